// ctnn/backends/cpu/activations.hpp — elementwise activations and softmax.
//
// forward_* transform pre-activations z into outputs y in place.
// backward_* turn dL/dy into dL/dz in place, from the outputs y alone (every
// activation here has a derivative expressible through its output): the
// rules of kernels/functors.hpp (relu_fn, ...) run by map.hpp, xsimd batches
// for the body and the same rule on scalars for the last n % L elements.
// Softmax works on rows of `cols` values (max, exp, sum and scale per row).
// Arch defaults to default_arch (arch.hpp), the tests pass each one the CPU
// runs and compare with the scalar references (activations_reference.hpp).
// sigmoid is computed from exp(-|z|), so it is overflow-safe for any |z|.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstddef>

#include "../../kernels/activations_reference.hpp"
#include "../../kernels/functors.hpp"
#include <xsimd/xsimd.hpp>

#include "arch.hpp"
#include "map.hpp"

namespace ctnn::kernels::cpu {

// The largest of x[0, n), n > 0, vectorized for float and double; xsimd 8 has
// no horizontal max, so the lanes are reduced through memory.
template <class T, class Arch = default_arch>
T row_max(const T* x, std::size_t n) {
  std::size_t nv = 0;
  T mx = x[0];
  if constexpr (simd_v<T, Arch>) {
    using B = xsimd::batch<T, Arch>;
    constexpr std::size_t L = B::size;
    nv = n - n % L;
    if (nv) {
      B bm = B::load_unaligned(x);
      for (std::size_t j = L; j < nv; j += L) bm = xsimd::max(bm, B::load_unaligned(x + j));
      alignas(64) T lanes[L];
      bm.store_unaligned(lanes);
      mx = *std::max_element(lanes, lanes + L);
    }
  }
  for (std::size_t j = nv; j < n; ++j) mx = std::max(mx, x[j]);
  return mx;
}

// The rules of kernels/functors.hpp, in place over n values through map.hpp.
template <class T, class Arch = default_arch>
void relu_forward(T* y, std::size_t n) {
  map<Arch>(fn::forward_of<fn::relu_fn>{}, n, y);
}
template <class T, class Arch = default_arch>
void relu_backward(const T* y, T* d, std::size_t n) {
  map<Arch>(fn::backward_of<fn::relu_fn>{}, n, y, d);
}
template <class T, class Arch = default_arch>
void leaky_relu_forward(T* y, std::size_t n, T alpha) {
  map<Arch>(fn::forward_of<fn::leaky_relu_fn<T>>{{alpha}}, n, y);
}
template <class T, class Arch = default_arch>
void leaky_relu_backward(const T* y, T* d, std::size_t n, T alpha) {
  map<Arch>(fn::backward_of<fn::leaky_relu_fn<T>>{{alpha}}, n, y, d);
}
template <class T, class Arch = default_arch>
void sigmoid_forward(T* y, std::size_t n) {
  map<Arch>(fn::forward_of<fn::sigmoid_fn>{}, n, y);
}
template <class T, class Arch = default_arch>
void sigmoid_backward(const T* y, T* d, std::size_t n) {
  map<Arch>(fn::backward_of<fn::sigmoid_fn>{}, n, y, d);
}
template <class T, class Arch = default_arch>
void tanh_forward(T* y, std::size_t n) {
  map<Arch>(fn::forward_of<fn::tanh_fn>{}, n, y);
}
template <class T, class Arch = default_arch>
void tanh_backward(const T* y, T* d, std::size_t n) {
  map<Arch>(fn::backward_of<fn::tanh_fn>{}, n, y, d);
}

template <class T, class Arch = default_arch>
void softmax_forward(T* y, std::size_t rows, std::size_t cols) {
  if constexpr (!simd_v<T, Arch>) {
    reference::softmax_forward(y, rows, cols);
  } else {
    using B = xsimd::batch<T, Arch>;
    constexpr std::size_t L = B::size;
    const std::size_t nv = cols - cols % L;
    for (std::size_t r = 0; r < rows; ++r) {
      T* row = y + r * cols;
      const T mx = cols ? row_max<T, Arch>(row, cols) : T(0);
      const B bmx(mx);
      B bs(T(0));
      for (std::size_t j = 0; j < nv; j += L) {
        const B e = xsimd::exp(B::load_unaligned(row + j) - bmx);
        e.store_unaligned(row + j);
        bs += e;
      }
      T sum = xsimd::hadd(bs);
      for (std::size_t j = nv; j < cols; ++j) {
        row[j] = std::exp(row[j] - mx);
        sum += row[j];
      }
      const T inv = T(1) / sum;
      const B binv(inv);
      for (std::size_t j = 0; j < nv; j += L) (B::load_unaligned(row + j) * binv).store_unaligned(row + j);
      for (std::size_t j = nv; j < cols; ++j) row[j] *= inv;
    }
  }
}
// dz_j = y_j * (d_j - sum_k d_k y_k)
template <class T, class Arch = default_arch>
void softmax_backward(const T* y, T* d, std::size_t rows, std::size_t cols) {
  if constexpr (!simd_v<T, Arch>) {
    reference::softmax_backward(y, d, rows, cols);
  } else {
    using B = xsimd::batch<T, Arch>;
    constexpr std::size_t L = B::size;
    const std::size_t nv = cols - cols % L;
    for (std::size_t r = 0; r < rows; ++r) {
      const T* yr = y + r * cols;
      T* dr = d + r * cols;
      B bdot(T(0));
      for (std::size_t j = 0; j < nv; j += L)
        bdot = xsimd::fma(B::load_unaligned(dr + j), B::load_unaligned(yr + j), bdot);
      T dot = xsimd::hadd(bdot);
      for (std::size_t j = nv; j < cols; ++j) dot += dr[j] * yr[j];
      const B bd(dot);
      for (std::size_t j = 0; j < nv; j += L)
        (B::load_unaligned(yr + j) * (B::load_unaligned(dr + j) - bd)).store_unaligned(dr + j);
      for (std::size_t j = nv; j < cols; ++j) dr[j] = yr[j] * (dr[j] - dot);
    }
  }
}

}  // namespace ctnn::kernels::cpu
