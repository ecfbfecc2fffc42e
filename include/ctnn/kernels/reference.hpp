// ctnn/kernels/reference.hpp — scalar reference kernels.
//
// The plain loops every fast path is tested against. All matrices are
// row-major. Sizes are run-time values here; the fast kernels (gemm.hpp)
// take the layer's sizes as template arguments.
//   gemm_nn: Y[m,n]  = X[m,k] * W[k,n] (+ b[n])
//   gemm_tn: dW[k,n] = X[m,k]^T * dY[m,n]      (overwrites)
//   gemm_nt: dX[m,k] = dY[m,n] * W[k,n]^T      (overwrites)
//   col_sum: db[n]   = sum over rows of dY[m,n] (overwrites)
#pragma once
#include <algorithm>
#include <cmath>
#include <cstddef>

namespace ctnn::kernels::reference {

template <class T>
void gemm_nn(const T* x, const T* w, const T* b, T* y, std::size_t m, std::size_t k, std::size_t n) {
  for (std::size_t i = 0; i < m; ++i) {
    T* yr = y + i * n;
    for (std::size_t j = 0; j < n; ++j) yr[j] = b ? b[j] : T(0);
    for (std::size_t p = 0; p < k; ++p) {
      const T xv = x[i * k + p];
      const T* wr = w + p * n;
      for (std::size_t j = 0; j < n; ++j) yr[j] += xv * wr[j];
    }
  }
}

template <class T>
void gemm_tn(const T* x, const T* dy, T* dw, std::size_t m, std::size_t k, std::size_t n) {
  std::fill(dw, dw + k * n, T(0));
  for (std::size_t i = 0; i < m; ++i) {
    const T* dyr = dy + i * n;
    for (std::size_t p = 0; p < k; ++p) {
      const T xv = x[i * k + p];
      T* dwr = dw + p * n;
      for (std::size_t j = 0; j < n; ++j) dwr[j] += xv * dyr[j];
    }
  }
}

template <class T>
void gemm_nt(const T* dy, const T* w, T* dx, std::size_t m, std::size_t k, std::size_t n) {
  for (std::size_t i = 0; i < m; ++i) {
    const T* dyr = dy + i * n;
    for (std::size_t p = 0; p < k; ++p) {
      const T* wr = w + p * n;
      T acc = 0;
      for (std::size_t j = 0; j < n; ++j) acc += dyr[j] * wr[j];
      dx[i * k + p] = acc;
    }
  }
}

template <class T>
void col_sum(const T* dy, T* db, std::size_t m, std::size_t n) {
  std::fill(db, db + n, T(0));
  for (std::size_t i = 0; i < m; ++i)
    for (std::size_t j = 0; j < n; ++j) db[j] += dy[i * n + j];
}

}  // namespace ctnn::kernels::reference
