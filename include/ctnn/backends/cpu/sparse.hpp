// ctnn/kernels/cpu/sparse.hpp — products of a sparse kernel stored as 16-column bitmaps and packed values.
//
// Layout of a sparse K x N kernel W (layers/sparse_dense.hpp): the columns
// are cut into chunks of 16 (the last may be narrower); for chunk c and input
// row k, bitmap[c * K + k] (16 bits) says which of the chunk's columns hold a
// weight; the weights follow in that order (chunk, row, column) in `values`,
// chunk c's first at offsets[c]; offsets[chunks] is the count used. The
// layout does not depend on the SIMD width, so files do not either.
//   forward_reference: y = x W + b (relu optional), the scalar loop that
//                      defines the products;
//   forward<Arch>:     the same with xsimd; on AVX-512 each row's 16 weights
//                      are expanded from the packed values with one masked
//                      expand-load (vexpandps: xsimd 8.1 has no word for it),
//                      on AVX2 (no expand) each half row by a permute
//                      from a 256-entry table of a plain load, the lanes
//                      past the kept ones zeroed by their sign bits (expand8u; the
//                      high half of a row of one sample from the 8 values
//                      that end with the row, expand8e; masked loads,
//                      expand8, in the last values only);
//                      elsewhere by a scalar loop into a vector;
//                      up to 8 batch rows share each expanded row (AVX-512:
//                      8, then 4 rows; 5 to 7 left run as 8 padded with
//                      zeros, 3 as 4, 1 or 2 one by one; AVX2: 2 to 6
//                      rows, chunk_rows_avx2), and a single row runs 4
//                      accumulators (AVX2: two chunks at a time,
//                      chunk_row1_avx2); from L rows on (AVX2: 7)
//                      (float, SIMD; sparse_expand::use), the
//                      chunks are expanded by the same instructions into the
//                      dense GEMM's panels instead (bitmap_panel,
//                      sparse_expand.hpp) and the dense micro-kernel runs;
//   backward_reference: dvalues, dbias and dx (scalar: a layer without
//                      decoded weights; with them the layer's backward is
//                      the dense GEMMs, the values' gradient gathered from
//                      dW: decode and gather below, layers/sparse_dense.hpp).
#pragma once
#include <algorithm>
#include <array>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <type_traits>
#include <utility>

#include <xsimd/xsimd.hpp>

#include "../../config.hpp"
#include "../../kernels/sparse_index.hpp"
#include "arch.hpp"
#include "sparse_expand.hpp"
#include "sparse_kernels.hpp"

namespace ctnn::kernels::cpu::sparse {

inline constexpr std::size_t chunk_width = bitmap_index::chunk_width;
constexpr std::size_t chunks(std::size_t n) { return (n + chunk_width - 1) / chunk_width; }

template <class T>
void forward_reference(const T* x, const T* values, const std::uint32_t* offsets, const std::uint16_t* bitmap,
                       const T* bias, T* y, std::size_t batch, std::size_t K, std::size_t N, bool relu) {
  for (std::size_t b = 0; b < batch; ++b) {
    for (std::size_t j = 0; j < N; ++j) y[b * N + j] = bias[j];
    for (std::size_t c = 0; c < chunks(N); ++c) {
      const T* v = values + offsets[c];
      for (std::size_t k = 0; k < K; ++k) {
        const unsigned m = bitmap[c * K + k];
        for (std::size_t l = 0; l < chunk_width; ++l)
          if (m >> l & 1u) y[b * N + c * chunk_width + l] += x[b * K + k] * *v++;
      }
    }
    if (relu)
      for (std::size_t j = 0; j < N; ++j) y[b * N + j] = std::max(y[b * N + j], T(0));
  }
}

// dz: dL/d(pre-activation) [batch x N]; dvalues, dbias are overwritten; dx (may be null) too.
template <class T>
void backward_reference(const T* x, const T* dz, const T* values, const std::uint32_t* offsets,
                        const std::uint16_t* bitmap, T* dvalues, T* dbias, T* dx, std::size_t batch, std::size_t K,
                        std::size_t N) {
  for (std::size_t j = 0; j < N; ++j) {
    T s = 0;
    for (std::size_t b = 0; b < batch; ++b) s += dz[b * N + j];
    dbias[j] = s;
  }
  if (dx) std::fill(dx, dx + batch * K, T(0));
  for (std::size_t c = 0; c < chunks(N); ++c) {
    std::size_t p = offsets[c];
    for (std::size_t k = 0; k < K; ++k) {
      const unsigned m = bitmap[c * K + k];
      for (std::size_t l = 0; l < chunk_width; ++l)
        if (m >> l & 1u) {
          const std::size_t j = c * chunk_width + l;
          T s = 0;
          for (std::size_t b = 0; b < batch; ++b) {
            s += x[b * K + k] * dz[b * N + j];
            if (dx) dx[b * K + k] += values[p] * dz[b * N + j];
          }
          dvalues[p++] = s;
        }
    }
  }
}

namespace detail {

template <class Arch>
inline constexpr bool avx512_v = std::is_base_of_v<xsimd::avx512f, Arch>;

// The scratch buffers of simd::scratch (gemm/pack.hpp) for the padded rows (sparse_expand: 8, rows: 9).
inline constexpr int pad_x_tag = 10, pad_y_tag = 11;

#if defined(__AVX512F__)
// The 16 weights of one chunk row: the packed values at v spread to the set
// lanes of m by a register expand (the memory form of vexpandps is several
// times slower on Intel cores). A plain 16-value load where it stays below
// vend (the end of the values: the expand reads only the first popcount(m)
// lanes), a masked load of popcount(m) values near the end.
inline __m512 expand_row(unsigned m, const float* v, const float* vend) {
  const __m512 raw = v + chunk_width <= vend ? _mm512_loadu_ps(v)
                                             : _mm512_maskz_loadu_ps(__mmask16((1u << std::popcount(m)) - 1u), v);
  return _mm512_maskz_expand_ps(__mmask16(m), raw);
}
#endif

#if defined(__AVX2__) && defined(__FMA__)
// AVX2 has no expand: per 8-bit mask a lane permutation (lane l takes the rank of bit l among the
// set bits; an unset lane takes lane popcount, which the masked load of expand8 zeroed, with the
// sign bit set: vpermps reads the low 3 bits only) and per count the load mask: 8 kB + 288 B of
// tables. expand8u and expand8e (plain loads) read tables of their own (perm32, 8 kB each; unset
// lanes INT32_MIN: lane 0, sign set, cleared by zero_unset), each its own object so that its
// address is one register and a mask times 32 (inside a larger object, g++ 12 added the table's
// offset to the mask and zero-extended the sum: 2 more instructions per granule).
struct expand_tables {
  alignas(32) std::int32_t perm[256][8];
  alignas(32) std::int32_t load[9][8];
};
struct expand_words {
  alignas(64) std::int32_t perm32[256][8];
};
constexpr expand_tables make_expand_tables() {
  expand_tables t{};
  for (unsigned m = 0; m < 256; ++m) {
    const int pc = std::popcount(m);
    int rank = 0;
    for (unsigned l = 0; l < 8; ++l) t.perm[m][l] = (m >> l & 1u) ? rank++ : INT32_MIN + (pc < 8 ? pc : 7);
  }
  for (int c = 0; c <= 8; ++c)
    for (int l = 0; l < 8; ++l) t.load[c][l] = l < c ? -1 : 0;
  return t;
}
// at_end: for the 8 values that end at the granule's last (lane l takes 8 - popcount + rank).
constexpr expand_words make_expand_words(bool at_end) {
  expand_words t{};
  for (unsigned m = 0; m < 256; ++m) {
    int rank = at_end ? 8 - std::popcount(m) : 0;
    for (unsigned l = 0; l < 8; ++l) t.perm32[m][l] = (m >> l & 1u) ? rank++ : INT32_MIN;
  }
  return t;
}
inline constexpr expand_tables expand_lut = make_expand_tables();
inline constexpr expand_words expand_lut32 = make_expand_words(false), expand_end32 = make_expand_words(true);

// The 8 weights of one half chunk row (mask m8, 8 bits) from the packed values at v.
inline __m256 expand8(unsigned m8, const float* v) {
  const __m256i load = _mm256_load_si256(reinterpret_cast<const __m256i*>(expand_lut.load[std::popcount(m8)]));
  const __m256i perm = _mm256_load_si256(reinterpret_cast<const __m256i*>(expand_lut.perm[m8]));
  return _mm256_permutevar8x32_ps(_mm256_maskload_ps(v, load), perm);
}

// Lanes of w whose permutation entry has its sign bit set, zeroed: an arithmetic shift and an
// and-not (two single-uop instructions; vblendvps on a zero vector is 3 uops on Intel cores).
inline __m256 zero_unset(__m256 w, __m256i perm) {
  return _mm256_andnot_ps(_mm256_castsi256_ps(_mm256_srai_epi32(perm, 31)), w);
}

// The same from a plain (unmasked) load: 8 values must be readable at v; the lanes past the
// popcount hold the next values, which zero_unset clears by the table's sign bits (AMD cores run
// vmaskmovps loads several times slower than plain ones). The permutation is one 32-byte load
// from a table of 32-bit lanes. Until branch sparse23: a 2 kB table of bytes widened by
// vpmovsxbd, which Intel cores run on port 5 beside the vpermps, and a vblendvps with a zero
// vector (Intel Xeon model 207, loaded, the one-sample kernel of a 784 x 256 layer at 80 %:
// 23.1-23.4 us, 19.9-20.6 with the 32-bit table, 17.5-17.8 with the and-not too; on the Zen 4
// an 8 kB table had measured 6 % slower at batch 1, its lines evicted by the values streaming
// through L1: not measured there since).
inline __m256 expand8u(unsigned m8, const float* v) {
  const __m256i perm = _mm256_load_si256(reinterpret_cast<const __m256i*>(expand_lut32.perm32[m8]));
  return zero_unset(_mm256_permutevar8x32_ps(_mm256_loadu_ps(v), perm), perm);
}
// The same from the 8 values that end at e (the granule's values are the last popcount(m8) of
// them; 8 values must be readable before e): the high granule of a chunk row ends where the row
// does, so its first value needs no popcount of the low one.
inline __m256 expand8e(unsigned m8, const float* e) {
  const __m256i perm = _mm256_load_si256(reinterpret_cast<const __m256i*>(expand_end32.perm32[m8]));
  return zero_unset(_mm256_permutevar8x32_ps(_mm256_loadu_ps(e - 8), perm), perm);
}

// Rows [k, K) of one sample's C chunks on AVX2 (chunk_row1_avx2), two rows per step, 16 rows
// per block, while every cursor is at least 8 values past `values` and a block's reads stay
// before vend (16 values a row at most); returns the row it stopped at. Per chunk row: its
// 16-bit bitmap read once; its low byte indexes the permutation table, and the low granule's values are
// the 8 from the row's first (expand8u); its high byte indexes the end table, and the high
// granule's values are the 8 that end where the row does (expand8e), so the only popcount is the
// row's, which moves the cursor (g++ 12: 8.6 instructions per granule for a 784 x 256 layer at
// 50 %, where the prefix popcounts of two rows read as one 32-bit word took 11.2). The chunks'
// bitmaps follow each other, Stride (K) apart (any Stride when C = 1).
template <std::size_t Stride, std::size_t C>
CTNN_FORCEINLINE std::size_t plain_rows_avx2(const float* x, std::size_t k, std::size_t K, const std::uint16_t* bm,
                                             const float** v, const float* values, const float* vend,
                                             __m256 (*a)[4]) {
  static_assert(C == 1 || Stride != 0, "plain_rows_avx2: the stride of the chunks' bitmaps");
  constexpr std::size_t block = 16;
  for (std::size_t c = 0; c < C; ++c)
    if (v[c] - values < 8) return k;
  while (k + 2 <= K) {
    const std::size_t rows = std::min(block, (K - k) & ~std::size_t(1));
    bool room = true;
    for (std::size_t c = 0; c < C; ++c) room = room && std::size_t(vend - v[c]) >= chunk_width * rows;
    if (!room) break;
    const std::uint16_t* b = bm + k;  // pointers, not k: fewer registers live (g++ 12 spilled x)
    const std::uint16_t* const bend = b + rows;
    const float* xp = x + k;
    for (; b != bend; b += 2, xp += 2) {
      const __m256 x0 = _mm256_broadcast_ss(xp), x1 = _mm256_broadcast_ss(xp + 1);
      for (std::size_t c = 0; c < C; ++c) {
        const unsigned m0 = b[c * Stride], m1 = b[c * Stride + 1];
        const float* p0 = v[c];
        const float* p1 = p0 + std::popcount(m0);
        const float* p2 = p1 + std::popcount(m1);
        a[c][0] = _mm256_fmadd_ps(x0, expand8u(m0 & 0xFFu, p0), a[c][0]);
        a[c][1] = _mm256_fmadd_ps(x0, expand8e(m0 >> 8, p1), a[c][1]);
        a[c][2] = _mm256_fmadd_ps(x1, expand8u(m1 & 0xFFu, p1), a[c][2]);
        a[c][3] = _mm256_fmadd_ps(x1, expand8e(m1 >> 8, p2), a[c][3]);
        v[c] = p2;
      }
    }
    k += rows;
  }
  return k;
}

// One sample (batch row) of C chunks (1 or 2, side by side; with 2, their bitmaps K = Stride
// apart) on AVX2, inputs shared by the chunks, into 4 accumulators a chunk: the first rows (while
// a cursor is less than 8 values past the start of the values) one at a time, the high granule
// read from its first value; then plain_rows_avx2; from the first rows whose values after a
// cursor are not all stored (the last chunk's last rows) on, two rows per step while 32 values
// remain after each cursor, the rest one row at a time with the masked loads of expand8.
template <std::size_t C, std::size_t Stride = 0>
void chunk_row1_avx2(const float* x, std::size_t K, const float* const* vs, const float* values, const float* vend,
                     const std::uint16_t* const* bms, const float* bias, float* y, std::size_t width, bool relu) {
  alignas(32) float bpad[C * chunk_width] = {};
  std::copy(bias, bias + width, bpad);
  __m256 a[C][4];
  const float* v[C];
  for (std::size_t c = 0; c < C; ++c) {
    v[c] = vs[c];
    a[c][0] = _mm256_load_ps(bpad + c * chunk_width);
    a[c][1] = _mm256_load_ps(bpad + c * chunk_width + 8);
    a[c][2] = a[c][3] = _mm256_setzero_ps();
  }
  std::size_t k = 0;
  auto head = [&] {
    bool behind = false, room = true;
    for (std::size_t c = 0; c < C; ++c) {
      behind = behind || v[c] - values < 8;
      room = room && vend - v[c] >= std::ptrdiff_t(chunk_width);
    }
    return behind && room;
  };
  for (; k < K && head(); ++k) {
    const __m256 x0 = _mm256_broadcast_ss(x + k);
    for (std::size_t c = 0; c < C; ++c) {
      const unsigned m = bms[c][k];
      a[c][0] = _mm256_fmadd_ps(x0, expand8u(m & 0xFFu, v[c]), a[c][0]);
      a[c][1] = _mm256_fmadd_ps(x0, expand8u(m >> 8, v[c] + std::popcount(m & 0xFFu)), a[c][1]);
      v[c] += std::popcount(m);
    }
  }
  k = plain_rows_avx2<Stride, C>(x, k, K, bms[0], v, values, vend, a);
  auto room = [&] {
    bool ok = true;
    for (std::size_t c = 0; c < C; ++c) ok = ok && vend - v[c] >= 32;
    return ok;
  };
  for (; k + 2 <= K && room(); k += 2) {
    const __m256 x0 = _mm256_broadcast_ss(x + k), x1 = _mm256_broadcast_ss(x + k + 1);
    for (std::size_t c = 0; c < C; ++c) {
      std::uint32_t q;  // 4 granules: byte g = columns 8 (g % 2) .. 8 (g % 2) + 7 of row k + g / 2
      std::memcpy(&q, bms[c] + k, sizeof q);
      const unsigned g0 = q & 0xFFu, g1 = q >> 8 & 0xFFu, g2 = q >> 16 & 0xFFu, g3 = q >> 24;
      const float* p = v[c];
      a[c][0] = _mm256_fmadd_ps(x0, expand8u(g0, p), a[c][0]);
      a[c][1] = _mm256_fmadd_ps(x0, expand8u(g1, p + std::popcount(g0)), a[c][1]);
      a[c][2] = _mm256_fmadd_ps(x1, expand8u(g2, p + std::popcount(q & 0xFFFFu)), a[c][2]);
      a[c][3] = _mm256_fmadd_ps(x1, expand8u(g3, p + std::popcount(q & 0xFFFFFFu)), a[c][3]);
      v[c] = p + std::popcount(q);
    }
  }
  for (; k < K; ++k) {
    const __m256 xb = _mm256_broadcast_ss(x + k);
    for (std::size_t c = 0; c < C; ++c) {
      const unsigned m = bms[c][k], lo = m & 0xFFu;
      a[c][0] = _mm256_fmadd_ps(xb, expand8(lo, v[c]), a[c][0]);
      a[c][1] = _mm256_fmadd_ps(xb, expand8(m >> 8, v[c] + std::popcount(lo)), a[c][1]);
      v[c] += std::popcount(m);
    }
  }
  alignas(32) float out[C * chunk_width];
  for (std::size_t c = 0; c < C; ++c) {
    __m256 s0 = _mm256_add_ps(a[c][0], a[c][2]), s1 = _mm256_add_ps(a[c][1], a[c][3]);
    if (relu) {
      s0 = _mm256_max_ps(s0, _mm256_setzero_ps());
      s1 = _mm256_max_ps(s1, _mm256_setzero_ps());
    }
    _mm256_store_ps(out + c * chunk_width, s0);
    _mm256_store_ps(out + c * chunk_width + 8, s1);
  }
  std::copy(out, out + width, y);
}

// R samples (2 to 6, rows of x K apart) of one chunk on AVX2: each row's 16 weights expanded once
// (two plain-load expands while 16 values remain readable, the masked ones after) and shared by
// the R samples, 2 accumulators each (2 R chains; one sample alone runs chunk_row1_avx2). forward
// runs R = 2 to 6 (batch 2: 19 us for the MLP against 31 us one by one; batch 4: 25 us, expanded
// into the GEMM's panels 35-36 us, dense 23-24 us: docs/pruning.md).
template <std::size_t R>
void chunk_rows_avx2(const float* x, std::size_t K, const float* v, const float* vend, const std::uint16_t* bm,
                     const float* bias, float* y, std::size_t N, std::size_t width, bool relu) {
  static_assert(R >= 2 && R <= 6, "chunk_rows_avx2: 2 to 6 rows (2 R accumulators of 16 registers)");
  // The row loops are unrolled by an index sequence: every accumulator index is a constant before
  // GCC's scalar replacement runs (with a loop over the rows, g++ 12 kept a[] for 3 or more rows in
  // memory and stored all 2 R accumulators every k).
  const auto rows = []<class F, std::size_t... r>(F&& f, std::index_sequence<r...>) {
    (f(std::integral_constant<std::size_t, r>{}), ...);
  };
  constexpr auto each = std::make_index_sequence<R>{};
  alignas(32) float bpad[chunk_width] = {};
  std::copy(bias, bias + width, bpad);
  __m256 a[R][2];
  rows([&](auto r) { a[r][0] = _mm256_load_ps(bpad), a[r][1] = _mm256_load_ps(bpad + 8); }, each);
  for (std::size_t k = 0; k < K; ++k) {
    const unsigned m = bm[k], lo = m & 0xFFu;
    __m256 w0, w1;
    if (vend - v >= 16) {
      w0 = expand8u(lo, v);
      w1 = expand8u(m >> 8, v + std::popcount(lo));
    } else {
      w0 = expand8(lo, v);
      w1 = expand8(m >> 8, v + std::popcount(lo));
    }
    v += std::popcount(m);
    rows(
        [&](auto r) {
          const __m256 xb = _mm256_broadcast_ss(x + r * K + k);
          a[r][0] = _mm256_fmadd_ps(xb, w0, a[r][0]);
          a[r][1] = _mm256_fmadd_ps(xb, w1, a[r][1]);
        },
        each);
  }
  alignas(32) float out[R][chunk_width];
  rows(
      [&](auto r) {
        __m256 s0 = a[r][0], s1 = a[r][1];
        if (relu) {
          s0 = _mm256_max_ps(s0, _mm256_setzero_ps());
          s1 = _mm256_max_ps(s1, _mm256_setzero_ps());
        }
        _mm256_store_ps(out[r], s0);
        _mm256_store_ps(out[r] + 8, s1);
      },
      each);
  for (std::size_t r = 0; r < R; ++r) std::copy(out[r], out[r] + width, y + r * N);
}
#endif

// RB batch rows of one chunk: acc[r] = bias + sum_k x[r, k] * expand(bitmap[k], values)
template <class Arch, std::size_t RB>
void chunk_rows(const float* x, std::size_t K, const float* v, const float* vend, const std::uint16_t* bm,
                const float* bias, float* y, std::size_t N, std::size_t width, bool relu) {
  (void)vend;  // read on AVX-512 only
#if defined(__AVX512F__)
  if constexpr (avx512_v<Arch>) {
    const __mmask16 lanes = __mmask16((1u << width) - 1u);
    const __m512 b = _mm512_maskz_loadu_ps(lanes, bias);
    if constexpr (RB == 1) {
      // one row: 4 accumulators break the FMA dependency chain
      __m512 a0 = b, a1 = _mm512_setzero_ps(), a2 = _mm512_setzero_ps(), a3 = _mm512_setzero_ps();
      // The 4-row loop ends at K4, a bound g++ knows: with `k + 4 <= K` g++ 12 could not bound
      // where it stopped and warned (-Waggressive-loop-optimizations) on the tail loop's bm[k]
      // wherever K was known and a multiple of 4 (the tail then never runs).
      const std::size_t K4 = K & ~std::size_t(3);
      std::size_t k = 0;
      for (; k < K4; k += 4) {
        const unsigned m0 = bm[k], m1 = bm[k + 1], m2 = bm[k + 2], m3 = bm[k + 3];
        const __m512 w0 = expand_row(m0, v, vend);
        v += std::popcount(m0);
        const __m512 w1 = expand_row(m1, v, vend);
        v += std::popcount(m1);
        const __m512 w2 = expand_row(m2, v, vend);
        v += std::popcount(m2);
        const __m512 w3 = expand_row(m3, v, vend);
        v += std::popcount(m3);
        a0 = _mm512_fmadd_ps(_mm512_set1_ps(x[k]), w0, a0);
        a1 = _mm512_fmadd_ps(_mm512_set1_ps(x[k + 1]), w1, a1);
        a2 = _mm512_fmadd_ps(_mm512_set1_ps(x[k + 2]), w2, a2);
        a3 = _mm512_fmadd_ps(_mm512_set1_ps(x[k + 3]), w3, a3);
      }
      for (; k < K; ++k) {
        const unsigned m = bm[k];
        a0 = _mm512_fmadd_ps(_mm512_set1_ps(x[k]), expand_row(m, v, vend), a0);
        v += std::popcount(m);
      }
      __m512 s = _mm512_add_ps(_mm512_add_ps(a0, a1), _mm512_add_ps(a2, a3));
      if (relu) s = _mm512_max_ps(s, _mm512_setzero_ps());
      _mm512_mask_storeu_ps(y, lanes, s);
    } else {
      __m512 acc[RB];
      for (std::size_t r = 0; r < RB; ++r) acc[r] = b;
      for (std::size_t k = 0; k < K; ++k) {
        const unsigned m = bm[k];
        if (!m) continue;
        const __m512 w = expand_row(m, v, vend);
        v += std::popcount(m);
        for (std::size_t r = 0; r < RB; ++r) acc[r] = _mm512_fmadd_ps(_mm512_set1_ps(x[r * K + k]), w, acc[r]);
      }
      for (std::size_t r = 0; r < RB; ++r) {
        if (relu) acc[r] = _mm512_max_ps(acc[r], _mm512_setzero_ps());
        _mm512_mask_storeu_ps(y + r * N, lanes, acc[r]);
      }
    }
    return;
  }
#endif
#if defined(__AVX2__) && defined(__FMA__)
  if constexpr (std::is_base_of_v<xsimd::avx2, Arch>) {
    if constexpr (RB == 1) {
      chunk_row1_avx2<1>(x, K, &v, v, vend, &bm, bias, y, width, relu);
      return;
    }  // RB rows: forward runs 2 to 6 in chunk_rows_avx2, from 7 on the expansion (sparse_expand::use)
  }
#endif
  // Any other architecture: expand into a 16-float row by a scalar loop, then vectors of L lanes.
  using V = xsimd::batch<float, Arch>;
  constexpr std::size_t L = V::size, NV = chunk_width / L;
  alignas(64) float row[chunk_width];
  alignas(64) float bpad[chunk_width] = {};
  std::copy(bias, bias + width, bpad);
  V acc[RB][NV];
  for (std::size_t r = 0; r < RB; ++r)
    for (std::size_t q = 0; q < NV; ++q) acc[r][q] = V::load_aligned(bpad + q * L);
  for (std::size_t k = 0; k < K; ++k) {
    const unsigned m = bm[k];
    if (!m) continue;
    for (std::size_t l = 0; l < chunk_width; ++l) row[l] = (m >> l & 1u) ? *v++ : 0.0f;
    for (std::size_t q = 0; q < NV; ++q) {
      const V w = V::load_aligned(row + q * L);
      for (std::size_t r = 0; r < RB; ++r) acc[r][q] = xsimd::fma(V(x[r * K + k]), w, acc[r][q]);
    }
  }
  for (std::size_t r = 0; r < RB; ++r) {
    alignas(64) float out[chunk_width];
    for (std::size_t q = 0; q < NV; ++q) {
      V s = acc[r][q];
      if (relu) s = xsimd::max(s, V(0.0f));
      s.store_aligned(out + q * L);
    }
    std::copy(out, out + width, y + r * N);
  }
}

}  // namespace detail

// The expander of the panel of columns [j0, j0 + NR) (NR = sparse_expand::panel_width<Arch>(N);
// sparse_expand.hpp): rows [k0, k1) as buf[(k - k0) * NR + j], zero where no weight is kept and
// past N. A panel of whole 16-column chunks (NR = 16 or 32): each chunk row by the expand of the
// forward kernel (AVX-512: one vexpandps; AVX2: two table permutes of plain loads, masked loads
// in the last 16 values), the chunk's values read on
// from where the last block stopped; a panel inside one chunk (NR < 16): one value at a time.
template <class Arch>
struct bitmap_panel {
  std::size_t K, NR, o = 0;
  const float* vend;
  const std::uint16_t* bm[2] = {};
  const float* v[2] = {};
  bitmap_panel(std::size_t k, std::size_t N, const float* values, const std::uint32_t* offsets,
               const std::uint16_t* bitmap, std::size_t j0)
      : K(k), NR(sparse_expand::panel_width<Arch>(N)), vend(values + offsets[chunks(N)]) {
    if (NR < chunk_width) o = j0 % chunk_width;
    for (std::size_t s = 0; s * chunk_width < std::max(NR, chunk_width) && s < 2; ++s) {
      const std::size_t c = j0 / chunk_width + s;
      if (c < chunks(N)) {
        bm[s] = bitmap + c * K;
        v[s] = values + offsets[c];
      }
    }
  }
  void operator()(std::size_t k0, std::size_t k1, float* buf) {
    if (NR < chunk_width) {
      // the panel lies inside chunk 0 of bm, from its column o on
      for (std::size_t k = k0; k < k1; ++k) {
        const unsigned m = bm[0][k];
        for (std::size_t l = 0; l < NR; ++l) {
          const std::size_t bit = o + l;
          buf[(k - k0) * NR + l] = (m >> bit & 1u) ? v[0][std::popcount(m & ((1u << bit) - 1u))] : 0.0f;
        }
        v[0] += std::popcount(m);
      }
      return;
    }
    for (std::size_t s = 0; s * chunk_width < NR; ++s) {
      float* dst = buf + s * chunk_width;
      if (!bm[s]) {
        for (std::size_t k = k0; k < k1; ++k) std::fill(dst + (k - k0) * NR, dst + (k - k0) * NR + chunk_width, 0.0f);
        continue;
      }
      const std::uint16_t* b = bm[s];
      const float* p = v[s];
      std::size_t k = k0;
#if defined(__AVX512F__)
      if constexpr (detail::avx512_v<Arch>) {
        for (; k < k1; ++k) {
          const unsigned m = b[k];
          _mm512_storeu_ps(dst + (k - k0) * NR, detail::expand_row(m, p, vend));
          p += std::popcount(m);
        }
      }
#endif
#if defined(__AVX2__) && defined(__FMA__)
      if constexpr (std::is_base_of_v<xsimd::avx2, Arch>) {
        for (; k < k1 && vend - p >= 16; ++k) {  // plain loads while 16 values are stored after p
          const unsigned m = b[k], lo = m & 0xFFu;
          _mm256_storeu_ps(dst + (k - k0) * NR, detail::expand8u(lo, p));
          _mm256_storeu_ps(dst + (k - k0) * NR + 8, detail::expand8u(m >> 8, p + std::popcount(lo)));
          p += std::popcount(m);
        }
        for (; k < k1; ++k) {
          const unsigned m = b[k], lo = m & 0xFFu;
          _mm256_storeu_ps(dst + (k - k0) * NR, detail::expand8(lo, p));
          _mm256_storeu_ps(dst + (k - k0) * NR + 8, detail::expand8(m >> 8, p + std::popcount(lo)));
          p += std::popcount(m);
        }
      }
#endif
      for (; k < k1; ++k) {
        const unsigned m = b[k];
        for (std::size_t l = 0; l < chunk_width; ++l) dst[(k - k0) * NR + l] = (m >> l & 1u) ? *p++ : 0.0f;
      }
      v[s] = p;
    }
  }
};

// y[batch x N] = x[batch x K] W + bias, relu optional; the scalar reference for types without SIMD.
template <std::size_t K, std::size_t N, class Arch = default_arch, class T>
void forward(const T* x, const T* values, const std::uint32_t* offsets, const std::uint16_t* bitmap, const T* bias,
             T* y, std::size_t batch, bool relu) {
  if constexpr (std::is_same_v<T, float> && simd_v<float, Arch> && chunk_width % xsimd::batch<float, Arch>::size == 0) {
    if (sparse_expand::use<Arch, T>(batch))
      return sparse_expand::forward<K, N, Arch>(x, bias, y, batch, relu, [&](std::size_t j0) {
        return bitmap_panel<Arch>(K, N, values, offsets, bitmap, j0);
      });
    constexpr std::size_t RB = 8;
    const float* vend = values + offsets[chunks(N)];
    std::size_t c0 = 0, b0 = 0;  // chunks below c0 are done for every sample, samples below b0 for every chunk
#if defined(__AVX2__) && defined(__FMA__)
    if constexpr (std::is_base_of_v<xsimd::avx2, Arch> && !detail::avx512_v<Arch>)
      if (batch < RB) {
        if (batch >= 2) {  // 2 to 6 (from bitmap_min_batch_narrow = 7 samples on the expansion runs: sparse_expand::use)
          static_assert(sparse_expand::bitmap_min_batch_narrow <= 7, "sparse::forward: chunk_rows_avx2 runs 6 rows at most");
          auto rows = [&]<std::size_t R>() {
            for (std::size_t c = 0; c < chunks(N); ++c) {  // the R samples share each expanded row
              const std::size_t j0 = c * chunk_width;
              detail::chunk_rows_avx2<R>(x, K, values + offsets[c], vend, bitmap + c * K, bias + j0, y + j0, N,
                                         std::min(chunk_width, N - j0), relu);
            }
          };
          switch (batch) {
            case 2: rows.template operator()<2>(); return;
            case 3: rows.template operator()<3>(); return;
            case 4: rows.template operator()<4>(); return;
            case 5: rows.template operator()<5>(); return;
            default: rows.template operator()<6>(); return;
          }
        }
        // one sample: two chunks at a time share the input's broadcasts
        for (; c0 + 2 <= chunks(N); c0 += 2) {
          const std::size_t j0 = c0 * chunk_width, width = std::min(2 * chunk_width, N - j0);
          const float* v[2] = {values + offsets[c0], values + offsets[c0 + 1]};
          const std::uint16_t* bm[2] = {bitmap + c0 * K, bitmap + (c0 + 1) * K};
          for (std::size_t b = 0; b < batch; ++b)
            detail::chunk_row1_avx2<2, K>(x + b * K, K, v, values, vend, bm, bias + j0, y + b * N + j0, width, relu);
        }
      }
#endif
    std::size_t nb = batch;  // the samples the loop below runs
    if constexpr (detail::avx512_v<Arch>) {
      // the last r = batch % 8 samples as P rows, padded with zeros (scratch of their own): 5 to 7
      // as 8, 3 as 4 (the P-row kernel runs one FMA chain per row and accumulator: as long for 2
      // rows as for 4, and 2 single rows are faster: docs/pruning.md)
      auto padded = [&]<std::size_t P>(std::size_t r) {
        nb = batch - r;
        float* xs = simd::scratch<float, detail::pad_x_tag>(P * K);
        float* ys = simd::scratch<float, detail::pad_y_tag>(P * N);
        std::copy(x + nb * K, x + batch * K, xs);
        std::fill(xs + r * K, xs + P * K, 0.0f);
        for (std::size_t c = 0; c < chunks(N); ++c) {
          const std::size_t j0 = c * chunk_width;
          detail::chunk_rows<Arch, P>(xs, K, values + offsets[c], vend, bitmap + c * K, bias + j0, ys + j0, N,
                                      std::min(chunk_width, N - j0), relu);
        }
        std::copy(ys, ys + r * N, y + nb * N);
      };
      if (batch % RB >= 5) padded.template operator()<RB>(batch % RB);
      if (batch % RB == 3) padded.template operator()<4>(3);
    }
    for (std::size_t c = c0; c < chunks(N); ++c) {
      const std::size_t j0 = c * chunk_width, width = std::min(chunk_width, N - j0);
      const float* v = values + offsets[c];
      const std::uint16_t* bm = bitmap + c * K;
      std::size_t b = b0;
      for (; b + RB <= nb; b += RB)
        detail::chunk_rows<Arch, RB>(x + b * K, K, v, vend, bm, bias + j0, y + b * N + j0, N, width, relu);
      if constexpr (detail::avx512_v<Arch>)  // 4 samples left: they share each expanded row
        if (nb - b == 4) {
          detail::chunk_rows<Arch, 4>(x + b * K, K, v, vend, bm, bias + j0, y + b * N + j0, N, width, relu);
          b += 4;
        }
      for (; b < nb; ++b)
        detail::chunk_rows<Arch, 1>(x + b * K, K, v, vend, bm, bias + j0, y + b * N + j0, N, width, relu);
    }
  } else {
    forward_reference(x, values, offsets, bitmap, bias, y, batch, K, N, relu);
  }
}

// Packs kernel w[K x N] (row-major) where keep[i] != 0 into the layout above;
// values beyond the kept count (up to capacity) are zero. Returns the count kept.
template <class T, class M>
std::size_t pack(const T* w, const M* keep, std::size_t K, std::size_t N, T* values, std::size_t capacity,
                 std::uint32_t* offsets, std::uint16_t* bitmap) {
  std::size_t p = 0;
  for (std::size_t c = 0; c < chunks(N); ++c) {
    offsets[c] = std::uint32_t(p);
    for (std::size_t k = 0; k < K; ++k) {
      unsigned m = 0;
      for (std::size_t l = 0; l < chunk_width && c * chunk_width + l < N; ++l) {
        const std::size_t i = k * N + c * chunk_width + l;
        if (keep[i]) {
          if (p < capacity) values[p] = w[i];
          ++p;
          m |= 1u << l;
        }
      }
      bitmap[c * K + k] = std::uint16_t(m);
    }
  }
  offsets[chunks(N)] = std::uint32_t(p);
  for (std::size_t q = p; q < capacity; ++q) values[q] = T(0);
  return p;
}

// Whether forward and backward can run on an index (one read from a file):
// offsets[0] = 0; the bitmaps of the last chunk mark no column >= N; each
// chunk starts where the one before ends (offsets[c + 1] = offsets[c] + the
// weights chunk c's bitmaps mark); the last ends at most at `capacity` (the
// values stored). Returns "" when so, else the first fault with its chunk, input
// and value.
inline std::string validate(const std::uint32_t* offsets, const std::uint16_t* bitmap, std::size_t K, std::size_t N,
                            std::size_t capacity) {
  auto columns = [&](std::size_t c) {
    return "chunk " + std::to_string(c) + " (columns " + std::to_string(c * chunk_width) + ".." +
           std::to_string(std::min(N, (c + 1) * chunk_width) - 1) + ")";
  };
  if (offsets[0] != 0) return columns(0) + " starts at value " + std::to_string(offsets[0]) + ", not 0";
  for (std::size_t c = 0; c < chunks(N); ++c) {
    const std::size_t width = std::min(chunk_width, N - c * chunk_width);
    std::size_t end = offsets[c];
    for (std::size_t k = 0; k < K; ++k) {
      const unsigned m = bitmap[c * K + k];
      if (m >> width)
        return "the bitmap of input " + std::to_string(k) + " in " + columns(c) + " marks column " +
               std::to_string(c * chunk_width + std::size_t(std::bit_width(m)) - 1) + ", past the " + std::to_string(N) +
               " units";
      end += std::size_t(std::popcount(m));
    }
    if (end > capacity)
      return columns(c) + " marks weights up to value " + std::to_string(end) + ", past the " +
             std::to_string(capacity) + " values stored";
    if (offsets[c + 1] != end)
      return columns(c) + " starts at value " + std::to_string(offsets[c]) + " and marks " +
             std::to_string(end - offsets[c]) + " weights, but the next offset is " + std::to_string(offsets[c + 1]) +
             ", not " + std::to_string(end);
  }
  return {};
}

// ---- the training side (st27, issue 28): a stripped layer's decoded weights and its values' gradient ----
// decode<K, N, Arch>(values, offsets, bitmap, w): w [K x N] = the weights (0 where none is kept), row by
// row, each chunk row one expand (AVX-512: detail::expand_row; AVX2: two detail::expand8) stored whole, from a cursor per
// chunk; gather<K, N, Arch>(w, offsets, bitmap, values): its inverse, values[p] = w at the p-th kept position,
// each chunk row one compress (AVX-512: vcompressps in a register, a masked store of popcount lanes;
// AVX2: a lane permutation per 8-bit mask, compress_lut, and a masked store). float where Arch has
// AVX-512 or AVX2 (xsimd 8.1 has no word for expand or compress); else the scalar loops of
// sparse_kernels<bitmap_index> below. Row-major, so w is written or read once, in order.
#if defined(__AVX512F__)
inline constexpr bool avx512_compiled = true;
#else
inline constexpr bool avx512_compiled = false;
#endif
#if defined(__AVX2__) && defined(__FMA__)
inline constexpr bool avx2_compiled = true;
#else
inline constexpr bool avx2_compiled = false;
#endif
template <class Arch, class T>
inline constexpr bool simd_decode_v =
    std::is_same_v<T, float> && (detail::avx512_v<Arch> ? avx512_compiled
                                                : std::is_base_of_v<xsimd::avx2, Arch> && avx2_compiled);

#if defined(__AVX2__) && defined(__FMA__)
// Per 8-bit mask: lane r takes the lane of the r-th set bit (the rest 0: stored by no mask).
struct compress_tables {
  alignas(32) std::int32_t perm[256][8];
};
constexpr compress_tables make_compress_tables() {
  compress_tables t{};
  for (unsigned m = 0; m < 256; ++m) {
    int r = 0;
    for (int l = 0; l < 8; ++l)
      if (m >> l & 1u) t.perm[m][r++] = l;
  }
  return t;
}
inline constexpr compress_tables compress_lut = make_compress_tables();
// The kept lanes of the 8 values at w (mask m8, only lanes < width read) to v, packed.
inline void compress8(unsigned m8, const float* w, float* v, unsigned width) {
  const __m256i perm = _mm256_load_si256(reinterpret_cast<const __m256i*>(compress_lut.perm[m8]));
  const __m256 row = width >= 8 ? _mm256_loadu_ps(w)
                                : _mm256_maskload_ps(w, _mm256_load_si256(reinterpret_cast<const __m256i*>(
                                                            detail::expand_lut.load[width])));
  _mm256_maskstore_ps(v, _mm256_load_si256(reinterpret_cast<const __m256i*>(detail::expand_lut.load[std::popcount(m8)])),
                      _mm256_permutevar8x32_ps(row, perm));
}
#endif

template <std::size_t K, std::size_t N, class Arch>
void decode(const float* values, const std::uint32_t* offsets, const std::uint16_t* bitmap, float* w) {
  constexpr std::size_t C = chunks(N), tail = N - (C - 1) * chunk_width;
  std::array<const float*, C> v;
  for (std::size_t c = 0; c < C; ++c) v[c] = values + offsets[c];
  [[maybe_unused]] const float* vend = values + offsets[C];
  for (std::size_t k = 0; k < K; ++k)
    for (std::size_t c = 0; c < C; ++c) {
      const unsigned m = bitmap[c * K + k];
      float* out = w + k * N + c * chunk_width;
      const bool whole = c + 1 < C || tail == chunk_width;
#if defined(__AVX512F__)
      if constexpr (detail::avx512_v<Arch>) {
        const __m512 row = detail::expand_row(m, v[c], vend);
        if (whole) _mm512_storeu_ps(out, row);
        else _mm512_mask_storeu_ps(out, __mmask16((1u << tail) - 1u), row);
        v[c] += std::popcount(m);
        continue;
      }
#endif
#if defined(__AVX2__) && defined(__FMA__)
      if constexpr (!detail::avx512_v<Arch>) {
        const unsigned lo = m & 0xFFu;
        const __m256 a = detail::expand8(lo, v[c]), b = detail::expand8(m >> 8, v[c] + std::popcount(lo));
        if (whole) {
          _mm256_storeu_ps(out, a);
          _mm256_storeu_ps(out + 8, b);
        } else {
          const auto mask = [](std::size_t n) {
            return _mm256_load_si256(reinterpret_cast<const __m256i*>(detail::expand_lut.load[std::min<std::size_t>(n, 8)]));
          };
          _mm256_maskstore_ps(out, mask(tail), a);
          if (tail > 8) _mm256_maskstore_ps(out + 8, mask(tail - 8), b);
        }
        v[c] += std::popcount(m);
        continue;
      }
#endif
      (void)m, (void)out, (void)whole;
    }
}

template <std::size_t K, std::size_t N, class Arch>
void gather(const float* w, const std::uint32_t* offsets, const std::uint16_t* bitmap, float* values) {
  constexpr std::size_t C = chunks(N), tail = N - (C - 1) * chunk_width;
  std::array<float*, C> v;
  for (std::size_t c = 0; c < C; ++c) v[c] = values + offsets[c];
  for (std::size_t k = 0; k < K; ++k)
    for (std::size_t c = 0; c < C; ++c) {
      const unsigned m = bitmap[c * K + k];
      const float* in = w + k * N + c * chunk_width;
      const unsigned width = c + 1 < C ? unsigned(chunk_width) : unsigned(tail);
#if defined(__AVX512F__)
      if constexpr (detail::avx512_v<Arch>) {
        const __m512 row = width == chunk_width ? _mm512_loadu_ps(in) : _mm512_maskz_loadu_ps(__mmask16((1u << width) - 1u), in);
        _mm512_mask_storeu_ps(v[c], __mmask16((1u << std::popcount(m)) - 1u), _mm512_maskz_compress_ps(__mmask16(m), row));
        v[c] += std::popcount(m);
        continue;
      }
#endif
#if defined(__AVX2__) && defined(__FMA__)
      if constexpr (!detail::avx512_v<Arch>) {
        const unsigned lo = m & 0xFFu;
        compress8(lo, in, v[c], std::min(width, 8u));
        if (width > 8) compress8(m >> 8, in + 8, v[c] + std::popcount(lo), width - 8);
        v[c] += std::popcount(m);
        continue;
      }
#endif
      (void)m, (void)in, (void)width;
    }
}

}  // namespace ctnn::kernels::cpu::sparse

namespace ctnn::kernels::cpu {
template <>
struct sparse_kernels<bitmap_index> {
  template <std::size_t K, std::size_t N, class Arch, class T>
  static void forward(const bitmap_index& ix, const T* x, const T* values, const T* bias, T* y,
                      std::size_t batch, bool relu, T*) {
    sparse::forward<K, N, Arch>(x, values, ix.offsets, ix.bitmaps, bias, y, batch, relu);
  }
  template <std::size_t K, std::size_t N, class T>
  static void backward(const bitmap_index& ix, const T* x, const T* dz, const T* values, T* dvalues, T* dbias, T* dx,
                       std::size_t batch) {
    sparse::backward_reference(x, dz, values, ix.offsets, ix.bitmaps, dvalues, dbias, dx, batch, K, N);
  }
  template <std::size_t K, std::size_t N, class Arch, class T>
  static void decode(const bitmap_index& ix, const T* values, T* w) {
    if constexpr (sparse::simd_decode_v<Arch, T>) {
      sparse::decode<K, N, Arch>(values, ix.offsets, ix.bitmaps, w);
    } else {
      std::fill(w, w + K * N, T(0));
      for (std::size_t c = 0; c < sparse::chunks(N); ++c) {
        const T* v = values + ix.offsets[c];
        for (std::size_t k = 0; k < K; ++k)
          for (unsigned m = ix.bitmaps[c * K + k]; m; m &= m - 1)
            w[k * N + c * 16 + std::size_t(std::countr_zero(m))] = *v++;
      }
    }
  }
  // The training side (st27, issue 28): values [capacity] = the entries of a dense K x N matrix w at the kept
  // positions (decode's inverse; 0 past the kept ones): a stripped layer's values' gradient from the dense dW.
  template <std::size_t K, std::size_t N, class Arch, class T>
  static void gather(const bitmap_index& ix, const T* w, T* values, std::size_t capacity) {
    if constexpr (sparse::simd_decode_v<Arch, T>) {
      sparse::gather<K, N, Arch>(w, ix.offsets, ix.bitmaps, values);
    } else {
      for (std::size_t c = 0; c < sparse::chunks(N); ++c) {
        T* v = values + ix.offsets[c];
        for (std::size_t k = 0; k < K; ++k)
          for (unsigned m = ix.bitmaps[c * K + k]; m; m &= m - 1)
            *v++ = w[k * N + c * 16 + std::size_t(std::countr_zero(m))];
      }
    }
    std::fill(values + std::min<std::size_t>(ix.offsets[sparse::chunks(N)], capacity), values + capacity, T(0));
  }
};
// Every batch on every architecture: the bitmap kernels measured below dense at 1-16 samples
// (0.28-0.63x at 1, quiet) and their expansion into the GEMM's panels 0.84-0.98x at 64
// (docs/pruning.md, "Decoded weights"): the layout is a file format, the products dense.
template <class Arch>
inline constexpr batch_range decode_batches<bitmap_index, Arch> = every_batch;
}  // namespace ctnn::kernels::cpu
