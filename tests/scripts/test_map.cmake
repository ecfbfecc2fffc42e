# Checks that tests/README.md is what scripts/test_map.py writes (every header of
# include/ctnn with the tests that name it), and that the check fails on a page that
# lacks a header's row. Skips without python3.
find_program(PYTHON3 python3)
if(NOT PYTHON3)
  message("CTNN_SKIP: python3 is missing")
  return()
endif()
execute_process(COMMAND ${PYTHON3} ${SOURCE}/scripts/test_map.py --check --root ${SOURCE}
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "tests/README.md is not current:\n${out}${err}")
endif()
# A page without the row of ctnn/ctnn.hpp must be refused, naming that row.
file(MAKE_DIRECTORY ${WORK})
file(STRINGS ${SOURCE}/tests/README.md lines)
set(stale "")
foreach(line IN LISTS lines)
  if(NOT line MATCHES "^\\| `ctnn/ctnn\\.hpp`")
    string(APPEND stale "${line}\n")
  endif()
endforeach()
file(WRITE ${WORK}/README.md "${stale}")
execute_process(COMMAND ${PYTHON3} ${SOURCE}/scripts/test_map.py --check --root ${SOURCE} --readme ${WORK}/README.md
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(rc EQUAL 0 OR NOT err MATCHES "missing or out of date: \\| `ctnn/ctnn\\.hpp`")
  message(FATAL_ERROR "test_map.py --check accepted a page without ctnn/ctnn.hpp's row (${rc}): ${out}${err}")
endif()
message(STATUS "tests/README.md is current; a page without a header's row is refused")
