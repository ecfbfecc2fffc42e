// ctnn/kernels/cpu/gemm.hpp — the three products of a dense layer, with the
// layer's sizes (K inputs, N outputs) known at compile time.
//
//   forward:  Y[m,N]  = X[m,K] * W[K,N] + b[N]
//   weights:  dW[K,N] = X[m,K]^T * dY[m,N],  db[N] = colsum(dY)
//   input:    dX[m,K] = dY[m,N] * W[K,N]^T
// m (the batch) is a run-time value. These entry points are what layers call;
// the implementation behind them may change (SIMD, threads) while the scalar
// reference (reference.hpp) stays the definition the tests compare against.
#pragma once
#include <cstddef>

#include "reference.hpp"

namespace ctnn::kernels::cpu {

template <std::size_t K, std::size_t N, class T>
void dense_forward(const T* x, const T* w, const T* b, T* y, std::size_t m) {
  reference::gemm_nn(x, w, b, y, m, K, N);
}

template <std::size_t K, std::size_t N, class T>
void dense_backward_weights(const T* x, const T* dy, T* dw, T* db, std::size_t m) {
  reference::gemm_tn(x, dy, dw, m, K, N);
  reference::col_sum(dy, db, m, N);
}

template <std::size_t K, std::size_t N, class T>
void dense_backward_input(const T* dy, const T* w, T* dx, std::size_t m) {
  reference::gemm_nt(dy, w, dx, m, K, N);
}

}  // namespace ctnn::kernels::cpu
