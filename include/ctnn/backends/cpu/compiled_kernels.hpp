// ctnn/backends/cpu/compiled_kernels.hpp — the optional compiled part: the
// GEMM kernels that do not depend on a network, built once instead of in
// every translation unit (as {fmt}'s compiled mode).
//
// Header-only (the default), every translation unit that trains or runs a
// network instantiates the run-time-sized GEMM (simd_gemm.hpp: the blocked
// micro-kernels, packing, gemv, dot products) for its architecture: about a
// third of the MLP example's compile (docs/performance.md, "Compile time and
// memory"). With CTNN_COMPILED_KERNELS defined, those instances for
// xsimd::default_arch (the architecture the compiler flags enable) and float
// and double are declared `extern template` here (and the library's other
// network-independent functions are only declared: core/separate.hpp), and
// one translation unit that defines CTNN_COMPILED_KERNELS_DEFINE before
// including <ctnn/ctnn.hpp> defines them all. The CMake function
// ctnn_compiled_kernels(target) (cmake/ctnn_compiled_kernels.cmake) sets both
// up, with the target's own flags, so the definitions are built for the
// architecture the program's translation units use; a translation unit built
// for another architecture names other instances, which the linker then
// reports as undefined (never a silent mix). The network-shaped kernels
// (column sums, the direct and im2col convolutions, average pooling, the layers'
// fused paths) and other architectures passed explicitly (cpu<avx2> on an
// AVX-512 build) stay instantiated where they are used; batch normalization
// (below, over a run-time channel count), the Winograd transforms (winograd.hpp's
// CTNN_DETAIL_WINOGRAD_INSTANCES) and max pooling (pooling.hpp's
// CTNN_DETAIL_POOLING_INSTANCES), both over a run-time geometry, do not, for float.
// Also for float, the shape classes of the micro-kernel a network's own code
// calls (gemm/microkernel.hpp; the blocked GEMM's calls are inside run_plan):
// the fused small MLP's and the packed product's (4 or MR rows, 1 or 2
// vectors, A in place, every activation rule a dense layer fuses: relu and
// identity share relu_fn's instance, leaky_relu, sigmoid, tanh), the narrow
// weight gradient's (1 to 15 rows, packed A, no activation), packed_product
// itself, and plan_gemm (the GEMM's planner): the network fixes which ones
// run, never their code.
// And the element-wise map<> of the rules every network's training calls
// (CTNN_DETAIL_MAP_INSTANCES, float: the optimizers' updates, scale, fill,
// check_finite, relu/sigmoid/tanh forward and backward), with their thread
// pool tasks: 0.11 s of the MLP example's code generation (docs/performance.md).
// gemm.hpp includes this file after the kernels it names (and this file
// includes gemm.hpp, so either can come first).
#pragma once
#include <cstddef>

#include "gemm.hpp"
#include "normalization.hpp"
#include "pooling.hpp"

// X: `extern template` (declarations) or `template` (definitions); A: the
// architecture; T: the element type. Every kernel simd_gemm_epilogue calls
// for fn::relu_fn, the rule the identity and relu epilogues share.
#define CTNN_DETAIL_GEMM_INSTANCES(X, A, T)                                                                       \
  X void run_plan<A, T, ::ctnn::fn::relu_fn>(const gemm_plan&, std::size_t, std::size_t, std::size_t, strided<T>, \
                                              strided<T>, T*, std::size_t, const T*, const ::ctnn::fn::relu_fn&,  \
                                              bool, T*, thread_pool&);                                            \
  X void dot_nt<A, 1, T, ::ctnn::fn::relu_fn>(std::size_t, std::size_t, std::size_t, const T*, std::size_t,       \
                                              const T*, std::size_t, T*, std::size_t, const T*,                   \
                                              const ::ctnn::fn::relu_fn&, bool, bool, thread_pool&);              \
  X void dot_nt<A, 2, T, ::ctnn::fn::relu_fn>(std::size_t, std::size_t, std::size_t, const T*, std::size_t,       \
                                              const T*, std::size_t, T*, std::size_t, const T*,                   \
                                              const ::ctnn::fn::relu_fn&, bool, bool, thread_pool&);              \
  X void gemv<A, T, ::ctnn::fn::relu_fn>(std::size_t, std::size_t, const T*, const T*, std::size_t, T*, const T*, \
                                         const ::ctnn::fn::relu_fn&, bool);

// X, A as above: micro-kernels of MRt rows and NV vectors, A in place (PA false) or packed, rule E, float.
#define CTNN_DETAIL_MICRO(X, A, MRt, NV, PA, E)                                                                   \
  X void micro<A, MRt, NV, PA, float, E>(std::size_t, const float*, std::size_t, const float*, std::size_t, float*, \
                                         std::size_t, std::size_t, std::size_t, const float*, bool, const E&, bool);
// Every micro-kernel and packed product of A in place for rule E: micro_rows' 4 and MR rows, 1 and 2 vectors.
#define CTNN_DETAIL_RULE_INSTANCES(X, A, E)                                                                   \
  CTNN_DETAIL_MICRO(X, A, 4, 1, false, E)                                                                     \
  CTNN_DETAIL_MICRO(X, A, 4, 2, false, E)                                                                     \
  CTNN_DETAIL_MICRO(X, A, (blocking<float, A>::MR), 1, false, E)                                              \
  CTNN_DETAIL_MICRO(X, A, (blocking<float, A>::MR), 2, false, E)                                              \
  X void packed_product<A, 1, float, E>(std::size_t, std::size_t, std::size_t, const float*, std::size_t,     \
                                        const float*, float*, std::size_t, const float*, const E&, bool,      \
                                        thread_pool&, bool);                                                  \
  X void packed_product<A, 2, float, E>(std::size_t, std::size_t, std::size_t, const float*, std::size_t,     \
                                        const float*, float*, std::size_t, const float*, const E&, bool,      \
                                        thread_pool&, bool);
// The narrow weight gradient's micro-kernels (narrow_weights_gradient<A, N>: N rows below a vector's
// lanes, 16 floats at most; on narrower vectors the longer ones are compiled and never called).
#define CTNN_DETAIL_NARROW(X, A, N) \
  CTNN_DETAIL_MICRO(X, A, N, (blocking<float, A>::wide ? 2 : 1), true, ::ctnn::fn::relu_fn)
// The fused small MLP's weight gradient (packed A, no rule: 4 and MR rows) with the vector count the narrow
// gradient above does not cover (the narrow one's 4 and MR rows are among its 1 to 15).
#define CTNN_DETAIL_FUSED_DW(X, A)                                                                  \
  CTNN_DETAIL_MICRO(X, A, 4, (blocking<float, A>::wide ? 1 : 2), true, ::ctnn::fn::relu_fn)         \
  CTNN_DETAIL_MICRO(X, A, (blocking<float, A>::MR), (blocking<float, A>::wide ? 1 : 2), true, ::ctnn::fn::relu_fn)
#define CTNN_DETAIL_FLOAT_SHAPE_INSTANCES(X, A)                                                                      \
  CTNN_DETAIL_RULE_INSTANCES(X, A, ::ctnn::fn::relu_fn)                                                              \
  CTNN_DETAIL_FUSED_DW(X, A)                                                                                         \
  CTNN_DETAIL_RULE_INSTANCES(X, A, ::ctnn::fn::leaky_relu_fn<float>)                                                 \
  CTNN_DETAIL_RULE_INSTANCES(X, A, ::ctnn::fn::sigmoid_fn)                                                           \
  CTNN_DETAIL_RULE_INSTANCES(X, A, ::ctnn::fn::tanh_fn)                                                              \
  CTNN_DETAIL_NARROW(X, A, 1) CTNN_DETAIL_NARROW(X, A, 2) CTNN_DETAIL_NARROW(X, A, 3) CTNN_DETAIL_NARROW(X, A, 4)    \
  CTNN_DETAIL_NARROW(X, A, 5) CTNN_DETAIL_NARROW(X, A, 6) CTNN_DETAIL_NARROW(X, A, 7) CTNN_DETAIL_NARROW(X, A, 8)    \
  CTNN_DETAIL_NARROW(X, A, 9) CTNN_DETAIL_NARROW(X, A, 10) CTNN_DETAIL_NARROW(X, A, 11)                              \
  CTNN_DETAIL_NARROW(X, A, 12) CTNN_DETAIL_NARROW(X, A, 13) CTNN_DETAIL_NARROW(X, A, 14)                             \
  CTNN_DETAIL_NARROW(X, A, 15)

// X, A as above: the product's entry with its planner (simd_gemm.hpp: simd_gemm_epilogue, CTNN_OUTLINE)
// for float and every rule a dense layer fuses (relu and identity: relu_fn), double for relu_fn; and
// pack_panels for float (gemm.hpp, CTNN_OUTLINE); narrow_weights_gradient_n for float (simd_gemm.hpp:
// every narrow N of the architecture, which dense_backward_weights calls in compiled mode).
#define CTNN_DETAIL_EPILOGUE(X, A, T, E)                                                                         \
  X void simd_gemm_epilogue<A, T, E>(std::size_t, std::size_t, std::size_t, strided<T>, strided<T>, T*,          \
                                     std::size_t, const T*, const E&, bool, thread_pool&);
#define CTNN_DETAIL_EPILOGUE_INSTANCES(X, A)                 \
  CTNN_DETAIL_EPILOGUE(X, A, float, ::ctnn::fn::relu_fn)                 \
  CTNN_DETAIL_EPILOGUE(X, A, float, ::ctnn::fn::leaky_relu_fn<float>)    \
  CTNN_DETAIL_EPILOGUE(X, A, float, ::ctnn::fn::sigmoid_fn)              \
  CTNN_DETAIL_EPILOGUE(X, A, float, ::ctnn::fn::tanh_fn)                 \
  CTNN_DETAIL_EPILOGUE(X, A, double, ::ctnn::fn::relu_fn)
#define CTNN_DETAIL_PACK_INSTANCES(X, A)                                                     \
  X void pack_panels<A, float>(std::size_t, std::size_t, strided<float>, float*);           \
  X void narrow_weights_gradient_n<A, float>(std::size_t, std::size_t, std::size_t, const float*, \
                                             const float*, float*, thread_pool&);

// X, A as above: map<A> (map.hpp) of rule F over float arrays P (each `float` or `const float`). The
// element-wise rules every network's training or inference calls through ops<cpu>::map: the optimizers'
// updates (optimizers/*.hpp's apply: w, g, then the slots), the gradient scaling and checks of the step,
// and the activations' forward and backward outside a fused pass (backends/cpu/activations.hpp).
#define CTNN_DETAIL_UNPAREN(...) __VA_ARGS__
#define CTNN_DETAIL_MAP(X, A, F, P, PTRS) \
  X bool map<A, F, CTNN_DETAIL_UNPAREN P>(const F&, std::size_t, CTNN_DETAIL_UNPAREN PTRS);
#define CTNN_DETAIL_MAP_INSTANCES(X, A)                                                                                \
  CTNN_DETAIL_MAP(X, A, ::ctnn::fn::sgd_update<float>, (float, const float), (float*, const float*))                   \
  CTNN_DETAIL_MAP(X, A, ::ctnn::fn::momentum_update<float>, (float, const float, float), (float*, const float*, float*)) \
  CTNN_DETAIL_MAP(X, A, ::ctnn::fn::adam_update<float>, (float, const float, float, float), (float*, const float*, float*, float*)) \
  CTNN_DETAIL_MAP(X, A, ::ctnn::fn::amsgrad_update<float>, (float, const float, float, float, float), (float*, const float*, float*, float*, float*)) \
  CTNN_DETAIL_MAP(X, A, ::ctnn::fn::scale<float>, (float), (float*))                                                   \
  CTNN_DETAIL_MAP(X, A, ::ctnn::fn::fill<float>, (float), (float*))                                                    \
  CTNN_DETAIL_MAP(X, A, ::ctnn::fn::check_finite, (const float), (const float*))                                       \
  CTNN_DETAIL_MAP(X, A, ::ctnn::fn::forward_of<::ctnn::fn::relu_fn>, (float), (float*))                                \
  CTNN_DETAIL_MAP(X, A, ::ctnn::fn::backward_of<::ctnn::fn::relu_fn>, (const float, float), (const float*, float*))    \
  CTNN_DETAIL_MAP(X, A, ::ctnn::fn::forward_of<::ctnn::fn::sigmoid_fn>, (float), (float*))                             \
  CTNN_DETAIL_MAP(X, A, ::ctnn::fn::backward_of<::ctnn::fn::sigmoid_fn>, (const float, float), (const float*, float*)) \
  CTNN_DETAIL_MAP(X, A, ::ctnn::fn::forward_of<::ctnn::fn::tanh_fn>, (float), (float*))                                \
  CTNN_DETAIL_MAP(X, A, ::ctnn::fn::backward_of<::ctnn::fn::tanh_fn>, (const float, float), (const float*, float*))

// X, A as above: batch normalization over a run-time channel count (normalization.hpp), float with
// float moving statistics: one body for every batch_norm layer's channel count, which ops<cpu<A>>
// calls in compiled mode instead of instantiating batch_norm_forward<C> and _backward<C> per C.
#define CTNN_DETAIL_NORMALIZATION_INSTANCES(X, A)                                                                   \
  X void batch_norm_forward_n<A, float, float>(std::size_t, const float*, float*, const float*, const float*,      \
                                               float*, float*, float*, float*, std::size_t, double, double, bool); \
  X void batch_norm_backward_n<A, float>(std::size_t, const float*, const float*, float*, const float*,            \
                                         const float*, const float*, float*, float*, std::size_t, bool);

namespace ctnn::kernels::cpu {
// Whether this translation unit uses the compiled GEMM kernels (declared
// extern) or defines them; false header-only.
inline constexpr bool compiled_kernels = ::ctnn::detail::compiled_part;
}  // namespace ctnn::kernels::cpu

#if defined(CTNN_COMPILED_KERNELS_DEFINE)
namespace ctnn::kernels::cpu::simd {
CTNN_DETAIL_GEMM_INSTANCES(template, xsimd::default_arch, float)
CTNN_DETAIL_GEMM_INSTANCES(template, xsimd::default_arch, double)
CTNN_DETAIL_FLOAT_SHAPE_INSTANCES(template, xsimd::default_arch)
CTNN_DETAIL_PACK_INSTANCES(template, xsimd::default_arch)
}  // namespace ctnn::kernels::cpu::simd
namespace ctnn::kernels::cpu {
CTNN_DETAIL_EPILOGUE_INSTANCES(template, xsimd::default_arch)
template gemm_plan plan_gemm<gemm_target_of<float, xsimd::default_arch>()>(gemm_problem);
template gemm_plan plan_gemm<gemm_target_of<double, xsimd::default_arch>()>(gemm_problem);
CTNN_DETAIL_MAP_INSTANCES(template, xsimd::default_arch)
CTNN_DETAIL_NORMALIZATION_INSTANCES(template, xsimd::default_arch)
CTNN_DETAIL_POOLING_INSTANCES(template, xsimd::default_arch)
}  // namespace ctnn::kernels::cpu
#elif defined(CTNN_COMPILED_KERNELS)
namespace ctnn::kernels::cpu::simd {
CTNN_DETAIL_GEMM_INSTANCES(extern template, xsimd::default_arch, float)
CTNN_DETAIL_GEMM_INSTANCES(extern template, xsimd::default_arch, double)
CTNN_DETAIL_FLOAT_SHAPE_INSTANCES(extern template, xsimd::default_arch)
CTNN_DETAIL_PACK_INSTANCES(extern template, xsimd::default_arch)
}  // namespace ctnn::kernels::cpu::simd
namespace ctnn::kernels::cpu {
CTNN_DETAIL_EPILOGUE_INSTANCES(extern template, xsimd::default_arch)
extern template gemm_plan plan_gemm<gemm_target_of<float, xsimd::default_arch>()>(gemm_problem);
extern template gemm_plan plan_gemm<gemm_target_of<double, xsimd::default_arch>()>(gemm_problem);
CTNN_DETAIL_MAP_INSTANCES(extern template, xsimd::default_arch)
CTNN_DETAIL_NORMALIZATION_INSTANCES(extern template, xsimd::default_arch)
CTNN_DETAIL_POOLING_INSTANCES(extern template, xsimd::default_arch)
}  // namespace ctnn::kernels::cpu
#endif
