// ctnn/kernels/tiled_gemm.hpp — the tile loop of ctnn's own dense GEMM with a rule epilogue.
//
// y[m, N] = e.forward(x[m, K] W[K, N] + b[N]), row-major, float accumulators.
// One block of gemm_tile::threads threads computes a BM x BN tile of y: per BK
// slice of K it stages x's and W's tiles in shared memory (stage; zeros past
// m, K, N), every thread adds its TM x TN register block (multiply), and at the
// end each thread applies the rule e (kernels/functors.hpp: a rule or a
// chain<F...>) to its sums plus the bias and stores them once (finish).
// Blocks cover columns along x and rows along y; a grid of fewer row blocks
// strides over the rest (row_blocks). The phases are host-device so a CPU
// test runs them block by block, thread by thread (tests/kernels/
// test_tiled_gemm.cpp); backends/cuda/gemm_epilogue.cuh launches them with
// __syncthreads between stage and multiply. load / store convert the storage
// type to and from float. docs/cuda.md ("What fuses where").
#pragma once
#include <cstddef>

#include "../config.hpp"

namespace ctnn::kernels {

struct gemm_tile {
  static constexpr unsigned BM = 64, BN = 64, BK = 16;  // a block's tile of y; the K slice per stage
  static constexpr unsigned TX = 16, TY = 16, threads = TX * TY;
  static constexpr unsigned TM = BM / TY, TN = BN / TX;  // each thread's register block
  static constexpr unsigned a_pitch = BM + 1;            // shared A tile, stored k-major, padded
  static constexpr std::size_t max_grid_y = 65535;
  static_assert(BM * BK % threads == 0 && BK * BN % threads == 0 && threads % BK == 0 && threads % BN == 0);

  using a_tile = float[BK][a_pitch];  // a_tile[k][r] = x[row0 + r, k0 + k]
  using b_tile = float[BK][BN];       // b_tile[k][c] = W[k0 + k, col0 + c]
  using accumulators = float[TM][TN];

  static constexpr std::size_t blocks(std::size_t n, unsigned b) { return (n + b - 1) / b; }
  static constexpr std::size_t grid_x(std::size_t N) { return blocks(N, BN); }
  static constexpr std::size_t grid_y(std::size_t m) {
    const std::size_t b = blocks(m, BM);
    return b == 0 ? 1 : b < max_grid_y ? b : max_grid_y;
  }
  static constexpr std::size_t row_blocks(std::size_t m) { return blocks(m, BM); }

  // Thread t's register block: output (i, j) lies at tile row row(t, i), tile column col(t, j)
  // (rows TY apart, columns TX apart: a warp's stores are contiguous, its shared reads broadcast).
  CTNN_HOST_DEVICE static constexpr unsigned row(unsigned t, unsigned i) { return t / TX + i * TY; }
  CTNN_HOST_DEVICE static constexpr unsigned col(unsigned t, unsigned j) { return t % TX + j * TX; }

  // Thread t's share of the slice k0 of both tiles (consecutive threads read consecutive addresses).
  template <class T, class Load>
  CTNN_HOST_DEVICE static void stage(unsigned t, std::size_t row0, std::size_t col0, std::size_t k0, const T* x,
                                     const T* w, std::size_t m, std::size_t K, std::size_t N, a_tile& as, b_tile& bs,
                                     Load load) {
    for (unsigned s = 0; s < BM * BK / threads; ++s) {
      const unsigned r = t / BK + s * (threads / BK), k = t % BK;
      const std::size_t gr = row0 + r, gk = k0 + k;
      as[k][r] = gr < m && gk < K ? load(x[gr * K + gk]) : 0.0f;
    }
    for (unsigned s = 0; s < BK * BN / threads; ++s) {
      const unsigned k = t / BN + s * (threads / BN), c = t % BN;
      const std::size_t gk = k0 + k, gc = col0 + c;
      bs[k][c] = gk < K && gc < N ? load(w[gk * N + gc]) : 0.0f;
    }
  }

  // acc += the staged slice's products for thread t's register block (k in order).
  CTNN_HOST_DEVICE static void multiply(unsigned t, const a_tile& as, const b_tile& bs, accumulators& acc) {
    for (unsigned k = 0; k < BK; ++k) {
      float a[TM], b[TN];
      for (unsigned i = 0; i < TM; ++i) a[i] = as[k][row(t, i)];
      for (unsigned j = 0; j < TN; ++j) b[j] = bs[k][col(t, j)];
      for (unsigned i = 0; i < TM; ++i)
        for (unsigned j = 0; j < TN; ++j) acc[i][j] += a[i] * b[j];
    }
  }

  // y = store(e.forward(acc + b)) for thread t's outputs inside m x N (b may be null).
  template <class T, class E, class Load, class Store>
  CTNN_HOST_DEVICE static void finish(unsigned t, std::size_t row0, std::size_t col0, const accumulators& acc,
                                      const T* b, T* y, std::size_t m, std::size_t N, const E& e, Load load,
                                      Store store) {
    for (unsigned i = 0; i < TM; ++i) {
      const std::size_t gr = row0 + row(t, i);
      if (gr >= m) break;
      for (unsigned j = 0; j < TN; ++j) {
        const std::size_t gc = col0 + col(t, j);
        if (gc >= N) break;
        y[gr * N + gc] = store(e.forward(acc[i][j] + (b ? load(b[gc]) : 0.0f)));
      }
    }
  }
};

}  // namespace ctnn::kernels
