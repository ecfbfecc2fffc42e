# Compiles CASE and passes only if the compiler rejects it, its output holds
# every line of the case that starts with "// expect: ", and its first line
# that holds "error:" contains the text of each "// first-error: " line (under
# clang with the parts of a diag::require message joined, see below).
# Where g++ and clang must differ, "// expect-gcc: ", "// expect-clang: ",
# "// first-error-gcc: " and "// first-error-clang: " lines hold for that
# compiler only (COMPILER: gcc or clang, from the compiler's --version).
execute_process(COMMAND ${CXX} --version OUTPUT_VARIABLE version ERROR_QUIET)
if(version MATCHES "clang")
  set(compiler clang)
else()
  set(compiler gcc)
endif()
file(STRINGS ${CASE} expectations REGEX "^// expect(-${compiler})?: ")
file(STRINGS ${CASE} first_expectations REGEX "^// first-error(-${compiler})?: ")
list(TRANSFORM expectations REPLACE "^// expect(-${compiler})?: " "// expect: ")
list(TRANSFORM first_expectations REPLACE "^// first-error(-${compiler})?: " "// first-error: ")
if(NOT expectations AND NOT first_expectations)
  message(FATAL_ERROR "${CASE}: no '// expect: ' or '// first-error: ' line")
endif()
# PCH (optional): a precompiled <ctnn/ctnn.hpp> of this compiler, used only when the
# case's first #include is that header (the case then reads as written) and the
# precompiled header is newer than every header under INCLUDE: for g++ the folder
# holding ctnn/ctnn.hpp.gch (searched before INCLUDE), for clang the .pch file.
set(pch_flags)
file(STRINGS ${CASE} includes REGEX "^#include")
list(LENGTH includes n_includes)
if(PCH AND EXISTS "${PCH}" AND n_includes GREATER 0)
  list(GET includes 0 first_include)
  set(pch_file "${PCH}")
  if(compiler STREQUAL gcc)
    set(pch_file "${PCH}/ctnn/ctnn.hpp.gch")
  endif()
  if(first_include STREQUAL "#include <ctnn/ctnn.hpp>" AND EXISTS "${pch_file}")
    file(GLOB_RECURSE headers ${INCLUDE}/ctnn/*.hpp)
    set(fresh TRUE)
    foreach(h IN LISTS headers)
      if("${h}" IS_NEWER_THAN "${pch_file}")
        set(fresh FALSE)
        break()
      endif()
    endforeach()
    if(fresh AND compiler STREQUAL gcc)
      set(pch_flags -I${PCH})
    elseif(fresh)
      set(pch_flags -include-pch ${PCH})
    endif()
  endif()
endif()
execute_process(
  COMMAND ${CXX} -std=c++20 -fsyntax-only ${pch_flags} -I${INCLUDE} ${CASE}
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
if(first_expectations)
  # The first line with "error:" (g++ and clang both write "file:line:col: error: ...").
  string(FIND "${err}${out}" "error:" at)
  if(at EQUAL -1)
    message(FATAL_ERROR "${CASE}: the compiler output has no 'error:' line. It said:\n${err}")
  endif()
  string(SUBSTRING "${err}${out}" ${at} -1 rest)
  string(FIND "${rest}" "\n" eol)
  string(SUBSTRING "${rest}" 0 ${eol} first)
  # clang names a message as parts of at most 36 characters (core/compile_message.hpp):
  # error_parts<text<32>{"layer 1 (dense<10>): input has "}, text<35>{"rank 2 ..."}>;
  # the parts are joined here, so one "// first-error: " line holds for both compilers.
  string(REGEX REPLACE "\"}, text<[0-9]+>{\"" "" first "${first}")
  foreach(line IN LISTS first_expectations)
    string(REPLACE "// first-error: " "" want "${line}")
    string(FIND "${first}" "${want}" pos)
    if(pos EQUAL -1)
      message(FATAL_ERROR "${CASE}: the first error line lacks '${want}'. It is:\n${first}\nThe compiler said:\n${err}")
    endif()
  endforeach()
endif()
message(STATUS "${CASE}: rejected with the expected message")
