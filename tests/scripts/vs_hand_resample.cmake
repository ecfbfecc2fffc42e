# Runs bench/vs_hand_resample.py on the epochs of a recorded 30-round run (series G's 1 ms
# case, bench/results/2026-12-02-pipeline-autotune-series-g-h.md) and checks the pooled
# figures and two of its probabilities (the draws are seeded); then that a file that is
# missing, or has a corrupt line, is refused with its name (and line). Skips without python3.
include(${CMAKE_CURRENT_LIST_DIR}/expect.cmake)
find_program(PYTHON3 python3)
if(NOT PYTHON3)
  message("CTNN_SKIP: python3 is missing")
  return()
endif()
set(script ${SOURCE}/bench/vs_hand_resample.py)
set(epochs ${SOURCE}/tests/scripts/vs_hand_epochs_g.txt)
run_ok(out "vs_hand_resample.py" ${PYTHON3} ${script} ${epochs} augment auto p2d2)
expect_lines("${out}" "vs_hand_resample.py"
  "60 epochs of augment auto\\+p2d2: median 0\\.1599 s, coefficient of variation 0\\.058"
  "n 10, best of each: ratio < 0\\.95 in 10\\.5 %, < 0\\.9 in 0\\.60 %"
  "n 20, median of each: ratio < 0\\.95 in 0\\.2 %")
file(MAKE_DIRECTORY ${WORK})
expect_refused("vs_hand_resample.py accepted a missing file" "missing.txt: No such file"
               ${PYTHON3} ${script} ${WORK}/missing.txt augment auto)
file(READ ${epochs} text)
file(WRITE ${WORK}/corrupt.txt "${text}augment auto 0.15 0.1x6\n")
expect_refused("vs_hand_resample.py accepted a corrupt line" "corrupt.txt:10: not a number"
               ${PYTHON3} ${script} ${WORK}/corrupt.txt augment auto)
message(STATUS "vs_hand_resample.py: printed the pooled figures and probabilities, refused bad files")
