// ctnn/kernels/cpu/sparse_nm.hpp — products of an N:M-sparse kernel packed as values and compact indices.
//
// Layout of a K x N kernel W with Nk weights kept in each group of M
// consecutive inputs of each unit (layers/sparse_dense_nm.hpp; K a multiple
// of M; G = K / M groups, U = G Nk values per unit): value p = j U + g Nk + s
// is unit j's s-th weight of group g (inputs g M .. g M + M - 1), at input
// g M + code(p); code(p) takes `bits` = bit_width(M - 1) bits (2 for M = 4)
// at bit p bits of the metadata, least significant first (a byte stream:
// ceil(N U bits / 8) bytes). A group that keeps fewer than Nk weights is
// padded with zero weights at its lowest unkept inputs.
//   forward_reference: y = x W + b (relu optional), the scalar loop;
//   forward<K, N, Nk, M, Arch>: whole blocks of L samples (L: lanes)
//                      transposed, units in tiles of 4 walking the groups
//                      together (a group's inputs are read from L1), each
//                      weight decoded once for up to 4 blocks of L samples,
//                      one FMA each; the samples left: for 2:4 on AVX-512, per
//                      unit 16 weights at a time cover 32 inputs, which sit
//                      in two registers: their codes (32 bits) become a lane
//                      index (vpsrlvd, vpternlogd) and vpermt2ps picks the
//                      inputs, no gather (x copied to aligned rows; 2 to 8
//                      samples: units 4 at a time, 2 for 8 samples, share
//                      each sample's loads of x, two_of_four_tile);
//                      on AVX2 (up to 15 samples: passes of 8, then the
//                      1 to 7 left together), x is reordered so that two
//                      vpermilps read the codes as they are (8 weights
//                      cover 16 inputs; one sample: units 4 at a time,
//                      two_of_four_avx2_one; 2 to 4: units 2 at a time,
//                      two_of_four_avx2_tile), and from 5 samples on each
//                      unit's 8 weights are expanded in registers into
//                      their 16 input positions (a byte table of vpermilps
//                      indices, unkept lanes cleared) shared by the samples,
//                      two FMAs each (two_of_four_avx2_dense: zero weights
//                      multiplied, as in the dense layer);
//                      otherwise the indices are decoded and x gathered
//                      (xsimd). (Expanding 2:4 weights into the dense GEMM's
//                      panels, as the bitmap layout does at large batches,
//                      measured slower than these kernels at 64 samples on
//                      AVX-512 and AVX2: docs/pruning.md.) Other types: the
//                      reference.
//   backward_reference: dvalues, dbias and dx (scalar).
//   decode_simd / gather_simd (the training side: the weights decoded to the dense
//                      K x N kernel, the values' gradient gathered from the dense
//                      dW; sparse_kernels below): blocks of L units x L values, each
//                      unit's L values one load, transposed in registers; a
//                      group's rows are the value vectors moved (AVX-512: masked
//                      moves, AVX2: blends) where their codes equal the row; float
//                      on AVX-512 and AVX2 with Nk dividing L (2:4 on AVX2:
//                      decode_two_of_four_avx2, compares and ands, the blocks of
//                      values outer), else decode_reference / gather_reference
//                      (scalar, group by group).
// Indices are read as little-endian bytes (x86, AArch64).
#pragma once
#include <algorithm>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>
#include <type_traits>

#include <xsimd/xsimd.hpp>

#include "../../config.hpp"
#include "../../kernels/sparse_index.hpp"
#include "arch.hpp"
#include "sparse_rows.hpp"
#include "sparse_kernels.hpp"

namespace ctnn::kernels::cpu::nm {

constexpr std::size_t code_bits(std::size_t m) { return std::size_t(std::bit_width(m - 1)); }
// Values of a K x N kernel with Nk of every M inputs kept.
constexpr std::size_t capacity(std::size_t K, std::size_t N, std::size_t Nk, std::size_t M) { return K / M * Nk * N; }
constexpr std::size_t meta_bytes(std::size_t K, std::size_t N, std::size_t Nk, std::size_t M) {
  return (capacity(K, N, Nk, M) * code_bits(M) + 7) / 8;
}
constexpr std::size_t scratch_per_sample(std::size_t K, std::size_t N) { return rows::scratch_per_sample(K, N); }

// The code of value p (bits <= 8: it spans at most two bytes).
inline unsigned code(const std::uint8_t* meta, std::size_t bytes, std::size_t bits, std::size_t p) {
  return nm_code(meta, bytes, bits, p);  // kernels/sparse_index.hpp (CUDA decodes with it too)
}

template <std::size_t Nk, std::size_t M, class T>
void forward_reference(const T* x, const T* values, const std::uint8_t* meta, const T* bias, T* y, std::size_t batch,
                       std::size_t K, std::size_t N, bool relu) {
  const std::size_t U = K / M * Nk, bytes = meta_bytes(K, N, Nk, M);
  for (std::size_t b = 0; b < batch; ++b)
    for (std::size_t j = 0; j < N; ++j) {
      T s = bias[j];
      for (std::size_t t = 0; t < U; ++t)
        s += x[b * K + t / Nk * M + code(meta, bytes, code_bits(M), j * U + t)] * values[j * U + t];
      y[b * N + j] = relu ? std::max(s, T(0)) : s;
    }
}

// dz: dL/d(pre-activation) [batch x N]; dvalues, dbias are overwritten; dx (may be null) too.
template <std::size_t Nk, std::size_t M, class T>
void backward_reference(const T* x, const T* dz, const T* values, const std::uint8_t* meta, T* dvalues, T* dbias, T* dx,
                        std::size_t batch, std::size_t K, std::size_t N) {
  const std::size_t U = K / M * Nk, bytes = meta_bytes(K, N, Nk, M);
  if (dx) std::fill(dx, dx + batch * K, T(0));
  for (std::size_t j = 0; j < N; ++j) {
    T sb = 0;
    for (std::size_t b = 0; b < batch; ++b) sb += dz[b * N + j];
    dbias[j] = sb;
    for (std::size_t t = 0; t < U; ++t) {
      const std::size_t p = j * U + t, k = t / Nk * M + code(meta, bytes, code_bits(M), p);
      T s = 0;
      for (std::size_t b = 0; b < batch; ++b) {
        s += x[b * K + k] * dz[b * N + j];
        if (dx) dx[b * K + k] += values[p] * dz[b * N + j];
      }
      dvalues[p] = s;
    }
  }
}

namespace detail {

// The code of value p when codes never straddle bytes (bits dividing 8).
template <std::size_t Bits>
inline unsigned code_in_byte(const std::uint8_t* meta, std::size_t p) {
  static_assert(8 % Bits == 0);
  return (meta[p * Bits / 8] >> (p * Bits % 8)) & ((1u << Bits) - 1u);
}

// Whole blocks of L samples (bp of them) transposed into scratch (xT [K][bp],
// then yT [N][bp]); units in tiles of T = 4 walk the groups together, so a
// group's M input rows serve the tile from L1, and each weight, decoded once,
// multiplies up to 4 blocks of L samples (one FMA each).
template <class Arch, std::size_t K, std::size_t N, std::size_t Nk, std::size_t M>
void grouped(const float* x, std::size_t bp, const float* values, const std::uint8_t* meta,
             std::size_t bytes, const float* bias, float* y, bool relu, float* scratch) {
  using V = xsimd::batch<float, Arch>;
  constexpr std::size_t L = V::size, G = K / M, U = G * Nk, bits = code_bits(M);
  float* xt = scratch;
  float* yt = scratch + K * bp;
  for (std::size_t k = 0; k < K; ++k)  // contiguous writes; the bp rows read stay in L1
    for (std::size_t b = 0; b < bp; ++b) xt[k * bp + b] = x[b * K + k];
  auto at = [&](std::size_t p) {
    if constexpr (8 % bits == 0) return code_in_byte<bits>(meta, p);
    else return code(meta, bytes, bits, p);
  };
  auto tile = [&]<std::size_t T, std::size_t Q>(std::size_t q0, std::size_t j0) {
    V acc[T][Q];
    for (std::size_t u = 0; u < T; ++u)
      for (std::size_t q = 0; q < Q; ++q) acc[u][q] = V(bias[j0 + u]);
    for (std::size_t g = 0; g < G; ++g) {
      const float* xg = xt + g * M * bp + q0 * L;
      for (std::size_t u = 0; u < T; ++u) {
        const std::size_t p = (j0 + u) * U + g * Nk;
        for (std::size_t s = 0; s < Nk; ++s) {
          const float* xr = xg + at(p + s) * bp;
          const V w(values[p + s]);
          for (std::size_t q = 0; q < Q; ++q) acc[u][q] = xsimd::fma(V::load_unaligned(xr + q * L), w, acc[u][q]);
        }
      }
    }
    for (std::size_t u = 0; u < T; ++u)
      for (std::size_t q = 0; q < Q; ++q) {
        if (relu) acc[u][q] = xsimd::max(acc[u][q], V(0.0f));
        acc[u][q].store_unaligned(yt + (j0 + u) * bp + (q0 + q) * L);
      }
  };
  auto units = [&]<std::size_t Q>(std::size_t q0) {
    for (std::size_t j = 0; j < N / 4 * 4; j += 4) tile.template operator()<4, Q>(q0, j);
    for (std::size_t j = N / 4 * 4; j < N; ++j) tile.template operator()<1, Q>(q0, j);
  };
  const std::size_t blocks = bp / L;
  for (std::size_t q0 = 0; q0 < blocks; q0 += 4) {
    switch (std::min<std::size_t>(4, blocks - q0)) {
      case 4: units.template operator()<4>(q0); break;
      case 3: units.template operator()<3>(q0); break;
      case 2: units.template operator()<2>(q0); break;
      default: units.template operator()<1>(q0); break;
    }
  }
  for (std::size_t b = 0; b < bp; ++b)
    for (std::size_t j = 0; j < N; ++j) y[b * N + j] = yt[j * bp + b];
}

// The scratch buffer of simd::scratch (gemm/pack.hpp) the rows of x are copied to: aligned on
// AVX-512, reordered on AVX2 (two_of_four_avx2_one, reorder_avx2) (sparse.hpp uses 10, 11).
inline constexpr int x_tag = 12;

// 32 bits of the metadata from bit `at` (zeros past its end).
inline std::uint32_t bits32(const std::uint8_t* meta, std::size_t bytes, std::size_t at) {
  const std::size_t o = at >> 3;
  std::uint64_t w = 0;
  if (o + 8 <= bytes) std::memcpy(&w, meta + o, 8);
  else if (o < bytes) std::memcpy(&w, meta + o, bytes - o);
  return std::uint32_t(w >> (at & 7));
}

#if defined(__AVX512F__)
// 2:4 on AVX-512: the 2-bit codes of 16 weights as the permute indices of their inputs among 32
// (lane i: input 4 (i / 2) + code i, i.e. (codes >> 2 i) & 3 | base; vpternlogd 0xEA: (a & b) | c),
// and the masks of a row's last, partial block (rem = K % 32 inputs, rem / 2 weights). Shared by
// two_of_four and two_of_four_tile.
template <std::size_t K>
struct two_of_four_decode {
  static constexpr std::size_t rem = K % 32;
  static constexpr __mmask16 tail_w = __mmask16((1u << (rem / 2)) - 1u);
  static constexpr __mmask16 tail_lo = __mmask16(rem >= 16 ? 0xFFFFu : (1u << rem) - 1u);
  static constexpr __mmask16 tail_hi = __mmask16(rem > 16 ? (1u << (rem - 16)) - 1u : 0u);
  const __m512i base = _mm512_setr_epi32(0, 0, 4, 4, 8, 8, 12, 12, 16, 16, 20, 20, 24, 24, 28, 28);
  const __m512i shifts = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
  const __m512i three = _mm512_set1_epi32(3);
  // The indices of the 16 weights whose codes start at bit `at` (whole: all 32 bits lie in meta).
  __m512i lanes(const std::uint8_t* meta, std::size_t bytes, std::size_t at, bool whole) const {
    std::uint32_t c;
    if constexpr (K % 8 == 0) {  // byte-aligned: a broadcast load
      if (whole) std::memcpy(&c, meta + at / 8, 4);
      else c = bits32(meta, bytes, at);
    } else {
      c = bits32(meta, bytes, at);
    }
    return _mm512_ternarylogic_epi32(_mm512_srlv_epi32(_mm512_set1_epi32(int(c)), shifts), three, base, 0xEA);
  }
};

// 2:4 on AVX-512, R samples (K apart): 16 weights cover 32 inputs held in two registers.
template <std::size_t K, std::size_t R>
void two_of_four(const float* x, std::size_t ldx, const float* values, const std::uint8_t* meta, std::size_t bytes,
                 const float* bias, float* y, std::size_t N, bool relu) {
  constexpr std::size_t U = K / 2, nb = K / 32, rem = K % 32;  // rem: a multiple of 4, rem / 2 weights
  constexpr std::size_t C = R == 1 ? 4 : 2;                     // independent chains (blocks per step)
  using D = two_of_four_decode<K>;
  constexpr __mmask16 tail_w = D::tail_w, tail_lo = D::tail_lo, tail_hi = D::tail_hi;
  const D decode;
  auto lanes = [&](std::size_t at, bool whole) { return decode.lanes(meta, bytes, at, whole); };
  auto block = [&](const float* xr, __m512i i, __m512 w, __m512 acc) {
    return _mm512_fmadd_ps(_mm512_permutex2var_ps(_mm512_loadu_ps(xr), i, _mm512_loadu_ps(xr + 16)), w, acc);
  };
  for (std::size_t j = 0; j < N; ++j) {
    const float* v = values + j * U;
    const std::size_t at = j * K;  // 2 bits per weight, K / 2 weights per unit
    __m512 acc[C][R];
    for (std::size_t c = 0; c < C; ++c)
      for (std::size_t r = 0; r < R; ++r) acc[c][r] = _mm512_setzero_ps();
    for (std::size_t b = 0; b < nb / C * C; b += C) {
      __m512i i[C];
      __m512 w[C];
      for (std::size_t c = 0; c < C; ++c) {
        i[c] = lanes(at + 32 * (b + c), true);
        w[c] = _mm512_loadu_ps(v + 16 * (b + c));
      }
      for (std::size_t r = 0; r < R; ++r)
        for (std::size_t c = 0; c < C; ++c) acc[c][r] = block(x + r * ldx + 32 * (b + c), i[c], w[c], acc[c][r]);
    }
    for (std::size_t b = nb / C * C; b < nb; ++b) {
      const __m512i i0 = lanes(at + 32 * b, true);
      const __m512 w0 = _mm512_loadu_ps(v + 16 * b);
      for (std::size_t r = 0; r < R; ++r) acc[0][r] = block(x + r * ldx + 32 * b, i0, w0, acc[0][r]);
    }
    if constexpr (rem != 0) {  // lanes past the unit's weights are zeroed (their codes belong to the next unit)
      const __m512i i0 = lanes(at + 32 * nb, false);
      const __m512 w0 = _mm512_maskz_loadu_ps(tail_w, v + 16 * nb);
      for (std::size_t r = 0; r < R; ++r) {
        const float* xr = x + r * ldx + 32 * nb;
        const __m512 xv = _mm512_maskz_permutex2var_ps(tail_w, _mm512_maskz_loadu_ps(tail_lo, xr), i0,
                                                       _mm512_maskz_loadu_ps(tail_hi, xr + 16));
        acc[1][r] = _mm512_fmadd_ps(xv, w0, acc[1][r]);
      }
    }
    for (std::size_t r = 0; r < R; ++r) {
      __m512 t = _mm512_add_ps(acc[0][r], acc[1][r]);
      if constexpr (C == 4) t = _mm512_add_ps(t, _mm512_add_ps(acc[2][r], acc[3][r]));
      const float s = bias[j] + _mm512_reduce_add_ps(t);
      y[r * N + j] = relu ? std::max(s, 0.0f) : s;
    }
  }
}
#endif

#if defined(__AVX512F__)
// 2:4 on AVX-512, R samples (K apart), T units at a time: each sample's two registers of 32 inputs
// are loaded once for the T units (two_of_four loads them once per unit: at 4 or 8 samples the
// loads, not the permutes or FMAs, bound it); one chain per unit and sample.
template <std::size_t K, std::size_t R, std::size_t T>
void two_of_four_tile(const float* x, std::size_t ldx, const float* values, const std::uint8_t* meta,
                      std::size_t bytes, const float* bias, float* y, std::size_t N, std::size_t j0, bool relu) {
  constexpr std::size_t U = K / 2, nb = K / 32, rem = K % 32;  // rem: a multiple of 4, rem / 2 weights
  using D = two_of_four_decode<K>;
  constexpr __mmask16 tail_w = D::tail_w, tail_lo = D::tail_lo, tail_hi = D::tail_hi;
  const D decode;
  auto lanes = [&](std::size_t at, bool whole) { return decode.lanes(meta, bytes, at, whole); };
  __m512 acc[T][R];
  for (std::size_t u = 0; u < T; ++u)
    for (std::size_t r = 0; r < R; ++r) acc[u][r] = _mm512_setzero_ps();
  for (std::size_t b = 0; b < nb; ++b) {
    __m512i i[T];
    __m512 w[T];
    for (std::size_t u = 0; u < T; ++u) {
      i[u] = lanes((j0 + u) * K + 32 * b, true);  // 2 bits per weight, K / 2 weights per unit
      w[u] = _mm512_loadu_ps(values + (j0 + u) * U + 16 * b);
    }
    for (std::size_t r = 0; r < R; ++r) {
      const __m512 lo = _mm512_loadu_ps(x + r * ldx + 32 * b), hi = _mm512_loadu_ps(x + r * ldx + 32 * b + 16);
      for (std::size_t u = 0; u < T; ++u)
        acc[u][r] = _mm512_fmadd_ps(_mm512_permutex2var_ps(lo, i[u], hi), w[u], acc[u][r]);
    }
  }
  if constexpr (rem != 0) {  // lanes past the unit's weights are zeroed (their codes belong to the next unit)
    __m512i i[T];
    __m512 w[T];
    for (std::size_t u = 0; u < T; ++u) {
      i[u] = lanes((j0 + u) * K + 32 * nb, false);
      w[u] = _mm512_maskz_loadu_ps(tail_w, values + (j0 + u) * U + 16 * nb);
    }
    for (std::size_t r = 0; r < R; ++r) {
      const float* xr = x + r * ldx + 32 * nb;
      const __m512 lo = _mm512_maskz_loadu_ps(tail_lo, xr), hi = _mm512_maskz_loadu_ps(tail_hi, xr + 16);
      for (std::size_t u = 0; u < T; ++u)
        acc[u][r] = _mm512_fmadd_ps(_mm512_maskz_permutex2var_ps(tail_w, lo, i[u], hi), w[u], acc[u][r]);
    }
  }
  for (std::size_t u = 0; u < T; ++u)
    for (std::size_t r = 0; r < R; ++r) {
      const float s = bias[j0 + u] + _mm512_reduce_add_ps(acc[u][r]);
      y[r * N + j0 + u] = relu ? std::max(s, 0.0f) : s;
    }
}

// 2:4 on AVX-512, R samples: units 4 at a time (two_of_four_tile), the last 1 to 3 together.
template <std::size_t K, std::size_t R>
void two_of_four_tiled(const float* x, std::size_t ldx, const float* values, const std::uint8_t* meta,
                       std::size_t bytes, const float* bias, float* y, std::size_t N, bool relu) {
  constexpr std::size_t T = R > 4 ? 2 : 4;  // T R accumulators
  std::size_t j = 0;
  for (; j + T <= N; j += T) two_of_four_tile<K, R, T>(x, ldx, values, meta, bytes, bias, y, N, j, relu);
  switch (N - j) {
    case 3: two_of_four_tile<K, R, 3>(x, ldx, values, meta, bytes, bias, y, N, j, relu); break;
    case 2: two_of_four_tile<K, R, 2>(x, ldx, values, meta, bytes, bias, y, N, j, relu); break;
    case 1: two_of_four_tile<K, R, 1>(x, ldx, values, meta, bytes, bias, y, N, j, relu); break;
    default: break;
  }
}
#endif


#if defined(__AVX2__) && defined(__FMA__)

// The 16 bits of 8 two-bit codes from bit `at` of a 2:4 layer's metadata, broadcast and shifted
// (vpsrlvd by 0, 2, ..., 14) so that lane i holds code i in its two low bits (the AVX2 kernels'
// vpermilps read only those). Byte-aligned when K % 8 == 0: two bytes, read as the low half of a
// 32-bit word broadcast from memory where 4 bytes are stored from there (vpbroadcastd from memory
// is a load; from a register, Intel cores run it and the vmovd before it on port 5 beside the two
// vpermilps; the high codes land in bits the kernels do not read).
template <std::size_t K>
inline __m256i two_of_four_codes_avx2(const std::uint8_t* meta, std::size_t bytes, std::size_t at) {
  std::uint32_t c;
  if constexpr (K % 8 == 0) {
    if (at / 8 + 4 <= bytes) {
      std::int32_t q;
      std::memcpy(&q, meta + at / 8, 4);
      return _mm256_srlv_epi32(_mm256_set1_epi32(q), _mm256_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14));
    }
    std::uint16_t h;
    std::memcpy(&h, meta + at / 8, 2);
    c = h;
  } else {
    c = bits32(meta, bytes, at);
  }
  return _mm256_srlv_epi32(_mm256_set1_epi32(int(c)), _mm256_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14));
}

// 2:4 on AVX2, one sample, units 4 at a time. x is first reordered, in every 16 inputs, as
// (0-3, 8-11 | 4-7, 12-15) (zeros pad the last 16), so that one register holds groups 0 and 2,
// the next 1 and 3; each 128-bit half is one group, and lane i (weight i, group i / 2) takes its
// input with a vpermilps from the register holding its group in that half, which reads only the
// two low bits of the index: the index is the unit's 16 codes shifted (vpsrlvd), no mask, no base.
// A blend joins the two registers' picks. Per 8 weights and unit: a broadcast and a shift of the
// codes, two vpermilps, a blend and an FMA with the weights from memory; the two loads of x
// serve the 4 units.
template <std::size_t K>
void two_of_four_avx2_one(const float* x, const float* values, const std::uint8_t* meta, std::size_t bytes,
                          const float* bias, float* y, std::size_t N, bool relu) {
  constexpr std::size_t U = K / 2, nb = K / 16, rem = K % 16, blocks = (K + 15) / 16;
  float* xs = simd::scratch<float, x_tag>(16 * blocks);
  for (std::size_t b = 0; b < blocks; ++b)
    for (std::size_t i = 0; i < 16; ++i) {
      const std::size_t k = 16 * b + (i & 3) + (i & 4 ? 8 : 0) + (i & 8 ? 4 : 0);
      xs[16 * b + i] = k < K ? x[k] : 0.0f;
    }
  const __m256i shifts = _mm256_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14);  // the tail's codes
  auto codes = [&](std::size_t at) { return two_of_four_codes_avx2<K>(meta, bytes, at); };
  auto pick = [&](std::size_t b, __m256i i) {
    return _mm256_blend_ps(_mm256_permutevar_ps(_mm256_load_ps(xs + 16 * b), i),
                           _mm256_permutevar_ps(_mm256_load_ps(xs + 16 * b + 8), i), 0xCC);
  };
  auto tile = [&]<std::size_t T>(std::size_t j0) {
    __m256 acc[T];
    for (std::size_t u = 0; u < T; ++u) acc[u] = _mm256_setzero_ps();
    for (std::size_t b = 0; b < nb; ++b) {
      const __m256 xa = _mm256_load_ps(xs + 16 * b), xb = _mm256_load_ps(xs + 16 * b + 8);
      for (std::size_t u = 0; u < T; ++u) {
        const __m256i i = codes((j0 + u) * K + 16 * b);  // 2 bits per weight, K / 2 weights per unit
        const __m256 xv = _mm256_blend_ps(_mm256_permutevar_ps(xa, i), _mm256_permutevar_ps(xb, i), 0xCC);
        acc[u] = _mm256_fmadd_ps(xv, _mm256_loadu_ps(values + (j0 + u) * U + 8 * b), acc[u]);
      }
    }
    if constexpr (rem != 0) {  // lanes past the unit's weights are zeroed (their codes belong to the next unit)
      const __m256i wl = _mm256_cmpgt_epi32(_mm256_set1_epi32(int(rem / 2)), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
      for (std::size_t u = 0; u < T; ++u) {
        const __m256i i = _mm256_srlv_epi32(_mm256_set1_epi32(int(bits32(meta, bytes, (j0 + u) * K + 16 * nb))), shifts);
        const __m256 xv = _mm256_and_ps(pick(nb, i), _mm256_castsi256_ps(wl));
        acc[u] = _mm256_fmadd_ps(xv, _mm256_maskload_ps(values + (j0 + u) * U + 8 * nb, wl), acc[u]);
      }
    }
    for (std::size_t u = 0; u < T; ++u) {
      const __m128 h = _mm_add_ps(_mm256_castps256_ps128(acc[u]), _mm256_extractf128_ps(acc[u], 1));
      const __m128 q = _mm_add_ps(h, _mm_movehl_ps(h, h));
      const float s = bias[j0 + u] + _mm_cvtss_f32(_mm_add_ss(q, _mm_shuffle_ps(q, q, 1)));
      y[j0 + u] = relu ? std::max(s, 0.0f) : s;
    }
  };
  const std::size_t n4 = N - N % 4;  // (j + 4 <= N, then j < N: g++ 12 -O3 warned of the second loop's wrap)
  for (std::size_t j = 0; j < n4; j += 4) tile.template operator()<4>(j);
  for (std::size_t j = n4; j < N; ++j) tile.template operator()<1>(j);
}
#endif

#if defined(__AVX2__) && defined(__FMA__)
// R rows of x (K apart) reordered as two_of_four_avx2_one reads them, in every 16 inputs (0-3, 8-11 |
// 4-7, 12-15), zeros past K, into rows of ld = 16 ceil(K / 16) floats (32-byte aligned).
template <std::size_t K, std::size_t R>
const float* reorder_avx2(const float* x, float* xs) {
  constexpr std::size_t nb = K / 16, blocks = (K + 15) / 16, ld = 16 * blocks;
  for (std::size_t r = 0; r < R; ++r) {
    const float* xr = x + r * K;
    float* d = xs + r * ld;
    for (std::size_t b = 0; b < nb; ++b) {
      const __m256 lo = _mm256_loadu_ps(xr + 16 * b), hi = _mm256_loadu_ps(xr + 16 * b + 8);
      _mm256_store_ps(d + 16 * b, _mm256_permute2f128_ps(lo, hi, 0x20));
      _mm256_store_ps(d + 16 * b + 8, _mm256_permute2f128_ps(lo, hi, 0x31));
    }
    for (std::size_t i = 0; i < 16 * (blocks - nb); ++i) {
      const std::size_t k = 16 * nb + (i & 3) + (i & 4 ? 8 : 0) + (i & 8 ? 4 : 0);
      d[16 * nb + i] = k < K ? xr[k] : 0.0f;
    }
  }
  return xs;
}

// 2:4 on AVX2, R samples reordered by reorder_avx2 (rows ld apart), T units from j0: per 8 weights
// and unit one broadcast and shift of the codes and a load of the weights, shared by the R samples;
// per sample two loads of x, shared by the T units; per sample and unit two vpermilps (which read the
// codes as they are, as in two_of_four_avx2_one), a blend and an FMA. (The kernel it replaces picked
// with two vpermps from x as it is and loaded x once per unit: 2 samples took 22-28 us for the MLP
// of bench_pruning, these 17 us.) One chain per unit and sample.
template <std::size_t K, std::size_t R, std::size_t T>
void two_of_four_avx2_tile(const float* xs, const float* values, const std::uint8_t* meta, std::size_t bytes,
                           const float* bias, float* y, std::size_t N, std::size_t j0, bool relu) {
  constexpr std::size_t U = K / 2, nb = K / 16, rem = K % 16, ld = 16 * ((K + 15) / 16);
  const __m256i shifts = _mm256_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14);  // the tail's codes
  auto codes = [&](std::size_t at) { return two_of_four_codes_avx2<K>(meta, bytes, at); };
  __m256 acc[T][R];
  for (std::size_t u = 0; u < T; ++u)
    for (std::size_t r = 0; r < R; ++r) acc[u][r] = _mm256_setzero_ps();
  for (std::size_t b = 0; b < nb; ++b) {
    __m256i i[T];
    __m256 w[T];
    for (std::size_t u = 0; u < T; ++u) {
      i[u] = codes((j0 + u) * K + 16 * b);  // 2 bits per weight, K / 2 weights per unit
      w[u] = _mm256_loadu_ps(values + (j0 + u) * U + 8 * b);
    }
    for (std::size_t r = 0; r < R; ++r) {
      const __m256 xa = _mm256_load_ps(xs + r * ld + 16 * b), xb = _mm256_load_ps(xs + r * ld + 16 * b + 8);
      for (std::size_t u = 0; u < T; ++u) {
        const __m256 xv = _mm256_blend_ps(_mm256_permutevar_ps(xa, i[u]), _mm256_permutevar_ps(xb, i[u]), 0xCC);
        acc[u][r] = _mm256_fmadd_ps(xv, w[u], acc[u][r]);
      }
    }
  }
  if constexpr (rem != 0) {  // lanes past the unit's weights are zeroed (their codes belong to the next unit)
    const __m256i wl = _mm256_cmpgt_epi32(_mm256_set1_epi32(int(rem / 2)), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
    __m256i i[T];
    __m256 w[T];
    for (std::size_t u = 0; u < T; ++u) {
      i[u] = _mm256_srlv_epi32(_mm256_set1_epi32(int(bits32(meta, bytes, (j0 + u) * K + 16 * nb))), shifts);
      w[u] = _mm256_maskload_ps(values + (j0 + u) * U + 8 * nb, wl);
    }
    for (std::size_t r = 0; r < R; ++r) {
      const __m256 xa = _mm256_load_ps(xs + r * ld + 16 * nb), xb = _mm256_load_ps(xs + r * ld + 16 * nb + 8);
      for (std::size_t u = 0; u < T; ++u) {
        const __m256 xv = _mm256_blend_ps(_mm256_permutevar_ps(xa, i[u]), _mm256_permutevar_ps(xb, i[u]), 0xCC);
        acc[u][r] = _mm256_fmadd_ps(_mm256_and_ps(xv, _mm256_castsi256_ps(wl)), w[u], acc[u][r]);
      }
    }
  }
  for (std::size_t u = 0; u < T; ++u)
    for (std::size_t r = 0; r < R; ++r) {
      const __m128 h = _mm_add_ps(_mm256_castps256_ps128(acc[u][r]), _mm256_extractf128_ps(acc[u][r], 1));
      const __m128 q = _mm_add_ps(h, _mm_movehl_ps(h, h));
      const float s = bias[j0 + u] + _mm_cvtss_f32(_mm_add_ss(q, _mm_shuffle_ps(q, q, 1)));
      y[r * N + j0 + u] = relu ? std::max(s, 0.0f) : s;
    }
}

// The vpermilps indices of expand_avx2, per byte of codes (two groups, weights s = 0, 1 and 2, 3 of a
// 128-bit half): at[q][4 g + l] is the weight at position l of group g (s or s + 1 where its code is
// l), -128 where none is (the sign bit, which expand_avx2 turns into a zero).
struct nm_lut {
  alignas(64) std::int8_t at[256][8];
  constexpr nm_lut() : at{} {
    for (unsigned q = 0; q < 256; ++q)
      for (unsigned g = 0; g < 2; ++g)
        for (unsigned l = 0; l < 4; ++l) {
          const unsigned c0 = q >> (4 * g) & 3u, c1 = q >> (4 * g + 2) & 3u;
          at[q][4 * g + l] = c0 == l ? std::int8_t(2 * g) : c1 == l ? std::int8_t(2 * g + 1) : std::int8_t(-128);
        }
  }
};
inline constexpr nm_lut expand_lut_nm{};

// 2:4 on AVX2, unit j's 8 weights of block b (inputs 16 b .. 16 b + 15) expanded into the two
// registers of 16 input positions that match the rows of reorder_avx2, zeros at the unkept positions:
// per register, the indices of its two groups' weights from expand_lut_nm (two 8-byte loads, an
// unpack, a vpmovsxbd), one vpermilps of the weights and a vpsrad + vandnps that zero the unkept
// positions (the sign bit; until branch sparse23 a vblendvps with a zero vector, 3 uops on Intel:
// nm::forward<784, 256> at 6 samples 50.0-51.2 -> 46.4-47.4 us, 8: 61.8-62.1 -> 58.1-59.6, Intel
// Xeon model 207, x86-64-v3, loaded). (Decoding the codes with shifts, shuffles and compares
// measured slower.)
struct expanded_avx2 {
  __m256 a, b;  // inputs (0-3, 8-11) and (4-7, 12-15) of the block, as reorder_avx2 orders x
};
template <std::size_t K>
CTNN_FORCEINLINE expanded_avx2 expand_avx2(const float* values, const std::uint8_t* meta, std::size_t bytes, std::size_t j,
                          std::size_t b) {
  constexpr std::size_t U = K / 2, nb = K / 16;
  const std::size_t at = j * K + 16 * b;  // 2 bits per weight, K / 2 weights per unit
  std::uint32_t c;
  __m256 v;
  if (b < nb) {
    if constexpr (K % 8 == 0) {
      std::uint16_t h;
      std::memcpy(&h, meta + at / 8, 2);
      c = h;
    } else {
      c = bits32(meta, bytes, at);
    }
    v = _mm256_loadu_ps(values + j * U + 8 * b);
  } else {  // the last, partial block: the lanes past the unit's weights are zero
    c = bits32(meta, bytes, at);
    v = _mm256_maskload_ps(values + j * U + 8 * b, _mm256_cmpgt_epi32(_mm256_set1_epi32(int(K % 16 / 2)),
                                                                     _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7)));
  }
  const __m128i q = _mm_unpacklo_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(expand_lut_nm.at[c & 0xFFu])),
                                       _mm_loadl_epi64(reinterpret_cast<const __m128i*>(expand_lut_nm.at[c >> 8 & 0xFFu])));
  const __m256i ca = _mm256_cvtepi8_epi32(q), cb = _mm256_cvtepi8_epi32(_mm_unpackhi_epi64(q, q));
  return {_mm256_andnot_ps(_mm256_castsi256_ps(_mm256_srai_epi32(ca, 31)), _mm256_permutevar_ps(v, ca)),
          _mm256_andnot_ps(_mm256_castsi256_ps(_mm256_srai_epi32(cb, 31)), _mm256_permutevar_ps(v, cb))};
}

// 2:4 on AVX2, R samples reordered by reorder_avx2 (rows ld apart): per unit and block of 16 inputs
// the 8 weights expanded in registers (expand_avx2) and shared by the R samples: two FMAs each, no
// shuffle per sample (two_of_four_avx2_tile: two vpermilps and a blend per sample and 8 weights).
// From 5 samples on (fewer leave the expansion's cost shared by too few). Zero weights are
// multiplied as in the dense layer.
template <std::size_t K, std::size_t R>
void two_of_four_avx2_dense(const float* xs, const float* values, const std::uint8_t* meta, std::size_t bytes,
                            const float* bias, float* y, std::size_t N, bool relu) {
  constexpr std::size_t blocks = (K + 15) / 16, ld = 16 * blocks;
  constexpr std::size_t C = R <= 6 ? 2 : 1;  // chains per sample (C R accumulators of 16 registers)
  for (std::size_t j = 0; j < N; ++j) {
    __m256 acc[C][R];
    for (std::size_t c = 0; c < C; ++c)
      for (std::size_t r = 0; r < R; ++r) acc[c][r] = _mm256_setzero_ps();
    for (std::size_t b = 0; b < blocks; ++b) {
      const expanded_avx2 w = expand_avx2<K>(values, meta, bytes, j, b);
      for (std::size_t r = 0; r < R; ++r) {
        acc[0][r] = _mm256_fmadd_ps(_mm256_load_ps(xs + r * ld + 16 * b), w.a, acc[0][r]);
        acc[C - 1][r] = _mm256_fmadd_ps(_mm256_load_ps(xs + r * ld + 16 * b + 8), w.b, acc[C - 1][r]);
      }
    }
    for (std::size_t r = 0; r < R; ++r) {
      if constexpr (C == 2) acc[0][r] = _mm256_add_ps(acc[0][r], acc[1][r]);
      const __m128 h = _mm_add_ps(_mm256_castps256_ps128(acc[0][r]), _mm256_extractf128_ps(acc[0][r], 1));
      const __m128 q = _mm_add_ps(h, _mm_movehl_ps(h, h));
      const float s = bias[j] + _mm_cvtss_f32(_mm_add_ss(q, _mm_shuffle_ps(q, q, 1)));
      y[r * N + j] = relu ? std::max(s, 0.0f) : s;
    }
  }
}

// 2:4 on AVX2, R samples (2 to 8): x reordered once; 2 to 4 samples: units 2 at a time
// (two_of_four_avx2_tile), the last one alone; 5 to 8: two_of_four_avx2_dense.
template <std::size_t K, std::size_t R>
void two_of_four_avx2_rows(const float* x, const float* values, const std::uint8_t* meta, std::size_t bytes,
                           const float* bias, float* y, std::size_t N, bool relu) {
  static_assert(R >= 2 && R <= 8, "two_of_four_avx2_rows: 2 to 8 samples");
  constexpr std::size_t T = 2;  // T R accumulators
  const float* xs = reorder_avx2<K, R>(x, simd::scratch<float, x_tag>(R * 16 * ((K + 15) / 16)));
  if constexpr (R >= 5) {
    two_of_four_avx2_dense<K, R>(xs, values, meta, bytes, bias, y, N, relu);
    return;
  }
  std::size_t j = 0;
  for (; j + T <= N; j += T) two_of_four_avx2_tile<K, R, T>(xs, values, meta, bytes, bias, y, N, j, relu);
  for (; j < N; ++j) two_of_four_avx2_tile<K, R, 1>(xs, values, meta, bytes, bias, y, N, j, relu);
}
#endif

// Any pattern and architecture, R samples: the indices decoded, x gathered.
template <class Arch, std::size_t R, std::size_t Nk, std::size_t M>
void gathered(const float* x, std::size_t K, const float* values, const std::uint8_t* meta, std::size_t bytes,
              const float* bias, float* y, std::size_t N, bool relu) {
  using V = xsimd::batch<float, Arch>;
  using I = xsimd::batch<std::int32_t, Arch>;
  constexpr std::size_t L = V::size, bits = code_bits(M);
  const std::size_t U = K / M * Nk;
  alignas(64) std::int32_t k[L];
  for (std::size_t j = 0; j < N; ++j) {
    const std::size_t p0 = j * U;
    V acc[R];
    float tail[R];
    for (std::size_t r = 0; r < R; ++r) {
      acc[r] = V(0.0f);
      tail[r] = 0.0f;
    }
    std::size_t t = 0;
    for (; t + L <= U; t += L) {
      for (std::size_t i = 0; i < L; ++i) k[i] = std::int32_t((t + i) / Nk * M + code(meta, bytes, bits, p0 + t + i));
      const I ki = I::load_aligned(k);
      const V w = V::load_unaligned(values + p0 + t);
      for (std::size_t r = 0; r < R; ++r) acc[r] = xsimd::fma(V::gather(x + r * K, ki), w, acc[r]);
    }
    for (; t < U; ++t) {
      const std::size_t kk = t / Nk * M + code(meta, bytes, bits, p0 + t);
      for (std::size_t r = 0; r < R; ++r) tail[r] += x[r * K + kk] * values[p0 + t];
    }
    for (std::size_t r = 0; r < R; ++r) {
      const float s = bias[j] + (xsimd::hadd(acc[r]) + tail[r]);
      y[r * N + j] = relu ? std::max(s, 0.0f) : s;
    }
  }
}

template <std::size_t K, class Arch, std::size_t R, std::size_t Nk, std::size_t M>
void rows_of(const float* x, const float* values, const std::uint8_t* meta, std::size_t bytes,
             const float* bias, float* y, std::size_t N, bool relu) {
#if defined(__AVX512F__)
  if constexpr (rows::detail::avx512_v<Arch> && Nk == 2 && M == 4) {
    // the rows of x 64-byte aligned (copied when not): a load split across two cache lines
    // made these loops up to 1.5 times slower (784 x 256, 8 samples: 54 us against 37 us)
    constexpr std::size_t ldx = (K + 15) / 16 * 16;
    if (K % 16 != 0 || reinterpret_cast<std::uintptr_t>(x) % 64 != 0) {
      float* xa = simd::scratch<float, x_tag>(R * ldx);
      for (std::size_t r = 0; r < R; ++r) std::copy(x + r * K, x + r * K + K, xa + r * ldx);
      x = xa;
    }
    if constexpr (R == 1) two_of_four<K, R>(x, ldx, values, meta, bytes, bias, y, N, relu);
    else two_of_four_tiled<K, R>(x, ldx, values, meta, bytes, bias, y, N, relu);
    return;
  }
#endif
#if defined(__AVX2__) && defined(__FMA__)
  if constexpr (std::is_base_of_v<xsimd::avx2, Arch> && Nk == 2 && M == 4) {
    if constexpr (R == 1) two_of_four_avx2_one<K>(x, values, meta, bytes, bias, y, N, relu);
    else two_of_four_avx2_rows<K, R>(x, values, meta, bytes, bias, y, N, relu);
    return;
  }
#endif
  gathered<Arch, R, Nk, M>(x, K, values, meta, bytes, bias, y, N, relu);
}

}  // namespace detail

// From how many whole blocks of L samples forward runs the transposed kernel (detail::grouped):
// 1 with 32 vector registers (AVX-512), else 2; 2:4 on AVX-512: 4 (64 samples), passes of 8 rows
// (two_of_four_tile) below that (on an Intel Xeon 16 samples took 111.5 us transposed, 15 in
// passes 72.5 us: docs/pruning.md).
template <class Arch, std::size_t Nk = 0, std::size_t M = 0>
inline constexpr std::size_t grouped_min_blocks =
    simd::blocking<float, Arch>::wide ? (Nk == 2 && M == 4 && rows::detail::avx512_v<Arch> ? 4 : 1) : 2;

// y[batch x N] = x[batch x K] W + bias, relu optional; scratch: (K + N) batch values, or null (no
// transposed blocks: the rows paths at every batch; a layer that decodes at every batch declares no
// cache, layers/sparse_dense_nm.hpp).
template <std::size_t K, std::size_t N, std::size_t Nk, std::size_t M, class Arch = default_arch, class T>
void forward(const T* x, const T* values, const std::uint8_t* meta, const T* bias, T* y, std::size_t batch, bool relu,
             T* scratch) {
  static_assert(K % M == 0 && Nk > 0 && Nk < M && M <= 256, "nm::forward: needs 0 < Nk < M <= 256 and M dividing K");
  if constexpr (rows::fast_v<T, Arch>) {
    constexpr std::size_t L = xsimd::batch<float, Arch>::size;
    constexpr std::size_t bytes = meta_bytes(K, N, Nk, M);
    // the transposed blocks from grouped_min_blocks blocks on (AVX2: a single block of 8 samples
    // measured 84 us against 68 us for twice 4 rows, docs/pruning.md); the rest 4, then 3, 2 or 1
    // rows at a time (each decoded weight shared by the rows; 2:4 on AVX-512: 8 first; 2:4 on
    // AVX2: 8, then the 1 to 7 left together, two_of_four_avx2_rows)
    const std::size_t bp = scratch && batch >= grouped_min_blocks<Arch, Nk, M> * L ? batch / L * L : 0;
    if (bp) detail::grouped<Arch, K, N, Nk, M>(x, bp, values, meta, bytes, bias, y, relu, scratch);
    std::size_t b = bp;
#if defined(__AVX2__) && defined(__FMA__)
    if constexpr (std::is_base_of_v<xsimd::avx2, Arch> && !rows::detail::avx512_v<Arch> && Nk == 2 && M == 4) {
      auto rows = [&]<std::size_t R>() {
        detail::rows_of<K, Arch, R, Nk, M>(x + b * K, values, meta, bytes, bias, y + b * N, N, relu);
      };
      for (; b + 8 <= batch; b += 8) rows.template operator()<8>();
      switch (batch - b) {
        case 7: rows.template operator()<7>(); break;
        case 6: rows.template operator()<6>(); break;
        case 5: rows.template operator()<5>(); break;
        case 4: rows.template operator()<4>(); break;
        case 3: rows.template operator()<3>(); break;
        case 2: rows.template operator()<2>(); break;
        case 1: rows.template operator()<1>(); break;
        default: break;
      }
      return;
    }
#endif
#if defined(__AVX512F__)
    if constexpr (rows::detail::avx512_v<Arch> && Nk == 2 && M == 4)
      for (; b + 8 <= batch; b += 8) detail::rows_of<K, Arch, 8, Nk, M>(x + b * K, values, meta, bytes, bias, y + b * N, N, relu);
#endif
    for (; b + 4 <= batch; b += 4) detail::rows_of<K, Arch, 4, Nk, M>(x + b * K, values, meta, bytes, bias, y + b * N, N, relu);
    if (batch - b == 3) detail::rows_of<K, Arch, 3, Nk, M>(x + b * K, values, meta, bytes, bias, y + b * N, N, relu);
    if (batch - b == 2) detail::rows_of<K, Arch, 2, Nk, M>(x + b * K, values, meta, bytes, bias, y + b * N, N, relu);
    if (batch - b == 1) detail::rows_of<K, Arch, 1, Nk, M>(x + b * K, values, meta, bytes, bias, y + b * N, N, relu);
  } else {
    (void)scratch;
    forward_reference<Nk, M>(x, values, meta, bias, y, batch, K, N, relu);
  }
}

// Whether forward and backward can run on an index (one read from a file):
// every position is < M (an input of its own group) and the Nk positions of
// a group strictly ascend (as pack writes them: distinct inputs). Returns ""
// when so, else the first fault with its unit, group, value and position.
inline std::string validate(const std::uint8_t* meta, std::size_t K, std::size_t N, std::size_t Nk, std::size_t M) {
  const std::size_t G = K / M, bytes = meta_bytes(K, N, Nk, M), bits = code_bits(M);
  for (std::size_t j = 0; j < N; ++j)
    for (std::size_t g = 0; g < G; ++g)
      for (std::size_t s = 0; s < Nk; ++s) {
        const std::size_t p = (j * G + g) * Nk + s;
        const unsigned c = code(meta, bytes, bits, p);
        auto where = [&] {
          return "value " + std::to_string(p) + " (unit " + std::to_string(j) + ", inputs " + std::to_string(g * M) +
                 ".." + std::to_string(g * M + M - 1) + ") has position " + std::to_string(c);
        };
        if (c >= M) return where() + ", but a group holds " + std::to_string(M) + " inputs";
        if (s > 0 && c <= code(meta, bytes, bits, p - 1))
          return where() + ", not above the one before it (" + std::to_string(code(meta, bytes, bits, p - 1)) +
                 "): positions ascend within a group";
      }
  return {};
}

// Packs kernel w[K x N] (row-major) where keep[i] != 0 into values
// [capacity(K, N, Nk, M)] and meta [meta_bytes(...)]. Returns the count kept;
// when it exceeds the capacity nothing is written. Throws
// std::invalid_argument naming the unit and inputs when a group keeps more
// than Nk weights (the mask is not Nk:M).
template <std::size_t Nk, std::size_t M, class T, class Mk>
std::size_t pack(const T* w, const Mk* keep, std::size_t K, std::size_t N, T* values, std::uint8_t* meta) {
  static_assert(Nk > 0 && Nk < M && M <= 256, "nm::pack: needs 0 < Nk < M <= 256");
  const std::size_t cap = capacity(K, N, Nk, M), bytes = meta_bytes(K, N, Nk, M), bits = code_bits(M);
  std::size_t kept = 0;
  for (std::size_t i = 0; i < K * N; ++i) kept += keep[i] ? 1 : 0;
  if (kept > cap) return kept;
  for (std::size_t j = 0; j < N; ++j)
    for (std::size_t g = 0; g < K / M; ++g) {
      std::size_t c = 0;
      for (std::size_t i = 0; i < M; ++i) c += keep[(g * M + i) * N + j] ? 1 : 0;
      if (c > Nk)
        throw std::invalid_argument("nm::pack: unit " + std::to_string(j) + " keeps " + std::to_string(c) +
                                    " of the inputs " + std::to_string(g * M) + ".." + std::to_string(g * M + M - 1) +
                                    ", more than " + std::to_string(Nk) + " of " + std::to_string(M));
    }
  std::fill(meta, meta + bytes, std::uint8_t(0));
  std::size_t p = 0;
  for (std::size_t j = 0; j < N; ++j)
    for (std::size_t g = 0; g < K / M; ++g) {
      bool take[256] = {};
      std::size_t c = 0;
      for (std::size_t i = 0; i < M; ++i)
        if (keep[(g * M + i) * N + j]) take[i] = true, ++c;
      for (std::size_t i = 0; i < M && c < Nk; ++i)  // pad with zero weights at the lowest unkept inputs
        if (!take[i]) take[i] = true, ++c;
      for (std::size_t i = 0; i < M; ++i) {
        if (!take[i]) continue;
        const std::size_t k = g * M + i, at = p * bits;
        values[p] = keep[k * N + j] ? w[k * N + j] : T(0);
        meta[at >> 3] |= std::uint8_t(i << (at & 7));
        if ((at & 7) + bits > 8) meta[(at >> 3) + 1] |= std::uint8_t(i >> (8 - (at & 7)));
        ++p;
      }
    }
  return kept;
}


// ---- decode (values -> the dense K x N kernel, 0 where not kept) and gather (its inverse: the
// values at the kept positions of a dense K x N matrix), the training side of a stripped layer
// with decoded weights (sparse_kernels below; layers/sparse_dense.hpp) ----
namespace detail {
// The Nk codes of unit j's group g, the first in the low bits (code_bits(M) each).
template <std::size_t K, std::size_t N, std::size_t Nk, std::size_t M>
unsigned group_codes(const std::uint8_t* meta, std::size_t j, std::size_t g) {
  constexpr std::size_t U = K / M * Nk, bytes = meta_bytes(K, N, Nk, M), bits = code_bits(M);
  if constexpr (Nk * bits <= 17) {  // one 24-bit window
    const std::size_t at = (j * U + g * Nk) * bits, o = at >> 3;
    unsigned c = meta[o];
    if (o + 1 < bytes) c |= unsigned(meta[o + 1]) << 8;
    if (o + 2 < bytes) c |= unsigned(meta[o + 2]) << 16;
    return c >> (at & 7);
  } else {
    static_assert(Nk * bits <= 32, "sparse_nm: the codes of one group must fit 32 bits");
    unsigned c = 0;
    for (std::size_t s = 0; s < Nk; ++s) c |= code(meta, bytes, bits, j * U + g * Nk + s) << (s * bits);
    return c;
  }
}
}  // namespace detail

// The scalar decode of groups [g0, g1) and units [j0, j1): those M (g1 - g0) rows' columns j0..j1 - 1
// zeroed, then the kept values written (group by group: a group's rows stay in L1 while written).
template <std::size_t K, std::size_t N, std::size_t Nk, std::size_t M, class T>
void decode_reference(const std::uint8_t* meta, const T* values, T* w, std::size_t g0, std::size_t g1,
                      std::size_t j0, std::size_t j1) {
  constexpr std::size_t U = K / M * Nk, bits = code_bits(M);
  constexpr unsigned mask = (1u << bits) - 1u;
  for (std::size_t g = g0; g < g1; ++g) {
    T* rows = w + g * M * N;
    for (std::size_t i = 0; i < M; ++i) std::fill(rows + i * N + j0, rows + i * N + j1, T(0));
    for (std::size_t j = j0; j < j1; ++j) {
      unsigned c = detail::group_codes<K, N, Nk, M>(meta, j, g);
      const T* v = values + j * U + g * Nk;
      for (std::size_t s = 0; s < Nk; ++s, c >>= bits) rows[(c & mask) * N + j] = v[s];
    }
  }
}
// The scalar gather of groups [g0, g1) and units [j0, j1).
template <std::size_t K, std::size_t N, std::size_t Nk, std::size_t M, class T>
void gather_reference(const std::uint8_t* meta, const T* w, T* values, std::size_t g0, std::size_t g1,
                      std::size_t j0, std::size_t j1) {
  constexpr std::size_t U = K / M * Nk, bits = code_bits(M);
  constexpr unsigned mask = (1u << bits) - 1u;
  for (std::size_t g = g0; g < g1; ++g) {
    const T* rows = w + g * M * N;
    for (std::size_t j = j0; j < j1; ++j) {
      unsigned c = detail::group_codes<K, N, Nk, M>(meta, j, g);
      T* v = values + j * U + g * Nk;
      for (std::size_t s = 0; s < Nk; ++s, c >>= bits) v[s] = rows[(c & mask) * N + j];
    }
  }
}

namespace detail {
// The vector words decode_simd and gather_simd use: L float lanes, an L x L transposition in
// registers, and pick (a lane of v where the code lane equals r, else acc's). AVX-512: 16 lanes
// (vunpck*, vshuff32x4; a compare into a mask register and a masked move); AVX2: 8 lanes
// (vunpck*, vshufps, vperm2f128; vpcmpeqd and vblendvps).
template <class Arch>
struct nm_lanes;
#if defined(__AVX512F__)
inline constexpr bool nm_avx512_compiled = true;
template <class Arch>
  requires rows::detail::avx512_v<Arch>
struct nm_lanes<Arch> {
  static constexpr std::size_t L = 16, acc_rows = 16;
  using V = __m512;
  using I = __m512i;
  static V load(const float* p) { return _mm512_loadu_ps(p); }
  static V fma(const float* a, V b, V c) { return _mm512_fmadd_ps(_mm512_set1_ps(*a), b, c); }
  static void store(float* p, V v) { _mm512_storeu_ps(p, v); }
  static V zero() { return _mm512_setzero_ps(); }
  static I words(const std::uint32_t* p) { return _mm512_load_si512(p); }
  static I field(I c, unsigned shift, unsigned mask) {
    return _mm512_and_si512(_mm512_srl_epi32(c, _mm_cvtsi32_si128(int(shift))), _mm512_set1_epi32(int(mask)));
  }
  static V pick(V acc, I code, unsigned r, V v) {
    return _mm512_mask_mov_ps(acc, _mm512_cmpeq_epi32_mask(code, _mm512_set1_epi32(int(r))), v);
  }
  static void transpose(V (&r)[16]) {
    __m512 lo[8], hi[8];
    for (std::size_t p = 0; p < 8; ++p) {
      lo[p] = _mm512_unpacklo_ps(r[2 * p], r[2 * p + 1]);  // per 128-bit lane k: r0[4k], r1[4k], r0[4k+1], r1[4k+1]
      hi[p] = _mm512_unpackhi_ps(r[2 * p], r[2 * p + 1]);
    }
    __m512 a[4][4];  // a[q][e], per lane k: rows 4q..4q+3 at column 4k + e
    for (std::size_t q = 0; q < 4; ++q) {
      const __m512d l0 = _mm512_castps_pd(lo[2 * q]), l1 = _mm512_castps_pd(lo[2 * q + 1]);
      const __m512d h0 = _mm512_castps_pd(hi[2 * q]), h1 = _mm512_castps_pd(hi[2 * q + 1]);
      a[q][0] = _mm512_castpd_ps(_mm512_unpacklo_pd(l0, l1));
      a[q][1] = _mm512_castpd_ps(_mm512_unpackhi_pd(l0, l1));
      a[q][2] = _mm512_castpd_ps(_mm512_unpacklo_pd(h0, h1));
      a[q][3] = _mm512_castpd_ps(_mm512_unpackhi_pd(h0, h1));
    }
    for (std::size_t e = 0; e < 4; ++e) {
      const __m512 x = _mm512_shuffle_f32x4(a[0][e], a[1][e], 0x88), y = _mm512_shuffle_f32x4(a[0][e], a[1][e], 0xDD);
      const __m512 z = _mm512_shuffle_f32x4(a[2][e], a[3][e], 0x88), w = _mm512_shuffle_f32x4(a[2][e], a[3][e], 0xDD);
      r[e] = _mm512_shuffle_f32x4(x, z, 0x88);       // column e      (lane 0 of each)
      r[4 + e] = _mm512_shuffle_f32x4(y, w, 0x88);   // column 4 + e  (lane 1)
      r[8 + e] = _mm512_shuffle_f32x4(x, z, 0xDD);   // column 8 + e  (lane 2)
      r[12 + e] = _mm512_shuffle_f32x4(y, w, 0xDD);  // column 12 + e (lane 3)
    }
  }
};
#else
inline constexpr bool nm_avx512_compiled = false;
#endif
#if defined(__AVX2__) && defined(__FMA__)
inline constexpr bool nm_avx2_compiled = true;
template <class Arch>
  requires(!rows::detail::avx512_v<Arch> && rows::detail::avx2_v<Arch>)
struct nm_lanes<Arch> {
  static constexpr std::size_t L = 8, acc_rows = 8;
  using V = __m256;
  using I = __m256i;
  static V load(const float* p) { return _mm256_loadu_ps(p); }
  static V fma(const float* a, V b, V c) { return _mm256_fmadd_ps(_mm256_broadcast_ss(a), b, c); }
  static void store(float* p, V v) { _mm256_storeu_ps(p, v); }
  static V zero() { return _mm256_setzero_ps(); }
  static I words(const std::uint32_t* p) { return _mm256_load_si256(reinterpret_cast<const __m256i*>(p)); }
  static I field(I c, unsigned shift, unsigned mask) {
    return _mm256_and_si256(_mm256_srl_epi32(c, _mm_cvtsi32_si128(int(shift))), _mm256_set1_epi32(int(mask)));
  }
  static V pick(V acc, I code, unsigned r, V v) {
    return _mm256_blendv_ps(acc, v, _mm256_castsi256_ps(_mm256_cmpeq_epi32(code, _mm256_set1_epi32(int(r)))));
  }
  static void transpose(V (&r)[8]) {
    __m256 t[8], s[8];
    for (std::size_t p = 0; p < 4; ++p) {
      t[2 * p] = _mm256_unpacklo_ps(r[2 * p], r[2 * p + 1]);
      t[2 * p + 1] = _mm256_unpackhi_ps(r[2 * p], r[2 * p + 1]);
    }
    for (std::size_t q = 0; q < 2; ++q) {  // rows 4q..4q+3, per 128-bit half h: column 4h + e in s[4q + e]
      s[4 * q] = _mm256_shuffle_ps(t[4 * q], t[4 * q + 2], _MM_SHUFFLE(1, 0, 1, 0));
      s[4 * q + 1] = _mm256_shuffle_ps(t[4 * q], t[4 * q + 2], _MM_SHUFFLE(3, 2, 3, 2));
      s[4 * q + 2] = _mm256_shuffle_ps(t[4 * q + 1], t[4 * q + 3], _MM_SHUFFLE(1, 0, 1, 0));
      s[4 * q + 3] = _mm256_shuffle_ps(t[4 * q + 1], t[4 * q + 3], _MM_SHUFFLE(3, 2, 3, 2));
    }
    for (std::size_t e = 0; e < 4; ++e) {
      r[e] = _mm256_permute2f128_ps(s[e], s[4 + e], 0x20);
      r[4 + e] = _mm256_permute2f128_ps(s[e], s[4 + e], 0x31);
    }
  }
};
#else
inline constexpr bool nm_avx2_compiled = false;
#endif

// Values of a unit per code window: the most (L, halved) whose codes fit 32 bits.
template <std::size_t L, std::size_t Bits>
constexpr std::size_t code_window() {
  std::size_t w = L;
  while (w * Bits > 32) w /= 2;
  return w;
}

#if defined(__AVX2__) && defined(__FMA__)
// 2:4 on AVX2 with K % 8 == 0 (a unit's codes start on a byte): decode_simd's blocks of 8 units x 8
// values (4 groups, 16 rows), cheaper where the generic block spends its uops. The transposition
// takes the 8 units' values as 128-bit halves (vinsertf128 from memory: a load and a uop on any
// port) and transposes 4 x 4 in each half (8 vunpck*/vshufps a half-block, port 5; the generic
// 8 x 8 adds 8 vperm2f128 there). The codes of two blocks are one 32-bit word a unit (8 loads and
// inserts; the generic block stores 8 words to the stack and reloads them as one vector, a load
// that store forwarding cannot serve). A group's two codes ascend (c0 < c1: pack writes them so, validate checks a file's), so
// row 0 is v0 where c0 = 0, row 3 v1 where c1 = 3, and rows 1 and 2 v0 where c0 = i or v1 where
// c1 = i: 6 compares of the masked code fields with constants, 6 ands and 2 ors a group (the
// generic pick: 8 compares and 8 vblendvps, 2-3 uops each on Intel), the same bits as decode_reference.
// The blocks of values are the outer loop: a block's 16 rows are written across all the units before
// the next (the generic order, units outer, walks all K rows N floats apart for each 8 units, and
// its 32-byte stores, half a line each, miss L1; docs/pruning.md, "Training a stripped layer").
template <std::size_t K, std::size_t N>
void decode_two_of_four_avx2(const std::uint8_t* meta, const float* values, float* w) {
  static_assert(K % 8 == 0, "decode_two_of_four_avx2: K % 8 == 0 (byte-aligned codes)");
  constexpr std::size_t L = 8, U = K / 2, JB = N / L * L, TB = U / L * L, unit_bytes = K / 8;
  // the block of units j0.., values t0..: its codes at bits [sh, sh + 16) of each lane of c
  auto block = [&](std::size_t j0, std::size_t t0, __m256i c, int sh) {
    const float* v = values + j0 * U + t0;
    __m256 r[8];
    for (std::size_t h = 0; h < 2; ++h) {  // values t0 + 4 h .. + 3: unit u in the low half, u + 4 the high
      __m256 a[4];
      for (std::size_t u = 0; u < 4; ++u)
        a[u] = _mm256_insertf128_ps(_mm256_castps128_ps256(_mm_loadu_ps(v + u * U + 4 * h)),
                                    _mm_loadu_ps(v + (u + 4) * U + 4 * h), 1);
      const __m256 t0l = _mm256_unpacklo_ps(a[0], a[1]), t0h = _mm256_unpackhi_ps(a[0], a[1]);
      const __m256 t1l = _mm256_unpacklo_ps(a[2], a[3]), t1h = _mm256_unpackhi_ps(a[2], a[3]);
      r[4 * h] = _mm256_shuffle_ps(t0l, t1l, _MM_SHUFFLE(1, 0, 1, 0));
      r[4 * h + 1] = _mm256_shuffle_ps(t0l, t1l, _MM_SHUFFLE(3, 2, 3, 2));
      r[4 * h + 2] = _mm256_shuffle_ps(t0h, t1h, _MM_SHUFFLE(1, 0, 1, 0));
      r[4 * h + 3] = _mm256_shuffle_ps(t0h, t1h, _MM_SHUFFLE(3, 2, 3, 2));
    }  // r[t]: value t0 + t of the 8 units
    for (std::size_t gg = 0; gg < 4; ++gg) {
      const int p0 = sh + int(4 * gg), p1 = p0 + 2;
      const __m256i c0 = _mm256_and_si256(c, _mm256_set1_epi32(3 << p0));
      const __m256i c1 = _mm256_and_si256(c, _mm256_set1_epi32(3 << p1));
      auto is = [](__m256i f, int code) { return _mm256_castsi256_ps(_mm256_cmpeq_epi32(f, _mm256_set1_epi32(code))); };
      const __m256 v0 = r[2 * gg], v1 = r[2 * gg + 1];
      float* rows = w + (t0 / 2 + gg) * 4 * N + j0;
      _mm256_storeu_ps(rows, _mm256_and_ps(v0, is(c0, 0)));
      _mm256_storeu_ps(rows + N, _mm256_or_ps(_mm256_and_ps(v0, is(c0, 1 << p0)), _mm256_and_ps(v1, is(c1, 1 << p1))));
      _mm256_storeu_ps(rows + 2 * N,
                       _mm256_or_ps(_mm256_and_ps(v0, is(c0, 2 << p0)), _mm256_and_ps(v1, is(c1, 2 << p1))));
      _mm256_storeu_ps(rows + 3 * N, _mm256_and_ps(v1, is(c1, 3 << p1)));
    }
  };
  // lane u: the 4 (two blocks) or 2 bytes of unit j0 + u's codes from value t0 on
  auto codes = [&]<std::size_t B>(std::size_t j0, std::size_t t0) {
    const std::uint8_t* m = meta + j0 * unit_bytes + t0 / 4;
    auto at = [&](std::size_t u) {
      std::uint32_t c = 0;
      std::memcpy(&c, m + u * unit_bytes, B);
      return std::int32_t(c);
    };
    return _mm256_setr_epi32(at(0), at(1), at(2), at(3), at(4), at(5), at(6), at(7));
  };
  std::size_t t0 = 0;
  for (; t0 + 2 * L <= TB; t0 += 2 * L)
    for (std::size_t j0 = 0; j0 < JB; j0 += L) {
      const __m256i c = codes.template operator()<4>(j0, t0);
      block(j0, t0, c, 0);
      block(j0, t0 + L, c, 16);
    }
  if (t0 < TB)
    for (std::size_t j0 = 0; j0 < JB; j0 += L) block(j0, t0, codes.template operator()<2>(j0, t0), 0);
}
#endif

#if defined(__AVX512F__)
// 2:4 on AVX-512 with K % 8 == 0 (a unit's codes start on a byte): decode_simd's blocks of 16 units x
// 16 values (8 groups, 32 rows), values outer, with decode_two_of_four_avx2's picks: the block's
// codes one 32-bit word a unit, gathered (vpgatherdd; the generic block stores 16 words to the stack
// and reloads them as one vector, a load that store forwarding cannot serve), and, as a group's two
// codes ascend (c0 < c1), row 0 is v0 where c0 = 0, row 3 v1 where c1 = 3, rows 1 and 2 v0 where
// c0 = i, then v1 where c1 = i: 6 compares into mask registers and 6 masked moves a group (the
// generic pick: 8 and 8), the same bits as decode_reference. The transposition is nm_lanes'.
template <std::size_t K, std::size_t N>
void decode_two_of_four_avx512(const std::uint8_t* meta, const float* values, float* w) {
  static_assert(K % 8 == 0, "decode_two_of_four_avx512: K % 8 == 0 (byte-aligned codes)");
  constexpr std::size_t L = 16, U = K / 2, JB = N / L * L, TB = U / L * L, unit_bytes = K / 8;
  constexpr int ub = int(unit_bytes);
  const __m512i at = _mm512_setr_epi32(0, ub, 2 * ub, 3 * ub, 4 * ub, 5 * ub, 6 * ub, 7 * ub, 8 * ub, 9 * ub, 10 * ub,
                                       11 * ub, 12 * ub, 13 * ub, 14 * ub, 15 * ub);
  for (std::size_t t0 = 0; t0 < TB; t0 += L)
    for (std::size_t j0 = 0; j0 < JB; j0 += L) {
      __m512 r[16];
      for (std::size_t u = 0; u < L; ++u) r[u] = _mm512_loadu_ps(values + (j0 + u) * U + t0);
      nm_lanes<xsimd::avx512bw>::transpose(r);  // r[t]: value t0 + t of the 16 units
      // lane u: unit j0 + u's codes of values t0 .. t0 + 15 (2 bits each, value t0 + t at bit 2 t)
      const __m512i c = _mm512_i32gather_epi32(at, meta + j0 * unit_bytes + t0 / 4, 1);
      for (std::size_t gg = 0; gg < L / 2; ++gg) {
        const int p0 = int(4 * gg), p1 = p0 + 2;
        const __m512i c0 = _mm512_and_si512(c, _mm512_set1_epi32(3 << p0));
        const __m512i c1 = _mm512_and_si512(c, _mm512_set1_epi32(3 << p1));
        auto is = [](__m512i f, int code) { return _mm512_cmpeq_epi32_mask(f, _mm512_set1_epi32(code)); };
        const __m512 v0 = r[2 * gg], v1 = r[2 * gg + 1];
        float* rows = w + (t0 / 2 + gg) * 4 * N + j0;
        _mm512_storeu_ps(rows, _mm512_maskz_mov_ps(is(c0, 0), v0));
        _mm512_storeu_ps(rows + N, _mm512_mask_mov_ps(_mm512_maskz_mov_ps(is(c0, 1 << p0), v0), is(c1, 1 << p1), v1));
        _mm512_storeu_ps(rows + 2 * N,
                         _mm512_mask_mov_ps(_mm512_maskz_mov_ps(is(c0, 2 << p0), v0), is(c1, 2 << p1), v1));
        _mm512_storeu_ps(rows + 3 * N, _mm512_maskz_mov_ps(is(c1, 3 << p1), v1));
      }
    }
}
#endif

// The codes of L units' values [t, t + CW) (CW: code_window), one 32-bit word a unit (lane u: unit
// j0 + u, value t's code in the low bits).
template <std::size_t K, std::size_t N, std::size_t Nk, std::size_t M, std::size_t L>
void code_words(const std::uint8_t* meta, std::size_t j0, std::size_t t, std::uint32_t* out) {
  constexpr std::size_t U = K / M * Nk, bytes = meta_bytes(K, N, Nk, M), bits = code_bits(M);
  for (std::size_t u = 0; u < L; ++u) out[u] = bits32(meta, bytes, ((j0 + u) * U + t) * bits);
}
}  // namespace detail

// Whether decode_simd and gather_simd run for Arch and T (else the references): float, AVX-512 or
// AVX2 compiled and named by Arch, and Nk dividing the lanes (a block of L values holds whole groups).
template <class Arch, class T, std::size_t Nk>
inline constexpr bool simd_decode_v =
    std::is_same_v<T, float> &&
    (rows::detail::avx512_v<Arch> ? detail::nm_avx512_compiled && 16 % Nk == 0
                                  : rows::detail::avx2_v<Arch> && detail::nm_avx2_compiled && 8 % Nk == 0);

// decode in blocks of L units x L values (L / Nk groups: M L / Nk rows of L columns): each unit's L
// values one load, transposed in registers (a vector per value: its L units), then each row of a
// group is a vector of zeros with the group's Nk value vectors moved in where their codes (one 32-bit
// word a unit, shifted) equal the row, stored whole; no zeroing pass. The blocks of values are the
// outer loop: a block's M L / Nk rows are written across all the units before the next (with the
// units outer, each L units walk all K rows N floats apart and the stores miss L1; docs/pruning.md,
// "Training a stripped layer"). 2:4 on AVX2 with
// K % 8 == 0: detail::decode_two_of_four_avx2 (the same blocks and order, fewer uops). The units
// past N / L L and the groups past whole blocks: decode_reference.
template <std::size_t K, std::size_t N, std::size_t Nk, std::size_t M, class Arch>
void decode_simd(const std::uint8_t* meta, const float* values, float* w) {
  using S = detail::nm_lanes<Arch>;
  using V = typename S::V;
  using I = typename S::I;
  constexpr std::size_t L = S::L, G = K / M, U = G * Nk, bits = code_bits(M);
  constexpr std::size_t CW = detail::code_window<L, bits>(), JB = N / L * L, GB = U / L * L / Nk;
  constexpr unsigned mask = (1u << bits) - 1u;
#if defined(__AVX512F__)
  if constexpr (Nk == 2 && M == 4 && K % 8 == 0 && rows::detail::avx512_v<Arch>) {
    detail::decode_two_of_four_avx512<K, N>(meta, values, w);
  } else
#endif
#if defined(__AVX2__) && defined(__FMA__)
  if constexpr (Nk == 2 && M == 4 && K % 8 == 0 && !rows::detail::avx512_v<Arch>) {
    detail::decode_two_of_four_avx2<K, N>(meta, values, w);
  } else
#endif
  {
    alignas(64) std::uint32_t cw[L / CW][L];
    for (std::size_t t0 = 0; t0 < GB * Nk; t0 += L)
      for (std::size_t j0 = 0; j0 < JB; j0 += L) {
        V r[L];
        for (std::size_t u = 0; u < L; ++u) r[u] = S::load(values + (j0 + u) * U + t0);
        S::transpose(r);  // r[t]: value t0 + t of the L units
        for (std::size_t c = 0; c < L / CW; ++c) detail::code_words<K, N, Nk, M, L>(meta, j0, t0 + c * CW, cw[c]);
        for (std::size_t gg = 0; gg < L / Nk; ++gg) {
          I code[Nk];
          for (std::size_t s = 0; s < Nk; ++s) {
            const std::size_t t = gg * Nk + s;
            code[s] = S::field(S::words(cw[t / CW]), unsigned(t % CW * bits), mask);
          }
          float* rows = w + (t0 / Nk + gg) * M * N + j0;
          for (std::size_t i = 0; i < M; ++i) {
            V acc = S::zero();
            for (std::size_t s = 0; s < Nk; ++s) acc = S::pick(acc, code[s], unsigned(i), r[gg * Nk + s]);
            S::store(rows + i * N, acc);
          }
        }
      }
  }
  if constexpr (JB < N) decode_reference<K, N, Nk, M>(meta, values, w, 0, GB, JB, N);
  if constexpr (GB < G) decode_reference<K, N, Nk, M>(meta, values, w, GB, G, 0, N);
}

// gather in the same blocks: per group, each of its M rows one load of L units, moved into the
// value vectors whose codes equal the row; the L value vectors transposed back to L values a unit,
// one store each. The rest: gather_reference.
template <std::size_t K, std::size_t N, std::size_t Nk, std::size_t M, class Arch>
void gather_simd(const std::uint8_t* meta, const float* w, float* values) {
  using S = detail::nm_lanes<Arch>;
  using V = typename S::V;
  using I = typename S::I;
  constexpr std::size_t L = S::L, G = K / M, U = G * Nk, bits = code_bits(M);
  constexpr std::size_t CW = detail::code_window<L, bits>(), JB = N / L * L, GB = U / L * L / Nk;
  constexpr unsigned mask = (1u << bits) - 1u;
  alignas(64) std::uint32_t cw[L / CW][L];
  for (std::size_t j0 = 0; j0 < JB; j0 += L)
    for (std::size_t t0 = 0; t0 < GB * Nk; t0 += L) {
      V r[L];
      for (std::size_t c = 0; c < L / CW; ++c) detail::code_words<K, N, Nk, M, L>(meta, j0, t0 + c * CW, cw[c]);
      for (std::size_t gg = 0; gg < L / Nk; ++gg) {
        I code[Nk];
        for (std::size_t s = 0; s < Nk; ++s) {
          const std::size_t t = gg * Nk + s;
          code[s] = S::field(S::words(cw[t / CW]), unsigned(t % CW * bits), mask);
          r[t] = S::zero();
        }
        const float* rows = w + (t0 / Nk + gg) * M * N + j0;
        for (std::size_t i = 0; i < M; ++i) {
          const V row = S::load(rows + i * N);
          for (std::size_t s = 0; s < Nk; ++s) r[gg * Nk + s] = S::pick(r[gg * Nk + s], code[s], unsigned(i), row);
        }
      }
      S::transpose(r);  // r[u]: unit j0 + u's values t0 .. t0 + L - 1
      for (std::size_t u = 0; u < L; ++u) S::store(values + (j0 + u) * U + t0, r[u]);
    }
  if constexpr (JB < N) gather_reference<K, N, Nk, M>(meta, w, values, 0, GB, JB, N);
  if constexpr (GB < G) gather_reference<K, N, Nk, M>(meta, w, values, GB, G, 0, N);
}


// The groups of a block (L / Nk) whose rows weights_gradient_simd accumulates at once: the most
// that divides them with M of them fitting A accumulators (0: none fits, M > A).
constexpr std::size_t gradient_groups(std::size_t per_block, std::size_t M, std::size_t A) {
  for (std::size_t q = std::min(per_block, A / std::max<std::size_t>(M, 1)); q > 0; --q)
    if (per_block % q == 0) return q;
  return 0;
}
// Whether weights_gradient_simd runs for Arch and T (else the dense dW and gather): decode_simd's
// condition and a group's M rows fitting the accumulators (M <= 16 on AVX-512, 8 on AVX2).
template <class Arch, class T, std::size_t Nk, std::size_t M>
constexpr bool fused_gradient() {
  if constexpr (simd_decode_v<Arch, T, Nk>)
    return gradient_groups(detail::nm_lanes<Arch>::L / Nk, M, detail::nm_lanes<Arch>::acc_rows) > 0;
  else
    return false;
}
template <class Arch, class T, std::size_t Nk, std::size_t M>
inline constexpr bool fused_gradient_v = fused_gradient<Arch, T, Nk, M>();

// The scratch buffer of simd::scratch for the last block's zero-padded columns of x (x_tag: 12).
inline constexpr int gradient_x_tag = 13;

// The values' gradient dvalues = X^T dZ at the kept positions and dbias = dZ's column sums, with no
// dense dW: per block of L units x L values (L / Nk groups), the block's rows of X^T dZ accumulated in
// registers (Q groups, Q M rows, at a time: one load of dZ's L units and Q M broadcast FMAs per
// sample), each value picked from its group's rows by its code (decode_simd's moves), the L value
// vectors transposed and stored (L values a unit). Blocks walk the units inside a block of rows, so
// x's columns and dZ stay in L1; the values past whole blocks run as one more block over x's last
// columns copied with zeros past K; the units past N / L L: scalar sums. dz [batch x N].
template <std::size_t K, std::size_t N, std::size_t Nk, std::size_t M, class Arch>
void weights_gradient_simd(const std::uint8_t* meta, const float* x, const float* dz, float* dvalues, float* dbias,
                           std::size_t batch) {
  using S = detail::nm_lanes<Arch>;
  using V = typename S::V;
  using I = typename S::I;
  constexpr std::size_t L = S::L, G = K / M, U = G * Nk, bits = code_bits(M), GL = L / Nk;
  constexpr std::size_t CW = detail::code_window<L, bits>(), JB = N / L * L, TB = U / L * L;
  constexpr std::size_t Q = gradient_groups(GL, M, S::acc_rows);
  constexpr unsigned mask = (1u << bits) - 1u;
  static_assert(Q > 0, "nm::weights_gradient_simd: a group's rows exceed the accumulators");
  alignas(64) std::uint32_t cw[L / CW][L];
  // the block of units j0.., values t0.. (rows of x from xr, ldx apart: x's, or the padded copy);
  // its L values a unit to out(u)
  auto block = [&](const float* xr, std::size_t ldx, std::size_t j0, std::size_t t0, auto&& out) {
    for (std::size_t c = 0; c < L / CW; ++c) detail::code_words<K, N, Nk, M, L>(meta, j0, t0 + c * CW, cw[c]);
    V r[L];
    for (std::size_t g0 = 0; g0 < GL; g0 += Q) {
      V acc[Q * M];
      for (std::size_t i = 0; i < Q * M; ++i) acc[i] = S::zero();
      for (std::size_t b = 0; b < batch; ++b) {
        const V d = S::load(dz + b * N + j0);
        const float* xb = xr + b * ldx + g0 * M;
        for (std::size_t i = 0; i < Q * M; ++i) acc[i] = S::fma(xb + i, d, acc[i]);
      }
      for (std::size_t gg = 0; gg < Q; ++gg)
        for (std::size_t s = 0; s < Nk; ++s) {
          const std::size_t t = (g0 + gg) * Nk + s;
          const I code = S::field(S::words(cw[t / CW]), unsigned(t % CW * bits), mask);
          V v = S::zero();
          for (std::size_t i = 0; i < M; ++i) v = S::pick(v, code, unsigned(i), acc[gg * M + i]);
          r[t] = v;
        }
    }
    S::transpose(r);  // r[u]: unit j0 + u's values t0 .. t0 + L - 1
    for (std::size_t u = 0; u < L; ++u) out(u, r[u]);
  };
  for (std::size_t t0 = 0; t0 < TB; t0 += L)
    for (std::size_t j0 = 0; j0 < JB; j0 += L)
      block(x + t0 / Nk * M, K, j0, t0, [&](std::size_t u, V v) { S::store(dvalues + (j0 + u) * U + t0, v); });
  if constexpr (TB < U) {  // the last values: x's last K - k0 columns copied, zeros up to a block's rows
    constexpr std::size_t k0 = TB / Nk * M, R = GL * M;
    float* xt = simd::scratch<float, gradient_x_tag>(batch * R);
    for (std::size_t b = 0; b < batch; ++b) {
      std::copy(x + b * K + k0, x + b * K + K, xt + b * R);
      std::fill(xt + b * R + (K - k0), xt + b * R + R, 0.0f);
    }
    alignas(64) float tmp[L];
    for (std::size_t j0 = 0; j0 < JB; j0 += L)
      block(xt, R, j0, TB, [&](std::size_t u, V v) {
        S::store(tmp, v);
        std::copy(tmp, tmp + (U - TB), dvalues + (j0 + u) * U + TB);
      });
  }
  if constexpr (JB < N) {  // the last units: each value's sum
    constexpr std::size_t bytes = meta_bytes(K, N, Nk, M);
    for (std::size_t j = JB; j < N; ++j)
      for (std::size_t t = 0; t < U; ++t) {
        const std::size_t k = t / Nk * M + code(meta, bytes, bits, j * U + t);
        float sum = 0.0f;
        for (std::size_t b = 0; b < batch; ++b) sum += x[b * K + k] * dz[b * N + j];
        dvalues[j * U + t] = sum;
      }
  }
  std::fill(dbias, dbias + N, 0.0f);
  for (std::size_t b = 0; b < batch; ++b)
    for (std::size_t j = 0; j < N; ++j) dbias[j] += dz[b * N + j];
}

}  // namespace ctnn::kernels::cpu::nm

namespace ctnn::kernels::cpu {
template <std::size_t Nk, std::size_t M>
struct sparse_kernels<nm_index<Nk, M>> {
  template <std::size_t K, std::size_t N, class Arch, class T>
  static void forward(const nm_index<Nk, M>& ix, const T* x, const T* values, const T* bias, T* y,
                      std::size_t batch, bool relu, T* scratch) {
    nm::forward<K, N, Nk, M, Arch>(x, values, ix.codes, bias, y, batch, relu, scratch);
  }
  template <std::size_t K, std::size_t N, class T>
  static void backward(const nm_index<Nk, M>& ix, const T* x, const T* dz, const T* values, T* dvalues, T* dbias,
                       T* dx, std::size_t batch) {
    nm::backward_reference<Nk, M>(x, dz, values, ix.codes, dvalues, dbias, dx, batch, K, N);
  }
  // decode and gather (its inverse: values [capacity] = w at the kept positions, 0 past them): for
  // float on AVX-512 and AVX2 (nm::simd_decode_v), blocks of L units x L values transposed in
  // registers (nm::decode_simd, gather_simd); else group of M rows by group, scalar
  // (nm::decode_reference, gather_reference; docs/pruning.md, "Training a stripped layer").
  template <std::size_t K, std::size_t N, class Arch, class T>
  static void decode(const nm_index<Nk, M>& ix, const T* values, T* w) {
    constexpr std::size_t G = K / M;
    if constexpr (nm::simd_decode_v<Arch, T, Nk>)
      nm::decode_simd<K, N, Nk, M, Arch>(ix.codes, values, w);
    else
      nm::decode_reference<K, N, Nk, M>(ix.codes, values, w, 0, G, 0, N);
    std::fill(w + G * M * N, w + K * N, T(0));
  }
  template <std::size_t K, std::size_t N, class Arch, class T>
  static void gather(const nm_index<Nk, M>& ix, const T* w, T* values, std::size_t capacity) {
    constexpr std::size_t G = K / M, U = G * Nk;
    if constexpr (nm::simd_decode_v<Arch, T, Nk>)
      nm::gather_simd<K, N, Nk, M, Arch>(ix.codes, w, values);
    else
      nm::gather_reference<K, N, Nk, M>(ix.codes, w, values, 0, G, 0, N);
    std::fill(values + std::min(capacity, U * N), values + capacity, T(0));
  }
  // Where fused_weights_gradient_v (below) holds: dvalues [capacity] = (X^T dZ) at the kept positions
  // (0 past them) and db, from x and dz without the dense dW (nm::weights_gradient_simd): the
  // backward of a decoding layer (layers/sparse_dense.hpp) in place of dW's GEMM and gather.
  template <std::size_t K, std::size_t N, class Arch, class T>
  static void weights_gradient(const nm_index<Nk, M>& ix, const T* x, const T* dz, T* dvalues, T* db,
                               std::size_t capacity, std::size_t batch) {
    constexpr std::size_t U = K / M * Nk;
    nm::weights_gradient_simd<K, N, Nk, M, Arch>(ix.codes, x, dz, dvalues, db, batch);
    std::fill(dvalues + std::min(capacity, U * N), dvalues + capacity, T(0));
  }
};
template <std::size_t Nk, std::size_t M, std::size_t K, std::size_t N, class Arch, class T>
inline constexpr bool fused_weights_gradient_v<nm_index<Nk, M>, K, N, Arch, T> = nm::fused_gradient_v<Arch, T, Nk, M>;
// Every batch on every architecture: the N:M kernels measured below dense at every batch on AVX2
// and from 4 samples on AVX-512, 0.71-0.79x at 1 there (docs/pruning.md, "Decoded weights").
template <std::size_t Nk, std::size_t M, class Arch>
inline constexpr batch_range decode_batches<nm_index<Nk, M>, Arch> = every_batch;
}  // namespace ctnn::kernels::cpu
