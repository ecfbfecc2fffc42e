# Runs bench/vs_hand_resample.py on the epochs of a recorded 30-round run (series G's 1 ms
# case, docs/performance.md) and checks the pooled figures and two of its probabilities (the
# draws are seeded); then that a file that is missing, or has a corrupt line, is refused with
# its name (and line). Skips without python3.
find_program(PYTHON3 python3)
if(NOT PYTHON3)
  message("CTNN_SKIP: python3 is missing")
  return()
endif()
set(script ${SOURCE}/bench/vs_hand_resample.py)
set(epochs ${SOURCE}/tests/scripts/vs_hand_epochs_g.txt)
execute_process(COMMAND ${PYTHON3} ${script} ${epochs} augment auto p2d2
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "vs_hand_resample.py failed (${rc}): ${out}${err}")
endif()
foreach(want "60 epochs of augment auto\\+p2d2: median 0\\.1599 s, coefficient of variation 0\\.058"
             "n 10, best of each: ratio < 0\\.95 in 10\\.5 %, < 0\\.9 in 0\\.60 %"
             "n 20, median of each: ratio < 0\\.95 in 0\\.2 %")
  if(NOT out MATCHES "${want}")
    message(FATAL_ERROR "vs_hand_resample.py: no line matching '${want}' in:\n${out}")
  endif()
endforeach()
file(MAKE_DIRECTORY ${WORK})
execute_process(COMMAND ${PYTHON3} ${script} ${WORK}/missing.txt augment auto
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(rc EQUAL 0 OR NOT err MATCHES "missing.txt: No such file")
  message(FATAL_ERROR "vs_hand_resample.py accepted a missing file: ${rc} ${out}${err}")
endif()
file(READ ${epochs} text)
file(WRITE ${WORK}/corrupt.txt "${text}augment auto 0.15 0.1x6\n")
execute_process(COMMAND ${PYTHON3} ${script} ${WORK}/corrupt.txt augment auto
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(rc EQUAL 0 OR NOT err MATCHES "corrupt.txt:10: not a number")
  message(FATAL_ERROR "vs_hand_resample.py accepted a corrupt line: ${rc} ${out}${err}")
endif()
message(STATUS "vs_hand_resample.py: printed the pooled figures and probabilities, refused bad files")
