# Runs `bench/report.py compare` (bench/peers/compare.sh's tables) on two
# hand-made rounds of the avx2 build, one thread (tests/scripts/peers_runs:
# values chosen so that the medians, the ratio of the medians, the per-round
# ratios and the shares of peak/fma can be checked by hand), and checks those
# rows and that rows without figures are left out. Skips without python3.
include(${CMAKE_CURRENT_LIST_DIR}/expect.cmake)
find_program(PYTHON3 python3)
if(NOT PYTHON3)
  message("CTNN_SKIP: python3 is missing")
  return()
endif()
run_ok(out "report.py compare" ${PYTHON3} ${SOURCE}/bench/report.py compare ${SOURCE}/tests/scripts/peers_runs)
# fit at 64: ctnn 40,000 / 44,000, PyTorch 20,000 / 10,000: 42,000 / 15,000 = 2.80x, rounds 2.00 and 4.40;
# 42,000 x 1.007104 MFLOP = 42.3 GFLOP/s of the 90 (median of 80 and 100): 47 %.
# Step at 256: 50,000 = 50.4 GFLOP/s, 56 % < 60 %. CNN: 2,200 / 800. Inference: 11 us / 25 us, rounds 3.00 and 1.67.
expect_lines("${out}" "report.py compare"
  "peak/fma, 1 thread: 90\\.0 GFLOP/s \\(peak/fma_independent 90\\.0, \\+0\\.0 %\\)"
  "\\| 64 \\| 1 \\| 42,000 \\| 15,000 \\| 2\\.80x \\(2\\.00-4\\.40\\) \\| >= 2\\.5x: met \\| 47 % \\|"
  "\\| 256 \\| 1 \\| 50,000 \\| 50\\.4 \\| 56 % \\| >= 60 %: missed \\|  \\|"
  "\\| 1 \\| 2,200 \\| 800 \\| 2\\.75x \\(2\\.00-4\\.00\\) \\| >= 3x: missed \\| 38 % \\| 14 % \\|"
  "\\| 1 \\| 11\\.00 \\| 25\\.00 \\| 2\\.27x \\(1\\.67-3\\.00\\) \\| <= 5 us: missed \\| 42\\.7, 47 % \\|"
  "Load average \\(1 min\\) before the runs: 0\\.10-0\\.30\\.")
if(out MATCHES "\\| 0 \\| 0 \\|")
  message(FATAL_ERROR "report.py compare printed a row without figures:\n${out}")
endif()
message(STATUS "report.py compare: medians, ratios and shares of the peak as computed by hand")
# The same rounds with a load average above the 2 CPUs of runs/cpus before one run: marked loaded.
set(loaded_runs ${WORK}/peers_runs_loaded)
file(REMOVE_RECURSE ${loaded_runs})
file(COPY ${SOURCE}/tests/scripts/peers_runs/ DESTINATION ${loaded_runs})
file(WRITE ${loaded_runs}/load "avx2 1.40\navx2 2.10\n")
run_ok(out2 "report.py compare (loaded)" ${PYTHON3} ${SOURCE}/bench/report.py compare ${loaded_runs})
expect_lines("${out2}" "report.py compare (loaded)"
  "Load average \\(1 min\\) before the runs: 1\\.40-2\\.10 \\(loaded: above the 2 CPUs\\)\\.")
if(out MATCHES "loaded")
  message(FATAL_ERROR "report.py compare called loads of 0.10-0.30 on 2 CPUs loaded:\n${out}")
endif()
