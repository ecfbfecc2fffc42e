# Compiles a program with LAYERS `dense<64, relu>` layers and one `fit` (the
# program of bench/compile/deep_mlp.sh): -c -O2, or the front end only with
# SYNTAX_ONLY; fails when the compiler rejects it or, where GNU time exists, when
# its peak memory exceeds MAX_KB. A binding that grows with the square of the
# depth (issue 30) shows here as time (the test's TIMEOUT) and memory; the
# bounds and the measured figures are beside the tests in tests/CMakeLists.txt
# and in docs/performance.md ("Compile time and memory").
# PROGRAM=pruned_onnx (with SYNTAX_ONLY): LAYERS pruned dense layers trained with
# update_pruning_step, stripped, exported to ONNX and imported; clang++-19
# rejected 300 of them before (folds nested 300 deep in pruning/global.hpp,
# the update step, ONNX export and import; clang's limit is 256).
if(NOT PROGRAM)
  set(PROGRAM dense)
endif()
set(src ${WORK}/deep_${PROGRAM}${LAYERS}.cpp)
if(PROGRAM STREQUAL "dense")
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
else()  # pruned_onnx: LAYERS pruned dense layers, update_pruning_step, strip_pruning, ONNX export and import
  set(text "#define ONNX_ML 1\n#define ONNX_NAMESPACE onnx\n#include <ctnn/ctnn.hpp>\n#include <ctnn/onnx/export.hpp>\n")
  string(APPEND text "#include <ctnn/onnx/import.hpp>\n#include <ctnn/pruning.hpp>\n#include <vector>\n")
  string(APPEND text "using net = ctnn::sequential<ctnn::input<16>,\n")
  foreach(i RANGE 1 ${LAYERS})
    string(APPEND text "  ctnn::prune_low_magnitude<ctnn::dense<16, ctnn::relu>, ctnn::constant_sparsity<0.5>>,\n")
  endforeach()
  string(APPEND text "  ctnn::dense<4>>;
int main() {
  std::vector<float> x(64 * 16, 0.5f);
  std::vector<std::int32_t> y(64, 1);
  const ctnn::data::in_memory<ctnn::shape<16>, ctnn::sparse_labels> data{x, y};
  auto m = ctnn::make_model<net>(1);
  ctnn::adam opt{1e-3};
  ctnn::fit(m, ctnn::sparse_categorical_crossentropy{.from_logits = true}, opt, data.batch(32), ctnn::epochs{1},
            ctnn::update_pruning_step{});
  auto small = ctnn::strip_pruning<ctnn::layout::bitmap>(m);
  ctnn::export_onnx(m, \"deep.onnx\");
  ctnn::import_onnx(m, \"deep.onnx\");
  return small.parameters().size() > 0 ? 0 : 1;
}
")
endif()
file(MAKE_DIRECTORY ${WORK})
file(WRITE ${src} "${text}")
if(SYNTAX_ONLY)
  set(cmd ${CXX} -std=c++20 -DNDEBUG -I${INCLUDE} -fsyntax-only ${src})
else()
  set(cmd ${CXX} -std=c++20 -O2 -DNDEBUG -I${INCLUDE} -c ${src} -o ${WORK}/deep_${PROGRAM}${LAYERS}.o)
endif()
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
