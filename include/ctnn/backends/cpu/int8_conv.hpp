// ctnn/backends/cpu/int8_conv.hpp — the int8 convolution's operands: im2col of int8 values, and the
// implicit im2col that the packed int8 GEMM's vector paths read in place (quantized_conv2d).
//
// For a conv_geometry G (channels-last x[batch, H, W, C], y[batch, OH, OW, F], the kernel in
// conv2d's (kh, kw, c) order, packed by int8::pack as W [F, K = KH KW C]):
//   im2col_s8(g, x, pad_value, cols, ld)  one sample's [OH OW, ld] matrix (the scalar path's
//     operand, and the reference of the implicit one).
//   windows<G>  the implicit operand: row i of the product (sample n, output oh, ow) reads each
//     kernel row of its window straight from an image [batch, ih, iw, C] (the input itself when
//     G has no padding; else a copy bordered by the pad value: window_image), one kernel row
//     row_bytes = padded_k(KW C) bytes (groups of 4); K = KH row_bytes. Where KW C is not a
//     multiple of 4 (the first layer: C = 1) the kernel is re-packed with zero weights in each
//     row's last group (pack_windows), which then reads up to 3 bytes past a window's row (the
//     next column, or past the image: over_reads, the image needs `slack` readable bytes after it).
//   conv_s8<G, Arch, R>(img, batch, packed, wsum, c, ldc), conv_s8_requantize<G, Y, Arch, R>(img, batch,
//     packed, wsum, e): gemm_s8 / gemm_s8_requantize on that operand (R: int8.hpp's weight_range) (packed: pack_windows' kernel,
//     or the layer's own where KW C % 4 == 0; wsum: its column sums), equal bit for bit to
//     im2col_s8 then gemm_s8 (integer sums are exact); false / nothing done on the scalar path
//     (int8_path_of<Arch>() == scalar: the caller runs im2col_s8 and gemm_s8). On the vnni path
//     (G.f >= 16) they run conv_vnni, gemm_vnni's arithmetic with G's sizes at compile time: 6-row x
//     4-panel tiles, the requantization's column terms formed once a call (the layers' packed kernels
//     start on a cache line: buffer::aligned(64)); the other paths run int8.hpp's product_vector.
//     conv_s8_requantize stores through conv_requant: requant's rule with MultiplyByQuantizedMultiplier's
//     two roundings as one 64-bit add and shift where the multipliers are in [2^-24, 1) (and, on the
//     256-bit paths, a relu follows), the same bits in fewer operations (below, at conv_requant).
// Tests: tests/quantization/test_int8.cpp (the kernels), test_quantized_conv2d.cpp (the layer).
#pragma once
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>
#include <vector>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

#include "../../kernels/conv_reference.hpp"
#include "int8.hpp"

namespace ctnn::kernels::cpu::int8 {

using kernels::conv_geometry;

// The int8 im2col matrix of one sample: rows OH OW of ld >= patch() bytes, (kh, kw, c) order as
// conv2d's kernel; a padded position holds pad_value, bytes patch()..ld-1 are 0.
inline void im2col_s8(const conv_geometry& g, const std::int8_t* x, std::int8_t pad_value, std::int8_t* cols,
                      std::size_t ld) {
  const std::size_t C = g.c, K = g.patch();
  for (std::size_t oh = 0; oh < g.oh; ++oh)
    for (std::size_t ow = 0; ow < g.ow; ++ow) {
      std::int8_t* row = cols + (oh * g.ow + ow) * ld;
      for (std::size_t i = 0; i < g.kh; ++i)
        for (std::size_t j = 0; j < g.kw; ++j) {
          std::int8_t* dst = row + (i * g.kw + j) * C;
          std::size_t r, s;
          if (kernels::reference::conv_source(g, oh, ow, i, j, r, s))
            std::memcpy(dst, x + (r * g.w + s) * C, C);
          else
            std::memset(dst, pad_value, C);
        }
      if (ld > K) std::memset(row + K, 0, ld - K);
    }
}

// The implicit im2col operand of detail::product_vector (int8.hpp's a_rows interface).
template <conv_geometry G>
struct windows {
  // the rows and columns the windows span; the image is the input where that fits without padding
  static constexpr std::size_t span_h = (G.oh - 1) * G.stride + G.kh, span_w = (G.ow - 1) * G.stride + G.kw;
  static constexpr bool in_place = G.pt == 0 && G.pl == 0 && span_h <= G.h && span_w <= G.w;
  static constexpr std::size_t ih = in_place ? G.h : span_h, iw = in_place ? G.w : span_w;
  static constexpr std::size_t image_size = ih * iw * G.c;
  static constexpr std::size_t row_bytes = padded_k(G.kw * G.c), k = G.kh * row_bytes;
  static constexpr bool over_reads = row_bytes != G.kw * G.c;
  static constexpr std::size_t slack = 4;  // readable bytes an image needs after its last sample (over_reads)
  static constexpr std::size_t positions = G.oh * G.ow;

  const std::int8_t* img;  // [batch, ih, iw, C]
  const std::int8_t* row(std::size_t i) const {
    const std::size_t n = i / positions, p = i % positions, oh = p / G.ow, ow = p % G.ow;
    return img + n * image_size + (oh * iw + ow) * G.stride * G.c;
  }
  static constexpr std::size_t segments() { return G.kh; }
  static constexpr std::size_t segment_stride() { return iw * G.c; }
  static constexpr std::size_t groups() { return row_bytes / 4; }
};

// The image windows<G> reads: batch samples of x [H, W, C] placed at (pt, pl) in [ih, iw, C],
// pad_value around them (the input's zero point, as im2col_s8's padding), then `slack` zero bytes.
template <conv_geometry G>
void window_image(const std::int8_t* x, std::size_t batch, std::int8_t pad_value, std::int8_t* img) {
  using Win = windows<G>;
  constexpr std::size_t C = G.c;
  for (std::size_t n = 0; n < batch; ++n) {
    const std::int8_t* xs = x + n * G.in_size();
    std::int8_t* out = img + n * Win::image_size;
    for (std::size_t r = 0; r < Win::ih; ++r) {
      std::int8_t* dst = out + r * Win::iw * C;
      const std::size_t xr = r - G.pt;  // (wraps above the input: out of range)
      if (r < G.pt || xr >= G.h) {
        std::memset(dst, pad_value, Win::iw * C);
        continue;
      }
      const std::size_t left = std::min(G.pl, Win::iw), inside = std::min(G.w, Win::iw - left);
      std::memset(dst, pad_value, left * C);
      std::memcpy(dst + left * C, xs + xr * G.w * C, inside * C);
      std::memset(dst + (left + inside) * C, pad_value, (Win::iw - left - inside) * C);
    }
  }
  std::memset(img + batch * Win::image_size, 0, Win::slack);
}

// The kernel windows<G> multiplies: packed (int8::pack of W [F, KH KW C]) re-packed as W' [F, k]
// with W'[f, i row_bytes + t] = W[f, i KW C + t] (t < KW C) and 0 in each row's padding; its
// column sums are W's. Where KW C % 4 == 0, W' == W.
template <conv_geometry G>
void pack_windows(const std::int8_t* packed, std::int8_t* out) {
  using Win = windows<G>;
  constexpr std::size_t K = G.patch(), kwc = G.kw * G.c;
  std::memset(out, 0, packed_bytes(Win::k, G.f));
  for (std::size_t j = 0; j < G.f; ++j)
    for (std::size_t i = 0; i < G.kh; ++i)
      for (std::size_t t = 0; t < kwc; ++t)
        out[packed_index(Win::k, G.f, j, i * Win::row_bytes + t)] = packed[packed_index(K, G.f, j, i * kwc + t)];
}

// conv_s8_requantize's epilogue: requant<Y> and, per column, the terms of MultiplyByQuantizedMultiplier
// with its two roundings as one (the vnni tiles' store below says why that is exact): off = bias -
// in_zp kernel_sum; add = 2^63 + 2^30 + 2^(30+r) (r > 0) + zp 2^(31+r) (wrapping uint64), sh = 31 + r,
// in the even and the odd columns' arrays; fix = 2^(32-r) mod 2^32; one[j / 8]: whether the 8
// columns from j (present ones) take it: 0 <= r <= 23 (shift -23..0), lo >= zp and low INT_MIN (a
// relu), lo <= 127, -128 <= zp <= 127. The 256-bit store, where one[j / 8]: x = sums + off (- 128
// wsum), p = x mult in 64-bit lanes, U = p + add, q = low 32 bits of (U >> sh) - fix: U is floor's
// argument plus 2^63 (a multiple of 2^sh, so the logical shift floors the signed sum, and adds
// 2^(63-sh), whose low 32 bits are fix), 11 operations for 8 outputs against requant's 17; the
// clamp max(min(q, 127), lo). Elsewhere requant's store runs.
// (a struct of its own, not one derived from requant, 8 bytes past a multiple of 16 with its count
// last: the tiles copy it (E out = e) in 16-byte loads and the count, which the tile before just
// stored, with a load of its own size; a 16-byte load across it waits for that store to retire:
// store_s16 took 1.5x as long)
template <class Y>
struct conv_requant {
  using value_type = Y;
  requant<Y> rq;  // (its own count unused)
  const std::int32_t* off;
  const std::int64_t* add;  // [padded N]: the even columns' (column 2 t at t), then from `half` the odd ones'
  const std::int64_t* sh;   // (as add)
  std::size_t half;
  const std::int32_t* fix;
  const std::uint8_t* one;  // [padded N / 8]
  std::size_t saturated = 0;
};
static_assert(sizeof(conv_requant<float>) % 16 == 8 && sizeof(conv_requant<std::int8_t>) % 16 == 8,
              "int8 conv_requant: the count is copied alone (above)");
// The terms for N columns into storage (thread_local: the caller's), N padded to 8.
template <class Y>
conv_requant<Y> conv_requant_for(const requant<Y>& e, std::size_t N) {
  const std::size_t n8 = (N + 7) / 8 * 8;
  thread_local std::vector<std::int64_t> wide;
  thread_local std::vector<std::int32_t> narrow;
  thread_local std::vector<std::uint8_t> one;
  wide.assign(2 * n8, 0);
  narrow.assign(2 * n8, 0);
  one.assign(n8 / 8, 0);
  const bool relu = e.low == std::numeric_limits<std::int32_t>::min() && e.lo >= e.zp && e.lo <= 127 && e.zp >= -128 &&
                    e.zp <= 127;
  for (std::size_t g = 0; g < n8 / 8; ++g) {
    bool ok = relu;
    for (std::size_t j = g * 8; j < std::min(N, g * 8 + 8); ++j) ok &= e.shift[j] <= 0 && e.shift[j] >= -23;
    one[g] = ok;
  }
  std::int64_t* add = wide.data();
  std::int64_t* sh = add + n8;
  std::int32_t* off = narrow.data();
  std::int32_t* fix = off + n8;
  for (std::size_t j = 0; j < N; ++j) {
    off[j] = std::int32_t(std::uint32_t(e.bias[j]) - std::uint32_t(e.in_zp) * std::uint32_t(e.kernel_sum[j]));
    if (!one[j / 8]) continue;
    const std::int64_t r = -std::int64_t(e.shift[j]);
    const std::uint64_t u = (std::uint64_t(1) << 63) + (std::uint64_t(1) << 30) + (r > 0 ? std::uint64_t(1) << (30 + r) : 0) +
                            std::uint64_t(std::int64_t(e.zp) * (std::int64_t(1) << (31 + r)));
    // even and odd columns apart: add[0 .. n8/2) the even ones, add[n8/2 ..) the odd ones
    add[j % 2 * (n8 / 2) + j / 2] = std::int64_t(u);
    sh[j % 2 * (n8 / 2) + j / 2] = 31 + r;
    fix[j] = r > 0 ? std::int32_t(std::uint32_t(1) << (32 - r)) : 0;
  }
  conv_requant<Y> c{e, off, add, sh, n8 / 2, fix, one.data(), 0};
  return c;
}

#if defined(__AVX2__)
struct cols8_conv {
  detail::cols8_requant rq;  // (requant's, where one is false)
  bool one;
  __m256i off, mu, mu_odd, add_even, add_odd, sh_even, sh_odd, fix;
  __m256i top = _mm256_set1_epi32(std::numeric_limits<std::int32_t>::min());
};
template <class Y>
CTNN_FORCEINLINE cols8_conv columns8(const conv_requant<Y>& e, std::size_t j, std::size_t width, __m256i sub) {
  cols8_conv c;
  c.one = e.one[j / 8];
  if (!c.one) {
    c.rq = detail::columns8(e.rq, j, width, sub);
    return c;
  }
  c.rq.j = j;
  c.rq.width = width;
  const auto at = [](const auto* p) { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)); };
  c.off = _mm256_sub_epi32(at(e.off + j), sub);
  c.mu = detail::load8(e.rq.mult + j, width);
  c.mu_odd = _mm256_srli_epi64(c.mu, 32);
  c.add_even = at(e.add + j / 2);
  c.add_odd = at(e.add + e.half + j / 2);
  c.sh_even = at(e.sh + j / 2);
  c.sh_odd = at(e.sh + e.half + j / 2);
  c.fix = at(e.fix + j);
  return c;
}
CTNN_FORCEINLINE __m256i conv_requantized8(const cols8_conv& c, __m256i v) {
  const __m256i x = _mm256_add_epi32(v, c.off);
  const __m256i ue = _mm256_add_epi64(_mm256_mul_epi32(x, c.mu), c.add_even);
  const __m256i uo = _mm256_add_epi64(_mm256_mul_epi32(_mm256_srli_epi64(x, 32), c.mu_odd), c.add_odd);
  const __m256i q = _mm256_blend_epi32(_mm256_srlv_epi64(ue, c.sh_even), _mm256_slli_epi64(_mm256_srlv_epi64(uo, c.sh_odd), 32), 0xAA);
  return _mm256_sub_epi32(q, c.fix);
}
template <class Y>
CTNN_FORCEINLINE void put(conv_requant<Y>& e, cols8_conv& c, __m256i v, std::size_t i) {
  if (!c.one) return detail::put(e.rq, c.rq, v, i);  // (counts nothing)
  // (its clamp and store as detail::put_clamped's, written out: through put_clamped the AVX2 build's
  // int8_conv<rfi>/1 took 1.04x as long, bench/results/2026-12-07-s32-cq32-code-quality.md)
  const __m256i q = conv_requantized8(c, v);
  c.top = _mm256_max_epi32(c.top, q);
  const __m256i v8 = _mm256_max_epi32(_mm256_min_epi32(q, _mm256_set1_epi32(127)), _mm256_set1_epi32(e.rq.lo));
  Y* dst = e.rq.y + i * e.rq.ldy + c.rq.j;
  if constexpr (std::is_same_v<Y, std::int8_t>) {
    const __m128i b = detail::low_bytes(v8);
    if (c.rq.width == 8) {
      _mm_storel_epi64(reinterpret_cast<__m128i*>(dst), b);
    } else {
      alignas(16) std::int8_t t[16];
      _mm_store_si128(reinterpret_cast<__m128i*>(t), b);
      std::memcpy(dst, t, c.rq.width);
    }
  } else {
    detail::store8(dst, _mm256_castps_si256(_mm256_mul_ps(_mm256_set1_ps(e.rq.scale),
                                                          _mm256_cvtepi32_ps(_mm256_sub_epi32(v8, _mm256_set1_epi32(e.rq.zp))))),
                   c.rq.width);
  }
}
template <class Y>
CTNN_FORCEINLINE bool saturated(const conv_requant<Y>& e, const cols8_conv& c) {
  if (!c.one) return detail::saturated(e.rq, c.rq);
  return (c.rq.present() & unsigned(_mm256_movemask_ps(_mm256_castsi256_ps(_mm256_cmpgt_epi32(c.top, _mm256_set1_epi32(127)))))) != 0;
}
template <class Y>
inline void count(conv_requant<Y>& e, const cols8_conv& c, __m256i v) {
  if (!c.one) {
    requant<Y> r = e.rq;
    r.saturated = 0;
    detail::count(r, c.rq, v);
    e.saturated += r.saturated;
    return;
  }
  // (after a relu nothing below is counted)
  const __m256i q = conv_requantized8(c, v);
  e.saturated += std::size_t(__builtin_popcount(
      c.rq.present() & unsigned(_mm256_movemask_ps(_mm256_castsi256_ps(_mm256_cmpgt_epi32(q, _mm256_set1_epi32(127)))))));
}
#endif
#if defined(__AVX512F__)
// the 512-bit tiles (gemm_vnni's, on the rows and panels conv_vnni's own tiles leave): requant's store
template <class Y>
inline detail::cols_requant columns(const conv_requant<Y>& e, std::size_t j, __mmask16 m, __m512i sub) {
  return detail::columns(e.rq, j, m, sub);
}
template <class Y>
inline void put(conv_requant<Y>& e, detail::cols_requant& c, __m512i v, std::size_t i) {
  detail::put(e.rq, c, v, i);  // (counts nothing)
}
template <class Y>
inline bool saturated(const conv_requant<Y>& e, const detail::cols_requant& c) {
  return detail::saturated(e.rq, c);
}
template <class Y>
inline void count(conv_requant<Y>& e, const detail::cols_requant& c, __m512i v) {
  requant<Y> r = e.rq;
  r.saturated = 0;
  detail::count(r, c, v);
  e.saturated += r.saturated;
}
#endif

#if defined(__AVX512VNNI__) && defined(__AVX512BW__)
namespace detail {
// The vnni path of conv_s8 / conv_s8_requantize: gemm_vnni's arithmetic (vpdpbusd on the flipped
// activations, c = dot - 128 wsum) with the convolution's sizes known at compile time. What
// differs from gemm_vnni on windows<G>: the epilogue's per-column terms (columns(): the loads, the
// offset, the shifts) are formed once a call, not once a tile; the loop over the kernel rows and
// their groups has fixed trip counts; and the tile is conv_rows x 4 panels (24 accumulators, the
// 4 weight vectors and the broadcasts in 32 zmm), not 4 x 4. A tile of R rows (from row i0) x P
// full panels starting at w (panel p0's first group), cols: the columns of those panels.
inline constexpr std::size_t conv_rows = 6;
// acc[r][q] += the tile's products: R rows (from row i0) x P full panels starting at w
template <conv_geometry G, std::size_t R, std::size_t P, class A>
CTNN_FORCEINLINE void conv_dot_vnni(const A& a, const std::int8_t* w, __m512i (&acc)[R][P], std::size_t i0) {
  using Win = windows<G>;
  constexpr std::size_t S = Win::segments(), GR = Win::groups(), ps = panel * Win::k, ss = Win::segment_stride();
  const std::int8_t* ar[R];
  for (std::size_t r = 0; r < R; ++r) ar[r] = a.row(i0 + r);
  for (std::size_t s = 0; s < S; ++s)
    for (std::size_t u = 0; u < GR; ++u, w += 4 * panel) {
      const std::size_t o = s * ss + 4 * u;
      __m512i wv[P];
      for (std::size_t q = 0; q < P; ++q) wv[q] = _mm512_loadu_si512(w + q * ps);
      for (std::size_t r = 0; r < R; ++r) {
        const __m512i b = _mm512_set1_epi32(load4(ar[r] + o));
        for (std::size_t q = 0; q < P; ++q) acc[r][q] = dpbusd(acc[r][q], b, wv[q]);
      }
    }
}
template <conv_geometry G, std::size_t R, std::size_t P, class A, class C, class E>
inline void conv_tile_vnni(const A& a, const std::int8_t* w, const C* cols, E& e, std::size_t i0) {
  __m512i acc[R][P];
  for (std::size_t r = 0; r < R; ++r)
    for (std::size_t q = 0; q < P; ++q) acc[r][q] = _mm512_setzero_si512();
  conv_dot_vnni<G>(a, w, acc, i0);
  E out = e;  // (a copy the stores cannot alias: e's fields stay in registers)
  for (std::size_t q = 0; q < P; ++q) {
    auto c = cols[q];
    for (std::size_t r = 0; r < R; ++r) put(out, c, acc[r][q], i0 + r);
    if (saturated(out, c))
      for (std::size_t r = 0; r < R; ++r) count(out, c, acc[r][q]);
  }
  if constexpr (requires { e.saturated; }) e.saturated = out.saturated;
}

// The tiles' requantizing store (requant<Y>), cheaper than requant's put and bit for bit the same:
//   - the accumulators start at the column's offset (bias - in_zp kernel_sum - 128 wsum), not 0;
//   - MultiplyByQuantizedMultiplier's two roundings as one, in 64-bit lanes: with p = x mult (x = s +
//     off, mult >= 0, no left shift), SaturatingRoundingDoublingHighMul is hi = floor((p + 2^30) /
//     2^31) (its nudge and truncation: int8.hpp's requantized) and RoundingDivideByPOT(hi, r), r >= 1,
//     floor((hi + 2^(r-1) - [hi < 0]) / 2^r); as floor((floor(y) + n) / d) = floor((y + n) / d) for
//     integers n, d > 0, the result is floor((p + 2^30 + 2^(30+r) - 2^31 [p < -2^30]) / 2^(31+r))
//     (r = 0: floor((p + 2^30) / 2^31)): an add and an arithmetic shift a lane; the output zero point
//     is added in the same sum as zp 2^(31+r) (r <= 23: |p| < 2^62, the sum stays below 2^63; its low
//     32 bits are q, wrapping as the 32-bit add);
//   - after a relu (low = INT_MIN, lo >= zp: Exact false) the term [p < -2^30] is dropped: hi < 0
//     gives a result <= 0 either way, so q <= zp <= lo, clamped to lo and never counted;
//   - the clamp q < lo ? lo : min(q, 127) as max(min(q, 127), lo) (lo <= 127).
// conv_rq_takes says where: every column of the block shifts right by at most 23 (multipliers at
// least 2^-24) and none left, lo <= 127, -128 <= zp <= 127; elsewhere requant's put runs.
template <class E>
struct is_conv_requant : std::false_type {};
template <class Y>
struct is_conv_requant<conv_requant<Y>> : std::true_type {};
struct conv_cols_rq {
  __m512i off, mu, mu_odd, add_even, add_odd, sh_even, sh_odd, corr_even, corr_odd;
  std::size_t j;
};
template <class Y>
inline bool conv_rq_takes(const requant<Y>& e, std::size_t j0, std::size_t n) {
  bool ok = e.lo <= 127 && e.zp >= -128 && e.zp <= 127;
  for (std::size_t j = j0; j < j0 + n; ++j) ok &= e.shift[j] <= 0 && e.shift[j] >= -23;
  return ok;
}
template <class Y>
inline bool conv_rq_exact(const requant<Y>& e) {
  return !(e.low == std::numeric_limits<std::int32_t>::min() && e.lo >= e.zp);
}
template <class Y>
inline conv_cols_rq conv_columns_rq(const requant<Y>& e, std::size_t j, const std::int32_t* wsum) {
  alignas(64) std::int64_t add[16], sh[16], corr[16];
  for (std::size_t t = 0; t < 16; ++t) {
    const std::int64_t r = -std::int64_t(e.shift[j + t]);  // (0..23: conv_rq_takes)
    add[t] = (std::int64_t(1) << 30) + (r > 0 ? std::int64_t(1) << (30 + r) : 0) + std::int64_t(e.zp) * (std::int64_t(1) << (31 + r));
    sh[t] = 31 + r;
    corr[t] = r > 0 ? std::int64_t(1) << 31 : 0;
  }
  const auto pick = [](const std::int64_t* v, std::size_t odd) {  // v[odd], v[odd + 2], ... in 8 lanes
    return _mm512_set_epi64(v[14 + odd], v[12 + odd], v[10 + odd], v[8 + odd], v[6 + odd], v[4 + odd], v[2 + odd], v[odd]);
  };
  const cols_requant c = columns(e, j, __mmask16(0xffff), _mm512_slli_epi32(_mm512_loadu_si512(wsum + j), 7));
  return {c.off, c.mu, c.mu_odd, pick(add, 0), pick(add, 1), pick(sh, 0), pick(sh, 1), pick(corr, 0), pick(corr, 1), j};
}
// q (before the clamp) of the sums v (the offset in them already), as requant's requantized
template <bool Exact>
CTNN_FORCEINLINE __m512i conv_requantized(const conv_cols_rq& c, __m512i v) {
  const __m512i pe = _mm512_mul_epi32(v, c.mu), po = _mm512_mul_epi32(_mm512_srli_epi64(v, 32), c.mu_odd);
  __m512i se = _mm512_add_epi64(pe, c.add_even), so = _mm512_add_epi64(po, c.add_odd);
  if constexpr (Exact) {
    const __m512i edge = _mm512_set1_epi64(-(std::int64_t(1) << 30));
    se = _mm512_mask_sub_epi64(se, _mm512_cmplt_epi64_mask(pe, edge), se, c.corr_even);
    so = _mm512_mask_sub_epi64(so, _mm512_cmplt_epi64_mask(po, edge), so, c.corr_odd);
  }
  return _mm512_mask_shuffle_epi32(_mm512_srav_epi64(se, c.sh_even), __mmask16(0xAAAA), _mm512_srav_epi64(so, c.sh_odd),
                                   _MM_PERM_CDAB);
}
template <conv_geometry G, std::size_t R, std::size_t P, bool Exact, class A, class Y>
inline void conv_tile_rq(const A& a, const std::int8_t* w, const conv_cols_rq* cols, const requant<Y>& e,
                         std::size_t& saturated, std::size_t i0) {
  __m512i acc[R][P];
  for (std::size_t r = 0; r < R; ++r)
    for (std::size_t q = 0; q < P; ++q) acc[r][q] = cols[q].off;
  conv_dot_vnni<G>(a, w, acc, i0);
  requant<Y> out = e;  // (a copy the stores cannot alias: e's fields stay in registers)
  out.saturated = 0;
  const __m512i top = _mm512_set1_epi32(127), low = _mm512_set1_epi32(out.low);
  for (std::size_t q = 0; q < P; ++q) {
    const conv_cols_rq& c = cols[q];
    __m512i hi = _mm512_set1_epi32(std::numeric_limits<std::int32_t>::min());
    __m512i lw = _mm512_set1_epi32(std::numeric_limits<std::int32_t>::max());
    for (std::size_t r = 0; r < R; ++r) {
      const __m512i v = conv_requantized<Exact>(c, acc[r][q]);
      hi = _mm512_max_epi32(hi, v);
      if constexpr (Exact) lw = _mm512_min_epi32(lw, v);  // (else nothing is counted below)
      detail::put_clamped<true, true>(out, v, out.y + (i0 + r) * out.ldy + c.j, __mmask16(0xffff));  // (conv_rq_takes: lo <= 127)
    }
    if (_mm512_cmpgt_epi32_mask(hi, top) | _mm512_cmplt_epi32_mask(lw, low))
      for (std::size_t r = 0; r < R; ++r) {
        const __m512i v = conv_requantized<Exact>(c, acc[r][q]);
        out.saturated += std::size_t(__builtin_popcount(
            unsigned(_mm512_kor(_mm512_cmpgt_epi32_mask(v, top), _mm512_cmplt_epi32_mask(v, low)))));
      }
  }
  saturated += out.saturated;
}
// P full panels from panel p0 over the M rows: conv_rows-row tiles, then the rows left by
// gemm_vnni's tiles (tile_vnni)
template <conv_geometry G, std::size_t P, class A, class C, class E>
inline void conv_block_vnni(std::size_t M, const A& a, const std::int8_t* packed, std::size_t p0, const C* cols,
                            const std::int32_t* wsum, E& e) {
  using Win = windows<G>;
  const std::int8_t* w = packed + p0 * panel * Win::k;
  std::size_t i = 0;
  if constexpr (is_conv_requant<E>::value) {
    // the tiles' own requantizing store where it applies (above), its columns formed once a block
    if (conv_rq_takes(e.rq, p0 * panel, P * panel)) {
      conv_cols_rq cr[P];
      for (std::size_t q = 0; q < P; ++q) cr[q] = conv_columns_rq(e.rq, (p0 + q) * panel, wsum);
      if (conv_rq_exact(e.rq))
        for (; i + conv_rows <= M; i += conv_rows) conv_tile_rq<G, conv_rows, P, true>(a, w, cr, e.rq, e.saturated, i);
      else
        for (; i + conv_rows <= M; i += conv_rows) conv_tile_rq<G, conv_rows, P, false>(a, w, cr, e.rq, e.saturated, i);
    }
  }
  for (; i + conv_rows <= M; i += conv_rows) conv_tile_vnni<G, conv_rows, P>(a, w, cols + p0, e, i);
  for (; i + 4 <= M; i += 4) rows_vnni<4>(G.f, Win::k, a, packed, p0, P, false, wsum, e, i);
  switch (M - i) {
    case 1: rows_vnni<1>(G.f, Win::k, a, packed, p0, P, false, wsum, e, i); break;
    case 2: rows_vnni<2>(G.f, Win::k, a, packed, p0, P, false, wsum, e, i); break;
    case 3: rows_vnni<3>(G.f, Win::k, a, packed, p0, P, false, wsum, e, i); break;
    default: break;
  }
}
// The whole product on the flipped windows a (M rows), G.f >= 16: blocks of 4 full panels (then
// the rest of them), each over every row, then the narrow last panel by gemm_vnni's tiles.
template <conv_geometry G, class A, class E>
void conv_vnni(std::size_t M, const A& a, const std::int8_t* packed, const std::int32_t* wsum, E& e) {
  using Win = windows<G>;
  constexpr std::size_t full = G.f / panel, tail = full % 4;
  static_assert(full > 0, "int8 conv_vnni: at least one full panel of 16 filters");
  using C = decltype(columns(e, 0, __mmask16(0xffff), _mm512_setzero_si512()));
  C cols[full];
  for (std::size_t p = 0; p < full; ++p)  // (the sums are dot - 128 wsum)
    cols[p] = columns(e, p * panel, __mmask16(0xffff), _mm512_slli_epi32(_mm512_loadu_si512(wsum + p * panel), 7));
  std::size_t p0 = 0;
  if constexpr (full >= 4)
    for (; p0 + 4 <= full; p0 += 4) conv_block_vnni<G, 4>(M, a, packed, p0, cols, wsum, e);
  if constexpr (tail != 0) conv_block_vnni<G, tail>(M, a, packed, p0, cols, wsum, e);
  if constexpr (G.f % panel != 0) {
    std::size_t i = 0;
    for (; i + 4 <= M; i += 4) rows_vnni<4>(G.f, Win::k, a, packed, full, 1, true, wsum, e, i);
    switch (M - i) {
      case 1: rows_vnni<1>(G.f, Win::k, a, packed, full, 1, true, wsum, e, i); break;
      case 2: rows_vnni<2>(G.f, Win::k, a, packed, full, 1, true, wsum, e, i); break;
      case 3: rows_vnni<3>(G.f, Win::k, a, packed, full, 1, true, wsum, e, i); break;
      default: break;
    }
  }
}
}  // namespace detail
#endif

// conv_s8's and conv_s8_requantize's product: conv_vnni on the vnni path (G.f >= 16, the column
// sums given), else product_vector (false: the scalar path).
namespace detail {
template <conv_geometry G, class Arch, weight_range R, class E>
bool conv_product(const std::int8_t* img, std::size_t batch, const std::int8_t* packed, const std::int32_t* wsum,
                  E& e) {
  using Win = windows<G>;
  const std::size_t M = batch * Win::positions;
#if defined(__AVX512VNNI__) && defined(__AVX512BW__)
  if constexpr (G.f >= panel)
    if (wsum && int8_path_of<Arch>() == int8_path::vnni) {
      conv_vnni<G>(M, flip_rows(M, Win{img}), packed, wsum, e);
      return true;
    }
#endif
  return product_vector<Arch, R>(M, G.f, Win::k, Win{img}, packed, wsum, e);
}
}  // namespace detail

// The sums c[(n OH + oh) OW + ow, f] (row stride ldc) on the image img (window_image's, or the
// input where windows<G>::in_place, with `slack` bytes after it where over_reads) and packed
// (pack_windows'; wsum its column sums). False, nothing written, on the scalar path.
template <conv_geometry G, class Arch = default_arch, weight_range R = weight_range::full>
bool conv_s8(const std::int8_t* img, std::size_t batch, const std::int8_t* packed, const std::int32_t* wsum,
             std::int32_t* c, std::size_t ldc) {
  store_i32 e{c, ldc};
  return batch == 0 || detail::conv_product<G, Arch, R>(img, batch, packed, wsum, e);
}

// conv_s8 with gemm_s8_requantize's epilogue e (rows of F outputs) fused into its stores; returns how
// many outputs saturated. Requires a vector path (int8_path_of<Arch>() != scalar).
template <conv_geometry G, class Y, class Arch = default_arch, weight_range R = weight_range::full>
std::size_t conv_s8_requantize(const std::int8_t* img, std::size_t batch, const std::int8_t* packed,
                               const std::int32_t* wsum, requant<Y> e) {
  if (batch == 0) return 0;
  e.saturated = 0;
  auto ec = conv_requant_for(e, G.f);
  detail::conv_product<G, Arch, R>(img, batch, packed, wsum, ec);
  return ec.saturated;
}

// ---- a max pooling fused into the convolution's store (quantized_conv2d<..., Pool>) ----
//
// Pool geometry PG (int8_pool.hpp's: h, w = G's oh, ow; c = f = G.f; kh x kw windows) over the
// convolution's outputs. The fused store takes each pool window's max over the int32 sums of its
// positions (per column), then requantizes that one value: kh kw times fewer values requantized, and
// only the pooled tensor written. Exact: for a column j the requantization
//   q(s) = clamp(MBQM(s + off_j, mult_j, shift_j) + zp, lo, 127)
// (int8.hpp's requant<Y>; Y float dequantizes c(q) = scale (q - zp)) is non-decreasing in the sum s
// where nothing wraps, so max_t q(s_t) = q(max_t s_t) and the int8 max pooling of the unfused
// outputs equals the fused value bit for bit:
//   - s + off_j, then << left: monotone while |s| + |off_j| shifted left stays below 2^31 - 128
//     (requant_monotone checks it per column from the bound |s| <= 128 127 K);
//   - SaturatingRoundingDoublingHighMul(x, mult) with mult >= 0: x mult is non-decreasing in x, and
//     its rounding (floor((x mult + 2^30) / 2^31) for x mult >= 0, the truncation of
//     (x mult + 1 - 2^30) / 2^31 below, both 0 at the junction) is a non-decreasing step function;
//     it never saturates (mult != -2^31), and |result| <= |x|;
//   - RoundingDivideByPOT: rounding to nearest, half away from zero: non-decreasing;
//   - + zp (|zp| <= 128): no wrap by the bound above; the clamp (relu's lo = max(-128, zp), or -128)
//     is non-decreasing; the dequantization scale (q - zp) is increasing for 0 < scale < inf.
// A negative multiplier would reverse the order: requant_for refuses it (a corrupt file) before any
// of this runs; where requant_monotone is false the caller runs the unfused convolution and pooling.
// The VNNI path's sums are dot - 128 wsum_j (a column constant): the max is taken over dot, which
// does not wrap where 255 127 K < 2^31 (pool_fusable requires it).
// Saturation: the fused store counts the pooled values it clamped, i.e. pool windows whose largest
// requantized value is above 127 (at least one output of the window saturated upwards) or, without
// a relu, below -128 (all of them saturated downwards): the clipped values the next layer reads. The
// unfused layer counts every output position (docs/quantization.md, "Saturation").
//
// Whether the fusion applies to convolution outputs of geometry G and pool PG: windows without
// padding, inside the outputs, that do not overlap (stride >= window), and sums whose vector forms
// do not wrap.
constexpr bool pool_fusable(const conv_geometry& g, const conv_geometry& pg) {
  return pg.h == g.oh && pg.w == g.ow && pg.c == g.f && pg.f == g.f && pg.pt == 0 && pg.pl == 0 && pg.oh > 0 &&
         pg.ow > 0 && pg.kh > 0 && pg.kw > 0 && (pg.oh - 1) * pg.stride + pg.kh <= pg.h &&
         (pg.ow - 1) * pg.stride + pg.kw <= pg.w && pg.stride >= pg.kh && pg.stride >= pg.kw &&
         padded_k(g.kh * padded_k(g.kw * g.c)) * 255 * 127 < (std::size_t(1) << 31);
}

// Whether e's requantization is non-decreasing in the int32 sum of K products of int8 values (|s| <=
// 128 127 K) for each of its N columns (above), and (Y float) its dequantization increasing.
template <class Y>
bool requant_monotone(const requant<Y>& e, std::size_t N, std::size_t K) {
  bool ok = true;
  if constexpr (std::is_same_v<Y, float>) ok = e.scale > 0 && e.scale <= std::numeric_limits<float>::max();
  const std::int64_t smax = std::int64_t(K) * 128 * 127, limit = (std::int64_t(1) << 31) - 129;
  for (std::size_t j = 0; j < N; ++j) {
    // off_j as the stores form it (wrapping int32)
    const auto off = std::int32_t(std::uint32_t(e.bias[j]) - std::uint32_t(e.in_zp) * std::uint32_t(e.kernel_sum[j]));
    const std::int64_t left = e.shift[j] > 0 ? e.shift[j] : 0;
    ok &= e.mult[j] >= 0 && left <= 30 && ((smax + (off < 0 ? -std::int64_t(off) : std::int64_t(off))) << left) <= limit;
  }
  return ok;
}

// The operand of the fused product: windows<G>'s rows, ordered so that the kh kw rows of each pool
// window follow each other (row i: pool window i / (kh kw) of the batch, position i % (kh kw) in it,
// row-major).
template <conv_geometry G, conv_geometry PG>
struct pool_windows : windows<G> {
  using Win = windows<G>;
  static constexpr std::size_t window = PG.kh * PG.kw, pooled = PG.oh * PG.ow;
  const std::int8_t* row(std::size_t i) const {
    const std::size_t g = i / window, t = i % window, n = g / pooled, p = g % pooled;
    const std::size_t oh = p / PG.ow * PG.stride + t / PG.kw, ow = p % PG.ow * PG.stride + t % PG.kw;
    return this->img + n * Win::image_size + (oh * Win::iw + ow) * G.stride * G.c;
  }
};

// The fused store: requant<Y>'s rule on the max of each Window consecutive rows (pool_windows'),
// written to pooled row i / Window of y; run: N + 16 int32 where a window's running max waits
// between tiles (a tile holds 2 to 6 rows, by path: int8.hpp's path notes).
template <class Y, std::size_t Window>
struct pool_requant : requant<Y> {
  std::int32_t* run;
};

#if defined(__AVX2__)
// the columns of a 256-bit tile (avx2, vnni256): requant's; each window's running max waits in run
// (N + 16 lanes: whole vectors past any column, no vpmaskmovd, which AMD's cores run slowly)
struct cols8_pool {
  detail::cols8_requant rq;
};
template <class Y, std::size_t Window>
inline cols8_pool columns8(const pool_requant<Y, Window>& e, std::size_t j, std::size_t width, __m256i sub) {
  return {detail::columns8(static_cast<const requant<Y>&>(e), j, width, sub)};
}
template <class Y, std::size_t Window>
inline void put(pool_requant<Y, Window>& e, cols8_pool& c, __m256i v, std::size_t i) {
  const std::size_t t = i % Window;
  auto* at = reinterpret_cast<__m256i*>(e.run + c.rq.j);
  if (t != 0) v = _mm256_max_epi32(v, _mm256_loadu_si256(at));
  if (t + 1 < Window) return _mm256_storeu_si256(at, v);
  // the window's max, requantized, counted and stored as requant's put does
  const __m256i q = detail::requantized8(c.rq, v);
  e.saturated += detail::saturated_lanes(e, c.rq, q);
  detail::put_clamped(e, c.rq, q, i / Window);
}
template <class Y, std::size_t Window>
constexpr bool saturated(const pool_requant<Y, Window>&, const cols8_pool&) {
  return false;  // (counted by put)
}
template <class Y, std::size_t Window>
inline void count(pool_requant<Y, Window>&, const cols8_pool&, __m256i) {}
#endif

#if defined(__AVX512F__)
// the columns of a VNNI tile: requant's, and the running max of the window in progress (open)
struct cols_pool {
  detail::cols_requant rq;
  __m512i mx;
  bool open;
};
template <class Y, std::size_t Window>
inline cols_pool columns(const pool_requant<Y, Window>& e, std::size_t j, __mmask16 m, __m512i sub) {
  return {detail::columns(static_cast<const requant<Y>&>(e), j, m, sub), _mm512_setzero_si512(), false};
}
template <class Y, std::size_t Window>
inline void put(pool_requant<Y, Window>& e, cols_pool& c, __m512i v, std::size_t i) {
  const std::size_t t = i % Window;
  if (t == 0)
    c.mx = v;
  else if (!c.open)  // the window began in an earlier tile
    c.mx = _mm512_max_epi32(_mm512_maskz_loadu_epi32(c.rq.m, e.run + c.rq.j), v);
  else
    c.mx = _mm512_max_epi32(c.mx, v);
  c.open = t + 1 < Window;
  if (c.open) return;
  // the window's max, requantized, counted and stored as requant's put does
  const __m512i q = detail::requantized(e, c.rq, c.mx);
  e.saturated += std::size_t(__builtin_popcount(unsigned(_mm512_kor(
      _mm512_mask_cmpgt_epi32_mask(c.rq.m, q, _mm512_set1_epi32(127)), _mm512_mask_cmplt_epi32_mask(c.rq.m, q, _mm512_set1_epi32(e.low))))));
  detail::put_clamped(e, q, e.y + i / Window * e.ldy + c.rq.j, c.rq.m);
}
template <class Y, std::size_t Window>
constexpr bool saturated(const pool_requant<Y, Window>&, const cols_pool&) {
  return false;  // (counted by put)
}
template <class Y, std::size_t Window>
inline void count(pool_requant<Y, Window>&, const cols_pool&, __m512i) {}
// the end of a tile: a window still open waits in run
template <class Y, std::size_t Window>
inline void finish(pool_requant<Y, Window>& e, const cols_pool& c) {
  if (c.open) _mm512_mask_storeu_epi32(e.run + c.rq.j, c.rq.m, c.mx);
}
#endif

namespace detail {
// A kernel small enough to stay in registers for the whole product (the first layer's: C = 1, 3x3,
// k = 12 bytes, 32 filters: 6 vectors): full panels only, at most 8 vectors of 16 columns x 4 k.
template <conv_geometry G>
inline constexpr bool kernel_resident = G.f % panel == 0 && windows<G>::k / 4 * (G.f / panel) <= 8;
}  // namespace detail

#if defined(__AVX512VNNI__) && defined(__AVX512BW__)
namespace detail {

// conv_s8_pool_requantize's VNNI path for kernel_resident<G>: the tile loop of gemm_vnni and
// pool_requant's store in one function, so that what a tile reloads there (the kernel, and the
// requantization's per-column terms: columns()) is formed once a call, and the rows of each pool
// window are addressed directly (no pool_windows::row divisions); one pool window (its kh kw rows x
// every panel) at a time, its max requantized and stored as pool_requant's put. The same sums and
// the same rule: bit for bit gemm_vnni with pool_requant (tests/quantization/test_quantized_conv2d_pool.cpp).
template <conv_geometry G, conv_geometry PG, class Y>
std::size_t pool_resident(const std::int8_t* img, std::size_t batch, const std::int8_t* packed,
                          const std::int32_t* wsum, const requant<Y>& e) {
  using Win = windows<G>;
  constexpr std::size_t NG = Win::k / 4, NP = G.f / panel, T = PG.kh * PG.kw;
  constexpr std::size_t S = Win::segments(), GR = Win::groups(), step = G.stride * G.c;
  __m512i w[NG][NP];
  for (std::size_t g = 0; g < NG; ++g)
    for (std::size_t p = 0; p < NP; ++p) w[g][p] = _mm512_loadu_si512(packed + p * panel * Win::k + g * 64);
  cols_requant c[NP];
  for (std::size_t p = 0; p < NP; ++p)  // (the sums are dot - 128 wsum: gemm_vnni's sub)
    c[p] = columns(e, p * panel, __mmask16(0xffff),
                   _mm512_slli_epi32(_mm512_loadu_si512(wsum + p * panel), 7));
  const __m512i flip = _mm512_set1_epi32(std::int32_t(0x80808080u));
  const __m512i lo = _mm512_set1_epi32(e.lo), top = _mm512_set1_epi32(127), low = _mm512_set1_epi32(e.low);
  const __m512i zp = _mm512_set1_epi32(e.zp);
  const __m512 scale = _mm512_set1_ps(e.scale);
  std::size_t saturated = 0;
  Y* out = e.y;
  for (std::size_t n = 0; n < batch; ++n)
    for (std::size_t ph = 0; ph < PG.oh; ++ph)
      for (std::size_t pw = 0; pw < PG.ow; ++pw, out += e.ldy) {
        // the window's first row: output (ph PG.stride, pw PG.stride), as windows<G>::row
        const std::int8_t* base = img + n * Win::image_size + (ph * PG.stride * Win::iw + pw * PG.stride) * step;
        __m512i acc[T][NP];
        for (std::size_t t = 0; t < T; ++t) {
          const std::int8_t* row = base + (t / PG.kw * Win::iw + t % PG.kw) * step;
          for (std::size_t p = 0; p < NP; ++p) acc[t][p] = _mm512_setzero_si512();
          for (std::size_t s = 0; s < S; ++s)
            for (std::size_t u = 0; u < GR; ++u) {
              const __m512i b = _mm512_xor_si512(_mm512_set1_epi32(load4(row + s * Win::segment_stride() + 4 * u)), flip);
              for (std::size_t p = 0; p < NP; ++p) acc[t][p] = dpbusd(acc[t][p], b, w[s * GR + u][p]);
            }
        }
        for (std::size_t p = 0; p < NP; ++p) {
          __m512i mx = acc[0][p];
          for (std::size_t t = 1; t < T; ++t) mx = _mm512_max_epi32(mx, acc[t][p]);
          const __m512i q = requantized(e, c[p], mx);
          saturated += std::size_t(__builtin_popcount(
              unsigned(_mm512_kor(_mm512_cmpgt_epi32_mask(q, top), _mm512_cmplt_epi32_mask(q, low)))));
          const __m512i v8 = _mm512_mask_blend_epi32(_mm512_cmplt_epi32_mask(q, lo), _mm512_min_epi32(q, top), lo);
          if constexpr (std::is_same_v<Y, std::int8_t>)
            _mm_storeu_si128(reinterpret_cast<__m128i*>(out + p * panel), _mm512_cvtepi32_epi8(v8));
          else
            _mm512_storeu_ps(out + p * panel, _mm512_mul_ps(scale, _mm512_cvtepi32_ps(_mm512_sub_epi32(v8, zp))));
        }
      }
  return saturated;
}
}  // namespace detail
#endif

// The pooled sums: p[(n PG.oh + ph) PG.ow + pw, f] = the max of c[(n G.oh + oh) G.ow + ow, f] over
// the window (ph, pw) (c: the sums of every output position, row stride G.f; pool_fusable(G, PG)).
// The scalar path's fused store: then requantize_rows on p.
template <conv_geometry G, conv_geometry PG>
void max_pool_i32(const std::int32_t* c, std::size_t batch, std::int32_t* p) {
  constexpr std::size_t F = G.f;
  for (std::size_t n = 0; n < batch; ++n)
    for (std::size_t ph = 0; ph < PG.oh; ++ph)
      for (std::size_t pw = 0; pw < PG.ow; ++pw) {
        std::int32_t* out = p + ((n * PG.oh + ph) * PG.ow + pw) * F;
        for (std::size_t a = 0; a < PG.kh; ++a)
          for (std::size_t b = 0; b < PG.kw; ++b) {
            const std::int32_t* in = c + ((n * G.oh + ph * PG.stride + a) * G.ow + pw * PG.stride + b) * F;
            for (std::size_t f = 0; f < F; ++f) out[f] = a + b == 0 ? in[f] : std::max(out[f], in[f]);
          }
      }
}

// conv_s8_requantize with the max pooling PG fused into its stores (above): y (e.y, row stride e.ldy)
// receives the pooled rows [batch, PG.oh, PG.ow]; returns how many pooled values saturated. Requires a
// vector path, pool_fusable(G, PG) and requant_monotone(e, G.f, G.patch()).
template <conv_geometry G, conv_geometry PG, class Y, class Arch = default_arch, weight_range R = weight_range::full>
std::size_t conv_s8_pool_requantize(const std::int8_t* img, std::size_t batch, const std::int8_t* packed,
                                    const std::int32_t* wsum, const requant<Y>& e) {
  static_assert(pool_fusable(G, PG), "int8 conv_s8_pool_requantize: a pooling the fused store does not take");
  using A = pool_windows<G, PG>;
#if defined(__AVX512VNNI__) && defined(__AVX512BW__)
  if constexpr (detail::kernel_resident<G>)
    if (batch && wsum && int8_path_of<Arch>() == int8_path::vnni)
      return detail::pool_resident<G, PG, Y>(img, batch, packed, wsum, e);
#endif
  thread_local std::vector<std::int32_t> run;
  run.resize(G.f + 16);
  pool_requant<Y, A::window> pe{e, run.data()};
  pe.saturated = 0;
  if (batch)
    detail::product_vector<Arch, R>(batch * A::pooled * A::window, G.f, A::k, A{{img}}, packed, wsum, pe);
  return pe.saturated;
}

}  // namespace ctnn::kernels::cpu::int8
