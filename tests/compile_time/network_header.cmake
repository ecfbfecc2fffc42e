# <ctnn/network.hpp> defines network types without any backend's kernels (issue 30: a program that
# only defines and checks network types compiles in a fraction of <ctnn/ctnn.hpp>'s time): compiles
# SOURCE (-fsyntax-only -H: the headers it reads) and fails when the program is rejected or when it
# reads xsimd's full header or the CPU backend's ops (backends/cpu/ops.hpp), which a layer header
# reached before this check (they include core/backend.hpp, the declaration of ops<B>, instead),
# xsimd's architecture list (its register headers and <immintrin.h>: cpu<> names its default
# architecture through backends/cpu/default_arch.hpp) or the CPU thread pool (<thread>,
# <condition_variable>: layers/batch_norm.hpp reached it through backends/cpu/normalization.hpp
# until session 34).
execute_process(COMMAND ${CXX} -std=c++20 -fsyntax-only -H -I${INCLUDE} ${SOURCE}
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "${SOURCE} does not compile:\n${err}")
endif()
foreach(heavy "xsimd/xsimd.hpp" "backends/cpu/ops.hpp" "xsimd/config/xsimd_arch.hpp" "backends/cpu/thread_pool.hpp")
  string(FIND "${err}" "${heavy}" at)
  if(NOT at EQUAL -1)
    string(REGEX MATCH "[^\n]*${heavy}[^\n]*" line "${err}")
    message(FATAL_ERROR "${SOURCE} reads ${heavy} (${line}); <ctnn/network.hpp> must not")
  endif()
endforeach()
message(STATUS "${SOURCE}: no backend kernels read")
