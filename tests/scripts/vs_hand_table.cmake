# Runs bench/vs_hand_table.py on two recorded bench_pipeline runs (series A,
# runs 1 and 2: bench/results/2026-12-01-pipeline-autotune-series-a-b.md) and on
# one of series H (2026-12-02, with vs_picked_best), checks its table rows and
# distribution lines, and that it refuses a truncated file, naming it. Skips
# without python3.
include(${CMAKE_CURRENT_LIST_DIR}/expect.cmake)
find_program(PYTHON3 python3)
if(NOT PYTHON3)
  message("CTNN_SKIP: python3 is missing")
  return()
endif()
set(script ${SOURCE}/bench/vs_hand_table.py)
run_ok(out "vs_hand_table.py" ${PYTHON3} ${script} ${SOURCE}/tests/scripts/vs_hand_run1.json
       ${SOURCE}/tests/scripts/vs_hand_run2.json)
expect_lines("${out}" "vs_hand_table.py"
  "\\| 1 \\| 0\\.73 / 0\\.67 \\(1,1; 2,4; 4\\) \\| 1\\.06 / 1\\.04 \\(2,1; 2,8; 2\\) \\| 0\\.98 / 0\\.94 \\(2,2; 2,1; 6\\) \\|"
  "`vs_hand_augment`, vs_picked: min 0\\.73, median 0\\.88, max 1\\.04; >= 0\\.95 in 1 of 2, < 0\\.9 in 1"
  "settle epochs min 2 median 4 max 6")
# A run of 2026-12-02 (series H, run 1): medians as vs_picked, best epochs as vs_picked_best.
run_ok(out "vs_hand_table.py on the series H run" ${PYTHON3} ${script} ${SOURCE}/tests/scripts/vs_hand_run_h1.json)
expect_lines("${out}" "vs_hand_table.py on the series H run"
  "\\| 1 \\| 0\\.99 / 0\\.97 \\(2,2; 2,4; 6\\) \\| 0\\.99 / 0\\.98 \\(2,8; 2,1; 4\\) \\| 1\\.00 / 1\\.00 \\(2,2; 2,2; 6\\) \\|"
  "`vs_hand_augment_memory`, vs_picked_best: min 0\\.94, median 0\\.94, max 0\\.94; >= 0\\.95 in 0 of 1, < 0\\.9 in 0")
file(MAKE_DIRECTORY ${WORK})
file(READ ${SOURCE}/tests/scripts/vs_hand_run1.json json LIMIT 300)
file(WRITE ${WORK}/truncated.json "${json}")
expect_refused("vs_hand_table.py accepted a truncated file" "truncated.json: not a complete bench_pipeline JSON file"
               ${PYTHON3} ${script} ${WORK}/truncated.json)
message(STATUS "vs_hand_table.py: printed the table and the distribution, refused a truncated file")
