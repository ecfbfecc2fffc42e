# Compiles CASE and passes only if the compiler rejects it and its output
# holds every line of the case that starts with "// expect: ".
file(STRINGS ${CASE} expectations REGEX "^// expect: ")
if(NOT expectations)
  message(FATAL_ERROR "${CASE}: no '// expect: ' line")
endif()
execute_process(
  COMMAND ${CXX} -std=c++20 -fsyntax-only -I${INCLUDE} ${CASE}
  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(rc EQUAL 0)
  message(FATAL_ERROR "${CASE} compiled, but it must not")
endif()
foreach(line IN LISTS expectations)
  string(REPLACE "// expect: " "" want "${line}")
  string(FIND "${err}${out}" "${want}" pos)
  if(pos EQUAL -1)
    message(FATAL_ERROR "${CASE}: the compiler output lacks '${want}'. It said:\n${err}")
  endif()
endforeach()
message(STATUS "${CASE}: rejected with the expected message")
