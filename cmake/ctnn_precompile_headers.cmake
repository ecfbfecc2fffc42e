# ctnn_precompile_headers(<target> [HEADERS <header>...])
#
# Precompiles ctnn's umbrella header (or HEADERS, e.g. <ctnn/ctnn.hpp> <ctnn/pruning.hpp>)
# for <target> with target_precompile_headers, so an edit of the program (one width,
# one rate) re-parses none of ctnn. Every source of <target> sees the headers as if
# it included them first; build flags must match the target's (CMake sees to it).
# The measured edit loop: docs/performance.md, "Compile time and memory".
function(ctnn_precompile_headers target)
  cmake_parse_arguments(arg "" "" "HEADERS" ${ARGN})
  if(NOT arg_HEADERS)
    set(arg_HEADERS <ctnn/ctnn.hpp>)
  endif()
  target_precompile_headers(${target} PRIVATE ${arg_HEADERS})
endfunction()
