// ctnn/kernels/cpu/convert.hpp — float <-> float16_t / bfloat16_t over arrays.
//
// convert<Arch>(src, dst, n) converts n values; convert_reference is the
// scalar loop over core/half.hpp's conversions that defines the results (round
// to nearest even, NaN kept and quieted, float16 subnormals kept). The fast
// paths give the same bits:
//   float16 <-> float  F16C (vcvtph2ps / vcvtps2ph, 8 lanes) when Arch is AVX2
//                      or better, the 16-lane AVX-512 forms on AVX-512;
//   bfloat16 -> float  a 16-bit zero-extension and shift (AVX2 / AVX-512);
//   float -> bfloat16  the integer rounding of half.hpp on 16 lanes (AVX-512F;
//                      not vcvtneps2bf16, which flushes subnormals to zero).
// Other architectures run the reference loop. The x86 paths are functions
// with a target attribute, called only when Arch (a compile-time choice,
// kernels/cpu/arch.hpp) includes those instructions.
#pragma once
#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "../../core/half.hpp"
#include <xsimd/xsimd.hpp>

#include "arch.hpp"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#define CTNN_X86_CONVERT 1
#else
#define CTNN_X86_CONVERT 0
#endif

namespace ctnn::kernels::cpu {

template <class S, class D>
void convert_reference(const S* src, D* dst, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) {
    if constexpr (std::is_same_v<D, float>) dst[i] = float(src[i]);
    else dst[i] = D(float(src[i]));
  }
}

namespace detail {

#if CTNN_X86_CONVERT
template <class Arch>
inline constexpr bool x86_avx2_v = std::is_base_of_v<xsimd::avx2, Arch>;
template <class Arch>
inline constexpr bool x86_avx512_v = std::is_base_of_v<xsimd::avx512f, Arch>;

__attribute__((target("avx2,f16c"))) inline void f16_to_f32_avx2(const float16_t* s, float* d, std::size_t n) {
  const std::size_t nv = n / 8 * 8;
  for (std::size_t i = 0; i < nv; i += 8)
    _mm256_storeu_ps(d + i, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i))));
  for (std::size_t i = nv; i < n; ++i) d[i] = float(s[i]);
}
__attribute__((target("avx2,f16c"))) inline void f32_to_f16_avx2(const float* s, float16_t* d, std::size_t n) {
  const std::size_t nv = n / 8 * 8;
  for (std::size_t i = 0; i < nv; i += 8)
    _mm_storeu_si128(reinterpret_cast<__m128i*>(d + i), _mm256_cvtps_ph(_mm256_loadu_ps(s + i), _MM_FROUND_TO_NEAREST_INT));
  for (std::size_t i = nv; i < n; ++i) d[i] = float16_t(s[i]);
}
__attribute__((target("avx512f"))) inline void f16_to_f32_avx512(const float16_t* s, float* d, std::size_t n) {
  const std::size_t nv = n / 16 * 16;
  for (std::size_t i = 0; i < nv; i += 16)
    _mm512_storeu_ps(d + i, _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(s + i))));
  for (std::size_t i = nv; i < n; ++i) d[i] = float(s[i]);
}
__attribute__((target("avx512f"))) inline void f32_to_f16_avx512(const float* s, float16_t* d, std::size_t n) {
  const std::size_t nv = n / 16 * 16;
  for (std::size_t i = 0; i < nv; i += 16)
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(d + i),
                        _mm512_cvtps_ph(_mm512_loadu_ps(s + i), _MM_FROUND_TO_NEAREST_INT));
  for (std::size_t i = nv; i < n; ++i) d[i] = float16_t(s[i]);
}
__attribute__((target("avx2"))) inline void bf16_to_f32_avx2(const bfloat16_t* s, float* d, std::size_t n) {
  const std::size_t nv = n / 8 * 8;
  for (std::size_t i = 0; i < nv; i += 8) {
    const __m256i w = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i)));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(d + i), _mm256_slli_epi32(w, 16));
  }
  for (std::size_t i = nv; i < n; ++i) d[i] = float(s[i]);
}
__attribute__((target("avx512f"))) inline void bf16_to_f32_avx512(const bfloat16_t* s, float* d, std::size_t n) {
  const std::size_t nv = n / 16 * 16;
  for (std::size_t i = 0; i < nv; i += 16) {
    const __m512i w = _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(s + i)));
    _mm512_storeu_si512(d + i, _mm512_slli_epi32(w, 16));
  }
  for (std::size_t i = nv; i < n; ++i) d[i] = float(s[i]);
}
__attribute__((target("avx512f"))) inline void f32_to_bf16_avx512(const float* s, bfloat16_t* d, std::size_t n) {
  const std::size_t nv = n / 16 * 16;
  const __m512i one = _mm512_set1_epi32(1), bias = _mm512_set1_epi32(0x7fff), absm = _mm512_set1_epi32(0x7fffffff),
                inf = _mm512_set1_epi32(0x7f800000), quiet = _mm512_set1_epi32(0x40);
  for (std::size_t i = 0; i < nv; i += 16) {
    const __m512i x = _mm512_loadu_si512(s + i);
    const __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(x, 16), one);
    const __m512i rounded = _mm512_srli_epi32(_mm512_add_epi32(_mm512_add_epi32(x, bias), lsb), 16);
    const __mmask16 nan = _mm512_cmpgt_epu32_mask(_mm512_and_si512(x, absm), inf);
    const __m512i r = _mm512_mask_mov_epi32(rounded, nan, _mm512_or_si512(_mm512_srli_epi32(x, 16), quiet));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(d + i), _mm512_cvtepi32_epi16(r));
  }
  for (std::size_t i = nv; i < n; ++i) d[i] = bfloat16_t(s[i]);
}
#endif

}  // namespace detail

// dst[i] = src[i] converted, for float <-> float16_t / bfloat16_t (and a plain
// copy for float -> float), on Arch's fastest conversion.
template <class Arch = default_arch, class S, class D>
void convert(const S* src, D* dst, std::size_t n) {
  if constexpr (std::is_same_v<S, D>) {
    for (std::size_t i = 0; i < n; ++i) dst[i] = src[i];
#if CTNN_X86_CONVERT
  } else if constexpr (std::is_same_v<S, float16_t> && std::is_same_v<D, float> && detail::x86_avx512_v<Arch>) {
    detail::f16_to_f32_avx512(src, dst, n);
  } else if constexpr (std::is_same_v<S, float16_t> && std::is_same_v<D, float> && detail::x86_avx2_v<Arch>) {
    detail::f16_to_f32_avx2(src, dst, n);
  } else if constexpr (std::is_same_v<S, float> && std::is_same_v<D, float16_t> && detail::x86_avx512_v<Arch>) {
    detail::f32_to_f16_avx512(src, dst, n);
  } else if constexpr (std::is_same_v<S, float> && std::is_same_v<D, float16_t> && detail::x86_avx2_v<Arch>) {
    detail::f32_to_f16_avx2(src, dst, n);
  } else if constexpr (std::is_same_v<S, bfloat16_t> && std::is_same_v<D, float> && detail::x86_avx512_v<Arch>) {
    detail::bf16_to_f32_avx512(src, dst, n);
  } else if constexpr (std::is_same_v<S, bfloat16_t> && std::is_same_v<D, float> && detail::x86_avx2_v<Arch>) {
    detail::bf16_to_f32_avx2(src, dst, n);
  } else if constexpr (std::is_same_v<S, float> && std::is_same_v<D, bfloat16_t> && detail::x86_avx512_v<Arch>) {
    detail::f32_to_bf16_avx512(src, dst, n);
#endif
  } else {
    convert_reference(src, dst, n);
  }
}

// Whether convert<Arch> has a SIMD path from S to D (the tests name what they check).
template <class Arch, class S, class D>
constexpr bool convert_is_simd() {
#if CTNN_X86_CONVERT
  if constexpr (std::is_same_v<S, float> && std::is_same_v<D, bfloat16_t>) return detail::x86_avx512_v<Arch>;
  else return detail::x86_avx2_v<Arch> || detail::x86_avx512_v<Arch>;
#else
  return false;
#endif
}

}  // namespace ctnn::kernels::cpu
