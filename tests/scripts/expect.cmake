# Helpers of the scripts tests (cmake -P): run a script, check what it printed or refused.

# run_ok(<out-var> <what> <command>...): runs the command; fails naming <what>, with its
# output, unless it exits with 0; sets <out-var> to its standard output.
function(run_ok out_var what)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${what} failed (${rc}): ${out}${err}")
  endif()
  set(${out_var} "${out}" PARENT_SCOPE)
endfunction()

# expect_lines(<text> <what> <regex>...): fails naming <what> unless every regex matches <text>.
# The regexes are read one argument at a time, so they may hold ';'.
function(expect_lines text what)
  math(EXPR last "${ARGC} - 1")
  foreach(i RANGE 2 ${last})
    if(NOT text MATCHES "${ARGV${i}}")
      message(FATAL_ERROR "${what}: no line matching '${ARGV${i}}' in:\n${text}")
    endif()
  endforeach()
endfunction()

# expect_refused(<what> <error-regex> <command>...): fails unless the command exits with
# non-zero and its standard error matches <error-regex>.
function(expect_refused what error)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(rc EQUAL 0 OR NOT err MATCHES "${error}")
    message(FATAL_ERROR "${what}: ${rc} ${out}${err}")
  endif()
endfunction()
