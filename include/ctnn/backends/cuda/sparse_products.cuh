// ctnn/backends/cuda/sparse_products.cuh — the sparse dense products of every layout on a CUDA device.
//
// ops<cuda<SM>>::sparse_dense_forward / _backward (ops.cuh) run these for an
// index view of kernels/sparse_index.hpp (bitmap_index, csc_index,
// rows_index, nm_index<Nk, M>, block_index<R, C>), whose buffers are device memory (the plan's
// metadata region). The semantics are the CPU op's (backends/cpu/sparse*.hpp):
//   forward:  y[b, j] = bias[j] + sum over unit j's weights p of x[b, k(p)] values[p]
//             (relu optional); one thread per (b, j), weights in the CPU's order;
//   backward: dbias[j] = sum_b dz[b, j] and dvalues[p] = sum_b x[b, k(p)] dz[b, j(p)]
//             (one warp per unit, lanes over the batch, a fixed-order warp sum);
//             dx[b, k] = sum over input k's weights of values[p] dz[b, j(p)] (when dx is
//             not null; one warp per (k, 32 samples), each lane owns one dx element).
// No atomics: every result has one owner and a fixed order (deterministic). A
// value past the weights the index uses keeps its gradient (the CPU writes none).
// Float32 arithmetic for every storage type (types.cuh). Each layout says how
// to walk unit j's weights and input k's weights (sparse_walk<Index> below).
// Simple, untuned kernels (training a stripped model is rare): docs/cuda.md.
#pragma once
#include <cstddef>
#include <cstdint>

#include "../../kernels/sparse_index.hpp"
#include "types.cuh"

namespace ctnn::cuda_kernels {

// How a layout's weights are walked on the device:
//   unit(ix, K, N, j, f)          f(p, k) for each weight p of unit j (input k), ascending
//   input(ix, K, N, k, lane, f)   f(p, j) for each weight p of input k (unit j), j ascending;
//                                 called by all 32 lanes of a warp together (lane: 0..31)
template <class Index>
struct sparse_walk;

// csc and rows store the same: unit j's weights are [starts[j], starts[j + 1]), inputs ascending.
struct sparse_by_unit_walk {
  template <class F>
  __device__ static void unit(const std::uint32_t* starts, const std::uint16_t* in, std::size_t j, F&& f) {
    for (std::uint32_t p = starts[j], e = starts[j + 1]; p < e; ++p) f(std::size_t(p), std::size_t(in[p]));
  }
  // input k's weight in unit j: a binary search of the unit's ascending inputs
  template <class F>
  __device__ static void input(const std::uint32_t* starts, const std::uint16_t* in, std::size_t N, std::size_t k,
                               F&& f) {
    for (std::size_t j = 0; j < N; ++j) {
      std::uint32_t lo = starts[j], hi = starts[j + 1];
      while (lo < hi) {
        const std::uint32_t mid = lo + (hi - lo) / 2;
        if (in[mid] < k) lo = mid + 1;
        else hi = mid;
      }
      if (lo < starts[j + 1] && in[lo] == k) f(std::size_t(lo), j);
    }
  }
};
template <>
struct sparse_walk<kernels::csc_index> {
  template <class F>
  __device__ static void unit(const kernels::csc_index& ix, std::size_t, std::size_t, std::size_t j, F&& f) {
    sparse_by_unit_walk::unit(ix.starts, ix.rows, j, f);
  }
  template <class F>
  __device__ static void input(const kernels::csc_index& ix, std::size_t, std::size_t N, std::size_t k, unsigned, F&& f) {
    sparse_by_unit_walk::input(ix.starts, ix.rows, N, k, f);
  }
};
template <>
struct sparse_walk<kernels::rows_index> {
  template <class F>
  __device__ static void unit(const kernels::rows_index& ix, std::size_t, std::size_t, std::size_t j, F&& f) {
    sparse_by_unit_walk::unit(ix.starts, ix.inputs, j, f);
  }
  template <class F>
  __device__ static void input(const kernels::rows_index& ix, std::size_t, std::size_t N, std::size_t k, unsigned,
                               F&& f) {
    sparse_by_unit_walk::input(ix.starts, ix.inputs, N, k, f);
  }
};

// Bitmap: chunk c = j / 16 holds, input by input, the weights its bitmaps mark; unit j is bit j % 16.
template <>
struct sparse_walk<kernels::bitmap_index> {
  static constexpr std::size_t W = kernels::bitmap_index::chunk_width;
  template <class F>
  __device__ static void unit(const kernels::bitmap_index& ix, std::size_t K, std::size_t, std::size_t j, F&& f) {
    const std::size_t c = j / W;
    const unsigned l = unsigned(j % W), below = (1u << l) - 1u;
    const std::uint16_t* bm = ix.bitmaps + c * K;
    std::size_t p = ix.offsets[c];
    for (std::size_t k = 0; k < K; ++k) {
      const unsigned m = bm[k];
      if (m >> l & 1u) f(p + std::size_t(__popc(m & below)), k);
      p += std::size_t(__popc(m));
    }
  }
  // input k's first weight in chunk c: offsets[c] + the weights of inputs 0..k-1 (the warp counts them)
  template <class F>
  __device__ static void input(const kernels::bitmap_index& ix, std::size_t K, std::size_t N, std::size_t k,
                               unsigned lane, F&& f) {
    const std::size_t chunks = (N + W - 1) / W;
    for (std::size_t c = 0; c < chunks; ++c) {
      const std::uint16_t* bm = ix.bitmaps + c * K;
      unsigned before = 0;
      for (std::size_t q = lane; q < k; q += 32) before += unsigned(__popc(unsigned(bm[q])));
      for (int o = 16; o > 0; o /= 2) before += __shfl_xor_sync(0xffffffffu, before, o);
      std::size_t p = std::size_t(ix.offsets[c]) + before;
      const unsigned m = bm[k];
      for (unsigned l = 0; l < W; ++l)
        if (m >> l & 1u) f(p++, c * W + l);
    }
  }
};

// Blocks: block column jb = j / C holds blocks [starts[jb], starts[jb + 1]), block rows ascending;
// block p's value (r, c) at p R C + r C + c is input rows[p] R + r, unit jb C + c.
template <std::size_t R, std::size_t C>
struct sparse_walk<kernels::block_index<R, C>> {
  template <class F>
  __device__ static void unit(const kernels::block_index<R, C>& ix, std::size_t, std::size_t, std::size_t j, F&& f) {
    const std::size_t jb = j / C, c = j % C;
    for (std::uint32_t p = ix.starts[jb], e = ix.starts[jb + 1]; p < e; ++p)
      for (std::size_t r = 0; r < R; ++r) f(std::size_t(p) * R * C + r * C + c, std::size_t(ix.rows[p]) * R + r);
  }
  // input k's block in block column jb: a binary search of the column's ascending block rows
  template <class F>
  __device__ static void input(const kernels::block_index<R, C>& ix, std::size_t, std::size_t N, std::size_t k,
                               unsigned, F&& f) {
    const std::size_t kb = k / R, r = k % R;
    for (std::size_t jb = 0; jb < N / C; ++jb) {
      std::uint32_t lo = ix.starts[jb], hi = ix.starts[jb + 1];
      while (lo < hi) {
        const std::uint32_t mid = lo + (hi - lo) / 2;
        if (ix.rows[mid] < kb) lo = mid + 1;
        else hi = mid;
      }
      if (lo < ix.starts[jb + 1] && ix.rows[lo] == kb)
        for (std::size_t c = 0; c < C; ++c) f(std::size_t(lo) * R * C + r * C + c, jb * C + c);
    }
  }
};

constexpr std::size_t sparse_code_bits(std::size_t m) {  // bit_width(m - 1)
  std::size_t b = 0;
  while ((std::size_t(1) << b) < m) ++b;
  return b;
}
// N:M: unit j's values are [j U, (j + 1) U), U = K / M Nk; value t of the unit is in group t / Nk.
template <std::size_t Nk, std::size_t M>
struct sparse_walk<kernels::nm_index<Nk, M>> {
  static constexpr std::size_t bits = sparse_code_bits(M);
  __device__ static std::size_t bytes(std::size_t K, std::size_t N) { return (K / M * Nk * N * bits + 7) / 8; }
  template <class F>
  __device__ static void unit(const kernels::nm_index<Nk, M>& ix, std::size_t K, std::size_t N, std::size_t j, F&& f) {
    const std::size_t U = K / M * Nk, n = bytes(K, N);
    for (std::size_t t = 0; t < U; ++t) {
      const std::size_t p = j * U + t;
      f(p, t / Nk * M + kernels::nm_code(ix.codes, n, bits, p));
    }
  }
  template <class F>
  __device__ static void input(const kernels::nm_index<Nk, M>& ix, std::size_t K, std::size_t N, std::size_t k,
                               unsigned, F&& f) {
    const std::size_t U = K / M * Nk, n = bytes(K, N), g = k / M, i = k % M;
    for (std::size_t j = 0; j < N; ++j)
      for (std::size_t s = 0; s < Nk; ++s) {
        const std::size_t p = j * U + g * Nk + s;
        if (kernels::nm_code(ix.codes, n, bits, p) == i) f(p, j);
      }
  }
};

// ---- the kernels (grid-stride: the grid may be capped) ----
template <class Index, class T>
__global__ void sparse_forward(Index ix, const T* x, const T* values, const T* bias, T* y, std::size_t batch,
                               std::size_t K, std::size_t N, bool relu) {
  for (std::size_t i = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; i < batch * N;
       i += std::size_t(gridDim.x) * blockDim.x) {
    const std::size_t b = i / N, j = i % N;
    const T* xb = x + b * K;
    float s = cuda_detail::load(bias[j]);
    sparse_walk<Index>::unit(ix, K, N, j, [&](std::size_t p, std::size_t k) {
      s += cuda_detail::load(xb[k]) * cuda_detail::load(values[p]);
    });
    y[i] = cuda_detail::store<T>(relu ? fmaxf(s, 0.0f) : s);
  }
}

__device__ inline float sparse_warp_sum(float v) {
  for (int o = 16; o > 0; o /= 2) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

// One warp per unit j: dbias[j] and dvalues of unit j's weights.
template <class Index, class T>
__global__ void sparse_backward_weights(Index ix, const T* x, const T* dz, T* dvalues, T* dbias, std::size_t batch,
                                        std::size_t K, std::size_t N) {
  const unsigned lane = threadIdx.x % 32;
  for (std::size_t j = (blockIdx.x * std::size_t(blockDim.x) + threadIdx.x) / 32; j < N;
       j += std::size_t(gridDim.x) * blockDim.x / 32) {
    float sb = 0;
    for (std::size_t b = lane; b < batch; b += 32) sb += cuda_detail::load(dz[b * N + j]);
    sb = sparse_warp_sum(sb);
    if (lane == 0) dbias[j] = cuda_detail::store<T>(sb);
    sparse_walk<Index>::unit(ix, K, N, j, [&](std::size_t p, std::size_t k) {
      float s = 0;
      for (std::size_t b = lane; b < batch; b += 32) s += cuda_detail::load(x[b * K + k]) * cuda_detail::load(dz[b * N + j]);
      s = sparse_warp_sum(s);
      if (lane == 0) dvalues[p] = cuda_detail::store<T>(s);
    });
  }
}

// One warp per (input k, 32 samples): lane owns dx[b, k]. Every lane of a warp runs the walk.
template <class Index, class T>
__global__ void sparse_backward_input(Index ix, const T* dz, const T* values, T* dx, std::size_t batch, std::size_t K,
                                      std::size_t N) {
  const unsigned lane = threadIdx.x % 32;
  const std::size_t tiles = (batch + 31) / 32;
  for (std::size_t w = (blockIdx.x * std::size_t(blockDim.x) + threadIdx.x) / 32; w < K * tiles;
       w += std::size_t(gridDim.x) * blockDim.x / 32) {
    const std::size_t k = w / tiles, b = (w % tiles) * 32 + lane;
    const bool mine = b < batch;
    float s = 0;
    sparse_walk<Index>::input(ix, K, N, k, lane, [&](std::size_t p, std::size_t j) {
      if (mine) s += cuda_detail::load(values[p]) * cuda_detail::load(dz[b * N + j]);
    });
    if (mine) dx[b * K + k] = cuda_detail::store<T>(s);
  }
}

}  // namespace ctnn::cuda_kernels
