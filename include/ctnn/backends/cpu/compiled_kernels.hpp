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
// (column sums, convolutions, the layers' fused paths) and other
// architectures passed explicitly (cpu<avx2> on an AVX-512 build) stay
// instantiated where they are used.
// simd_gemm.hpp includes this file after the kernels it names (and this file
// includes simd_gemm.hpp, so either can come first).
#pragma once
#include <cstddef>

#include "simd_gemm.hpp"

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

namespace ctnn::kernels::cpu {
// Whether this translation unit uses the compiled GEMM kernels (declared
// extern) or defines them; false header-only.
inline constexpr bool compiled_kernels =
#if defined(CTNN_COMPILED_KERNELS) || defined(CTNN_COMPILED_KERNELS_DEFINE)
    true;
#else
    false;
#endif
}  // namespace ctnn::kernels::cpu

#if defined(CTNN_COMPILED_KERNELS_DEFINE)
namespace ctnn::kernels::cpu::simd {
CTNN_DETAIL_GEMM_INSTANCES(template, xsimd::default_arch, float)
CTNN_DETAIL_GEMM_INSTANCES(template, xsimd::default_arch, double)
}  // namespace ctnn::kernels::cpu::simd
#elif defined(CTNN_COMPILED_KERNELS)
namespace ctnn::kernels::cpu::simd {
CTNN_DETAIL_GEMM_INSTANCES(extern template, xsimd::default_arch, float)
CTNN_DETAIL_GEMM_INSTANCES(extern template, xsimd::default_arch, double)
}  // namespace ctnn::kernels::cpu::simd
#endif
