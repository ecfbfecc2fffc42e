// ctnn/kernels/cpu/updates.hpp — the optimizers' per-parameter update loops.
//
// Each function applies one step to n parameters w from gradients g and the
// optimizer's slots, exactly the formulas of optimizers/*.hpp (which call
// them), vectorized with xsimd for float and double (arch.hpp) and scalar for
// the last n % L elements and for other types. Element-wise only, so results
// do not depend on how the loop is split.
//   adam:    m += (g - m) b1; v += (g^2 - v) b2; (amsgrad: vh = max(vh, v), used as v)
//            w -= alpha m / (sqrt(v) + eps)
//   adagrad: acc += g^2; w -= lr g / sqrt(acc + eps)
#pragma once
#include <algorithm>
#include <cmath>
#include <cstddef>

#include "arch.hpp"

namespace ctnn::kernels::cpu {

template <class T>
void adam_update(T* w, const T* g, T* m, T* v, T* vh, std::size_t n, T alpha, T b1, T b2, T eps, bool amsgrad) {
  std::size_t i = 0;
  if constexpr (has_simd_v<T>) {
    using B = xsimd::batch<T, default_arch>;
    constexpr std::size_t L = B::size;
    const B va(alpha), vb1(b1), vb2(b2), veps(eps);
    for (; i + L <= n; i += L) {
      const B gi = B::load_unaligned(g + i);
      B mi = B::load_unaligned(m + i), vi = B::load_unaligned(v + i);
      mi = xsimd::fma(gi - mi, vb1, mi);
      vi = xsimd::fma(gi * gi - vi, vb2, vi);
      mi.store_unaligned(m + i);
      vi.store_unaligned(v + i);
      if (amsgrad) {
        vi = xsimd::max(B::load_unaligned(vh + i), vi);
        vi.store_unaligned(vh + i);
      }
      const B wi = B::load_unaligned(w + i) - va * mi / (xsimd::sqrt(vi) + veps);
      wi.store_unaligned(w + i);
    }
  }
  for (; i < n; ++i) {
    m[i] += (g[i] - m[i]) * b1;
    v[i] += (g[i] * g[i] - v[i]) * b2;
    T vv = v[i];
    if (amsgrad) {
      vh[i] = std::max(vh[i], v[i]);
      vv = vh[i];
    }
    w[i] -= alpha * m[i] / (std::sqrt(vv) + eps);
  }
}

template <class T>
void adagrad_update(T* w, const T* g, T* acc, std::size_t n, T lr, T eps) {
  std::size_t i = 0;
  if constexpr (has_simd_v<T>) {
    using B = xsimd::batch<T, default_arch>;
    constexpr std::size_t L = B::size;
    const B vlr(lr), veps(eps);
    for (; i + L <= n; i += L) {
      const B gi = B::load_unaligned(g + i);
      const B ai = xsimd::fma(gi, gi, B::load_unaligned(acc + i));
      ai.store_unaligned(acc + i);
      (B::load_unaligned(w + i) - vlr * gi / xsimd::sqrt(ai + veps)).store_unaligned(w + i);
    }
  }
  for (; i < n; ++i) {
    acc[i] += g[i] * g[i];
    w[i] -= lr * g[i] / std::sqrt(acc[i] + eps);
  }
}

}  // namespace ctnn::kernels::cpu
