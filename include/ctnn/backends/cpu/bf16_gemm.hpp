// ctnn/kernels/cpu/bf16_gemm.hpp — C = A Bᵀ on bfloat16 operands, float32 accumulation.
//
// gemm_nt_bf16(A, B, C, M, N, K): A is M x K, B is N x K (both row-major
// bfloat16_t, so each output is a dot product of two contiguous rows), C is
// M x N float32. With AVX512-BF16 (vdpbf16ps: 32 bfloat16 products summed in
// pairs into 16 float lanes per instruction) on tiles of 4 x 4 outputs; on
// other CPUs the conversion fallback turns both operands to float32
// (kernels/cpu/convert.hpp) and runs FMA dot products. The products of two
// bfloat16 values are exact in float32, so the paths differ only in the
// order of the float32 sums (and vdpbf16ps treats subnormal inputs as zero).
// gemm_nt_bf16_reference is the scalar loop that defines the result.
// has_avx512_bf16() says at run time whether the CPU has the instruction; the
// choice is made per call, as the instruction set is outside xsimd's
// architectures (kernels/cpu/arch.hpp).
#pragma once
#include <cstddef>
#include <vector>

#include "../../core/half.hpp"
#include "convert.hpp"

namespace ctnn::kernels::cpu {

inline void gemm_nt_bf16_reference(const bfloat16_t* a, const bfloat16_t* b, float* c, std::size_t m, std::size_t n,
                                   std::size_t k) {
  for (std::size_t i = 0; i < m; ++i)
    for (std::size_t j = 0; j < n; ++j) {
      float s = 0;
      for (std::size_t p = 0; p < k; ++p) s += float(a[i * k + p]) * float(b[j * k + p]);
      c[i * n + j] = s;
    }
}

inline bool has_avx512_bf16() noexcept {
#if CTNN_X86_CONVERT
  static const bool yes = __builtin_cpu_supports("avx512bf16") && __builtin_cpu_supports("avx512bw");
  return yes;
#else
  return false;
#endif
}

namespace detail {
#if CTNN_X86_CONVERT
#define CTNN_BF16_TARGET __attribute__((target("avx512f,avx512bw,avx512bf16")))
// The helpers are inlined into gemm_nt_bf16_avx512 at every optimization level: clang 19 at -O0
// with ASan or UBSan, in a translation unit without AVX-512 (-march=x86-64-v3), passed their
// 512-bit values wrongly between such calls (the products came back NaN; the asan-avx2 CI stage).
#define CTNN_BF16_INLINE __attribute__((target("avx512f,avx512bw,avx512bf16"), always_inline))

CTNN_BF16_INLINE inline __m512bh load_bh(const bfloat16_t* p, std::size_t left) {
  if (left >= 32) return (__m512bh)_mm512_loadu_si512(p);
  return (__m512bh)_mm512_maskz_loadu_epi16(__mmask32((1ull << left) - 1), p);
}

// R rows of A x S rows of B, each accumulated over K in steps of 32.
template <int R, int S>
CTNN_BF16_INLINE inline void tile_bf16(const bfloat16_t* a, const bfloat16_t* b, float* c, std::size_t n,
                                       std::size_t k) {
  __m512 acc[R][S];
  for (int r = 0; r < R; ++r)
    for (int s = 0; s < S; ++s) acc[r][s] = _mm512_setzero_ps();
  for (std::size_t p = 0; p < k; p += 32) {
    const std::size_t left = k - p;
    __m512bh bv[S];
    for (int s = 0; s < S; ++s) bv[s] = load_bh(b + s * k + p, left);
    for (int r = 0; r < R; ++r) {
      const __m512bh av = load_bh(a + r * k + p, left);
      for (int s = 0; s < S; ++s) acc[r][s] = _mm512_dpbf16_ps(acc[r][s], av, bv[s]);
    }
  }
  for (int r = 0; r < R; ++r)
    for (int s = 0; s < S; ++s) c[r * n + s] = _mm512_reduce_add_ps(acc[r][s]);
}

CTNN_BF16_TARGET inline void gemm_nt_bf16_avx512(const bfloat16_t* a, const bfloat16_t* b, float* c, std::size_t m,
                                                 std::size_t n, std::size_t k) {
  const std::size_t m4 = m / 4 * 4, n4 = n / 4 * 4;
  for (std::size_t i = 0; i < m4; i += 4) {
    for (std::size_t j = 0; j < n4; j += 4) tile_bf16<4, 4>(a + i * k, b + j * k, c + i * n + j, n, k);
    for (std::size_t j = n4; j < n; ++j) tile_bf16<4, 1>(a + i * k, b + j * k, c + i * n + j, n, k);
  }
  for (std::size_t i = m4; i < m; ++i) {
    for (std::size_t j = 0; j < n4; j += 4) tile_bf16<1, 4>(a + i * k, b + j * k, c + i * n + j, n, k);
    for (std::size_t j = n4; j < n; ++j) tile_bf16<1, 1>(a + i * k, b + j * k, c + i * n + j, n, k);
  }
}
#undef CTNN_BF16_TARGET
#undef CTNN_BF16_INLINE
#endif

// The conversion fallback: both operands to float32, then FMA dot products
// with 8 partial sums (vectorized by the compiler for Arch's flags).
inline void gemm_nt_bf16_convert(const bfloat16_t* a, const bfloat16_t* b, float* c, std::size_t m, std::size_t n,
                                 std::size_t k) {
  std::vector<float> af(m * k), bf(n * k);
  convert(a, af.data(), m * k);
  convert(b, bf.data(), n * k);
  for (std::size_t i = 0; i < m; ++i)
    for (std::size_t j = 0; j < n; ++j) {
      const float* x = af.data() + i * k;
      const float* y = bf.data() + j * k;
      float s[8] = {};
      const std::size_t k8 = k / 8 * 8;
      for (std::size_t p = 0; p < k8; p += 8)
        for (std::size_t l = 0; l < 8; ++l) s[l] += x[p + l] * y[p + l];
      float t = 0;
      for (std::size_t p = k8; p < k; ++p) t += x[p] * y[p];
      for (float v : s) t += v;
      c[i * n + j] = t;
    }
}
}  // namespace detail

// C[m x n] = A[m x k] B[n x k]ᵀ; `use_bf16_instructions` false forces the conversion fallback.
inline void gemm_nt_bf16(const bfloat16_t* a, const bfloat16_t* b, float* c, std::size_t m, std::size_t n,
                         std::size_t k, bool use_bf16_instructions = true) {
#if CTNN_X86_CONVERT
  if (use_bf16_instructions && has_avx512_bf16()) return detail::gemm_nt_bf16_avx512(a, b, c, m, n, k);
#endif
  (void)use_bf16_instructions;
  detail::gemm_nt_bf16_convert(a, b, c, m, n, k);
}

}  // namespace ctnn::kernels::cpu
