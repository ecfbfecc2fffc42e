// ctnn/kernels/cpu/activations.hpp — elementwise activations and softmax.
//
// forward_* transform pre-activations z into outputs y in place.
// backward_* turn dL/dy into dL/dz in place, from the outputs y alone (every
// activation here has a derivative expressible through its output).
// Softmax works on rows of `cols` values (max, exp, sum and scale per row).
// Vectorized with xsimd::batch<T, Arch> for float and double; Arch defaults to
// default_arch (arch.hpp), the tests pass each one the CPU runs. The last
// n % L elements and other types run the scalar reference
// (activations_reference.hpp), which the tests compare against. sigmoid is
// computed from exp(-|z|), so it is overflow-safe for any |z|.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstddef>

#include "../../kernels/activations_reference.hpp"
#include "arch.hpp"

namespace ctnn::kernels::cpu {

namespace detail {
// Applies f(batch) -> batch to y[0, n - n % L) in place; returns the index
// where the scalar tail starts (0 without SIMD for T on Arch).
template <class T, class Arch, class F>
std::size_t map_batches(T* y, std::size_t n, F f) {
  std::size_t i = 0;
  if constexpr (simd_v<T, Arch>) {
    using B = xsimd::batch<T, Arch>;
    constexpr std::size_t L = B::size;
    for (; i + L <= n; i += L) f(B::load_unaligned(y + i)).store_unaligned(y + i);
  }
  return i;
}
// d[i] = f(y_batch, d_batch) on d[0, n - n % L); returns the tail start.
template <class T, class Arch, class F>
std::size_t map_batches2(const T* y, T* d, std::size_t n, F f) {
  std::size_t i = 0;
  if constexpr (simd_v<T, Arch>) {
    using B = xsimd::batch<T, Arch>;
    constexpr std::size_t L = B::size;
    for (; i + L <= n; i += L) f(B::load_unaligned(y + i), B::load_unaligned(d + i)).store_unaligned(d + i);
  }
  return i;
}
}  // namespace detail

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

template <class T, class Arch = default_arch>
void relu_forward(T* y, std::size_t n) {
  const std::size_t i = detail::map_batches<T, Arch>(y, n, [](auto z) {
    using B = decltype(z);
    return xsimd::select(z > B(T(0)), z, B(T(0)));
  });
  reference::relu_forward(y + i, n - i);
}
template <class T, class Arch = default_arch>
void relu_backward(const T* y, T* d, std::size_t n) {
  const std::size_t i = detail::map_batches2<T, Arch>(y, d, n, [](auto yb, auto db) {
    using B = decltype(yb);
    return xsimd::select(yb > B(T(0)), db, B(T(0)));
  });
  reference::relu_backward(y + i, d + i, n - i);
}

template <class T, class Arch = default_arch>
void leaky_relu_forward(T* y, std::size_t n, T alpha) {
  const std::size_t i = detail::map_batches<T, Arch>(y, n, [alpha](auto z) {
    using B = decltype(z);
    return xsimd::select(z > B(T(0)), z, B(alpha) * z);
  });
  reference::leaky_relu_forward(y + i, n - i, alpha);
}
// For 0 < alpha, y > 0 exactly when z > 0.
template <class T, class Arch = default_arch>
void leaky_relu_backward(const T* y, T* d, std::size_t n, T alpha) {
  const std::size_t i = detail::map_batches2<T, Arch>(y, d, n, [alpha](auto yb, auto db) {
    using B = decltype(yb);
    return xsimd::select(yb > B(T(0)), db, B(alpha) * db);
  });
  reference::leaky_relu_backward(y + i, d + i, n - i, alpha);
}

// e = exp(-|z|) never overflows: y = 1 / (1 + e) for z >= 0, e / (1 + e) below.
template <class T, class Arch = default_arch>
void sigmoid_forward(T* y, std::size_t n) {
  const std::size_t i = detail::map_batches<T, Arch>(y, n, [](auto z) {
    using B = decltype(z);
    const B e = xsimd::exp(-xsimd::abs(z));
    const B s = B(T(1)) / (B(T(1)) + e);
    return xsimd::select(z >= B(T(0)), s, e * s);
  });
  reference::sigmoid_forward(y + i, n - i);
}
template <class T, class Arch = default_arch>
void sigmoid_backward(const T* y, T* d, std::size_t n) {
  const std::size_t i = detail::map_batches2<T, Arch>(y, d, n, [](auto yb, auto db) {
    using B = decltype(yb);
    return db * (yb * (B(T(1)) - yb));
  });
  reference::sigmoid_backward(y + i, d + i, n - i);
}

template <class T, class Arch = default_arch>
void tanh_forward(T* y, std::size_t n) {
  const std::size_t i = detail::map_batches<T, Arch>(y, n, [](auto z) { return xsimd::tanh(z); });
  reference::tanh_forward(y + i, n - i);
}
template <class T, class Arch = default_arch>
void tanh_backward(const T* y, T* d, std::size_t n) {
  const std::size_t i = detail::map_batches2<T, Arch>(y, d, n, [](auto yb, auto db) {
    using B = decltype(yb);
    return db * (B(T(1)) - yb * yb);
  });
  reference::tanh_backward(y + i, d + i, n - i);
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
