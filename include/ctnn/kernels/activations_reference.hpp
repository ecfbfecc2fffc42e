// ctnn/kernels/activations_reference.hpp — scalar activation kernels.
//
// The plain loops the vectorized kernels of activations.hpp are tested
// against (and which they use for the last n % L elements). Same contracts:
// forward_* transform pre-activations z into outputs y in place; backward_*
// turn dL/dy into dL/dz in place from the outputs y alone. Softmax works on
// rows of `cols` values. sigmoid is overflow-safe for any |z|.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstddef>

namespace ctnn::kernels::reference {

template <class T>
void relu_forward(T* y, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) y[i] = y[i] > T(0) ? y[i] : T(0);
}
template <class T>
void relu_backward(const T* y, T* d, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) d[i] = y[i] > T(0) ? d[i] : T(0);
}

template <class T>
void leaky_relu_forward(T* y, std::size_t n, T alpha) {
  for (std::size_t i = 0; i < n; ++i) y[i] = y[i] > T(0) ? y[i] : alpha * y[i];
}
// For 0 < alpha, y > 0 exactly when z > 0.
template <class T>
void leaky_relu_backward(const T* y, T* d, std::size_t n, T alpha) {
  for (std::size_t i = 0; i < n; ++i) d[i] = y[i] > T(0) ? d[i] : alpha * d[i];
}

template <class T>
void sigmoid_forward(T* y, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) {
    const T z = y[i];
    // stable for large |z|
    if (z >= T(0)) {
      y[i] = T(1) / (T(1) + std::exp(-z));
    } else {
      const T e = std::exp(z);
      y[i] = e / (T(1) + e);
    }
  }
}
template <class T>
void sigmoid_backward(const T* y, T* d, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) d[i] *= y[i] * (T(1) - y[i]);
}

template <class T>
void tanh_forward(T* y, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) y[i] = std::tanh(y[i]);
}
template <class T>
void tanh_backward(const T* y, T* d, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) d[i] *= T(1) - y[i] * y[i];
}

template <class T>
void softmax_forward(T* y, std::size_t rows, std::size_t cols) {
  for (std::size_t r = 0; r < rows; ++r) {
    T* row = y + r * cols;
    const T mx = *std::max_element(row, row + cols);
    T sum = 0;
    for (std::size_t j = 0; j < cols; ++j) {
      row[j] = std::exp(row[j] - mx);
      sum += row[j];
    }
    const T inv = T(1) / sum;
    for (std::size_t j = 0; j < cols; ++j) row[j] *= inv;
  }
}
// dz_j = y_j * (d_j - sum_k d_k y_k)
template <class T>
void softmax_backward(const T* y, T* d, std::size_t rows, std::size_t cols) {
  for (std::size_t r = 0; r < rows; ++r) {
    const T* yr = y + r * cols;
    T* dr = d + r * cols;
    T dot = 0;
    for (std::size_t j = 0; j < cols; ++j) dot += dr[j] * yr[j];
    for (std::size_t j = 0; j < cols; ++j) dr[j] = yr[j] * (dr[j] - dot);
  }
}

}  // namespace ctnn::kernels::reference
