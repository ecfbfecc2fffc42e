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
#include <algorithm>
#include <cmath>
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
// R rows x 4 columns of c per tile: the 4 weight rows are loaded once for R activation rows.
template <std::size_t R>
inline void tile_avx2(std::size_t K, const std::int8_t* x, std::size_t lda, const std::int8_t* w0, std::size_t ldw,
                      std::size_t cols, std::int32_t* c, std::size_t ldc) {
  const std::size_t K32 = K / 32 * 32;
  const __m256i ones = _mm256_set1_epi16(1);
  __m256i s[R][4];
  for (std::size_t r = 0; r < R; ++r)
    for (std::size_t q = 0; q < 4; ++q) s[r][q] = _mm256_setzero_si256();
  for (std::size_t k = 0; k < K32; k += 32) {
    __m256i xv[R], ax[R];
    for (std::size_t r = 0; r < R; ++r) {
      xv[r] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x + r * lda + k));
      ax[r] = _mm256_sign_epi8(xv[r], xv[r]);
    }
    for (std::size_t q = 0; q < cols; ++q) {
      const __m256i wv = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w0 + q * ldw + k));
      for (std::size_t r = 0; r < R; ++r) s[r][q] = dot32(s[r][q], ax[r], xv[r], wv, ones);
    }
  }
  for (std::size_t r = 0; r < R; ++r)
    for (std::size_t q = 0; q < cols; ++q)
      c[r * ldc + q] = hsum(s[r][q]) + dot_tail(x + r * lda, w0 + q * ldw, K32, K);
}
inline void gemm_avx2(std::size_t M, std::size_t N, std::size_t K, const std::int8_t* a, std::size_t lda,
                      const std::int8_t* w, std::size_t ldw, std::int32_t* c, std::size_t ldc) {
  std::size_t i = 0;
  for (; i + 2 <= M; i += 2)
    for (std::size_t j = 0; j < N; j += 4)
      tile_avx2<2>(K, a + i * lda, lda, w + j * ldw, ldw, std::min<std::size_t>(4, N - j), c + i * ldc + j, ldc);
  for (; i < M; ++i)
    for (std::size_t j = 0; j < N; j += 4)
      tile_avx2<1>(K, a + i * lda, lda, w + j * ldw, ldw, std::min<std::size_t>(4, N - j), c + i * ldc + j, ldc);
}
#endif

#if defined(__AVX512VNNI__) && defined(__AVX512BW__)
// dot(a + 128, w) over K by vpdpbusd, R rows x 4 columns per tile; the K % 64 tail by masked
// loads (w's lanes 0 there).
template <std::size_t R>
inline void tile_vnni(std::size_t K, const std::int8_t* x, std::size_t lda, const std::int8_t* w0, std::size_t ldw,
                      std::size_t cols, const std::int32_t* wsum, std::int32_t* c, std::size_t ldc) {
  const std::size_t K64 = K / 64 * 64;
  const __mmask64 tail = K64 < K ? (~__mmask64(0) >> (64 - (K - K64))) : 0;
  const __m512i flip = _mm512_set1_epi8(char(0x80));
  __m512i s[R][4];
  for (std::size_t r = 0; r < R; ++r)
    for (std::size_t q = 0; q < 4; ++q) s[r][q] = _mm512_setzero_si512();
  for (std::size_t k = 0; k < K64; k += 64) {
    __m512i xu[R];
    for (std::size_t r = 0; r < R; ++r) xu[r] = _mm512_xor_si512(_mm512_loadu_si512(x + r * lda + k), flip);
    for (std::size_t q = 0; q < cols; ++q) {
      const __m512i wv = _mm512_loadu_si512(w0 + q * ldw + k);
      for (std::size_t r = 0; r < R; ++r) s[r][q] = _mm512_dpbusd_epi32(s[r][q], xu[r], wv);
    }
  }
  if (tail) {
    __m512i xu[R];
    for (std::size_t r = 0; r < R; ++r)
      xu[r] = _mm512_xor_si512(_mm512_maskz_loadu_epi8(tail, x + r * lda + K64), flip);
    for (std::size_t q = 0; q < cols; ++q) {
      const __m512i wv = _mm512_maskz_loadu_epi8(tail, w0 + q * ldw + K64);
      for (std::size_t r = 0; r < R; ++r) s[r][q] = _mm512_dpbusd_epi32(s[r][q], xu[r], wv);
    }
  }
  for (std::size_t r = 0; r < R; ++r)
    for (std::size_t q = 0; q < cols; ++q) c[r * ldc + q] = std::int32_t(std::uint32_t(_mm512_reduce_add_epi32(s[r][q])) - 128u * std::uint32_t(wsum[q]));
}
inline void gemm_vnni(std::size_t M, std::size_t N, std::size_t K, const std::int8_t* a, std::size_t lda,
                      const std::int8_t* w, std::size_t ldw, const std::int32_t* wsum, std::int32_t* c,
                      std::size_t ldc) {
  std::size_t i = 0;
  for (; i + 4 <= M; i += 4)
    for (std::size_t j = 0; j < N; j += 4)
      tile_vnni<4>(K, a + i * lda, lda, w + j * ldw, ldw, std::min<std::size_t>(4, N - j), wsum + j, c + i * ldc + j,
                   ldc);
  for (; i < M; ++i)
    for (std::size_t j = 0; j < N; j += 4)
      tile_vnni<1>(K, a + i * lda, lda, w + j * ldw, ldw, std::min<std::size_t>(4, N - j), wsum + j, c + i * ldc + j,
                   ldc);
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

// q[i] = clamp(round(x[i] / scale) + zp, lo, hi) (round half away from zero, TFLite's
// AffineQuantize; a NaN gives zp), in xsimd::batch<float, Arch> where Arch has float SIMD: equal
// to quantization::quantize element by element (IEEE division, exact rounding and clamp).
template <class Arch = default_arch>
void quantize(const float* x, std::size_t n, float scale, std::int32_t zp, std::int32_t lo, std::int32_t hi,
              std::int8_t* q) {
  std::size_t i = 0;
  if constexpr (simd_v<float, Arch>) {
    using B = xsimd::batch<float, Arch>;
    constexpr std::size_t L = B::size;
    const B s = B(scale), z = B(float(zp)), l = B(float(lo)), h = B(float(hi));
    constexpr std::size_t chunk = 256 / L * L;  // rounded in vectors, then narrowed by a loop the compiler vectorizes
    alignas(64) float tmp[chunk];
    for (; i + L <= n;) {
      const std::size_t c = std::min(chunk, (n - i) / L * L);
      for (std::size_t k = 0; k < c; k += L) {
        const B v = xsimd::round(B::load_unaligned(x + i + k) / s);
        xsimd::select(v == v, xsimd::min(xsimd::max(v + z, l), h), z).store_aligned(tmp + k);
      }
      for (std::size_t k = 0; k < c; ++k) q[i + k] = std::int8_t(std::int32_t(tmp[k]));
      i += c;
    }
  }
  for (; i < n; ++i) {
    const float v = std::round(x[i] / scale);
    q[i] = std::int8_t(v == v ? std::min(std::max(v + float(zp), float(lo)), float(hi)) : float(zp));
  }
}

// max |x[i]| over n values (0 for n = 0; NaNs are skipped), the dynamic-range row scale's input.
template <class Arch = default_arch>
float abs_max(const float* x, std::size_t n) {
  float m = 0;
  std::size_t i = 0;
  if constexpr (simd_v<float, Arch>) {
    using B = xsimd::batch<float, Arch>;
    B acc(0.0f);
    for (; i + B::size <= n; i += B::size) {
      const B a = xsimd::abs(B::load_unaligned(x + i));
      acc = xsimd::select(a > acc, a, acc);
    }
    alignas(64) float t[B::size];
    acc.store_aligned(t);
    for (float f : t) m = f > m ? f : m;
  }
  for (const float* p = x + i; p < x + n; ++p) m = std::abs(*p) > m ? std::abs(*p) : m;
  return m;
}

// One output row of a full-integer layer: y[j] = scale (clamp(MBQM(acc[j] + off[j], mult[j],
// shift[j]) + zp, lo, 127) - zp), MBQM TFLite's MultiplyByQuantizedMultiplier
// (quantization/arithmetic.hpp) written without branches so that the compiler vectorizes it;
// requires 0 <= mult[j] (quantize_multiplier's range), -31 <= shift[j] <= 30.
inline void requantize_row(std::size_t N, const std::int32_t* acc, const std::int32_t* off, const std::int32_t* mult,
                           const std::int32_t* shift, std::int32_t zp, std::int32_t lo, float scale, float* y) {
  constexpr std::size_t chunk = 64;
  std::int32_t qs[chunk];
  for (std::size_t j0 = 0; j0 < N; j0 += chunk) {
    const std::size_t c = std::min(chunk, N - j0);
    for (std::size_t u = 0; u < c; ++u) {
      const std::size_t j = j0 + u;
      const std::int32_t sh = shift[j];
      const std::int32_t left = sh > 0 ? sh : 0, right = sh > 0 ? 0 : -sh;
      const std::int32_t x = std::int32_t((std::uint32_t(acc[j]) + std::uint32_t(off[j])) << left);
      const std::int64_t ab = std::int64_t(x) * std::int64_t(mult[j]);
      constexpr std::int64_t low31 = (std::int64_t(1) << 31) - 1;
      // nudge: 2^30 for ab >= 0, 1 - 2^30 below; then t / 2^31 truncated toward zero, all without branches
      const std::int64_t t = ab + (std::int64_t(1) << 30) - ((ab >> 63) & low31);
      const std::int32_t hi = std::int32_t((t + ((t >> 63) & low31)) >> 31);
      const std::int32_t mask = std::int32_t((std::uint32_t(1) << right) - 1u);
      const std::int32_t thr = (mask >> 1) + (hi < 0 ? 1 : 0);
      const std::int32_t q = (hi >> right) + ((hi & mask) > thr ? 1 : 0) + zp;
      qs[u] = q < lo ? lo : q > 127 ? 127 : q;
    }
    for (std::size_t u = 0; u < c; ++u) y[j0 + u] = scale * float(qs[u] - zp);
  }
}

}  // namespace ctnn::kernels::cpu::int8
