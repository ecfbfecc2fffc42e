// ctnn/backends/cpu/int8.hpp — int8 x int8 -> int32 products (the int8 dense layer's GEMM).
//
//   gemm_s8<Arch>(M, N, K, a, lda, w, ldw, wsum, c, ldc):  c[i, j] = sum_k a[i, k] w[j, k]
// a: M rows of K int8 activations ([-128, 127]); w: N rows of K int8 weights, each in [-127, 127]
// (TFLite's symmetric range; -128 is a precondition violation); wsum[j] = sum_k w[j, k] (or null:
// computed here); c: int32, overwritten. Integer sums are exact, so every path equals
// reference::gemm_s8 bit for bit. Paths, by the backend's Arch and this CPU (int8_path_of<Arch>()):
//   vnni    Arch derived from avx512bw, the TU compiled with __AVX512VNNI__ and the CPU reporting
//           AVX512_VNNI (cpuid 7.0:ECX[11], checked once): vpdpbusd on a + 128 as u8 (XOR 0x80),
//           then c = dot - 128 wsum (the oneDNN/XNNPACK offset trick); tails by masked loads.
//   avx2    Arch derived from avx2 or avx512f (not bw+VNNI): vpmaddubsw(|a|, sign(w, a)) then
//           vpmaddwd with ones. |a| <= 128 and |w| <= 127 keep each int16 pair sum within
//           +-32512, so vpmaddubsw never saturates and full 8-bit weights keep their precision
//           (u8 a + 128 times s8 w would reach 64770 and saturate; 7-bit weights would lose a bit).
//   scalar  otherwise (and the K % 32 tail of avx2).
// xsimd 8.1 has no VNNI architecture: the rule above is compile time (the intrinsics exist only
// under __AVX512VNNI__) plus one cpuid read. Docs: docs/quantization.md.
#pragma once
#include <cstddef>
#include <cstdint>
#include <type_traits>
#include <vector>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#include <immintrin.h>
#endif

#include "arch.hpp"

namespace ctnn::kernels::cpu::int8 {

enum class int8_path { scalar, avx2, vnni };

namespace reference {
// The definition every path is compared against.
inline void gemm_s8(std::size_t M, std::size_t N, std::size_t K, const std::int8_t* a, std::size_t lda,
                    const std::int8_t* w, std::size_t ldw, std::int32_t* c, std::size_t ldc) {
  for (std::size_t i = 0; i < M; ++i)
    for (std::size_t j = 0; j < N; ++j) {
      std::int32_t s = 0;
      for (std::size_t k = 0; k < K; ++k) s += std::int32_t(a[i * lda + k]) * std::int32_t(w[j * ldw + k]);
      c[i * ldc + j] = s;
    }
}
}  // namespace reference

inline void row_sums(std::size_t N, std::size_t K, const std::int8_t* w, std::size_t ldw, std::int32_t* out) {
  for (std::size_t j = 0; j < N; ++j) {
    std::int32_t s = 0;
    for (std::size_t k = 0; k < K; ++k) s += w[j * ldw + k];
    out[j] = s;
  }
}

// Whether this CPU executes AVX512_VNNI (cpuid leaf 7, subleaf 0, ECX bit 11), read once.
inline bool cpu_has_avx512vnni() noexcept {
#if defined(__x86_64__) || defined(__i386__)
  static const bool has = [] {
    unsigned a = 0, b = 0, c = 0, d = 0;
    if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return false;
    return ((c >> 11) & 1u) != 0;
  }();
  return has;
#else
  return false;
#endif
}

#if defined(__AVX512VNNI__) && defined(__AVX512BW__)
inline constexpr bool vnni_compiled = true;
#else
inline constexpr bool vnni_compiled = false;
#endif

// The path gemm_s8<Arch> takes on this CPU.
template <class Arch>
int8_path int8_path_of() noexcept {
  if constexpr (std::is_base_of_v<xsimd::avx512bw, Arch> && Arch::supported()) {
    if (vnni_compiled && cpu_has_avx512vnni()) return int8_path::vnni;
    return int8_path::avx2;  // -mavx512bw implies AVX2
  } else if constexpr ((std::is_base_of_v<xsimd::avx2, Arch> || std::is_base_of_v<xsimd::avx512f, Arch>) &&
                       Arch::supported()) {
    return int8_path::avx2;
  } else {
    return int8_path::scalar;
  }
}

namespace detail {
inline std::int32_t dot_tail(const std::int8_t* a, const std::int8_t* w, std::size_t k0, std::size_t K) {
  std::int32_t s = 0;
  for (std::size_t k = k0; k < K; ++k) s += std::int32_t(a[k]) * std::int32_t(w[k]);
  return s;
}

#if defined(__AVX2__)
inline std::int32_t hsum(__m256i v) {
  __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4e));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xb1));
  return _mm_cvtsi128_si32(s);
}
// |a| (as u8, 128 for -128) times w * sign(a): each pair sum within +-32512, no saturation.
inline __m256i dot32(__m256i acc, __m256i abs_a, __m256i a, __m256i w, __m256i ones) {
  const __m256i p16 = _mm256_maddubs_epi16(abs_a, _mm256_sign_epi8(w, a));
  return _mm256_add_epi32(acc, _mm256_madd_epi16(p16, ones));
}
inline void gemm_avx2(std::size_t M, std::size_t N, std::size_t K, const std::int8_t* a, std::size_t lda,
                      const std::int8_t* w, std::size_t ldw, std::int32_t* c, std::size_t ldc) {
  const std::size_t K32 = K / 32 * 32;
  const __m256i ones = _mm256_set1_epi16(1);
  for (std::size_t i = 0; i < M; ++i) {
    const std::int8_t* x = a + i * lda;
    std::size_t j = 0;
    for (; j + 4 <= N; j += 4) {
      const std::int8_t* w0 = w + j * ldw;
      __m256i s0 = _mm256_setzero_si256(), s1 = s0, s2 = s0, s3 = s0;
      for (std::size_t k = 0; k < K32; k += 32) {
        const __m256i xv = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x + k));
        const __m256i ax = _mm256_sign_epi8(xv, xv);
        s0 = dot32(s0, ax, xv, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w0 + k)), ones);
        s1 = dot32(s1, ax, xv, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w0 + ldw + k)), ones);
        s2 = dot32(s2, ax, xv, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w0 + 2 * ldw + k)), ones);
        s3 = dot32(s3, ax, xv, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w0 + 3 * ldw + k)), ones);
      }
      c[i * ldc + j] = hsum(s0) + dot_tail(x, w0, K32, K);
      c[i * ldc + j + 1] = hsum(s1) + dot_tail(x, w0 + ldw, K32, K);
      c[i * ldc + j + 2] = hsum(s2) + dot_tail(x, w0 + 2 * ldw, K32, K);
      c[i * ldc + j + 3] = hsum(s3) + dot_tail(x, w0 + 3 * ldw, K32, K);
    }
    for (; j < N; ++j) {
      const std::int8_t* wj = w + j * ldw;
      __m256i s = _mm256_setzero_si256();
      for (std::size_t k = 0; k < K32; k += 32) {
        const __m256i xv = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x + k));
        s = dot32(s, _mm256_sign_epi8(xv, xv), xv, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(wj + k)), ones);
      }
      c[i * ldc + j] = hsum(s) + dot_tail(x, wj, K32, K);
    }
  }
}
#endif

#if defined(__AVX512VNNI__) && defined(__AVX512BW__)
// dot(a + 128, w) over K by vpdpbusd; the K % 64 tail by masked loads (w's lanes 0 there).
inline void gemm_vnni(std::size_t M, std::size_t N, std::size_t K, const std::int8_t* a, std::size_t lda,
                      const std::int8_t* w, std::size_t ldw, const std::int32_t* wsum, std::int32_t* c,
                      std::size_t ldc) {
  const std::size_t K64 = K / 64 * 64;
  const __mmask64 tail = K64 < K ? (~__mmask64(0) >> (64 - (K - K64))) : 0;
  const __m512i flip = _mm512_set1_epi8(char(0x80));
  for (std::size_t i = 0; i < M; ++i) {
    const std::int8_t* x = a + i * lda;
    auto xu_at = [&](std::size_t k) { return _mm512_xor_si512(_mm512_loadu_si512(x + k), flip); };
    const __m512i xt = _mm512_xor_si512(_mm512_maskz_loadu_epi8(tail, x + K64), flip);
    std::size_t j = 0;
    for (; j + 4 <= N; j += 4) {
      const std::int8_t* w0 = w + j * ldw;
      __m512i s0 = _mm512_setzero_si512(), s1 = s0, s2 = s0, s3 = s0;
      for (std::size_t k = 0; k < K64; k += 64) {
        const __m512i xu = xu_at(k);
        s0 = _mm512_dpbusd_epi32(s0, xu, _mm512_loadu_si512(w0 + k));
        s1 = _mm512_dpbusd_epi32(s1, xu, _mm512_loadu_si512(w0 + ldw + k));
        s2 = _mm512_dpbusd_epi32(s2, xu, _mm512_loadu_si512(w0 + 2 * ldw + k));
        s3 = _mm512_dpbusd_epi32(s3, xu, _mm512_loadu_si512(w0 + 3 * ldw + k));
      }
      if (tail) {
        s0 = _mm512_dpbusd_epi32(s0, xt, _mm512_maskz_loadu_epi8(tail, w0 + K64));
        s1 = _mm512_dpbusd_epi32(s1, xt, _mm512_maskz_loadu_epi8(tail, w0 + ldw + K64));
        s2 = _mm512_dpbusd_epi32(s2, xt, _mm512_maskz_loadu_epi8(tail, w0 + 2 * ldw + K64));
        s3 = _mm512_dpbusd_epi32(s3, xt, _mm512_maskz_loadu_epi8(tail, w0 + 3 * ldw + K64));
      }
      c[i * ldc + j] = _mm512_reduce_add_epi32(s0) - 128 * wsum[j];
      c[i * ldc + j + 1] = _mm512_reduce_add_epi32(s1) - 128 * wsum[j + 1];
      c[i * ldc + j + 2] = _mm512_reduce_add_epi32(s2) - 128 * wsum[j + 2];
      c[i * ldc + j + 3] = _mm512_reduce_add_epi32(s3) - 128 * wsum[j + 3];
    }
    for (; j < N; ++j) {
      const std::int8_t* wj = w + j * ldw;
      __m512i s = _mm512_setzero_si512();
      for (std::size_t k = 0; k < K64; k += 64) s = _mm512_dpbusd_epi32(s, xu_at(k), _mm512_loadu_si512(wj + k));
      if (tail) s = _mm512_dpbusd_epi32(s, xt, _mm512_maskz_loadu_epi8(tail, wj + K64));
      c[i * ldc + j] = _mm512_reduce_add_epi32(s) - 128 * wsum[j];
    }
  }
}
#endif
}  // namespace detail

template <class Arch = default_arch>
void gemm_s8(std::size_t M, std::size_t N, std::size_t K, const std::int8_t* a, std::size_t lda, const std::int8_t* w,
             std::size_t ldw, const std::int32_t* wsum, std::int32_t* c, std::size_t ldc) {
  const int8_path p = int8_path_of<Arch>();
#if defined(__AVX512VNNI__) && defined(__AVX512BW__)
  if (p == int8_path::vnni) {
    std::vector<std::int32_t> own;
    if (!wsum) {
      own.resize(N);
      row_sums(N, K, w, ldw, own.data());
      wsum = own.data();
    }
    detail::gemm_vnni(M, N, K, a, lda, w, ldw, wsum, c, ldc);
    return;
  }
#endif
#if defined(__AVX2__)
  if (p == int8_path::avx2) {
    detail::gemm_avx2(M, N, K, a, lda, w, ldw, c, ldc);
    return;
  }
#endif
  (void)p;
  (void)wsum;
  reference::gemm_s8(M, N, K, a, lda, w, ldw, c, ldc);
}

}  // namespace ctnn::kernels::cpu::int8
