// ctnn/backends/cpu/sparse_block.hpp — products of a block-sparse kernel: kept R x C blocks stored whole.
//
// Layout of a K x N kernel W cut into R x C blocks (R inputs by C units; R
// dividing K, C dividing N; layers/sparse_dense_block.hpp): by block column
// (units jb C .. jb C + C - 1), the kept blocks' block rows ascending in
// rows[starts[jb] .. starts[jb + 1]) (block row kb: inputs kb R .. kb R + R - 1),
// block p's R C values at values[p R C], row-major (input, then unit).
//   forward_reference: y = x W + b (relu optional), the scalar loop;
//   forward<K, N, R, C, Arch>: XNNPACK's sparse inference idea: one block row
//                      of C units is C / L vectors (L: the widest lanes of
//                      Arch, or of an architecture it extends, dividing C:
//                      1x8 runs 8-lane vectors on AVX-512, 4x4 4-lane ones),
//                      and each input of a kept block is one broadcast and
//                      one FMA per vector, no gather; samples in groups
//                      sharing each loaded weight vector, a single sample on
//                      4 accumulator chains (4 blocks a step, their block rows
//                      one 8-byte load). C not divisible by 4 lanes, or
//                      types without SIMD: the reference;
//   backward_reference: dvalues, dbias and dx (scalar).
//   pack / validate: the storage from a K x N mask, the check of a file's index.
#pragma once
#include <algorithm>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <type_traits>

#include <xsimd/xsimd.hpp>

#include "../../kernels/sparse_index.hpp"
#include "arch.hpp"
#include "sparse_kernels.hpp"

namespace ctnn::kernels::cpu::block {

template <class T>
void forward_reference(const T* x, const T* values, const std::uint32_t* starts, const std::uint16_t* rows,
                       const T* bias, T* y, std::size_t batch, std::size_t K, std::size_t N, std::size_t R,
                       std::size_t C, bool relu) {
  for (std::size_t b = 0; b < batch; ++b)
    for (std::size_t jb = 0; jb < N / C; ++jb) {
      for (std::size_t c = 0; c < C; ++c) y[b * N + jb * C + c] = bias[jb * C + c];
      for (std::size_t p = starts[jb]; p < starts[jb + 1]; ++p)
        for (std::size_t r = 0; r < R; ++r)
          for (std::size_t c = 0; c < C; ++c)
            y[b * N + jb * C + c] += x[b * K + rows[p] * R + r] * values[(p * R + r) * C + c];
      if (relu)
        for (std::size_t c = 0; c < C; ++c) y[b * N + jb * C + c] = std::max(y[b * N + jb * C + c], T(0));
    }
}

// dz: dL/d(pre-activation) [batch x N]; dvalues, dbias are overwritten; dx (may be null) too.
template <class T>
void backward_reference(const T* x, const T* dz, const T* values, const std::uint32_t* starts,
                        const std::uint16_t* rows, T* dvalues, T* dbias, T* dx, std::size_t batch, std::size_t K,
                        std::size_t N, std::size_t R, std::size_t C) {
  for (std::size_t j = 0; j < N; ++j) {
    T s = 0;
    for (std::size_t b = 0; b < batch; ++b) s += dz[b * N + j];
    dbias[j] = s;
  }
  if (dx) std::fill(dx, dx + batch * K, T(0));
  for (std::size_t jb = 0; jb < N / C; ++jb)
    for (std::size_t p = starts[jb]; p < starts[jb + 1]; ++p)
      for (std::size_t r = 0; r < R; ++r)
        for (std::size_t c = 0; c < C; ++c) {
          const std::size_t k = rows[p] * R + r, j = jb * C + c, v = (p * R + r) * C + c;
          T s = 0;
          for (std::size_t b = 0; b < batch; ++b) {
            s += x[b * K + k] * dz[b * N + j];
            if (dx) dx[b * K + k] += values[v] * dz[b * N + j];
          }
          dvalues[v] = s;
        }
}

namespace detail {
// The architecture whose vectors hold a block row: Arch, or one it extends, with lanes dividing C.
// (xsimd's x86 architectures are ordered by version: a CPU running Arch runs every one below it.)
template <class Arch, class Cand>
constexpr bool runs() {
  if constexpr (!Cand::supported() || !Arch::supported()) return false;
  else return Cand::version() <= Arch::version();
}
template <class Arch, class Cand>
inline constexpr bool runs_v = runs<Arch, Cand>();
template <class A, std::size_t C>
constexpr bool fits() {
  if constexpr (!A::supported()) return false;
  else return C % xsimd::batch<float, A>::size == 0;
}
template <class A, std::size_t C>
inline constexpr bool fits_v = fits<A, C>();
template <class Arch, std::size_t C>
constexpr auto pick() {
  if constexpr (!Arch::supported()) return xsimd::unsupported{};
  else if constexpr (fits_v<Arch, C>) return Arch{};
  else if constexpr (runs_v<Arch, xsimd::fma3<xsimd::avx2>> && fits_v<xsimd::fma3<xsimd::avx2>, C>)
    return xsimd::fma3<xsimd::avx2>{};
  else if constexpr (runs_v<Arch, xsimd::avx2> && fits_v<xsimd::avx2, C>) return xsimd::avx2{};
  else if constexpr (runs_v<Arch, xsimd::sse2> && fits_v<xsimd::sse2, C>) return xsimd::sse2{};
  else return xsimd::unsupported{};
}
template <class Arch, std::size_t C>
using vec_arch = decltype(pick<Arch, C>());

// S samples (K apart) of one block column: acc[s][q] over the column's kept blocks.
template <class A, std::size_t K, std::size_t N, std::size_t R, std::size_t C, std::size_t S>
void column(const float* x, const float* values, std::uint32_t p0, std::uint32_t p1, const std::uint16_t* rows,
            const float* bias, float* y, bool relu) {
  using V = xsimd::batch<float, A>;
  constexpr std::size_t L = V::size, Q = C / L;
  constexpr std::size_t U = S == 1 ? 4 : 1;  // one sample: 4 chains of FMAs
  V acc[U][S][Q];
  for (std::size_t u = 0; u < U; ++u)
    for (std::size_t s = 0; s < S; ++s)
      for (std::size_t q = 0; q < Q; ++q) acc[u][s][q] = u == 0 ? V::load_unaligned(bias + q * L) : V(0.0f);
  // block p's R rows into chain u; xr: its first input
  auto one = [&](std::size_t u, const float* w, const float* xr) {
    for (std::size_t r = 0; r < R; ++r) {
      V wv[Q];
      for (std::size_t q = 0; q < Q; ++q) wv[q] = V::load_unaligned(w + r * C + q * L);
      for (std::size_t s = 0; s < S; ++s) {
        const V xb(xr[s * K + r]);
        for (std::size_t q = 0; q < Q; ++q) acc[u][s][q] = xsimd::fma(xb, wv[q], acc[u][s][q]);
      }
    }
  };
  const float* w = values + std::size_t(p0) * R * C;
  const std::uint16_t* row = rows + p0;
  const std::uint16_t* const end = rows + p1;
  if constexpr (U == 4) {
    // one sample: 4 blocks a step, block p0 + 4 i + u into chain u; their 4 block rows read as one
    // 8-byte load (little-endian) and split in registers: a block costs its weight loads and a
    // broadcast, not a third load for its row (0.66-0.68x the time of 4 row loads, AVX2, loaded)
    for (; row + 4 <= end; row += 4, w += 4 * R * C) {
      std::uint64_t q4;
      if constexpr (std::endian::native == std::endian::little) {
        std::memcpy(&q4, row, sizeof q4);
      } else {
        q4 = std::uint64_t(row[0]) | std::uint64_t(row[1]) << 16 | std::uint64_t(row[2]) << 32 |
             std::uint64_t(row[3]) << 48;
      }
      one(0, w, x + std::size_t(q4 & 0xffff) * R);
      one(1, w + R * C, x + std::size_t(q4 >> 16 & 0xffff) * R);
      one(2, w + 2 * R * C, x + std::size_t(q4 >> 32 & 0xffff) * R);
      one(3, w + 3 * R * C, x + std::size_t(q4 >> 48) * R);
    }
  }
  for (; row < end; ++row, w += R * C) one(0, w, x + std::size_t(*row) * R);
  for (std::size_t s = 0; s < S; ++s)
    for (std::size_t q = 0; q < Q; ++q) {
      V t = acc[0][s][q];
      if constexpr (U == 4) t = (t + acc[1][s][q]) + (acc[2][s][q] + acc[3][s][q]);
      if (relu) t = xsimd::max(t, V(0.0f));
      t.store_unaligned(y + s * N + q * L);
    }
}
}  // namespace detail

// Whether forward<K, N, R, C, Arch> runs vector kernels for T (else the reference).
template <class T, std::size_t C, class Arch>
inline constexpr bool fast_v = std::is_same_v<T, float> && !std::is_same_v<detail::vec_arch<Arch, C>, xsimd::unsupported>;

// y[batch x N] = x[batch x K] W + bias, relu optional.
template <std::size_t K, std::size_t N, std::size_t R, std::size_t C, class Arch = default_arch, class T>
void forward(const T* x, const T* values, const std::uint32_t* starts, const std::uint16_t* rows, const T* bias, T* y,
             std::size_t batch, bool relu) {
  static_assert(K % R == 0 && N % C == 0, "block::forward: R must divide K and C must divide N");
  if constexpr (fast_v<T, C, Arch>) {
    using A = detail::vec_arch<Arch, C>;
    constexpr std::size_t Q = C / xsimd::batch<float, A>::size;
    constexpr std::size_t S = std::max<std::size_t>(1, std::min<std::size_t>(8, 12 / Q));  // accumulators <= 12
    std::size_t b = 0;
    for (; b + S <= batch; b += S)
      for (std::size_t jb = 0; jb < N / C; ++jb)
        detail::column<A, K, N, R, C, S>(x + b * K, values, starts[jb], starts[jb + 1], rows, bias + jb * C,
                                         y + b * N + jb * C, relu);
    for (; b < batch; ++b)
      for (std::size_t jb = 0; jb < N / C; ++jb)
        detail::column<A, K, N, R, C, 1>(x + b * K, values, starts[jb], starts[jb + 1], rows, bias + jb * C,
                                         y + b * N + jb * C, relu);
  } else {
    forward_reference(x, values, starts, rows, bias, y, batch, K, N, R, C, relu);
  }
}

// Packs kernel w[K x N] (row-major): every R x C block holding a weight `keep`
// marks is kept whole (its unmarked weights stored as 0), by block column,
// block rows ascending. Returns the count `keep` marks, or, when the blocks it
// touches hold more than `capacity` blocks' values, that larger count (and
// writes nothing). Values and rows past the kept blocks are 0.
template <class T, class M>
std::size_t pack(const T* w, const M* keep, std::size_t K, std::size_t N, std::size_t R, std::size_t C, T* values,
                 std::size_t capacity, std::uint32_t* starts, std::uint16_t* rows) {
  auto touched = [&](std::size_t kb, std::size_t jb) {
    for (std::size_t r = 0; r < R; ++r)
      for (std::size_t c = 0; c < C; ++c)
        if (keep[(kb * R + r) * N + jb * C + c]) return true;
    return false;
  };
  std::size_t marked = 0, blocks = 0;
  for (std::size_t i = 0; i < K * N; ++i) marked += keep[i] ? 1 : 0;
  for (std::size_t jb = 0; jb < N / C; ++jb)
    for (std::size_t kb = 0; kb < K / R; ++kb) blocks += touched(kb, jb) ? 1 : 0;
  if (blocks > capacity) return std::max(marked, blocks * R * C);
  std::size_t p = 0;
  for (std::size_t jb = 0; jb < N / C; ++jb) {
    starts[jb] = std::uint32_t(p);
    for (std::size_t kb = 0; kb < K / R; ++kb) {
      if (!touched(kb, jb)) continue;
      for (std::size_t r = 0; r < R; ++r)
        for (std::size_t c = 0; c < C; ++c) {
          const std::size_t i = (kb * R + r) * N + jb * C + c;
          values[(p * R + r) * C + c] = keep[i] ? w[i] : T(0);
        }
      rows[p++] = std::uint16_t(kb);
    }
  }
  starts[N / C] = std::uint32_t(p);
  for (std::size_t q = p * R * C; q < capacity * R * C; ++q) values[q] = T(0);
  for (std::size_t q = p; q < capacity; ++q) rows[q] = 0;
  return marked;
}

// Whether forward and backward can run on an index (one read from a file):
// starts[0] = 0, never decreasing, ending at most at `capacity` blocks; block
// rows < K / R, strictly ascending within each block column. "" when so.
inline std::string validate(const std::uint32_t* starts, const std::uint16_t* rows, std::size_t K, std::size_t N,
                            std::size_t R, std::size_t C, std::size_t capacity) {
  if (starts[0] != 0) return "block column 0 starts at block " + std::to_string(starts[0]) + ", not 0";
  for (std::size_t jb = 0; jb < N / C; ++jb) {
    if (starts[jb + 1] < starts[jb])
      return "block column " + std::to_string(jb) + " ends at block " + std::to_string(starts[jb + 1]) +
             ", before it starts (" + std::to_string(starts[jb]) + ")";
    if (starts[jb + 1] > capacity)
      return "block column " + std::to_string(jb) + " ends at block " + std::to_string(starts[jb + 1]) + ", past the " +
             std::to_string(capacity) + " blocks stored";
    for (std::size_t p = starts[jb]; p < starts[jb + 1]; ++p) {
      if (rows[p] >= K / R)
        return "block " + std::to_string(p) + " (block column " + std::to_string(jb) + ") has block row " +
               std::to_string(rows[p]) + ", but the layer has " + std::to_string(K / R);
      if (p > starts[jb] && rows[p] <= rows[p - 1])
        return "block " + std::to_string(p) + " (block column " + std::to_string(jb) + ") has block row " +
               std::to_string(rows[p]) + ", not above the one before (" + std::to_string(rows[p - 1]) + ")";
    }
  }
  return {};
}

}  // namespace ctnn::kernels::cpu::block

namespace ctnn::kernels::cpu {
template <std::size_t R, std::size_t C>
struct sparse_kernels<block_index<R, C>> {
  template <std::size_t K, std::size_t N, class Arch, class T>
  static void forward(const block_index<R, C>& ix, const T* x, const T* values, const T* bias, T* y,
                      std::size_t batch, bool relu, T*) {
    block::forward<K, N, R, C, Arch>(x, values, ix.starts, ix.rows, bias, y, batch, relu);
  }
  template <std::size_t K, std::size_t N, class T>
  static void backward(const block_index<R, C>& ix, const T* x, const T* dz, const T* values, T* dvalues, T* dbias,
                       T* dx, std::size_t batch) {
    block::backward_reference(x, dz, values, ix.starts, ix.rows, dvalues, dbias, dx, batch, K, N, R, C);
  }
};
}  // namespace ctnn::kernels::cpu
