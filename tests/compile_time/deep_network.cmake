# Compiles (-c, optimised) a program with LAYERS `dense<64, relu>` layers and one
# `fit`, the program of bench/compile/deep_mlp.sh, and fails when the compiler
# rejects it or, where GNU time exists, when its peak memory exceeds MAX_KB.
# A binding that grows with the square of the depth (issue 30) shows here as
# time (the test's TIMEOUT) and memory. 300 layers at -O2 (tests/CMakeLists.txt
# bounds them at 750,000 KB): g++ 12 458 MB after the fix, 876 MB before (29f0549,
# which fails here); clang++-19 583 MB after, and before it rejected the program
# (a fold over more than 256 layers; docs/performance.md).
set(src ${WORK}/deep${LAYERS}.cpp)
set(text "#include <ctnn/ctnn.hpp>\n#include <vector>\nusing net = ctnn::sequential<ctnn::input<64>,\n")
foreach(i RANGE 1 ${LAYERS})
  string(APPEND text "  ctnn::dense<64, ctnn::relu>,\n")
endforeach()
string(APPEND text "  ctnn::dense<10>>;
static_assert(net::output_shape == ctnn::shape<10>{});
static_assert(net::layer_count == ${LAYERS} + 1);
int main() {
  std::vector<float> x(256 * 64, 0.5f);
  std::vector<std::int32_t> y(256, 1);
  const ctnn::data::in_memory<ctnn::shape<64>, ctnn::sparse_labels> data{x, y};
  auto m = ctnn::make_model<net>(1);
  ctnn::adam opt{1e-3};
  ctnn::fit(m, ctnn::sparse_categorical_crossentropy{.from_logits = true}, opt, data.batch(32), ctnn::epochs{1});
  return 0;
}
")
file(MAKE_DIRECTORY ${WORK})
file(WRITE ${src} "${text}")
set(cmd ${CXX} -std=c++20 -O2 -DNDEBUG -I${INCLUDE} -c ${src} -o ${WORK}/deep${LAYERS}.o)
find_program(gnu_time NAMES time PATHS /usr/bin NO_DEFAULT_PATH)
if(gnu_time)
  set(cmd ${gnu_time} -f "ctnn-peak-kb %M user-s %U" ${cmd})
endif()
execute_process(COMMAND ${cmd} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "${LAYERS} layers did not compile:\n${err}")
endif()
if(gnu_time)
  string(REGEX MATCH "ctnn-peak-kb ([0-9]+) user-s ([0-9.]+)" m "${err}")
  message(STATUS "${LAYERS} layers: ${CMAKE_MATCH_2} s user, ${CMAKE_MATCH_1} KB peak")
  if(CMAKE_MATCH_1 GREATER MAX_KB)
    message(FATAL_ERROR "${LAYERS} layers took ${CMAKE_MATCH_1} KB to compile, above ${MAX_KB} KB: "
                        "does something grow with the square of the depth? (docs/performance.md)")
  endif()
endif()
