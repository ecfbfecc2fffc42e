// ctnn/kernels/cpu/sparse_rows.hpp — products of a sparse kernel stored per output unit (CSR over the transposed kernel).
//
// Layout of a sparse K x N kernel W (layers/sparse_dense_rows.hpp): unit
// (column) j's weights are values[starts[j] .. starts[j + 1]), their input
// indices in idx[...] (16-bit: K <= 65536), ascending; starts[N] is the
// count stored. The work is proportional to the number of weights:
//   forward_reference: y = x W + b (relu optional), the scalar loop that
//                      defines the product;
//   forward<K, N, Arch>: xsimd. Whole blocks of L samples (L = lanes of the
//                      architecture) are transposed into `scratch` ((K + N)
//                      x batch values), so each weight multiplies L samples
//                      in one FMA, 4 blocks sharing each broadcast weight (a
//                      single block: 4 chains over consecutive weights); from
//                      pad_min samples left on (fewer than L), they run as
//                      one more block padded with zeros (in a scratch of its
//                      own, simd::scratch; on AVX-512 up to pad_half_max
//                      samples as a block of 8 in AVX2 vectors: half the
//                      zeros to transpose); fewer run with gathers of x:
//                      per unit, L weights at a time, one gather of L
//                      inputs per sample (AVX-512 and AVX2: vgatherdps; SSE2:
//                      xsimd's emulated gather), 4 samples sharing each
//                      loaded index vector. Where
//                      sparse_expand::use_per_weight says (as csc): the dense
//                      micro-kernel over the units scattered into its panels
//                      (sparse_expand.hpp). Other
//                      types: the reference.
//   backward_reference: dvalues, dbias and dx (scalar).
// detail::transposed<Arch> is shared with the N:M layout (sparse_nm.hpp): it
// takes the per-unit ranges and the input index of each weight as functions.
#pragma once
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <type_traits>

#include <xsimd/xsimd.hpp>

#include "../../kernels/sparse_index.hpp"
#include "arch.hpp"
#include "sparse_csc.hpp"
#include "sparse_expand.hpp"
#include "sparse_kernels.hpp"

namespace ctnn::kernels::cpu::rows {

// Metadata bytes: starts (uint32, N + 1) then indices (uint16, nnz).
constexpr std::size_t meta_bytes(std::size_t N, std::size_t nnz) { return 4 * (N + 1) + 2 * nnz; }
// The storage is the column layout's (starts = csc's column starts, idx = its
// rows), so the scalar definitions and the scratch size are csc's:
// forward_reference(x, values, starts, idx, bias, y, batch, K, N, relu) and
// backward_reference(x, dz, values, starts, idx, dvalues, dbias, dx, batch, K, N)
// (dz: dL/d(pre-activation) [batch x N]; dvalues, dbias overwritten; dx may be null).
using csc::backward_reference;
using csc::forward_reference;
using csc::scratch_per_sample;
// w [K x N] = the weights decoded to dense, 0 where none is kept (the layers' derived buffer:
// sparse_kernels.hpp, decode_batches).
template <class T>
void decode(const std::uint32_t* starts, const std::uint16_t* idx, const T* values, T* w, std::size_t K,
            std::size_t N) {
  std::fill(w, w + K * N, T(0));
  for (std::size_t j = 0; j < N; ++j)
    for (std::uint32_t p = starts[j]; p < starts[j + 1]; ++p) w[std::size_t(idx[p]) * N + j] = values[p];
}
// decode's inverse (st27, training): values [capacity] = w at the kept positions, 0 past them.
template <class T>
void gather(const std::uint32_t* starts, const std::uint16_t* idx, const T* w, T* values, std::size_t capacity,
            std::size_t N) {
  for (std::size_t j = 0; j < N; ++j)
    for (std::uint32_t p = starts[j]; p < starts[j + 1]; ++p) values[p] = w[std::size_t(idx[p]) * N + j];
  std::fill(values + std::min<std::size_t>(starts[N], capacity), values + capacity, T(0));
}

namespace detail {

template <class Arch>
inline constexpr bool avx512_v = std::is_base_of_v<xsimd::avx512f, Arch>;
template <class Arch>
inline constexpr bool avx2_v = std::is_base_of_v<xsimd::avx2, Arch>;

// L 16-bit indices widened to 32 bits.
template <class Arch>
inline xsimd::batch<std::int32_t, Arch> load_index(const std::uint16_t* p) {
#if defined(__AVX512F__)
  if constexpr (avx512_v<Arch>) return _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
#endif
#if defined(__AVX2__)
  if constexpr (avx2_v<Arch> && !avx512_v<Arch>)
    return _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
#endif
  using I = xsimd::batch<std::int32_t, Arch>;
  alignas(64) std::int32_t k[I::size];
  for (std::size_t i = 0; i < I::size; ++i) k[i] = p[i];
  return I::load_aligned(k);
}

// R samples (rows of x, K apart) of all N units, x gathered: y[r, j] = bias[j] + sum_p x[r, idx[p]] values[p].
template <class Arch, std::size_t R>
void gathered(const float* x, std::size_t K, const float* values, const std::uint32_t* starts, const std::uint16_t* idx,
              const float* bias, float* y, std::size_t N, bool relu) {
#if defined(__AVX512F__)
  if constexpr (avx512_v<Arch>) {
    for (std::size_t j = 0; j < N; ++j) {
      __m512 acc[R], acc2[R];
      for (std::size_t r = 0; r < R; ++r) acc[r] = acc2[r] = _mm512_setzero_ps();
      std::uint32_t p = starts[j];
      const std::uint32_t e = starts[j + 1];
      for (; p + 32 <= e; p += 32) {  // two independent chains
        const __m512i k0 = _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(idx + p)));
        const __m512i k1 = _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(idx + p + 16)));
        const __m512 w0 = _mm512_loadu_ps(values + p), w1 = _mm512_loadu_ps(values + p + 16);
        for (std::size_t r = 0; r < R; ++r) {
          acc[r] = _mm512_fmadd_ps(_mm512_i32gather_ps(k0, x + r * K, 4), w0, acc[r]);
          acc2[r] = _mm512_fmadd_ps(_mm512_i32gather_ps(k1, x + r * K, 4), w1, acc2[r]);
        }
      }
      if (p + 16 <= e) {
        const __m512i k0 = _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(idx + p)));
        const __m512 w0 = _mm512_loadu_ps(values + p);
        for (std::size_t r = 0; r < R; ++r) acc[r] = _mm512_fmadd_ps(_mm512_i32gather_ps(k0, x + r * K, 4), w0, acc[r]);
        p += 16;
      }
      if (p < e) {
        const __mmask16 m = __mmask16((1u << (e - p)) - 1u);
        const __m512i k0 = _mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(m, idx + p));
        const __m512 w0 = _mm512_maskz_loadu_ps(m, values + p);
        for (std::size_t r = 0; r < R; ++r)
          acc2[r] = _mm512_fmadd_ps(_mm512_mask_i32gather_ps(_mm512_setzero_ps(), m, k0, x + r * K, 4), w0, acc2[r]);
      }
      for (std::size_t r = 0; r < R; ++r) {
        const float s = bias[j] + _mm512_reduce_add_ps(_mm512_add_ps(acc[r], acc2[r]));
        y[r * N + j] = relu ? std::max(s, 0.0f) : s;
      }
    }
    return;
  }
#endif
  using V = xsimd::batch<float, Arch>;
  constexpr std::size_t L = V::size;
  for (std::size_t j = 0; j < N; ++j) {
    V acc[R];
    float tail[R];
    for (std::size_t r = 0; r < R; ++r) {
      acc[r] = V(0.0f);
      tail[r] = 0.0f;
    }
    std::uint32_t p = starts[j];
    const std::uint32_t e = starts[j + 1];
    for (; p + L <= e; p += L) {
      const auto k = load_index<Arch>(idx + p);
      const V w = V::load_unaligned(values + p);
      for (std::size_t r = 0; r < R; ++r) acc[r] = xsimd::fma(V::gather(x + r * K, k), w, acc[r]);
    }
    for (; p < e; ++p)
      for (std::size_t r = 0; r < R; ++r) tail[r] += x[r * K + idx[p]] * values[p];
    for (std::size_t r = 0; r < R; ++r) {
      const float s = bias[j] + (xsimd::hadd(acc[r]) + tail[r]);
      y[r * N + j] = relu ? std::max(s, 0.0f) : s;
    }
  }
}

// Whole blocks of L samples (bp = blocks * L of them): xT[k][b] and yT[j][b]
// in scratch ((K + N) bp values); each weight multiplies L samples per FMA,
// 4 blocks at a time sharing the broadcast weight. Unit j's weights are p in
// [begin(j), begin(j + 1)), weight p's input row is row(j, p). Only the first
// nb <= bp samples exist: the others are zeros in xT and are not written back
// (a last block padded: pad_min).
template <class Arch, class Begin, class Row>
void transposed(const float* x, std::size_t K, std::size_t N, std::size_t bp, const float* values, const float* bias,
                float* y, bool relu, float* scratch, Begin begin, Row row, std::size_t nb) {
  using V = xsimd::batch<float, Arch>;
  constexpr std::size_t L = V::size;
  const std::size_t blocks = bp / L;
  float* xt = scratch;
  float* yt = scratch + K * bp;
  for (std::size_t k = 0; k < K; ++k) {  // contiguous writes; the bp rows read stay in L1
    for (std::size_t b = 0; b < nb; ++b) xt[k * bp + b] = x[b * K + k];
    for (std::size_t b = nb; b < bp; ++b) xt[k * bp + b] = 0.0f;
  }
  // Q blocks of one unit from block q0, C accumulator sets over consecutive weights (C FMA chains
  // per block: a single block would otherwise wait on one chain's latency per weight)
  auto unit = [&]<std::size_t Q, std::size_t C>(std::size_t j, std::size_t q0) {
    const std::size_t e = begin(j + 1);
    V acc[C][Q];
    for (std::size_t c = 0; c < C; ++c)
      for (std::size_t q = 0; q < Q; ++q) acc[c][q] = V(c == 0 ? bias[j] : 0.0f);
    std::size_t p = begin(j);
    for (; p + C <= e; p += C)
      for (std::size_t c = 0; c < C; ++c) {
        const V w(values[p + c]);
        const float* xr = xt + std::size_t(row(j, p + c)) * bp + q0 * L;
        for (std::size_t q = 0; q < Q; ++q) acc[c][q] = xsimd::fma(V::load_unaligned(xr + q * L), w, acc[c][q]);
      }
    for (; p < e; ++p) {
      const V w(values[p]);
      const float* xr = xt + std::size_t(row(j, p)) * bp + q0 * L;
      for (std::size_t q = 0; q < Q; ++q) acc[0][q] = xsimd::fma(V::load_unaligned(xr + q * L), w, acc[0][q]);
    }
    for (std::size_t q = 0; q < Q; ++q) {
      V s = acc[0][q];
      for (std::size_t c = 1; c < C; ++c) s += acc[c][q];
      if (relu) s = xsimd::max(s, V(0.0f));
      s.store_unaligned(yt + j * bp + (q0 + q) * L);
    }
  };
  for (std::size_t j = 0; j < N; ++j) {
    std::size_t q0 = 0;
    for (; q0 + 4 <= blocks; q0 += 4) unit.template operator()<4, 2>(j, q0);
    if (blocks - q0 == 3) unit.template operator()<3, 2>(j, q0);
    if (blocks - q0 == 2) unit.template operator()<2, 2>(j, q0);
    if (blocks - q0 == 1) unit.template operator()<1, 4>(j, q0);
  }
  for (std::size_t b = 0; b < nb; ++b)
    for (std::size_t j = 0; j < N; ++j) y[b * N + j] = yt[j * bp + b];
}

// The scratch buffer of simd::scratch a padded last block goes to (sparse_expand uses 8).
inline constexpr int pad_scratch_tag = 9;

}  // namespace detail

// From how many samples left after the whole blocks of L (fewer than L) they run as one block of L
// padded with zeros (the transposing kernel, a whole block's time) instead of one by one with
// gathers of x (the MLP of docs/pruning.md at 88.9-90 % on AVX-512: 2 samples padded 17-19 us,
// 1 sample gathered 11-12 us; on AVX2 14.5-15 us and 10-11 us).
inline constexpr std::size_t pad_min = 2;
// On AVX-512, up to pad_half_max samples left run as one block of 8 padded (8-lane FMAs), not 16.
inline constexpr std::size_t pad_half_max = 8;

// Whether forward<K, N, Arch> runs xsimd kernels for T (else the reference).
template <class T, class Arch>
inline constexpr bool fast_v = std::is_same_v<T, float> && simd_v<float, Arch>;

// y[batch x N] = x[batch x K] W + bias, relu optional. scratch: (K + N) batch
// values (a layer's cache block), used when batch >= L.
template <std::size_t K, std::size_t N, class Arch = default_arch, class T>
void forward(const T* x, const T* values, const std::uint32_t* starts, const std::uint16_t* idx, const T* bias, T* y,
             std::size_t batch, bool relu, T* scratch) {
  if constexpr (fast_v<T, Arch>) {
    if (sparse_expand::use_per_weight<Arch, T>(batch, starts[N], K * N))
      return sparse_expand::forward<K, N, Arch>(x, bias, y, batch, relu, [&](std::size_t j0) {
        return sparse_expand::column_panel<Arch, std::uint16_t>(N, values, starts, idx, j0);
      });
    constexpr std::size_t L = xsimd::batch<float, Arch>::size;
    const std::size_t bp = batch / L * L;
    auto begin = [&](std::size_t j) { return std::size_t(starts[j]); };
    auto row = [&](std::size_t, std::size_t p) { return idx[p]; };
    if (bp) detail::transposed<Arch>(x, K, N, bp, values, bias, y, relu, scratch, begin, row, bp);
    if (batch - bp >= pad_min) {  // the rest as one block of L, padded (its own scratch: the cache holds batch)
      if constexpr (detail::avx512_v<Arch>)
        if (batch - bp <= pad_half_max)  // one block of 8 (AVX2 vectors): half the padding to transpose
          return detail::transposed<xsimd::fma3<xsimd::avx2>>(
              x + bp * K, K, N, 8, values, bias, y + bp * N, relu,
              simd::scratch<float, detail::pad_scratch_tag>((K + N) * 8), begin, row, batch - bp);
      return detail::transposed<Arch>(x + bp * K, K, N, L, values, bias, y + bp * N, relu,
                                      simd::scratch<float, detail::pad_scratch_tag>((K + N) * L), begin, row,
                                      batch - bp);
    }
    std::size_t b = bp;
    for (; b + 4 <= batch; b += 4) detail::gathered<Arch, 4>(x + b * K, K, values, starts, idx, bias, y + b * N, N, relu);
    for (; b < batch; ++b) detail::gathered<Arch, 1>(x + b * K, K, values, starts, idx, bias, y + b * N, N, relu);
  } else {
    (void)scratch;
    forward_reference(x, values, starts, idx, bias, y, batch, K, N, relu);
  }
}

// Packs kernel w[K x N] (row-major) where keep[i] != 0, unit by unit, inputs
// ascending. Returns the count kept; when it exceeds capacity nothing is
// written. Otherwise values and indices past the count (up to capacity) are 0.
template <class T, class M>
std::size_t pack(const T* w, const M* keep, std::size_t K, std::size_t N, T* values, std::size_t capacity,
                 std::uint32_t* starts, std::uint16_t* idx) {
  std::size_t kept = 0;
  for (std::size_t i = 0; i < K * N; ++i) kept += keep[i] ? 1 : 0;
  if (kept > capacity) return kept;
  std::size_t p = 0;
  for (std::size_t j = 0; j < N; ++j) {
    starts[j] = std::uint32_t(p);
    for (std::size_t k = 0; k < K; ++k)
      if (keep[k * N + j]) {
        values[p] = w[k * N + j];
        idx[p++] = std::uint16_t(k);
      }
  }
  starts[N] = std::uint32_t(p);
  for (; p < capacity; ++p) {
    values[p] = T(0);
    idx[p] = 0;
  }
  return kept;
}

}  // namespace ctnn::kernels::cpu::rows

namespace ctnn::kernels::cpu {
namespace csc {
// The column layout's products are the rows layout's (the same storage: column starts, 16-bit rows).
template <std::size_t K, std::size_t N, class Arch = default_arch, class T>
void forward(const T* x, const T* values, const std::uint32_t* col, const std::uint16_t* rows, const T* bias, T* y,
             std::size_t batch, bool relu, T* scratch) {
  rows::forward<K, N, Arch>(x, values, col, rows, bias, y, batch, relu, scratch);
}
}  // namespace csc

// The column layout's products: the rows kernels (csc::forward). (Its own AVX-512 kernels, one
// gather per sample and 16-sample transposes with one FMA chain per block, ran within a few % of
// the rows kernels at batch 1 and slower at a single block: retired.)
template <>
struct sparse_kernels<csc_index> {
  template <std::size_t K, std::size_t N, class Arch, class T>
  static void forward(const csc_index& ix, const T* x, const T* values, const T* bias, T* y,
                      std::size_t batch, bool relu, T* scratch) {
    csc::forward<K, N, Arch>(x, values, ix.starts, ix.rows, bias, y, batch, relu, scratch);
  }
  template <std::size_t K, std::size_t N, class T>
  static void backward(const csc_index& ix, const T* x, const T* dz, const T* values, T* dvalues, T* dbias, T* dx,
                       std::size_t batch) {
    csc::backward_reference(x, dz, values, ix.starts, ix.rows, dvalues, dbias, dx, batch, K, N);
  }
  template <std::size_t K, std::size_t N, class Arch, class T>
  static void decode(const csc_index& ix, const T* values, T* w) {
    rows::decode(ix.starts, ix.rows, values, w, K, N);
  }
  template <std::size_t K, std::size_t N, class Arch, class T>
  static void gather(const csc_index& ix, const T* w, T* values, std::size_t capacity) {
    rows::gather(ix.starts, ix.rows, w, values, capacity, N);
  }
};

template <>
struct sparse_kernels<rows_index> {
  template <std::size_t K, std::size_t N, class Arch, class T>
  static void forward(const rows_index& ix, const T* x, const T* values, const T* bias, T* y,
                      std::size_t batch, bool relu, T* scratch) {
    rows::forward<K, N, Arch>(x, values, ix.starts, ix.inputs, bias, y, batch, relu, scratch);
  }
  template <std::size_t K, std::size_t N, class T>
  static void backward(const rows_index& ix, const T* x, const T* dz, const T* values, T* dvalues, T* dbias, T* dx,
                       std::size_t batch) {
    rows::backward_reference(x, dz, values, ix.starts, ix.inputs, dvalues, dbias, dx, batch, K, N);
  }
  template <std::size_t K, std::size_t N, class Arch, class T>
  static void decode(const rows_index& ix, const T* values, T* w) {
    rows::decode(ix.starts, ix.inputs, values, w, K, N);
  }
  template <std::size_t K, std::size_t N, class Arch, class T>
  static void gather(const rows_index& ix, const T* w, T* values, std::size_t capacity) {
    rows::gather(ix.starts, ix.inputs, w, values, capacity, N);
  }
};
// csc and rows (one storage, the same kernels' speed): decoded at 1-4 samples on AVX-512 (the
// 8-lane block 0.45-0.77x dense at 2-4, 0.74-1.03x at 1; 0.98-1.3x at 5-8) and at 1 elsewhere (AVX2:
// the gathers 0.49-0.83x at 1, quiet; 1.0-1.4x from 2 on, loaded) (docs/pruning.md, "Decoded
// weights"); their kernels above. (The base-class test: an AVX2 build cannot name AVX-512 vectors.)
template <class Arch>
inline constexpr batch_range decode_batches_per_weight =
    std::is_base_of_v<xsimd::avx512f, Arch> ? batch_range{1, 5} : batch_range{1, 2};
template <class Arch>
inline constexpr batch_range decode_batches<csc_index, Arch> = decode_batches_per_weight<Arch>;
template <class Arch>
inline constexpr batch_range decode_batches<rows_index, Arch> = decode_batches_per_weight<Arch>;
}  // namespace ctnn::kernels::cpu
