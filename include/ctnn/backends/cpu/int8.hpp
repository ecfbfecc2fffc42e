// ctnn/backends/cpu/int8.hpp — int8 x int8 -> int32 products on packed weights (the int8 dense layer's GEMM).
//
// Weights W[N, K] (int8 in [-127, 127], TFLite's symmetric range; -128 is a precondition
// violation) are packed once, at conversion, by pack(K, N, w, out) into packed_bytes(K, N) =
// N padded_k(K) bytes: panels of 16 output columns (the last one N % 16 wide), each holding
// groups of 4 consecutive k per column (K zero-padded to a multiple of 4), so one 16-column
// group is one 64-byte vector. The layout does not depend on the architecture (weights files
// are portable); packed_index(K, N, j, k) is the byte of W[j, k].
//   gemm_s8<Arch>(M, N, K, a, lda, packed, wsum, c, ldc):  c[i, j] = sum_k a[i, k] W[j, k]
// a: M rows of int8 activations, lda >= padded_k(K), bytes K..padded_k(K)-1 readable (any value:
// their weights are 0); wsum[j] = sum_k W[j, k] (or null: computed here); c: int32, overwritten.
// Each path accumulates an M_r x N_r register tile from broadcast 4-byte activation groups, no
// horizontal sums; integer sums are exact, so every path equals reference::gemm_s8 bit for bit.
//   gemm_u8_requantize<Y, Arch, R>(M, N, K, a_u8, ...): the fused full-integer product on the
// activations + 128 as unsigned bytes (quantize_u8's output), which the u8 x s8 paths (vnni,
// vnni256, avx2_u8: takes_u8) use as they are, without flip_rows' pass.
// Paths, by the backend's Arch and this CPU (int8_path_of<Arch>()):
//   vnni    Arch derived from avx512bw, the TU compiled with __AVX512VNNI__ and the CPU reporting
//           AVX512_VNNI (cpuid 7.0:ECX[11]): vpdpbusd(a ^ 0x80 as u8, W), 4 x 64 tile (one row: two
//           accumulator sets, 8 chains), then c = dot - 128 wsum (the oneDNN/XNNPACK offset trick);
//           a ^ 0x80 formed once a call (flip_rows), not at each broadcast.
//   vnni256 Arch derived from avx2 or avx512f (or avx512bw without the vnni path), the TU compiled
//           with __AVXVNNI__ and the CPU reporting AVX-VNNI (cpuid 7.1:EAX[4]), or compiled with
//           __AVX512VNNI__ and __AVX512VL__ and the CPU reporting both (the EVEX form on ymm, which
//           computes the same): a 3 x 32 tile on the full panels (tile_vnni256, the activations
//           flipped once a call as vnni), the avx2 path's narrow 2 x 16 tile with vpdpbusd in place
//           of its three steps on the last panel, c = dot - 128 wsum as vnni.
//   avx2    otherwise for those Arch: from 4 rows on, a copied to int16 once a call and vpmaddwd
//           with W sign-extended by vpmovsxbw, 6 (or 4) x 8 tile; the other rows and the narrow
//           panel vpmaddubsw(|a|, W or -W by a's sign) + vpmaddwd with ones, 2 x 32 tile: |a| <=
//           128, |W| <= 127 keep each int16 pair within +-32512, so nothing saturates at full
//           8-bit weights.
//   avx2_u8 the avx2 path for weights in [-64, 64] (weight_range::reduced: ONNX Runtime's
//           reduce_range, quantization::reduce_range): vpmaddubsw((a ^ 0x80) as u8, W) + vpmaddwd
//           with ones, c = dot - 128 wsum as vnni: 255 64 2 = 32640 keeps every int16 pair exact,
//           so no sign trick and no int16 copy; from 4 rows on a flipped once a call and 4 x 16
//           tiles (tile_u8), else the 2 x 32 tile.
//   scalar  otherwise. Docs: docs/quantization.md.
// The weights' range is a template argument (weight_range, after Arch; full by default): a reduced
// product requires |W| <= 64 (the reduce_range layers' weights files and conversions check it); the
// other paths are exact for either range.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#include <immintrin.h>
#endif

#include <xsimd/xsimd.hpp>

#include "../../config.hpp"
#include "arch.hpp"

namespace ctnn::kernels::cpu::int8 {

enum class int8_path { scalar, avx2, vnni, vnni256, avx2_u8 };
// The weights' range a product may assume: full, TFLite's symmetric [-127, 127], or reduced,
// [-64, 64] (ONNX Runtime's reduce_range: 7-bit weights), where the avx2 path multiplies the
// unsigned activations a + 128 by the weights with vpmaddubsw directly (avx2_u8).
enum class weight_range { full, reduced };
inline constexpr std::int32_t reduced_weight_max = 64;  // 2 x 255 x 64 = 32640 <= 32767: no int16 pair saturates

inline constexpr std::size_t panel = 16;  // output columns per packed panel
constexpr std::size_t padded_k(std::size_t K) { return (K + 3) / 4 * 4; }
constexpr std::size_t packed_bytes(std::size_t K, std::size_t N) { return padded_k(K) * N; }
constexpr std::size_t packed_index(std::size_t K, std::size_t N, std::size_t j, std::size_t k) {
  const std::size_t p = j / panel, width = std::min(panel, N - p * panel);
  return p * panel * padded_k(K) + k / 4 * 4 * width + (j - p * panel) * 4 + k % 4;
}
// w: [N, K] row-major (leading dimension ldw) -> out: packed_bytes(K, N) bytes.
inline void pack(std::size_t K, std::size_t N, const std::int8_t* w, std::size_t ldw, std::int8_t* out) {
  if (const std::size_t n = packed_bytes(K, N)) std::memset(out, 0, n);  // (K or N = 0: out may be null)
  for (std::size_t j = 0; j < N; ++j)
    for (std::size_t k = 0; k < K; ++k) out[packed_index(K, N, j, k)] = w[j * ldw + k];
}
inline void unpack(std::size_t K, std::size_t N, const std::int8_t* packed, std::int8_t* w) {
  for (std::size_t j = 0; j < N; ++j)
    for (std::size_t k = 0; k < K; ++k) w[j * K + k] = packed[packed_index(K, N, j, k)];
}

namespace reference {
// The definition every path is compared against (w unpacked, [N, K]).
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

// wsum[j] = sum_k W[j, k] from the packed layout.
inline void packed_sums(std::size_t N, std::size_t K, const std::int8_t* packed, std::int32_t* out) {
  for (std::size_t j = 0; j < N; ++j) {
    std::int32_t s = 0;
    for (std::size_t k = 0; k < K; ++k) s += packed[packed_index(K, N, j, k)];
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

// Whether this CPU executes the 256-bit vpdpbusd this build encodes (dpbusd256): AVX-VNNI's VEX form
// (cpuid 7.1:EAX[4]) in a build with __AVXVNNI__, else AVX512_VNNI's EVEX form on ymm (cpuid
// 7.0:ECX[11] and AVX512VL, 7.0:EBX[31]); read once.
inline bool cpu_has_vnni256() noexcept {
#if defined(__x86_64__) || defined(__i386__)
  static const bool has = [] {
    unsigned a = 0, b = 0, c = 0, d = 0;
#if defined(__AVXVNNI__)
    if (!__get_cpuid_count(7, 1, &a, &b, &c, &d)) return false;
    return ((a >> 4) & 1u) != 0;
#else
    if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return false;
    return ((c >> 11) & 1u) != 0 && ((b >> 31) & 1u) != 0;
#endif
  }();
  return has;
#else
  return false;
#endif
}

#if defined(__AVX2__) && (defined(__AVXVNNI__) || (defined(__AVX512VNNI__) && defined(__AVX512VL__)))
inline constexpr bool vnni256_compiled = true;
#else
inline constexpr bool vnni256_compiled = false;
#endif

// The path gemm_s8<Arch, R> takes on this CPU (R reduced: avx2_u8 where full weights take avx2).
template <class Arch, weight_range R = weight_range::full>
int8_path int8_path_of() noexcept {
  if constexpr (R == weight_range::reduced) {
    const int8_path p = int8_path_of<Arch>();
    return p == int8_path::avx2 ? int8_path::avx2_u8 : p;
  } else if constexpr (std::is_base_of_v<xsimd::avx512bw, Arch> && Arch::supported()) {
    if (vnni_compiled && cpu_has_avx512vnni()) return int8_path::vnni;
    if (vnni256_compiled && cpu_has_vnni256()) return int8_path::vnni256;
    return int8_path::avx2;  // -mavx512bw implies AVX2
  } else if constexpr ((std::is_base_of_v<xsimd::avx2, Arch> || std::is_base_of_v<xsimd::avx512f, Arch>) &&
                       Arch::supported()) {
    if (vnni256_compiled && cpu_has_vnni256()) return int8_path::vnni256;
    return int8_path::avx2;
  } else {
    return int8_path::scalar;
  }
}

// What a kernel's store does with an int32 accumulator vector (columns j.. of row i):
//   store_i32    c[i ldc + j] = the sums (gemm_s8, block::gemm)
//   requant<Y>   requantize_row's rule on them, fused: y[i ldy + j] = the clamped int8 value (Y
//                std::int8_t) or its dequantized float, the saturated outputs counted; the int32
//                sums never reach memory (gemm_s8_requantize, block::gemm_requantize)
struct store_i32 {
  std::int32_t* c;
  std::size_t ldc;
};
template <class Y>
struct requant {
  using value_type = Y;
  const std::int32_t* bias;        // per column: bias - in_zp kernel_sum added to the sums (wrapping
  const std::int32_t* kernel_sum;  // int32, formed in the store: no per-call pass over the columns)
  std::int32_t in_zp;
  const std::int32_t* mult;   // per column: quantize_multiplier's q (>= 0) and shift (-31..30)
  const std::int32_t* shift;
  std::int32_t zp, lo, low;   // the output zero point; the clamp's floor; below `low`: saturated
  float scale;                // Y float: the output scale
  Y* y;
  std::size_t ldy;
  std::size_t saturated = 0;  // outputs above 127 or below `low` (counted by the stores)
};

// The activation operand of the vector paths (detail::product_vector): row i of the product
// reads its 4-byte groups at row(i) + s segment_stride() + 4 t, segment s < segments(), t <
// groups(), in the packed kernel's k order (k = 4 (s groups() + t)). a_rows: the rows of a matrix
// (one segment); int8_conv.hpp's windows: the kernel rows of each output position's window, read
// in place from the image (an implicit im2col).
struct a_rows {
  const std::int8_t* a;
  std::size_t g;    // groups of 4 bytes a row: padded_k(K) / 4
  std::size_t lda;
  const std::int8_t* row(std::size_t i) const { return a + i * lda; }
  static constexpr std::size_t segments() { return 1; }
  static constexpr std::size_t segment_stride() { return 0; }
  std::size_t groups() const { return g; }
};

namespace detail {
inline std::int32_t load4(const std::int8_t* p) {
  std::int32_t v;
  std::memcpy(&v, p, 4);
  return v;
}
inline void gemm_scalar(std::size_t M, std::size_t N, std::size_t K, const std::int8_t* a, std::size_t lda,
                        const std::int8_t* packed, std::int32_t* c, std::size_t ldc) {
  for (std::size_t i = 0; i < M; ++i)
    for (std::size_t j = 0; j < N; ++j) {
      std::int32_t s = 0;
      for (std::size_t k = 0; k < K; ++k) s += std::int32_t(a[i * lda + k]) * packed[packed_index(K, N, j, k)];
      c[i * ldc + j] = s;
    }
}

#if defined(__AVX2__)
// The low byte of each of 8 int32 lanes (std::int8_t(v), modular), in the low 8 bytes.
inline __m128i low_bytes(__m256i v) {
  const __m128i pick = _mm_setr_epi8(0, 4, 8, 12, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1);
  return _mm_unpacklo_epi32(_mm_shuffle_epi8(_mm256_castsi256_si128(v), pick),
                            _mm_shuffle_epi8(_mm256_extracti128_si256(v, 1), pick));
}
// 8 int32 lanes from p, `width` (1..8) of them present, the others 0 (no vpmaskmovd: AMD's cores
// run it slowly), and their store.
inline __m256i load8(const std::int32_t* p, std::size_t width) {
  if (width == 8) return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
  alignas(32) std::int32_t t[8] = {};
  std::memcpy(t, p, width * sizeof(std::int32_t));
  return _mm256_load_si256(reinterpret_cast<const __m256i*>(t));
}
template <class T>
inline void store8(T* p, __m256i v, std::size_t width) {
  static_assert(sizeof(T) == 4);
  if (width == 8) return _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), v);
  alignas(32) T t[8];
  _mm256_store_si256(reinterpret_cast<__m256i*>(t), v);
  std::memcpy(p, t, width * sizeof(T));
}
// The epilogues on 8 columns, `width` (1..8) of them present, in the AVX-512 form's steps (below):
// columns8(e, j, width, sub) forms what the columns share (once a tile), put(e, c, v, i) stores
// the sums v - sub of row i, and where saturated(e, c) says that one of the rows put may have
// saturated, count(e, c, v) counts row v's saturated outputs exactly; put(e, v, i, j, width) does all.
struct cols8_i32 {
  std::size_t j, width;
  __m256i sub;
};
inline cols8_i32 columns8(const store_i32&, std::size_t j, std::size_t width, __m256i sub) { return {j, width, sub}; }
inline void put(store_i32& e, const cols8_i32& c, __m256i v, std::size_t i) {
  store8(e.c + i * e.ldc + c.j, _mm256_sub_epi32(v, c.sub), c.width);
}
constexpr bool saturated(const store_i32&, const cols8_i32&) { return false; }
inline void count(store_i32&, const cols8_i32&, __m256i) {}
// requant's columns: off = bias - in_zp kernel_sum - sub, the multiplier's shifts taken apart; the
// largest and smallest value put (before the clamp)
struct cols8_requant {
  std::size_t j, width;
  __m256i off, mu, mu_odd, left, right, mask, half_mask, zp;
  __m256i top = _mm256_set1_epi32(std::numeric_limits<std::int32_t>::min());
  __m256i bottom = _mm256_set1_epi32(std::numeric_limits<std::int32_t>::max());
  unsigned present() const { return (1u << width) - 1u; }
};
template <class Y>
CTNN_FORCEINLINE cols8_requant columns8(const requant<Y>& e, std::size_t j, std::size_t width, __m256i sub) {
  const __m256i zero = _mm256_setzero_si256(), one = _mm256_set1_epi32(1);
  const __m256i sh = load8(e.shift + j, width), mu = load8(e.mult + j, width);
  const __m256i off = _mm256_sub_epi32(
      _mm256_sub_epi32(load8(e.bias + j, width),
                       _mm256_mullo_epi32(load8(e.kernel_sum + j, width), _mm256_set1_epi32(e.in_zp))),
      sub);
  const __m256i right = _mm256_max_epi32(_mm256_sub_epi32(zero, sh), zero);
  const __m256i mask = _mm256_sub_epi32(_mm256_sllv_epi32(one, right), one);
  return {j,    width, off, mu, _mm256_srli_epi64(mu, 32), _mm256_max_epi32(sh, zero), right, mask,
          _mm256_srai_epi32(mask, 1), _mm256_set1_epi32(e.zp)};
}
// requantize_row's q (before the clamp) of the sums v: TFLite's MultiplyByQuantizedMultiplier on
// the 8 int32 lanes of v + off, bit for bit the scalar one, + zp: x << left,
// SaturatingRoundingDoublingHighMul (with mult >= 0 it never saturates, and its nudge and
// truncation toward zero are floor((x q + 2^30) / 2^31) in exact 64-bit products, of the even
// lanes and of the odd ones, vpmuldq), then RoundingDivideByPOT by `right`.
CTNN_FORCEINLINE __m256i requantized8(const cols8_requant& c, __m256i v) {
  const __m256i x = _mm256_sllv_epi32(_mm256_add_epi32(v, c.off), c.left), half = _mm256_set1_epi64x(std::int64_t(1) << 30);
  const __m256i he = _mm256_srli_epi64(_mm256_add_epi64(_mm256_mul_epi32(x, c.mu), half), 31);
  const __m256i ho = _mm256_slli_epi64(_mm256_add_epi64(_mm256_mul_epi32(_mm256_srli_epi64(x, 32), c.mu_odd), half), 1);
  const __m256i hi = _mm256_blend_epi32(he, ho, 0xAA);
  const __m256i thr = _mm256_add_epi32(c.half_mask, _mm256_srli_epi32(hi, 31));
  // + 1 where the remainder is above the threshold (the compare's -1 subtracted)
  return _mm256_add_epi32(
      _mm256_sub_epi32(_mm256_srav_epi32(hi, c.right), _mm256_cmpgt_epi32(_mm256_and_si256(hi, c.mask), thr)), c.zp);
}
// The present outputs of q that saturate: above 127 or below `low`, as a count.
template <class Y>
inline std::size_t saturated_lanes(const requant<Y>& e, const cols8_requant& c, __m256i q) {
  const __m256i out = _mm256_or_si256(_mm256_cmpgt_epi32(q, _mm256_set1_epi32(127)),
                                      _mm256_cmpgt_epi32(_mm256_set1_epi32(e.low), q));
  return std::size_t(__builtin_popcount(c.present() & unsigned(_mm256_movemask_ps(_mm256_castsi256_ps(out)))));
}
// q clamped (q < lo ? lo : min(q, 127), as requantize_row's clamp, even for a zero point beyond
// 127) into row `row` of y: the int8 values, or their dequantized floats
template <class Y>
CTNN_FORCEINLINE void put_clamped(const requant<Y>& e, const cols8_requant& c, __m256i q, std::size_t row) {
  const __m256i lo = _mm256_set1_epi32(e.lo);
  const __m256i top = _mm256_min_epi32(q, _mm256_set1_epi32(127));
  // lo <= 127 (every valid zero point): max(min(q, 127), lo), the same values; vpblendvb is 2-3
  // operations on the vector ports
  const __m256i v8 = e.lo <= 127 ? _mm256_max_epi32(top, lo) : _mm256_blendv_epi8(top, lo, _mm256_cmpgt_epi32(lo, q));
  Y* dst = e.y + row * e.ldy + c.j;
  if constexpr (std::is_same_v<Y, std::int8_t>) {
    const __m128i b = low_bytes(v8);  // std::int8_t(v8), as the scalar rule
    if (c.width == 8) {
      _mm_storel_epi64(reinterpret_cast<__m128i*>(dst), b);
    } else {
      alignas(16) std::int8_t t[16];
      _mm_store_si128(reinterpret_cast<__m128i*>(t), b);
      std::memcpy(dst, t, c.width);
    }
  } else {
    store8(dst, _mm256_castps_si256(_mm256_mul_ps(_mm256_set1_ps(e.scale), _mm256_cvtepi32_ps(_mm256_sub_epi32(v8, c.zp)))),
           c.width);
  }
}
template <class Y>
CTNN_FORCEINLINE void put(requant<Y>& e, cols8_requant& c, __m256i v, std::size_t i) {
  const __m256i q = requantized8(c, v);
  c.top = _mm256_max_epi32(c.top, q);
  c.bottom = _mm256_min_epi32(c.bottom, q);
  put_clamped(e, c, q, i);
}
template <class Y>
CTNN_FORCEINLINE bool saturated(const requant<Y>& e, const cols8_requant& c) {
  const __m256i out = _mm256_or_si256(_mm256_cmpgt_epi32(c.top, _mm256_set1_epi32(127)),
                                      _mm256_cmpgt_epi32(_mm256_set1_epi32(e.low), c.bottom));
  return (c.present() & unsigned(_mm256_movemask_ps(_mm256_castsi256_ps(out)))) != 0;
}
template <class Y>
inline void count(requant<Y>& e, const cols8_requant& c, __m256i v) {
  e.saturated += saturated_lanes(e, c, requantized8(c, v));
}
template <class E>
inline void put(E& e, __m256i v, std::size_t i, std::size_t j, std::size_t width = 8) {
  auto c = columns8(e, j, width, _mm256_setzero_si256());
  put(e, c, v, i);
  if (saturated(e, c)) count(e, c, v);
}
inline void put(store_i32& e, __m128i v, std::size_t i, std::size_t j) {
  _mm_storeu_si128(reinterpret_cast<__m128i*>(e.c + i * e.ldc + j), v);
}
#endif

#if defined(__AVX512F__)
// The epilogues on 16 columns, those of m present, in steps: columns(e, j, m, sub) forms what
// the columns share (once a tile: the loads, the offset, the shifts), put(e, c, v, i) stores the
// sums v - sub of row i, and where saturated(e, c) says that one of the rows put may have
// saturated, count(e, c, v) counts row v's saturated outputs exactly (off the common path: put
// keeps only the largest and smallest value); put(e, v, i, j, m) does all.
struct cols_i32 {
  std::size_t j;
  __mmask16 m;
  __m512i sub;
};
inline cols_i32 columns(const store_i32&, std::size_t j, __mmask16 m, __m512i sub) { return {j, m, sub}; }
inline void put(store_i32& e, cols_i32& c, __m512i v, std::size_t i) {
  _mm512_mask_storeu_epi32(e.c + i * e.ldc + c.j, c.m, _mm512_sub_epi32(v, c.sub));
}
constexpr bool saturated(const store_i32&, const cols_i32&) { return false; }
inline void count(store_i32&, const cols_i32&, __m512i) {}
// requant's columns: off = bias - in_zp kernel_sum - sub, and the multiplier's shifts taken apart; the
// largest and smallest value put (before the clamp)
struct cols_requant {
  std::size_t j;
  __mmask16 m;
  __m512i off, mu, mu_odd, left, right, mask, half_mask;
  __m512i top = _mm512_set1_epi32(std::numeric_limits<std::int32_t>::min());
  __m512i bottom = _mm512_set1_epi32(std::numeric_limits<std::int32_t>::max());
};
template <class Y>
inline cols_requant columns(const requant<Y>& e, std::size_t j, __mmask16 m, __m512i sub) {
  const __m512i zero = _mm512_setzero_si512(), one = _mm512_set1_epi32(1);
  const __m512i sh = _mm512_maskz_loadu_epi32(m, e.shift + j), mu = _mm512_maskz_loadu_epi32(m, e.mult + j);
  const __m512i off = _mm512_sub_epi32(
      _mm512_sub_epi32(_mm512_maskz_loadu_epi32(m, e.bias + j),
                       _mm512_mullo_epi32(_mm512_maskz_loadu_epi32(m, e.kernel_sum + j), _mm512_set1_epi32(e.in_zp))),
      sub);
  const __m512i right = _mm512_max_epi32(_mm512_sub_epi32(zero, sh), zero);
  const __m512i mask = _mm512_sub_epi32(_mm512_sllv_epi32(one, right), one);
  return {j, m, off, mu, _mm512_srli_epi64(mu, 32), _mm512_max_epi32(sh, zero), right, mask, _mm512_srai_epi32(mask, 1)};
}
// q clamped (q < lo ? lo : min(q, 127), as requantize_row's clamp, even for a zero point beyond
// 127; lo <= 127, every valid zero point: max(min(q, 127), lo), the same values in one operation
// fewer) into dst: the int8 values, or their dequantized floats, in the lanes of m. The requantizing
// stores' one clamp and store (requant's, pool_requant's, int8_conv.hpp's conv_tile_rq; LoFits: lo
// <= 127 known; Whole: all 16 lanes, stores without a mask)
template <bool LoFits = false, bool Whole = false, class Y>
CTNN_FORCEINLINE void put_clamped(const requant<Y>& e, __m512i q, Y* dst, __mmask16 m) {
  const __m512i lo = _mm512_set1_epi32(e.lo), top = _mm512_set1_epi32(127);
  const __m512i v8 = LoFits || e.lo <= 127
                         ? _mm512_max_epi32(_mm512_min_epi32(q, top), lo)
                         : _mm512_mask_blend_epi32(_mm512_cmplt_epi32_mask(q, lo), _mm512_min_epi32(q, top), lo);
  if constexpr (std::is_same_v<Y, std::int8_t>) {
    if constexpr (Whole)
      _mm_storeu_si128(reinterpret_cast<__m128i*>(dst), _mm512_cvtepi32_epi8(v8));
    else
      _mm512_mask_cvtepi32_storeu_epi8(dst, m, v8);
  } else {
    const __m512 f = _mm512_mul_ps(_mm512_set1_ps(e.scale), _mm512_cvtepi32_ps(_mm512_sub_epi32(v8, _mm512_set1_epi32(e.zp))));
    if constexpr (Whole)
      _mm512_storeu_ps(dst, f);
    else
      _mm512_mask_storeu_ps(dst, m, f);
  }
}
// requantize_row's q (before the clamp) of the sums v: requantized8's rule on 16 lanes of v + off, + zp
template <class Y>
inline __m512i requantized(const requant<Y>& e, const cols_requant& c, __m512i v) {
  const __m512i x = _mm512_sllv_epi32(_mm512_add_epi32(v, c.off), c.left), half = _mm512_set1_epi64(std::int64_t(1) << 30);
  const __m512i he = _mm512_srli_epi64(_mm512_add_epi64(_mm512_mul_epi32(x, c.mu), half), 31);
  const __m512i ho = _mm512_slli_epi64(_mm512_add_epi64(_mm512_mul_epi32(_mm512_srli_epi64(x, 32), c.mu_odd), half), 1);
  const __m512i hi = _mm512_mask_blend_epi32(__mmask16(0xAAAA), he, ho);
  const __m512i thr = _mm512_add_epi32(c.half_mask, _mm512_srli_epi32(hi, 31));
  const __m512i r = _mm512_srav_epi32(hi, c.right);
  return _mm512_add_epi32(
      _mm512_mask_add_epi32(r, _mm512_cmpgt_epi32_mask(_mm512_and_si512(hi, c.mask), thr), r, _mm512_set1_epi32(1)),
      _mm512_set1_epi32(e.zp));
}
template <class Y>
inline void put(requant<Y>& e, cols_requant& c, __m512i v, std::size_t i) {
  const __m512i q = requantized(e, c, v);
  c.top = _mm512_mask_max_epi32(c.top, c.m, c.top, q);
  c.bottom = _mm512_mask_min_epi32(c.bottom, c.m, c.bottom, q);
  put_clamped(e, q, e.y + i * e.ldy + c.j, c.m);
}
template <class Y>
inline bool saturated(const requant<Y>& e, const cols_requant& c) {
  return (_mm512_cmpgt_epi32_mask(c.top, _mm512_set1_epi32(127)) |
          _mm512_cmplt_epi32_mask(c.bottom, _mm512_set1_epi32(e.low))) != 0;
}
// outputs above 127 or below `low`
template <class Y>
inline void count(requant<Y>& e, const cols_requant& c, __m512i v) {
  const __m512i q = requantized(e, c, v);
  e.saturated += std::size_t(__builtin_popcount(unsigned(_mm512_kor(
      _mm512_mask_cmpgt_epi32_mask(c.m, q, _mm512_set1_epi32(127)), _mm512_mask_cmplt_epi32_mask(c.m, q, _mm512_set1_epi32(e.low))))));
}
template <class E>
inline void put(E& e, __m512i v, std::size_t i, std::size_t j, __mmask16 m = __mmask16(0xffff)) {
  auto c = columns(e, j, m, _mm512_setzero_si512());
  put(e, c, v, i);
  if (saturated(e, c)) count(e, c, v);
}
#endif

#if defined(__AVX2__)
// acc + p. GCC (12) copies each accumulator of a tile through another register, and through the
// stack, around the intrinsic's add; the asm form keeps them in place (clang: the intrinsic)
inline __m256i add_acc(__m256i acc, __m256i p) {
#if defined(__GNUC__) && !defined(__clang__)
  __asm__("vpaddd %1, %0, %0" : "+x"(acc) : "x"(p));
  return acc;
#else
  return _mm256_add_epi32(acc, p);
#endif
}
// The dot-product steps of the 256-bit tiles: acc += the 8 int32 dot products of one broadcast
// 4-byte activation group (prep(a4)) with one weight vector (8 columns x 4 k).
//   dot_avx2     vpmaddubsw(|a|, w or -w by a's sign) + vpmaddwd with ones (no pair saturates:
//                above); the sign as (w ^ m) - m with m = (a < 0) per byte, not vpsignb, which
//                Zen 4 runs on the multiplier pipes (conv bench: 38.5 -> 34.7 us, docs/quantization.md)
//   dot_vnni256  vpdpbusd((a ^ 0x80) as u8, w): the sums are acc - 128 wsum (offset)
struct dot_avx2 {
  static constexpr bool offset = false;
  struct act {
    __m256i neg, abs;  // 0xff where a < 0; |a| as u8 (-128 -> 128)
  };
  __m256i ones = _mm256_set1_epi16(1);
  static act prep(std::int32_t a4) {
    const __m256i b = _mm256_set1_epi32(a4);
    return {_mm256_cmpgt_epi8(_mm256_setzero_si256(), b), _mm256_abs_epi8(b)};
  }
  __m256i step(__m256i acc, const act& x, __m256i w) const {
    return add_acc(acc, _mm256_madd_epi16(_mm256_maddubs_epi16(x.abs, _mm256_sub_epi8(_mm256_xor_si256(w, x.neg), x.neg)), ones));
  }
};
//   dot_u8       vpmaddubsw((a ^ 0x80) as u8, w) + vpmaddwd with ones, for w in [-64, 64] only
//                (weight_range::reduced): a pair is at most 2 x 255 x 64 = 32640, never saturated;
//                the sums are acc - 128 wsum (offset), as vnni256's
struct dot_u8 {
  static constexpr bool offset = true;
  using act = __m256i;
  __m256i ones = _mm256_set1_epi16(1);
  static act prep(std::int32_t a4) { return _mm256_xor_si256(_mm256_set1_epi32(a4), _mm256_set1_epi32(std::int32_t(0x80808080u))); }
  __m256i step(__m256i acc, act x, __m256i w) const { return add_acc(acc, _mm256_madd_epi16(_mm256_maddubs_epi16(x, w), ones)); }
};
#if defined(__AVXVNNI__) || (defined(__AVX512VNNI__) && defined(__AVX512VL__))
// acc += dot4(u8 a, s8 w) per int32 lane: AVX-VNNI's VEX vpdpbusd where the build has it, else
// AVX512_VNNI's EVEX form on ymm (AVX512VL), which computes the same. GCC (12) copies every
// accumulator of a tile through another register around either intrinsic (and, with 2 x 2
// accumulators in the -march=native build, through the stack at every group); the asm forms keep
// them in place (clang: the intrinsics)
inline __m256i dpbusd256(__m256i acc, __m256i a, __m256i w) {
#if defined(__GNUC__) && !defined(__clang__)
#if defined(__AVXVNNI__)
  __asm__("%{vex%} vpdpbusd %2, %1, %0" : "+x"(acc) : "x"(a), "xm"(w));
#else
  __asm__("vpdpbusd %2, %1, %0" : "+v"(acc) : "v"(a), "vm"(w));
#endif
  return acc;
#elif defined(__AVXVNNI__)
  return _mm256_dpbusd_avx_epi32(acc, a, w);
#else
  return _mm256_dpbusd_epi32(acc, a, w);
#endif
}
struct dot_vnni256 {
  static constexpr bool offset = true;
  using act = __m256i;
  static act prep(std::int32_t a4) { return _mm256_xor_si256(_mm256_set1_epi32(a4), _mm256_set1_epi32(std::int32_t(0x80808080u))); }
  __m256i step(__m256i acc, act x, __m256i w) const { return dpbusd256(acc, x, w); }
};
// dot_vnni256 on activations flipped already (flipped<A>): the broadcast alone
struct dot_vnni256_flipped : dot_vnni256 {
  static act prep(std::int32_t a4) { return _mm256_set1_epi32(a4); }
};
#endif

// R rows (from row i0) x Q 8-column vectors from panel p0 (Q = 4: two panels, 2: one), the dot
// step D, stored by the epilogue e. Full panels (a fixed 64-byte group stride) unless Narrow:
// then the panel is the last, N % 16 wide, Q = 1 (8 columns or fewer) or 2; its weight loads are
// whole vectors (the lanes past the panel read the next group's bytes, never stored) but where a
// vector would cross the end of the packed weights (the last groups: vpmaskmovd).
template <class D, std::size_t R, std::size_t Q, bool Narrow = false, class A, class E>
inline void tile_avx2(std::size_t K, std::size_t N, const A& a, const std::int8_t* packed, std::size_t p0,
                      const std::int32_t* wsum, E& e, std::size_t i0) {
  const std::size_t kp = padded_k(K), j0 = p0 * panel;
  const std::size_t width = Narrow ? N - j0 : panel, stride = 4 * width;
  const std::int8_t* w = packed + j0 * kp;
  const std::int8_t* const end = packed + kp * N;
  [[maybe_unused]] const __m256i idx = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  const D dot;
  __m256i acc[R][Q];
  for (std::size_t r = 0; r < R; ++r)
    for (std::size_t q = 0; q < Q; ++q) acc[r][q] = _mm256_setzero_si256();
  const std::int8_t* ar[R];
  for (std::size_t r = 0; r < R; ++r) ar[r] = a.row(i0 + r);
  // one loop over every group (a nested loop over the segments made GCC (12) keep accumulators
  // on the stack, stored and loaded at every group); o jumps to the next segment at its end
  const std::size_t groups = a.segments() * a.groups(), jump = a.segment_stride() - 4 * a.groups();
  for (std::size_t g = 0, o = 0, next = 4 * a.groups(); g < groups; ++g, o += 4, w += stride) {
    if (o == next) {
      o += jump;
      next += a.segment_stride();
    }
    typename D::act x[R];
    for (std::size_t r = 0; r < R; ++r) x[r] = D::prep(load4(ar[r] + o));
    for (std::size_t q = 0; q < Q; ++q) {
      __m256i wv;
      if constexpr (!Narrow) {
        wv = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w + q / 2 * panel * kp + q % 2 * 32));
      } else {
        const std::int8_t* wq = w + q * 32;
        wv = end - wq >= 32 ? _mm256_loadu_si256(reinterpret_cast<const __m256i*>(wq))
                            : _mm256_maskload_epi32(reinterpret_cast<const int*>(wq),
                                                    _mm256_cmpgt_epi32(_mm256_set1_epi32(int(width - 8 * q)), idx));
      }
      for (std::size_t r = 0; r < R; ++r) acc[r][q] = dot.step(acc[r][q], x[r], wv);
    }
  }
  E out = e;  // (a copy the stores cannot alias: e's fields stay in registers)
  for (std::size_t q = 0; q < Q; ++q) {
    const std::size_t j = j0 + 8 * q, w8 = Narrow ? std::min<std::size_t>(8, width - 8 * q) : 8;
    __m256i sub = _mm256_setzero_si256();
    if constexpr (D::offset) sub = _mm256_slli_epi32(load8(wsum + j, w8), 7);  // - 128 wsum
    auto c = columns8(out, j, w8, sub);
    for (std::size_t r = 0; r < R; ++r) put(out, c, acc[r][q], i0 + r);
    if (saturated(out, c))
      for (std::size_t r = 0; r < R; ++r) count(out, c, acc[r][q]);
  }
  if constexpr (requires { e.saturated; }) e.saturated = out.saturated;
}
// The avx2 path's tile for 4 or more rows: the activations sign-extended to int16 once a call
// (a16: the int16 copy of the bytes from a.row(0), at the same offsets), each weight vector's 16
// bytes (4 columns x 4 k) sign-extended by vpmovsxbw, vpmaddwd of the broadcast 4 int16
// activations with them: 2 multiplies and 2 adds per 32 products and row, the conversion shared by
// R rows (the sign trick's tile: 2 multiplies and 3 other operations, and 2 a group and row for
// the sign). No product or pair sum comes near int16's or int32's limits (|a w| <= 128 127). Each
// accumulator pair (lo: columns j..j+3, hi: j+4..j+7) holds two partial sums a column (k mod 4 in
// 0..1 and 2..3), added by vphaddd at the end. R rows (from row i0) x the 8 full-panel columns
// from column j (a multiple of 8).
// tile_s16's stores: R rows of sums v from row i0, columns j..j+7. A call of its own: inlined (the
// epilogue's helpers are, for the sign trick's tiles), GCC (12) spilled the tile's loop (conv
// bench at batch 1: 33.4 -> 44.0 us).
template <std::size_t R, class E>
[[gnu::noinline]] void store_s16(E& e, std::size_t j, const __m256i* v, std::size_t i0) {
  E out = e;  // (a copy the stores cannot alias: e's fields stay in registers)
  auto c = columns8(out, j, 8, _mm256_setzero_si256());
  for (std::size_t r = 0; r < R; ++r) put(out, c, v[r], i0 + r);
  if (saturated(out, c))
    for (std::size_t r = 0; r < R; ++r) count(out, c, v[r]);
  if constexpr (requires { e.saturated; }) e.saturated = out.saturated;
}
template <std::size_t R, class A, class E>
inline void tile_s16(std::size_t K, const A& a, const std::int16_t* a16, const std::int8_t* base,
                     const std::int8_t* packed, std::size_t j, E& e, std::size_t i0) {
  const std::size_t kp = padded_k(K);
  const std::int8_t* w = packed + j / panel * panel * kp + j % panel * 4;
  __m256i lo[R], hi[R];
  for (std::size_t r = 0; r < R; ++r) lo[r] = hi[r] = _mm256_setzero_si256();
  const std::int16_t* ar[R];
  for (std::size_t r = 0; r < R; ++r) ar[r] = a16 + (a.row(i0 + r) - base);
  // the weight pointer counts the groups and o, the offset, jumps to the next segment at its end
  // (a counter and the pointer kept apart, GCC (12) kept both on the stack)
  const std::int8_t* const wend = w + a.segments() * a.groups() * 4 * panel;
  const std::size_t jump = a.segment_stride() - 4 * a.groups();
  for (std::size_t o = 0, next = 4 * a.groups(); w != wend; o += 4, w += 4 * panel) {
    if constexpr (A::segments() > 1)
      if (o == next) {
        o += jump;
        next += a.segment_stride();
      }
    const __m256i wl = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(w)));
    const __m256i wh = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(w + 16)));
    for (std::size_t r = 0; r < R; ++r) {
      std::int64_t x4;
      std::memcpy(&x4, ar[r] + o, 8);
      const __m256i x = _mm256_set1_epi64x(x4);
      lo[r] = add_acc(lo[r], _mm256_madd_epi16(x, wl));
      hi[r] = add_acc(hi[r], _mm256_madd_epi16(x, wh));
    }
  }
  // hadd: [c0 c1 c4 c5 | c2 c3 c6 c7], then the 64-bit lanes in order
  for (std::size_t r = 0; r < R; ++r) lo[r] = _mm256_permute4x64_epi64(_mm256_hadd_epi32(lo[r], hi[r]), 0xD8);
  store_s16<R>(e, j, lo, i0);
}
// a16 from the bytes [row(0), past row(M - 1)'s last group) of a, which holds every row's groups
// where row(0) is the lowest address and row(M - 1) the highest (a_rows, int8_conv.hpp's windows
// and pool_windows: the last sample's last window position); thread_local storage, kept (the
// largest call's: 2 bytes an input byte)
template <class A>
inline const std::int16_t* widen_rows(std::size_t M, const A& a) {
  const std::int8_t* base = a.row(0);
  const std::size_t n = std::size_t(a.row(M - 1) - base) + (a.segments() - 1) * a.segment_stride() + 4 * a.groups();
  thread_local std::vector<std::int16_t> buf;
  if (buf.size() < n) buf.resize(n);
  std::int16_t* out = buf.data();
  std::size_t i = 0;
  for (; i + 16 <= n; i += 16)
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + i),
                        _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(base + i))));
  for (; i < n; ++i) out[i] = base[i];
  return out;
}
template <class D, std::size_t R, class A, class E>
inline void rows_avx2(std::size_t N, std::size_t K, const A& a, const std::int8_t* packed, std::size_t p0,
                      std::size_t np, bool narrow, const std::int32_t* wsum, E& e, std::size_t i0) {
  if (narrow) {
    if (N - p0 * panel <= 8) return tile_avx2<D, R, 1, true>(K, N, a, packed, p0, wsum, e, i0);
    return tile_avx2<D, R, 2, true>(K, N, a, packed, p0, wsum, e, i0);
  }
  if (np == 1) return tile_avx2<D, R, 2>(K, N, a, packed, p0, wsum, e, i0);
  tile_avx2<D, R, 4>(K, N, a, packed, p0, wsum, e, i0);
}
// tile_s16's rows (then 4): 6 x 8 columns measured faster than 4 and 5 (12 accumulators, 2
// weight vectors, the broadcast and a product: 16 ymm)
inline constexpr std::size_t rows_s16 = 6;
// The 256-bit paths (avx2: D dot_avx2; vnni256: dot_vnni256, wsum the column sums). The avx2
// path with 4 rows or more, on the full panels: tile_s16 on the rows in sixes, then fours, the
// sign trick's tiles on the rest (below 4 rows: all of them; its activations per row need 3
// operations a group, against the int16 copy's pass over all of a) and on the narrow panel (in the same column block after them: a column's rows stay in order, as
// int8_conv.hpp's pooling store needs).
// dot_u8 on activations flipped already (a ^ 0x80 as u8: flip_rows' copy): the broadcast alone
struct dot_u8_flipped : dot_u8 {
  static act prep(std::int32_t a4) { return _mm256_set1_epi32(a4); }
};
// The activation operand A with its bytes already XORed with 0x80 (vpdpbusd's u8 operand, a + 128):
// row(i) is A's row i in a copy of the bytes [A.row(0), past A.row(M - 1)'s last group), made once
// a call by flip_rows (thread_local storage, kept: the largest call's), so that the VNNI tiles
// broadcast each group without an XOR (vpxord zmm takes a vpdpbusd slot: both issue on ports 0 and
// 5; the 256-bit tiles' XOR per row and group likewise). Requires row(0) the lowest address and
// row(M - 1)'s groups the highest, as widen_rows (a_rows, int8_conv.hpp's windows and pool_windows).
template <class A>
struct flipped : A {
  static constexpr bool is_flipped = true;
  const std::int8_t* base;
  const std::int8_t* copy;
  const std::int8_t* row(std::size_t i) const { return copy + (A::row(i) - base); }
};
template <class A>
inline flipped<A> flip_rows(std::size_t M, const A& a) {
  const std::int8_t* base = a.row(0);
  const std::size_t n = std::size_t(a.row(M - 1) - base) + (a.segments() - 1) * a.segment_stride() + 4 * a.groups();
  thread_local std::vector<std::int8_t> buf;
  if (buf.size() < n) buf.resize(n);
  std::int8_t* out = buf.data();
  const __m256i flip = _mm256_set1_epi32(std::int32_t(0x80808080u));
  std::size_t i = 0;
  for (; i + 32 <= n; i += 32)
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + i),
                        _mm256_xor_si256(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(base + i)), flip));
  for (; i < n; ++i) out[i] = std::int8_t(base[i] ^ 0x80);
  return {a, base, out};
}
template <class A>
inline constexpr bool is_flipped_v = requires { A::is_flipped; };
// a as flipped<A>: flip_rows' copy, or a itself where its bytes are flipped already (the u8
// operand of gemm_u8_requantize: quantize_u8's bytes)
template <class A>
inline auto flipped_once(std::size_t M, const A& a) {
  if constexpr (is_flipped_v<A>)
    return a;
  else
    return flip_rows(M, a);
}
// avx2_u8's tile for 4 rows and more on the flipped activations: R rows (from row i0) x one full
// panel (16 columns, 2 vectors), each row's broadcast group multiplied with both weight vectors
// (vpmaddubsw, vpmaddwd with ones, vpaddd: 2 R accumulators, 2 weights, the broadcast, ones and a
// product in 16 ymm for R = 4); the sums - 128 wsum stored by store_s16 (a call of its own: with
// the requantizing store inlined, GCC (12) spilled this tile's loop, as tile_s16's).
template <std::size_t R, class A, class E>
inline void tile_u8(std::size_t K, const A& a, const std::int8_t* packed, std::size_t p0, const std::int32_t* wsum,
                    E& e, std::size_t i0) {
  const std::size_t kp = padded_k(K), j0 = p0 * panel;
  const std::int8_t* w = packed + j0 * kp;
  const __m256i ones = _mm256_set1_epi16(1);
  __m256i lo[R], hi[R];
  for (std::size_t r = 0; r < R; ++r) lo[r] = hi[r] = _mm256_setzero_si256();
  const std::int8_t* ar[R];
  for (std::size_t r = 0; r < R; ++r) ar[r] = a.row(i0 + r);
  const std::int8_t* const wend = w + a.segments() * a.groups() * 4 * panel;
  const std::size_t jump = a.segment_stride() - 4 * a.groups();
  for (std::size_t o = 0, next = 4 * a.groups(); w != wend; o += 4, w += 4 * panel) {
    if constexpr (A::segments() > 1)
      if (o == next) {
        o += jump;
        next += a.segment_stride();
      }
    const __m256i w0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w));
    const __m256i w1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w + 32));
    for (std::size_t r = 0; r < R; ++r) {
      const __m256i x = _mm256_set1_epi32(load4(ar[r] + o));
      lo[r] = add_acc(lo[r], _mm256_madd_epi16(_mm256_maddubs_epi16(x, w0), ones));
      hi[r] = add_acc(hi[r], _mm256_madd_epi16(_mm256_maddubs_epi16(x, w1), ones));
    }
  }
  const __m256i sub_lo = _mm256_slli_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(wsum + j0)), 7);
  const __m256i sub_hi = _mm256_slli_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(wsum + j0 + 8)), 7);
  for (std::size_t r = 0; r < R; ++r) {
    lo[r] = _mm256_sub_epi32(lo[r], sub_lo);
    hi[r] = _mm256_sub_epi32(hi[r], sub_hi);
  }
  store_s16<R>(e, j0, lo, i0);
  store_s16<R>(e, j0 + 8, hi, i0);
}
template <class D, class A, class E>
inline void gemm_avx2(std::size_t M, std::size_t N, std::size_t K, const A& a, const std::int8_t* packed,
                      const std::int32_t* wsum, E& e) {
  // avx2_u8 from 4 rows on: the activations flipped once a call (no XOR a group and row), the full
  // panels in tile_u8's 4-row tiles, the rows after them and the narrow panel in the 2-row tiles
  if constexpr (std::is_same_v<D, dot_u8>) {
    if (M >= 4) {
      const auto f = flipped_once(M, a);
      const std::size_t full = N / panel, m4 = M / 4 * 4;
      for (std::size_t p = 0; p < full; ++p) {
        for (std::size_t i = 0; i < m4; i += 4) tile_u8<4>(K, f, packed, p, wsum, e, i);
        std::size_t i = m4;
        for (; i + 2 <= M; i += 2) rows_avx2<dot_u8_flipped, 2>(N, K, f, packed, p, 1, false, wsum, e, i);
        if (i < M) rows_avx2<dot_u8_flipped, 1>(N, K, f, packed, p, 1, false, wsum, e, i);
      }
      if (N % panel) {
        std::size_t i = 0;
        for (; i + 2 <= M; i += 2) rows_avx2<dot_u8_flipped, 2>(N, K, f, packed, full, 1, true, wsum, e, i);
        if (i < M) rows_avx2<dot_u8_flipped, 1>(N, K, f, packed, full, 1, true, wsum, e, i);
      }
      return;
    }
  }
  const std::size_t full = N / panel;
  const std::int16_t* a16 = nullptr;
  std::size_t m4 = 0;
  if constexpr (std::is_same_v<D, dot_avx2>)
    if (M >= 4 && full > 0) {
      a16 = widen_rows(M, a);
      m4 = M / rows_s16 * rows_s16 + M % rows_s16 / 4 * 4;
    }
  // blocks of 2 full panels (32 columns), then the narrow last panel; each block over every row
  const auto block = [&](std::size_t p0, std::size_t np, bool narrow) {
    std::size_t i = 0;
    if (!narrow && a16) {
      for (std::size_t j = p0 * panel; j < (p0 + np) * panel; j += 8) {
        std::size_t r = 0;
        for (; r + rows_s16 <= m4; r += rows_s16) tile_s16<rows_s16>(K, a, a16, a.row(0), packed, j, e, r);
        for (; r < m4; r += 4) tile_s16<4>(K, a, a16, a.row(0), packed, j, e, r);
      }
      i = m4;
    }
    // (an operand flipped already: dot_u8's broadcast without the XOR)
    using Dx = std::conditional_t<is_flipped_v<A> && std::is_same_v<D, dot_u8>, dot_u8_flipped, D>;
    for (; i + 2 <= M; i += 2) rows_avx2<Dx, 2>(N, K, a, packed, p0, np, narrow, wsum, e, i);
    if (i < M) rows_avx2<Dx, 1>(N, K, a, packed, p0, np, narrow, wsum, e, i);
  };
  for (std::size_t p0 = 0; p0 < full; p0 += 2) block(p0, std::min<std::size_t>(2, full - p0), false);
  if (N % panel) block(full, 1, true);
}
#endif


#if defined(__AVXVNNI__) || (defined(__AVX512VNNI__) && defined(__AVX512VL__))
// The vnni256 path's tile on full panels: R rows (from row i0) x Q 8-column vectors from panel p0
// (Q = 4: two panels, 2: one), vpdpbusd256 of each flipped<A> group broadcast (no XOR) with the
// weights, stored by the epilogue e with the - 128 wsum offset. 3 x 4 (12 accumulators, 3
// broadcasts, the weights as memory operands: 15 of the 16 ymm an AVX-VNNI build has) against the
// sign trick's 2 x 4 tile that the avx2 path shares (8 accumulators: vpdpbusd's latency of 5 cycles
// at 2 a cycle wants 10 chains). One loop over every group; o jumps to the next segment at its end.
// One row (batch 1) gives Q chains only: its groups run in C = 3 sets of accumulators in turn
// (group g adds to set g % 3; 12 chains), summed at the end: int32 sums wrap exactly, so the same
// bits in any order (4 chains ran at about 0.8 vpdpbusd a cycle: 2.5x under the port's 2).
template <std::size_t R, std::size_t Q, class A, class E>
inline void tile_vnni256(std::size_t K, const A& a, const std::int8_t* packed, std::size_t p0,
                         const std::int32_t* wsum, E& e, std::size_t i0) {
  static_assert(is_flipped_v<A>, "int8 tile_vnni256: the activations are flipped<A>");
  constexpr std::size_t C = R == 1 ? 3 : 1;  // accumulator sets, groups taken in turn
  const std::size_t kp = padded_k(K), j0 = p0 * panel;
  const std::int8_t* w = packed + j0 * kp;
  __m256i acc[C][R][Q];
  for (std::size_t c = 0; c < C; ++c)
    for (std::size_t r = 0; r < R; ++r)
      for (std::size_t q = 0; q < Q; ++q) acc[c][r][q] = _mm256_setzero_si256();
  const std::int8_t* ar[R];
  for (std::size_t r = 0; r < R; ++r) ar[r] = a.row(i0 + r);
  const std::size_t groups = a.segments() * a.groups(), jump = a.segment_stride() - 4 * a.groups();
  std::size_t o = 0, next = 4 * a.groups();
  // one group of 4 bytes a row into accumulator set c, then the next group
  const auto group = [&]<std::size_t c>() CTNN_FORCEINLINE_LAMBDA {
    if constexpr (A::segments() > 1)  // (one segment, as a dense layer's rows: no test in the loop)
      if (o == next) {
        o += jump;
        next += a.segment_stride();
      }
    __m256i x[R];
    for (std::size_t r = 0; r < R; ++r) x[r] = _mm256_set1_epi32(load4(ar[r] + o));
    for (std::size_t q = 0; q < Q; ++q) {
      const __m256i wv = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w + q / 2 * panel * kp + q % 2 * 32));
      for (std::size_t r = 0; r < R; ++r) acc[c][r][q] = dpbusd256(acc[c][r][q], x[r], wv);
    }
    o += 4;
    w += 4 * panel;
  };
  std::size_t g = 0;
  if constexpr (C == 3)
    for (; g + 3 <= groups; g += 3) {
      group.template operator()<0>();
      group.template operator()<1>();
      group.template operator()<2>();
    }
  for (; g < groups; ++g) group.template operator()<0>();
  for (std::size_t c = 1; c < C; ++c)
    for (std::size_t r = 0; r < R; ++r)
      for (std::size_t q = 0; q < Q; ++q) acc[0][r][q] = _mm256_add_epi32(acc[0][r][q], acc[c][r][q]);
  E out = e;  // (a copy the stores cannot alias: e's fields stay in registers)
  for (std::size_t q = 0; q < Q; ++q) {
    const std::size_t j = j0 + 8 * q;
    auto c = columns8(out, j, 8, _mm256_slli_epi32(load8(wsum + j, 8), 7));  // - 128 wsum
    for (std::size_t r = 0; r < R; ++r) put(out, c, acc[0][r][q], i0 + r);
    if (saturated(out, c))
      for (std::size_t r = 0; r < R; ++r) count(out, c, acc[0][r][q]);
  }
  if constexpr (requires { e.saturated; }) e.saturated = out.saturated;
}
// The vnni256 path: the activations flipped once (flip_rows), blocks of 2 full panels (then 1) over
// every row in tile_vnni256's threes (then 2 or 1 rows); the narrow last panel by the avx2 path's
// narrow tiles with dot_vnni256 on the unflipped operand (in the same order: a column's rows stay in
// order, as int8_conv.hpp's pooling store needs).
template <class A, class E>
inline void gemm_vnni256(std::size_t M, std::size_t N, std::size_t K, const A& a, const std::int8_t* packed,
                         const std::int32_t* wsum, E& e) {
  const std::size_t full = N / panel;
  if (full > 0) {
    const auto af = flipped_once(M, a);
    for (std::size_t p0 = 0; p0 < full; p0 += 2) {
      const bool two = full - p0 >= 2;
      std::size_t i = 0;
      for (; i + 3 <= M; i += 3)
        two ? tile_vnni256<3, 4>(K, af, packed, p0, wsum, e, i) : tile_vnni256<3, 2>(K, af, packed, p0, wsum, e, i);
      if (M - i == 2)
        two ? tile_vnni256<2, 4>(K, af, packed, p0, wsum, e, i) : tile_vnni256<2, 2>(K, af, packed, p0, wsum, e, i);
      else if (M - i == 1)
        two ? tile_vnni256<1, 4>(K, af, packed, p0, wsum, e, i) : tile_vnni256<1, 2>(K, af, packed, p0, wsum, e, i);
    }
  }
  if (N % panel) {
    using D = std::conditional_t<is_flipped_v<A>, dot_vnni256_flipped, dot_vnni256>;
    std::size_t i = 0;
    for (; i + 2 <= M; i += 2) rows_avx2<D, 2>(N, K, a, packed, full, 1, true, wsum, e, i);
    if (i < M) rows_avx2<D, 1>(N, K, a, packed, full, 1, true, wsum, e, i);
  }
}
#endif

#if defined(__AVX512VNNI__) && defined(__AVX512BW__)
// acc += dot4(u8 a, s8 w) per int32 lane. GCC (13) copies every accumulator of a tile through
// another register around the intrinsic; the asm form keeps them in place (clang: the intrinsic).
inline __m512i dpbusd(__m512i acc, __m512i a, __m512i w) {
#if defined(__GNUC__) && !defined(__clang__)
  __asm__("vpdpbusd %2, %1, %0" : "+v"(acc) : "v"(a), "v"(w));
  return acc;
#else
  return _mm512_dpbusd_epi32(acc, a, w);
#endif
}
// R rows (from row i0) x P panels from panel p0: vpdpbusd on broadcast (a ^ 0x80) groups (flipped<A>:
// the groups as they are), stored by the epilogue e. Full panels (16 columns, a fixed 64-byte group
// stride) unless Narrow: then P = 1 and the panel is the last, N % 16 wide, read and written through
// a mask. One row (batch 1) gives P chains only (4 at most): its groups run in C = 2 sets of
// accumulators in turn (group g of a segment adds to set g % 2; 8 chains), summed at the end: int32
// sums wrap exactly, so the same bits in any order (as tile_vnni256's one-row tile; 3 sets, 12
// chains, ran dense 784x256 at batch 1 7 % slower than 4 chains, 2 sets as fast).
template <std::size_t R, std::size_t P, bool Narrow = false, class A, class E>
inline void tile_vnni(std::size_t K, std::size_t N, const A& a, const std::int8_t* packed, std::size_t p0,
                      const std::int32_t* wsum, E& e, std::size_t i0) {
  constexpr std::size_t C = R == 1 ? 2 : 1;  // accumulator sets, groups taken in turn
  const std::size_t kp = padded_k(K), j0 = p0 * panel;
  const std::size_t width = Narrow ? N - j0 : panel, stride = 4 * width;
  const __mmask16 mk = Narrow ? __mmask16((1u << width) - 1u) : __mmask16(0xffff);
  const std::int8_t* w = packed + j0 * kp;
  [[maybe_unused]] const __m512i flip = _mm512_set1_epi32(std::int32_t(0x80808080u));
  __m512i acc[C][R][P];
  for (std::size_t c = 0; c < C; ++c)
    for (std::size_t r = 0; r < R; ++r)
      for (std::size_t q = 0; q < P; ++q) acc[c][r][q] = _mm512_setzero_si512();
  const std::int8_t* ar[R];
  for (std::size_t r = 0; r < R; ++r) ar[r] = a.row(i0 + r);
  // one group of 4 bytes a row (at o) into accumulator set c
  const auto group = [&]<std::size_t c>(std::size_t o) CTNN_FORCEINLINE_LAMBDA {
    __m512i ab[R];
    for (std::size_t r = 0; r < R; ++r) {
      ab[r] = _mm512_set1_epi32(load4(ar[r] + o));
      if constexpr (!is_flipped_v<A>) ab[r] = _mm512_xor_si512(ab[r], flip);
    }
    for (std::size_t q = 0; q < P; ++q) {
      const __m512i wv = Narrow ? _mm512_maskz_loadu_epi32(mk, w) : _mm512_loadu_si512(w + q * panel * kp);
      for (std::size_t r = 0; r < R; ++r) acc[c][r][q] = dpbusd(acc[c][r][q], ab[r], wv);
    }
    w += stride;
  };
  for (std::size_t s = 0; s < a.segments(); ++s) {
    std::size_t o = s * a.segment_stride();
    const std::size_t end = o + 4 * a.groups();
    if constexpr (C == 2)
      for (; o + 8 <= end; o += 8) {
        group.template operator()<0>(o);
        group.template operator()<1>(o + 4);
      }
    for (; o < end; o += 4) group.template operator()<0>(o);
  }
  for (std::size_t c = 1; c < C; ++c)
    for (std::size_t r = 0; r < R; ++r)
      for (std::size_t q = 0; q < P; ++q) acc[0][r][q] = _mm512_add_epi32(acc[0][r][q], acc[c][r][q]);
  E out = e;  // (a copy the stores cannot alias: e's fields stay in registers)
  for (std::size_t q = 0; q < P; ++q) {
    const std::size_t j = j0 + q * panel;
    auto c = columns(out, j, mk, _mm512_slli_epi32(_mm512_maskz_loadu_epi32(mk, wsum + j), 7));  // - 128 wsum
    for (std::size_t r = 0; r < R; ++r) put(out, c, acc[0][r][q], i0 + r);
    if (saturated(out, c))
      for (std::size_t r = 0; r < R; ++r) count(out, c, acc[0][r][q]);
    // an epilogue that carries state across tiles (int8_conv.hpp's pool_requant) keeps it now
    if constexpr (requires { finish(out, c); }) finish(out, c);
  }
  if constexpr (requires { e.saturated; }) e.saturated = out.saturated;
}
template <std::size_t R, class A, class E>
inline void rows_vnni(std::size_t N, std::size_t K, const A& a, const std::int8_t* packed, std::size_t p0,
                      std::size_t np, bool narrow, const std::int32_t* wsum, E& e, std::size_t i0) {
  if (narrow) return tile_vnni<R, 1, true>(K, N, a, packed, p0, wsum, e, i0);
  switch (np) {
    case 1: tile_vnni<R, 1>(K, N, a, packed, p0, wsum, e, i0); break;
    case 2: tile_vnni<R, 2>(K, N, a, packed, p0, wsum, e, i0); break;
    case 3: tile_vnni<R, 3>(K, N, a, packed, p0, wsum, e, i0); break;
    default: tile_vnni<R, 4>(K, N, a, packed, p0, wsum, e, i0); break;
  }
}
template <class A, class E>
inline void gemm_vnni(std::size_t M, std::size_t N, std::size_t K, const A& a, const std::int8_t* packed,
                      const std::int32_t* wsum, E& e) {
  const std::size_t full = N / panel;
  // blocks of 4 full panels (64 columns), then the narrow last panel; each block over every row
  const auto block = [&](std::size_t p0, std::size_t np, bool narrow) {
    std::size_t i = 0;
    for (; i + 4 <= M; i += 4) rows_vnni<4>(N, K, a, packed, p0, np, narrow, wsum, e, i);
    switch (M - i) {
      case 1: rows_vnni<1>(N, K, a, packed, p0, np, narrow, wsum, e, i); break;
      case 2: rows_vnni<2>(N, K, a, packed, p0, np, narrow, wsum, e, i); break;
      case 3: rows_vnni<3>(N, K, a, packed, p0, np, narrow, wsum, e, i); break;
      default: break;
    }
  };
  for (std::size_t p0 = 0; p0 < full; p0 += 4) block(p0, std::min<std::size_t>(4, full - p0), false);
  if (N % panel) block(full, 1, true);
}
#endif
}  // namespace detail

namespace detail {
// gemm_s8's vector paths (K > 0), stored by the epilogue e; false (nothing done) where this CPU
// and Arch take the scalar path.
template <class Arch, weight_range R = weight_range::full, class A, class E>
bool product_vector(std::size_t M, std::size_t N, std::size_t K, const A& a, const std::int8_t* packed,
                    const std::int32_t* wsum, E& e) {
  [[maybe_unused]] const int8_path p = int8_path_of<Arch>();
  // the VNNI paths' u8 offset correction needs the weights' column sums: computed here where the
  // caller has none
  std::vector<std::int32_t> own;
  [[maybe_unused]] auto sums = [&]() -> const std::int32_t* {
    if (wsum) return wsum;
    own.resize(N);
    packed_sums(N, K, packed, own.data());
    return own.data();
  };
#if defined(__AVX512VNNI__) && defined(__AVX512BW__)
  if (p == int8_path::vnni) {
    gemm_vnni(M, N, K, flipped_once(M, a), packed, sums(), e);
    return true;
  }
#endif
#if defined(__AVXVNNI__) || (defined(__AVX512VNNI__) && defined(__AVX512VL__))
  if (p == int8_path::vnni256) {
    gemm_vnni256(M, N, K, a, packed, sums(), e);
    return true;
  }
#endif
#if defined(__AVX2__)
  if (p == int8_path::avx2) {
    if constexpr (is_flipped_v<A> && R != weight_range::reduced)
      return false;  // (the sign trick and the int16 tiles take the int8 values: gemm_u8_requantize's fallback)
    else if constexpr (R == weight_range::reduced)
      gemm_avx2<dot_u8>(M, N, K, a, packed, sums(), e);
    else
      gemm_avx2<dot_avx2>(M, N, K, a, packed, wsum, e);
    return true;
  }
#endif
  (void)M, (void)N, (void)K, (void)a, (void)packed, (void)wsum, (void)e;
  return false;
}
template <class Arch, weight_range R = weight_range::full, class E>
bool gemm_s8_vector(std::size_t M, std::size_t N, std::size_t K, const std::int8_t* a, std::size_t lda,
                    const std::int8_t* packed, const std::int32_t* wsum, E& e) {
  return product_vector<Arch, R>(M, N, K, a_rows{a, padded_k(K) / 4, lda}, packed, wsum, e);
}
}  // namespace detail

// R reduced: every weight in [-64, 64] (a precondition: a weight beyond it saturates on avx2_u8).
template <class Arch = default_arch, weight_range R = weight_range::full>
void gemm_s8(std::size_t M, std::size_t N, std::size_t K, const std::int8_t* a, std::size_t lda,
             const std::int8_t* packed, const std::int32_t* wsum, std::int32_t* c, std::size_t ldc) {
  if (M == 0 || N == 0) return;
  if (K == 0) {
    for (std::size_t i = 0; i < M; ++i) std::fill(c + i * ldc, c + i * ldc + N, 0);
    return;
  }
  store_i32 e{c, ldc};
  if (!detail::gemm_s8_vector<Arch, R>(M, N, K, a, lda, packed, wsum, e)) detail::gemm_scalar(M, N, K, a, lda, packed, c, ldc);
}

// q[i] = clamp(round(x[i] / scale) + zp, lo, hi) (round half away from zero, TFLite's reference
// AffineQuantize; a NaN gives zp): equal to quantization::quantize element by element (IEEE
// division, exact rounding and clamp). TFLite's optimized kernels and XNNPACK multiply by 1 /
// scale instead (XNNPACK rounding ties to even), which can differ by one step from the reference
// near a tie; ctnn keeps the reference's division (docs/quantization.md, "What is exact").
// Rounding half away from zero is trunc(d + copysign(0.49999997f, d)), exact for every float d
// (the sum rounds to the next integer exactly when d's fraction is >= 0.5; a d of magnitude >= 2^23
// is an integer the sum keeps): vrndscaleps / vroundps on 16 values (Arch derived from avx512f,
// in a TU built with AVX-512) or 8 (derived from avx2), narrowed by vpmovdb / a byte shuffle and
// counted by a mask, else xsimd::batch<float, Arch> where Arch has float SIMD, else scalar.
// The AVX-512 (with AVX512DQ) and AVX2 forms take the division's result without dividing where
// that is certain (detail::near_tie): d = x * (1 / scale) (r = 1 / scale and scale normal floats)
// is within 3 ulp of the quotient x / scale (each rounding 1/2 ulp: |d - x / scale| <= (2u + u^2)
// |x / scale|, u = 2^-24), so where d's distance to the nearest half-integer is above |d| 2^-21
// (8 ulp) no half-integer lies between d and the quotient and both round to the same integer (a
// tie is at distance 0); a vector with a value within that distance (about 2^-20 |d| of the values:
// 1e-4 for |d| ~ 100), beyond 2^20, infinite or NaN is computed again by the division. Same bits
// as the division for every input (tests/quantization/test_int8.cpp), 2.5-3x fewer cycles
// (vdivps zmm: one per 10 cycles here).
// Returns how many values the clamp changed (saturated: beyond the range, infinities included).
// The main loops (AVX-512: 64 values a step, AVX2: 32; -128 <= lo <= hi <= 127) test the step's
// four vectors for a value near a tie once (the largest gap, by its bits; on AVX2, with -128 <= zp
// <= 127, the gap |d - rint(d)| against a fixed 0.5 - 2^-12: where |d| < 512 the quotient is
// within |d| 2^-21 < 2^-12 of d (the rule above), so no half-integer lies between them; where |d|
// >= 512 (to 2^31: beyond, vcvtps2dq's int32 is INT_MIN and the gap large) rint(d) and the
// quotient's rounding, within 1 of each other up to 2^20 and of d's sign beyond, both put v = q +
// zp beyond [lo, hi] on the same side (|v| >= 511 - 128): the same clamped value and count; two
// vector operations fewer than the |d| 2^-21 term), narrow v + 128 to int16
// by signed saturation, count there the values beyond [lo + 128, hi + 128] in a vector of int16
// counts kept in registers (a count added to memory at every vector made a store-forwarding chain of
// the loop), clamp there only where [lo, hi] is not int8's own range, and narrow to bytes by
// unsigned saturation (the clamp to [0, 255]) and one permute into one store. Flip: the bytes
// stored are q ^ 0x80 (the value + 128 as an unsigned byte: quantize_u8), else XORed back.
// In int8's own range (and -128 <= zp <= 127) the AVX2 form runs detail::quantize_grid's cheaper
// step first (27 vector operations a 32 values, its rule there) and the AVX-512 form (with
// AVX512BW) quantize_grid512's (the same rule on 64 values), and those steps where it stops.
namespace detail {
#if defined(__AVX2__)
// quantize_to's AVX2 step in int8's own range ([-128, 127], -128 <= zp <= 127, 1 / scale = inv
// and scale normal, MXCSR rounding to nearest): steps of 32 values from x + i into q + i while
// each passes its test; returns where it stopped (a step that fails, or fewer than 32 values
// left), which quantize_to computes by its other steps. Not inlined: the callers with another
// range do not set up its constants.
// y = x inv + c (one vfmadd where Arch has FMA, else a multiply and an add), c = 384.5 + zp +
// 2^-14 (exact: the floats in [256, 512) are 2^-15 apart, the unit below). Where y is in [256,
// 512), y - 256 = v + f 2^-15 with v = q + 128 in [0, 255] (no clamp, nothing to count) and f
// the fraction of x inv + 0.5 in units, + 2, rounded: y's bits are 0x43800000 + v 2^15 + f.
// There |x inv| <= 255.5, so the quotient x / scale is within 1 unit of x inv exact (2 roundings
// of 2^-24 relative), and y within 1/2 unit of x inv + c (the fma's one rounding; a multiply and
// an add: 1/4 + 1/2): where f > 4, y - 256 - 2^-14 is at least 3 units from an integer (the
// quotient + zp + 128 at a tie) and the quotient + zp + 128.5 within 1.75 units of it, so v is
// the quotient's rounding + zp + 128, bit for bit. Per step: the four y's bits >> 15 packed to
// uint16 (0x8700 + v in range; beyond it the shift, a sign bit or the saturation to 0xffff leave
// a lane outside [0x8700, 0x87ff], so the lane - 0x8700 has a bit in 0xff00) and 2 f (the low
// 16-bit lane doubled: v's low bit shifted out) at least 10, both tested by one vptest: 27
// vector operations a step against 38 for quantize_to's step with the saturation count. A step
// fails near a tie (about 0.5 % of the steps where the fractions are uniform), beyond int8,
// infinite or NaN. Flip: the bytes stored are v (quantize_u8), else v ^ 0x80.
template <class Arch, bool Flip>
[[gnu::noinline]] std::size_t quantize_grid(const float* x, std::size_t i, std::size_t n, float inv, std::int32_t zp,
                                            std::int8_t* q) {
  const __m256 r = _mm256_set1_ps(inv), c = _mm256_set1_ps(384.5f + float(zp) + 0x1p-14f);
  const auto affine = [&](__m256 v) {
#if defined(__FMA__)
    if constexpr (std::is_base_of_v<xsimd::fma3<xsimd::avx2>, Arch>) return _mm256_fmadd_ps(v, r, c);
#endif
    return _mm256_add_ps(_mm256_mul_ps(v, r), c);
  };
  const __m256i base = _mm256_set1_epi16(std::int16_t(-0x7900)), high = _mm256_set1_epi16(std::int16_t(-0x100));
  const __m256i near_f = _mm256_set1_epi32(0x108);  // low 16-bit lanes: 0x100 + 2 x 4 (subs: >= 0x100 where 2 f <= 8)
  const __m256i order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
  const __m256i flip = _mm256_set1_epi8(Flip ? 0 : -128);
  for (; i + 32 <= n; i += 32) {
    __m256i s[4], f[4];
    for (std::size_t u = 0; u < 4; ++u) {
      const __m256i y = _mm256_castps_si256(affine(_mm256_loadu_ps(x + i + 8 * u)));
      s[u] = _mm256_srli_epi32(y, 15);
      f[u] = _mm256_add_epi16(y, y);
    }
    const __m256i m = _mm256_min_epu16(_mm256_min_epu16(f[0], f[1]), _mm256_min_epu16(f[2], f[3]));
    const __m256i v0 = _mm256_sub_epi16(_mm256_packus_epi32(s[0], s[1]), base);
    const __m256i v1 = _mm256_sub_epi16(_mm256_packus_epi32(s[2], s[3]), base);
    if (!_mm256_testz_si256(_mm256_or_si256(_mm256_subs_epu16(near_f, m), _mm256_or_si256(v0, v1)), high)) return i;
    const __m256i b = _mm256_permutevar8x32_epi32(_mm256_packus_epi16(v0, v1), order);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(q + i), _mm256_xor_si256(b, flip));
  }
  return i;
}
#endif
#if defined(__AVX512BW__)
// quantize_grid's step on 64 values (quantize_to's AVX-512 form, the same conditions but MXCSR's:
// the vfmadd rounds to nearest by its own {rn-sae}): four y's bits >> 15 packed to uint16 and
// their low 16-bit lanes doubled as there, the fraction and the range of the 64 values tested by
// one vpternlog (the three vectors ORed) and one vptestmw into a mask: 24 vector operations, 4
// loads and a store a 64 values (quantize one XOR more) against about 43 for quantize_to's
// AVX-512 step (its near-tie test by vreduceps, by GCC 12's code). A
// step fails near a tie (about 1 % of the steps where the fractions are uniform), beyond int8,
// infinite or NaN. Flip: the bytes stored are v (quantize_u8), else v ^ 0x80.
template <bool Flip>
[[gnu::noinline]] std::size_t quantize_grid512(const float* x, std::size_t i, std::size_t n, float inv, std::int32_t zp,
                                               std::int8_t* q) {
  const __m512 r = _mm512_set1_ps(inv), c = _mm512_set1_ps(384.5f + float(zp) + 0x1p-14f);
  const __m512i base = _mm512_set1_epi16(std::int16_t(-0x7900)), high = _mm512_set1_epi16(std::int16_t(-0x100));
  const __m512i near_f = _mm512_set1_epi32(0x108);  // low 16-bit lanes: 0x100 + 2 x 4 (subs: >= 0x100 where 2 f <= 8)
  // the dword order of the packs' result: [a0-3 b0-3 c0-3 d0-3 | a4-7 ...] for vectors a..d
  const __m512i order = _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
  const __m512i flip = _mm512_set1_epi8(Flip ? 0 : -128);
  for (; i + 64 <= n; i += 64) {
    __m512i s[4], f[4];
    for (std::size_t u = 0; u < 4; ++u) {
      const __m512 a = _mm512_loadu_ps(x + i + 16 * u);
      const __m512i y = _mm512_castps_si512(_mm512_fmadd_round_ps(a, r, c, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
      s[u] = _mm512_srli_epi32(y, 15);
      f[u] = _mm512_add_epi16(y, y);
    }
    const __m512i m = _mm512_min_epu16(_mm512_min_epu16(f[0], f[1]), _mm512_min_epu16(f[2], f[3]));
    const __m512i v0 = _mm512_sub_epi16(_mm512_packus_epi32(s[0], s[1]), base);
    const __m512i v1 = _mm512_sub_epi16(_mm512_packus_epi32(s[2], s[3]), base);
    // 0xFE: a | b | c
    if (_mm512_test_epi16_mask(_mm512_ternarylogic_epi32(_mm512_subs_epu16(near_f, m), v0, v1, 0xFE), high)) return i;
    const __m512i b = _mm512_permutexvar_epi32(order, _mm512_packus_epi16(v0, v1));
    _mm512_storeu_si512(q + i, Flip ? b : _mm512_xor_si512(b, flip));
  }
  return i;
}
#endif
template <class Arch, bool Flip>
std::size_t quantize_to(const float* x, std::size_t n, float scale, std::int32_t zp, std::int32_t lo, std::int32_t hi,
                        std::int8_t* q) {
  std::size_t i = 0, saturated = 0;
  [[maybe_unused]] constexpr std::int8_t flip8 = Flip ? std::int8_t(-128) : std::int8_t(0);
#if defined(__AVX512F__)
  if constexpr (std::is_base_of_v<xsimd::avx512f, Arch>) {
    // a value the clamp changed is one the rule saturates; a NaN is 0 until the end (then zp)
    const __m512 s = _mm512_set1_ps(scale), z = _mm512_set1_ps(float(zp)), l = _mm512_set1_ps(float(lo)),
                 h = _mm512_set1_ps(float(hi));
    const __m512i sign = _mm512_set1_epi32(std::numeric_limits<std::int32_t>::min());
    const __m512i nearly_half = _mm512_set1_epi32(0x3EFFFFFF);  // 0.49999997f, the float below 0.5
    const __m512i flip32 = _mm512_set1_epi32(Flip ? 0x80 : 0);
    const auto block = [&](std::size_t at, __mmask16 m) {
      const __m512 d = _mm512_div_ps(_mm512_maskz_loadu_ps(m, x + at), s);
      const __mmask16 number = _mm512_cmp_ps_mask(d, d, _CMP_EQ_OQ);
      // (d & sign) | 0.49999997f: copysign
      const __m512 nudge = _mm512_castsi512_ps(_mm512_ternarylogic_epi32(_mm512_castps_si512(d), sign, nearly_half, 0xEA));
      const __m512 t = _mm512_roundscale_ps(_mm512_maskz_add_ps(number, d, nudge), _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
      const __m512 vz = _mm512_add_ps(t, z);
      const __m512 cv = _mm512_min_ps(_mm512_max_ps(vz, l), h);
      saturated += std::size_t(__builtin_popcount(unsigned(_mm512_mask_cmp_ps_mask(m & number, cv, vz, _CMP_NEQ_UQ))));
      _mm512_mask_cvtepi32_storeu_epi8(q + at, m, _mm512_xor_si512(_mm512_cvttps_epi32(_mm512_mask_blend_ps(number, z, cv)), flip32));
    };
#if defined(__AVX512DQ__)
    const float inv = 1.0f / scale;
    if (std::isnormal(scale) && std::isnormal(inv)) {
#if defined(__AVX512BW__)
      // int8's own range: quantize_grid512's steps first (a call of whole steps returns here,
      // before the other steps' constants), and where one fails, that step by the steps below
      const bool grid = lo == -128 && hi == 127 && zp >= -128 && zp <= 127;
      if (grid && (i = detail::quantize_grid512<Flip>(x, 0, n, inv, zp, q)) == n) return 0;
#endif
      const __m512 r = _mm512_set1_ps(inv), half = _mm512_set1_ps(0.5f), eps = _mm512_set1_ps(0x1p-21f);
      const __m512i zi = _mm512_set1_epi32(zp), li = _mm512_set1_epi32(lo), hi_ = _mm512_set1_epi32(hi);
      // |d - rint(d)| (exact) + |d| 2^-21 >= 0.5, or NaN: near a half-integer, large or not a number
      const auto near_tie = [&](__m512 d, __mmask16 m) {
        const __m512 w = _mm512_reduce_ps(d, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
        return _mm512_mask_cmp_ps_mask(m, _mm512_fmadd_ps(_mm512_abs_ps(d), eps, _mm512_abs_ps(w)), half, _CMP_NLT_UQ);
      };
      // the block by the reciprocal; false (nothing stored) where a value is near a tie (above)
      const auto fast = [&](std::size_t at, __mmask16 m) {
        const __m512 d = _mm512_mul_ps(_mm512_maskz_loadu_ps(m, x + at), r);
        if (near_tie(d, m)) return false;
        const __m512i v = _mm512_add_epi32(_mm512_cvt_roundps_epi32(d, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC), zi);
        const __m512i c = _mm512_min_epi32(_mm512_max_epi32(v, li), hi_);
        saturated += std::size_t(__builtin_popcount(unsigned(_mm512_mask_cmpneq_epi32_mask(m, c, v))));
        _mm512_mask_cvtepi32_storeu_epi8(q + at, m, _mm512_xor_si512(c, flip32));
        return true;
      };
      if (lo >= -128 && hi <= 127 && lo <= hi && zp >= -(1 << 24) && zp <= (1 << 24)) {
        // the dword order of the packs' result: [a0-3 b0-3 c0-3 d0-3 | a4-7 ...] for vectors a..d
        const __m512i order = _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
        const __m512i zi128 = _mm512_set1_epi32(zp + 128), half_bits = _mm512_set1_epi32(0x3F000000);  // 0.5f
        const __m512i lo16 = _mm512_set1_epi16(std::int16_t(lo + 128)), hi16 = _mm512_set1_epi16(std::int16_t(hi + 128));
        const __m512i span16 = _mm512_set1_epi16(std::int16_t(hi - lo)), one16 = _mm512_set1_epi16(1);
        const __m512i flip = _mm512_set1_epi8(Flip ? 0 : -128);  // (the bytes packed are q + 128)
        // the steps of 64 values from x + k while k + 64 <= end; returns where they stopped
        // (forced inline: GCC 12 called the clamped ones, and with the grid's loop below both,
        // reloading their constants through the closure every step; inlined, the clamped
        // quantization takes 0.89x the CPU time, bench/results/2026-12-07-s33-q33-*)
        const auto steps = [&]<bool Clamp>(std::size_t k, std::size_t end) CTNN_FORCEINLINE_LAMBDA {
          while (k + 64 <= end) {
            // per int16 lane: at most 2 values a step, 8192 steps a round
            const std::size_t stop = k + std::min<std::size_t>((end - k) / 64, 8192) * 64;
            __m512i outside = _mm512_setzero_si512();
            for (; k < stop; k += 64) {
              __m512i v[4], gaps = _mm512_setzero_si512();
              for (std::size_t u = 0; u < 4; ++u) {
                const __m512 d = _mm512_mul_ps(_mm512_loadu_ps(x + k + 16 * u), r);
                const __m512 w = _mm512_reduce_ps(d, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
                // near_tie's gap (>= 0, or a NaN with the sign bit clear), its largest by its bits
                gaps = _mm512_max_epi32(gaps, _mm512_castps_si512(_mm512_fmadd_ps(_mm512_abs_ps(d), eps, _mm512_abs_ps(w))));
                v[u] = _mm512_add_epi32(_mm512_cvt_roundps_epi32(d, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC), zi128);
              }
              if (_mm512_cmpge_epi32_mask(gaps, half_bits)) {
                for (std::size_t u = 0; u < 4; ++u)
                  if (!fast(k + 16 * u, __mmask16(0xffff))) block(k + 16 * u, __mmask16(0xffff));
                continue;
              }
              // v + 128 to int16 (a value beyond int16 saturates, and stays beyond [lo + 128, hi + 128]),
              // counted and clamped there, then to bytes by unsigned saturation (the clamp to [0, 255])
              __m512i p[2] = {_mm512_packs_epi32(v[0], v[1]), _mm512_packs_epi32(v[2], v[3])};
              for (auto& h : p) {
                if constexpr (Clamp) {
                  outside = _mm512_mask_add_epi16(outside, _mm512_cmpgt_epu16_mask(_mm512_sub_epi16(h, lo16), span16), outside, one16);
                  h = _mm512_min_epi16(_mm512_max_epi16(h, lo16), hi16);
                } else {
                  outside = _mm512_mask_add_epi16(outside, _mm512_cmpgt_epu16_mask(h, hi16), outside, one16);
                }
              }
              const __m512i b = _mm512_permutexvar_epi32(order, _mm512_packus_epi16(p[0], p[1]));
              _mm512_storeu_si512(q + k, _mm512_xor_si512(b, flip));
            }
            saturated += std::size_t(_mm512_reduce_add_epi32(_mm512_madd_epi16(outside, _mm512_set1_epi16(1))));
          }
          return k;
        };
        if (lo == -128 && hi == 127) {
#if defined(__AVX512BW__)
          if (grid)
            while (i + 64 <= n) i = detail::quantize_grid512<Flip>(x, steps.template operator()<false>(i, i + 64), n, inv, zp, q);
#endif
          i = steps.template operator()<false>(i, n);
        } else {
          i = steps.template operator()<true>(i, n);
        }
      }
      for (; i + 16 <= n; i += 16)
        if (!fast(i, __mmask16(0xffff))) block(i, __mmask16(0xffff));
      if (i < n && !fast(i, __mmask16((1u << (n - i)) - 1u))) block(i, __mmask16((1u << (n - i)) - 1u));
      return saturated;
    }
#endif
    for (; i + 16 <= n; i += 16) block(i, __mmask16(0xffff));
    if (i < n) block(i, __mmask16((1u << (n - i)) - 1u));
    return saturated;
  }
#endif
#if defined(__AVX2__)
  if constexpr (std::is_base_of_v<xsimd::avx2, Arch> && !std::is_base_of_v<xsimd::avx512f, Arch>) {
    // the AVX-512 form on 8 values (vroundps toward zero, the byte narrowing by a shuffle)
    const __m256 s = _mm256_set1_ps(scale), z = _mm256_set1_ps(float(zp)), l = _mm256_set1_ps(float(lo)),
                 h = _mm256_set1_ps(float(hi));
    const __m256 sign = _mm256_castsi256_ps(_mm256_set1_epi32(std::numeric_limits<std::int32_t>::min()));
    const __m256 nearly_half = _mm256_castsi256_ps(_mm256_set1_epi32(0x3EFFFFFF));
    // by the reciprocal where certain (the AVX-512 form's rule above)
    const float inv = 1.0f / scale;
    const bool by_inverse = std::isnormal(scale) && std::isnormal(inv);
    const __m256 r = _mm256_set1_ps(inv), half = _mm256_set1_ps(0.5f), eps = _mm256_set1_ps(0x1p-21f);
    const __m256 magnitude = _mm256_castsi256_ps(_mm256_set1_epi32(std::numeric_limits<std::int32_t>::max()));
    const __m256i zi = _mm256_set1_epi32(zp), li = _mm256_set1_epi32(lo), hi_ = _mm256_set1_epi32(hi);
    const __m128i flip16 = _mm_set1_epi8(flip8);
    // t = rint(d) and whether d is near a tie: |d| 2^-21 (exact) + |d - t| (exact), one rounding:
    // >= 0.5 where the exact sum is (all ones there)
    const auto near_tie = [&](__m256 d, __m256& t) {
      t = _mm256_round_ps(d, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
      return _mm256_cmp_ps(_mm256_add_ps(_mm256_mul_ps(_mm256_and_ps(d, magnitude), eps), _mm256_and_ps(_mm256_sub_ps(d, t), magnitude)),
                           half, _CMP_NLT_UQ);
    };
    // 8 values from x + at into q + at (by the reciprocal where certain, else by the division)
    const auto block8 = [&](std::size_t at) {
      if (by_inverse) {
        __m256 t;
        if (!_mm256_movemask_ps(near_tie(_mm256_mul_ps(_mm256_loadu_ps(x + at), r), t))) {
          const __m256i v = _mm256_add_epi32(_mm256_cvttps_epi32(t), zi);  // (t an integer below 2^20)
          const __m256i c = _mm256_min_epi32(_mm256_max_epi32(v, li), hi_);
          saturated += std::size_t(
              8 - __builtin_popcount(unsigned(_mm256_movemask_ps(_mm256_castsi256_ps(_mm256_cmpeq_epi32(c, v))))));
          _mm_storel_epi64(reinterpret_cast<__m128i*>(q + at), _mm_xor_si128(detail::low_bytes(c), flip16));
          return;
        }
      }
      const __m256 d = _mm256_div_ps(_mm256_loadu_ps(x + at), s);
      const __m256 number = _mm256_cmp_ps(d, d, _CMP_EQ_OQ);
      const __m256 nudge = _mm256_or_ps(_mm256_and_ps(d, sign), nearly_half);
      const __m256 t = _mm256_round_ps(_mm256_and_ps(_mm256_add_ps(d, nudge), number), _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
      const __m256 vz = _mm256_add_ps(t, z);
      const __m256 cv = _mm256_min_ps(_mm256_max_ps(vz, l), h);
      saturated += std::size_t(__builtin_popcount(
          unsigned(_mm256_movemask_ps(_mm256_and_ps(number, _mm256_cmp_ps(cv, vz, _CMP_NEQ_UQ))))));
      _mm_storel_epi64(reinterpret_cast<__m128i*>(q + at),
                       _mm_xor_si128(detail::low_bytes(_mm256_cvttps_epi32(_mm256_blendv_ps(z, cv, number))), flip16));
    };
    // 32 values a step where the clamp keeps them in int8: the four vectors narrowed by saturating
    // packs (exact there) and one vpermd, not a byte shuffle each (port 5 bound the 8-value loop);
    // a step with a value near a tie runs block8 on its four vectors
    // (vcvtps2dq rounds as MXCSR says: to nearest where nobody changed it, checked once a call)
    if (by_inverse && lo >= -128 && hi <= 127 && lo <= hi && zp >= -128 && zp <= 127 &&
        (_mm_getcsr() & 0x6000u) == 0) {
      const __m256i order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
      const __m256i zi128 = _mm256_set1_epi32(zp + 128);
      const __m256i near_bits = _mm256_set1_epi32(0x3EFFE000 - 1);  // 0.5f - 2^-12 (steps' rule, above), - 1: cmpgt
      const __m256i lo16 = _mm256_set1_epi16(std::int16_t(lo + 128)), hi16 = _mm256_set1_epi16(std::int16_t(hi + 128));
      const __m256i span16 = _mm256_set1_epi16(std::int16_t(hi - lo));
      const __m256i flip = _mm256_set1_epi8(Flip ? 0 : -128);  // (the bytes packed are q + 128)
      // (inlined: the call GCC 12 made of it once quantize_grid's caller grew cost the
      // dynamic-range rows 4 %)
      const auto steps = [&](std::size_t k, const float* xs, std::int8_t* qs) CTNN_FORCEINLINE_LAMBDA {
        while (k + 32 <= n) {
          // per int16 lane: at most 2 values a step (counted negated), 8192 steps a round
          const std::size_t count = std::min<std::size_t>((n - k) / 32, 8192), stop = k + count * 32;
          __m256i inside = _mm256_setzero_si256();
          std::size_t divided = 0;  // the steps block8 ran (and counted)
          for (; k < stop; k += 32) {
            __m256i v[4], gaps = _mm256_setzero_si256();
            for (std::size_t u = 0; u < 4; ++u) {
              const __m256 d = _mm256_mul_ps(_mm256_loadu_ps(xs + k + 8 * u), r);
              const __m256i t = _mm256_cvtps_epi32(d);  // rint(d); beyond int32 or NaN: INT_MIN
              // |d - t| (>= 0, or a NaN with the sign bit clear), its largest by its bits
              gaps = _mm256_max_epi32(gaps, _mm256_castps_si256(_mm256_and_ps(_mm256_sub_ps(d, _mm256_cvtepi32_ps(t)), magnitude)));
              v[u] = _mm256_add_epi32(t, zi128);
            }
            if (_mm256_movemask_ps(_mm256_castsi256_ps(_mm256_cmpgt_epi32(gaps, near_bits)))) {
              for (std::size_t u = 0; u < 4; ++u) block8(k + 8 * u);
              ++divided;
              continue;
            }
            // v + 128 to int16 (beyond int16: saturated, still beyond [lo + 128, hi + 128]), counted
            // (h <= span unsigned: h == min(h, span)) and clamped there, then to bytes by unsigned
            // saturation (the clamp to [0, 255]) and one vpermd
            __m256i p[2] = {_mm256_packs_epi32(v[0], v[1]), _mm256_packs_epi32(v[2], v[3])};
            for (auto& h : p) {
              const __m256i o = _mm256_sub_epi16(h, lo16);
              inside = _mm256_add_epi16(inside, _mm256_cmpeq_epi16(o, _mm256_min_epu16(o, span16)));
              h = _mm256_min_epi16(_mm256_max_epi16(h, lo16), hi16);
            }
            const __m256i b = _mm256_permutevar8x32_epi32(_mm256_packus_epi16(p[0], p[1]), order);
            _mm256_storeu_si256(reinterpret_cast<__m256i*>(qs + k), _mm256_xor_si256(b, flip));
          }
          alignas(32) std::int32_t lanes[8];
          _mm256_store_si256(reinterpret_cast<__m256i*>(lanes), _mm256_madd_epi16(inside, _mm256_set1_epi16(1)));
          std::size_t kept = 0;
          for (std::int32_t c : lanes) kept += std::size_t(-std::int64_t(c));
          saturated += 32 * (count - divided) - kept;
        }
        return k;
      };
      if (lo == -128 && hi == 127) {
        // int8's own range: quantize_grid's steps, and where one fails, exact32: the steps' form
        // without the clamp, the values beyond int8 counted where they are (32 values from x + k
        // into q + k, by block8 where one is near a tie)
        const auto exact32 = [&](std::size_t k) {
          __m256i v[4], gaps = _mm256_setzero_si256();
          for (std::size_t u = 0; u < 4; ++u) {
            const __m256 d = _mm256_mul_ps(_mm256_loadu_ps(x + k + 8 * u), r);
            const __m256i t = _mm256_cvtps_epi32(d);
            gaps = _mm256_max_epi32(gaps, _mm256_castps_si256(_mm256_and_ps(_mm256_sub_ps(d, _mm256_cvtepi32_ps(t)), magnitude)));
            v[u] = _mm256_add_epi32(t, zi128);
          }
          if (_mm256_movemask_ps(_mm256_castsi256_ps(_mm256_cmpgt_epi32(gaps, near_bits)))) {
            for (std::size_t u = 0; u < 4; ++u) block8(k + 8 * u);
            return;
          }
          const __m256i p0 = _mm256_packs_epi32(v[0], v[1]), p1 = _mm256_packs_epi32(v[2], v[3]);
          // int16 lanes within [0, 255] (two mask bits each)
          const unsigned in = unsigned(__builtin_popcount(unsigned(_mm256_movemask_epi8(_mm256_cmpeq_epi16(p0, _mm256_min_epu16(p0, hi16)))))) +
                              unsigned(__builtin_popcount(unsigned(_mm256_movemask_epi8(_mm256_cmpeq_epi16(p1, _mm256_min_epu16(p1, hi16))))));
          saturated += 32 - in / 2;
          const __m256i b = _mm256_permutevar8x32_epi32(_mm256_packus_epi16(p0, p1), order);
          _mm256_storeu_si256(reinterpret_cast<__m256i*>(q + k), _mm256_xor_si256(b, flip));
        };
        while ((i = detail::quantize_grid<Arch, Flip>(x, i, n, inv, zp, q)) + 32 <= n) {
          exact32(i);
          i += 32;
        }
      } else {
        i = steps(i, x, q);
      }
    }
    for (; i + 8 <= n; i += 8) block8(i);
    // the tail below, by the scalar rule
  } else
#endif
  if constexpr (simd_v<float, Arch>) {
    using B = xsimd::batch<float, Arch>;
    constexpr std::size_t L = B::size;
    const B s = B(scale), z = B(float(zp)), l = B(float(lo)), h = B(float(hi));
    constexpr std::size_t chunk = 256 / L * L;  // rounded in vectors, then narrowed by a loop the compiler vectorizes
    alignas(64) float tmp[chunk];
    for (; i + L <= n;) {
      const std::size_t c = std::min(chunk, (n - i) / L * L);
      auto clamped = B(0.0f) != B(0.0f);  // whether the clamp changed a value of the chunk
      for (std::size_t k = 0; k < c; k += L) {
        // Rounded half away from zero by hand, not by xsimd::round: xsimd 8.1's sse2 round, built
        // by clang 19 -O2 with AVX-512 enabled, returned integer bit patterns read as floats.
        // Clamping to +-2^22 first changes no result (the clamp below) and keeps the truncation
        // exact; a NaN is 0 there and zp at the end.
        const B d = B::load_unaligned(x + i + k) / s;
        const auto number = d == d;
        const B cd = xsimd::min(xsimd::max(xsimd::select(number, d, B(0.0f)), B(-4194304.0f)), B(4194304.0f));
        const B t = xsimd::to_float(xsimd::to_int(cd));  // toward zero
        const B v = t + xsimd::select(xsimd::abs(cd - t) >= B(0.5f), xsimd::select(cd < B(0.0f), B(-1.0f), B(1.0f)), B(0.0f));
        const B vz = v + z, cv = xsimd::min(xsimd::max(vz, l), h);
        clamped = clamped | (cv != vz);  // (a NaN's vz is zp: never clamped)
        xsimd::select(number, cv, z).store_aligned(tmp + k);
      }
      for (std::size_t k = 0; k < c; ++k) q[i + k] = std::int8_t(std::int32_t(tmp[k]) ^ flip8);
      // Counted off the common path: one compare a vector marks a chunk where the clamp acted,
      // whose values are then counted one by one (rare when the calibration holds).
      if (xsimd::any(clamped))
        for (std::size_t k = 0; k < c; ++k) {
          const float r = std::round(x[i + k] / scale) + float(zp);
          saturated += r < float(lo) || r > float(hi);
        }
      i += c;
    }
  }
  for (; i < n; ++i) {
    const float v = std::round(x[i] / scale);
    const float vz = v + float(zp);
    saturated += vz < float(lo) || vz > float(hi);
    q[i] = std::int8_t(std::int32_t(v == v ? std::min(std::max(vz, float(lo)), float(hi)) : float(zp)) ^ flip8);
  }
  return saturated;
}
}  // namespace detail
template <class Arch = default_arch>
std::size_t quantize(const float* x, std::size_t n, float scale, std::int32_t zp, std::int32_t lo, std::int32_t hi,
                     std::int8_t* q) {
  return detail::quantize_to<Arch, false>(x, n, scale, zp, lo, hi, q);
}
// quantize's values + 128 as unsigned bytes (q ^ 0x80 bit for bit: the u8 operand of vpdpbusd and
// of avx2_u8's vpmaddubsw, which gemm_u8_requantize takes as it is), for -128 <= lo <= hi <= 127.
template <class Arch = default_arch>
std::size_t quantize_u8(const float* x, std::size_t n, float scale, std::int32_t zp, std::int32_t lo, std::int32_t hi,
                        std::uint8_t* q) {
  return detail::quantize_to<Arch, true>(x, n, scale, zp, lo, hi, reinterpret_cast<std::int8_t*>(q));
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

// One output row of a full-integer layer (Arch: the backend's; one derived from avx512f, in a TU
// built with AVX-512, runs the fused epilogue's 16-lane form (requant<Y>), the same numbers, else the
// loops below, which the compiler vectorizes): y[j] = scale (clamp(MBQM(acc[j] + off[j], mult[j],
// shift[j]) + zp, lo, 127) - zp) (Y float), or the clamped int8 value itself (Y std::int8_t: the
// output stays int8 for the next full-integer layer), MBQM TFLite's MultiplyByQuantizedMultiplier
// (quantization/arithmetic.hpp) written without branches so that the compiler vectorizes it;
// requires 0 <= mult[j] (quantize_multiplier's range), -31 <= shift[j] <= 30. Returns how many
// outputs saturated: above 127, or (relu false) below -128; after a relu (lo = max(-128, zp)) the
// values below are the activation's, never counted.
template <class Y = float, class Arch = default_arch>
inline std::size_t requantize_row(std::size_t N, const std::int32_t* acc, const std::int32_t* off,
                                  const std::int32_t* mult, const std::int32_t* shift, std::int32_t zp, std::int32_t lo,
                                  float scale, Y* y, bool relu) {
  static_assert(std::is_same_v<Y, float> || std::is_same_v<Y, std::int8_t>,
                "int8::requantize_row: the output is float (dequantized) or std::int8_t");
#if defined(__AVX512F__)
  if constexpr (std::is_base_of_v<xsimd::avx512f, Arch>) {
    // the fused epilogue's 16-lane form on sums read from memory
    // (off as the bias, input zero point 0)
    requant<Y> e{off, off, 0, mult, shift, zp, lo, relu ? std::numeric_limits<std::int32_t>::min() : -128, scale, y, 0};
    std::size_t j = 0;
    for (; j + 16 <= N; j += 16) detail::put(e, _mm512_loadu_si512(acc + j), 0, j);
    if (j < N) {
      const auto m = __mmask16((1u << (N - j)) - 1u);
      detail::put(e, _mm512_maskz_loadu_epi32(m, acc + j), 0, j, m);
    }
    return e.saturated;
  }
#endif
  const std::int32_t low = relu ? std::numeric_limits<std::int32_t>::min() : -128;  // below it: saturated
  constexpr std::size_t chunk = 64;
  std::int32_t qs[chunk];
  std::size_t saturated = 0;
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
      // + zp wrapping, as the vector forms (a result near 2^31 and a positive zero point: a wrong
      // number, never undefined behaviour)
      qs[u] = std::int32_t(std::uint32_t((hi >> right) + ((hi & mask) > thr ? 1 : 0)) + std::uint32_t(zp));
    }
    // The clamp here, and the count off the common path: the chunk's largest and smallest q (a
    // max and a min a value) tell whether any saturated, and only then are they counted (counted
    // in the loop above, GCC 12 no longer vectorizes it).
    std::int32_t top = -128, bottom = 127;
    for (std::size_t u = 0; u < c; ++u) {
      const std::int32_t q = qs[u];
      top = q > top ? q : top;
      bottom = q < bottom ? q : bottom;
      const std::int32_t c = q < lo ? lo : q > 127 ? 127 : q;
      if constexpr (std::is_same_v<Y, std::int8_t>)
        y[j0 + u] = std::int8_t(c);
      else
        y[j0 + u] = scale * float(c - zp);
    }
    if (top > 127 || bottom < low) {
      std::uint32_t n = 0;  // (32-bit lanes: the loop vectorizes as the ones above)
      for (std::size_t u = 0; u < c; ++u) n += std::uint32_t(qs[u] > 127) + std::uint32_t(qs[u] < low);
      saturated += n;
    }
  }
  return saturated;
}

// The full-integer layers' epilogue (quantized_dense, quantized_dense_block, quantized_conv2d):
// checks every column's requantization multiplier (a corrupt weights file: invalid_argument naming
// the layer, `layer()` (its name, made only then: not a string built at every call), and the
// `column` word, "unit" or "filter") and returns the requant<Y> epilogue writing rows of N outputs
// (ldy = N) to y (lo = out_zp after a relu; Y std::int8_t: the int8 values, for the next
// full-integer layer), whose off[j] = bias[j] - in_zp kernel_sum[j] is wrapping int32 arithmetic
// (a corrupt file gives wrong numbers, never undefined behaviour). The fused kernels
// (gemm_s8_requantize, block::gemm_requantize) run it in their stores; requantize_rows runs it on
// int32 sums in memory.
template <class Y>
inline requant<Y> requant_for(std::size_t N, const std::int32_t* bias, std::int32_t in_zp,
                              const std::int32_t* kernel_sum, const std::int32_t* mult, const std::int32_t* shift,
                              std::int32_t out_zp, bool relu, float out_scale, Y* y, std::string (*layer)(),
                              const char* column) {
  // the check as a reduction without branches, so that the loop vectorizes (a branch per column
  // cost as much as the requantization itself at batch 1); the column named afterwards
  std::uint32_t bad = 0;
  for (std::size_t j = 0; j < N; ++j)
    bad |= std::uint32_t(mult[j] < 0) | std::uint32_t(shift[j] < -31) | std::uint32_t(shift[j] > 30);
  if (bad)
    for (std::size_t j = 0; j < N; ++j)
      if (mult[j] < 0 || shift[j] < -31 || shift[j] > 30)
        throw std::invalid_argument(layer() + ": " + column + " " + std::to_string(j) + "'s requantization multiplier (" +
                                    std::to_string(mult[j]) + ", shift " + std::to_string(shift[j]) +
                                    ") is outside quantize_multiplier's range (a corrupt weights file?)");
  const std::int32_t lo = relu ? std::max<std::int32_t>(-128, out_zp) : -128;
  const std::int32_t low = relu ? std::numeric_limits<std::int32_t>::min() : -128;
  return {bias, kernel_sum, in_zp, mult, shift, out_zp, lo, low, out_scale, y, N};
}

// requantize_row on rows x N int32 sums (acc, row stride N) with requant_for's epilogue e.
// Returns how many outputs saturated.
template <class Y, class Arch = default_arch>
inline std::size_t requantize_rows(std::size_t rows, std::size_t N, const std::int32_t* acc, const requant<Y>& e) {
  thread_local std::vector<std::int32_t> off;
  off.resize(N);
  for (std::size_t j = 0; j < N; ++j)
    off[j] = std::int32_t(std::uint32_t(e.bias[j]) - std::uint32_t(e.in_zp) * std::uint32_t(e.kernel_sum[j]));
  std::size_t saturated = 0;
  const bool relu = e.low != -128;
  for (std::size_t i = 0; i < rows; ++i)
    saturated += requantize_row<Y, Arch>(N, acc + i * N, off.data(), e.mult, e.shift, e.zp, e.lo, e.scale,
                                         e.y + i * e.ldy, relu);
  return saturated;
}
template <class Y = float, class Arch = default_arch>
inline std::size_t requantize_rows(std::size_t rows, std::size_t N, const std::int32_t* acc, const std::int32_t* bias,
                            std::int32_t in_zp, const std::int32_t* kernel_sum, const std::int32_t* mult,
                            const std::int32_t* shift, std::int32_t out_zp, bool relu, float out_scale, Y* y,
                            std::string (*layer)(), const char* column) {
  return requantize_rows<Y, Arch>(
      rows, N, acc, requant_for(N, bias, in_zp, kernel_sum, mult, shift, out_zp, relu, out_scale, y, layer, column));
}

// gemm_s8 with the requantization fused into its stores: y[i, j] (e.y, row stride e.ldy) =
// requantize_row's output for the sums c[i, j] with e's columns, equal to gemm_s8 then
// requantize_rows bit for bit; on the vector paths the int32 sums never reach memory (the scalar
// path, and K = 0: gemm_s8 into a buffer, then requantize_rows). Returns how many outputs saturated.
template <class Y, class Arch = default_arch, weight_range R = weight_range::full>
std::size_t gemm_s8_requantize(std::size_t M, std::size_t N, std::size_t K, const std::int8_t* a, std::size_t lda,
                               const std::int8_t* packed, const std::int32_t* wsum, requant<Y> e) {
  if (M == 0 || N == 0) return 0;
  e.saturated = 0;
  if (K > 0 && detail::gemm_s8_vector<Arch, R>(M, N, K, a, lda, packed, wsum, e)) return e.saturated;
  thread_local std::vector<std::int32_t> acc;
  acc.resize(M * N);
  gemm_s8<Arch, R>(M, N, K, a, lda, packed, wsum, acc.data(), N);
  std::size_t saturated = 0;
  for (std::size_t i = 0; i < M; ++i) {
    requant<Y> r = e;
    r.y = e.y + i * e.ldy;
    saturated += requantize_rows<Y, Arch>(1, N, acc.data() + i * N, r);
  }
  return saturated;
}

// Whether gemm_u8_requantize<Y, Arch, R> takes its unsigned operand as it is: the paths whose product
// is u8 x s8 (vnni, vnni256, avx2_u8); on the others (avx2 with full weights, scalar) it converts the
// bytes back to int8 first, and a caller does better to quantize to int8 (quantize) and call
// gemm_s8_requantize.
template <class Arch = default_arch, weight_range R = weight_range::full>
bool takes_u8() noexcept {
  const int8_path p = int8_path_of<Arch, R>();
  return p == int8_path::vnni || p == int8_path::vnni256 || p == int8_path::avx2_u8;
}
// gemm_s8_requantize on the activations + 128 as unsigned bytes (a[i, k] = the int8 value ^ 0x80:
// quantize_u8's output), the same results bit for bit: the u8 x s8 paths (takes_u8) use the bytes
// as vpdpbusd's / vpmaddubsw's operand without flip_rows' pass; bytes K..padded_k(K)-1 of a row
// readable (any value). Returns how many outputs saturated.
template <class Y, class Arch = default_arch, weight_range R = weight_range::full>
std::size_t gemm_u8_requantize(std::size_t M, std::size_t N, std::size_t K, const std::uint8_t* a, std::size_t lda,
                               const std::int8_t* packed, const std::int32_t* wsum, requant<Y> e) {
  if (M == 0 || N == 0) return 0;
  const auto* s = reinterpret_cast<const std::int8_t*>(a);
#if defined(__AVX2__)
  e.saturated = 0;
  if (K > 0 && takes_u8<Arch, R>() &&
      detail::product_vector<Arch, R>(M, N, K, detail::flipped<a_rows>{{s, padded_k(K) / 4, lda}, s, s}, packed, wsum, e))
    return e.saturated;
#endif
  // the int8 values back (a ^ 0x80), then the signed product
  const std::size_t bytes = (M - 1) * lda + padded_k(K);
  thread_local std::vector<std::int8_t> back;
  if (back.size() < bytes) back.resize(bytes);
  for (std::size_t i = 0; i < bytes; ++i) back[i] = std::int8_t(s[i] ^ std::int8_t(-128));
  return gemm_s8_requantize<Y, Arch, R>(M, N, K, back.data(), lda, packed, wsum, e);
}

}  // namespace ctnn::kernels::cpu::int8
