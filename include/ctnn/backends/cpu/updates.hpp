// ctnn/kernels/cpu/updates.hpp — the optimizers' per-parameter update loops.
//
// Each function applies one step to n parameters w from gradients g and the
// optimizer's slots, exactly the formulas of optimizers/*.hpp (which call
// them), vectorized with xsimd::batch<T, Arch> for float and double (Arch
// defaults to default_arch, arch.hpp; the tests pass each one the CPU runs)
// and scalar for the last n % L elements and for other types. Element-wise
// only, so results do not depend on how the loop is split. Each returns
// whether every updated w is finite, folded into the loop as a running sum of
// w - w (0 for a finite value, NaN for NaN and infinity): two vector
// operations per vector of parameters, no second pass over memory.
//   adam:    m += (g - m) b1; v += (g^2 - v) b2; (amsgrad: vh = max(vh, v), used as v)
//            w -= alpha m / (sqrt(v) + eps)
//   adagrad: acc += g^2; w -= lr g / sqrt(acc + eps)
//   sgd:     mom == 0: w -= lr g; else m = mom m - lr g; w += m (nesterov: w += mom m - lr g)
//   rmsprop: vel = rho vel + (1 - rho) g^2;
//            centered: avg = rho avg + (1 - rho) g; denom = vel - avg^2 + eps, else vel + eps
//            inc = lr g / sqrt(denom); mom > 0: mb = mom mb + inc; w -= mb, else w -= inc
#pragma once
#include <algorithm>
#include <cmath>
#include <cstddef>

#include "arch.hpp"
#include "thread_pool.hpp"

namespace ctnn::kernels::cpu {

// Runs f(lo, hi) over [0, n) in chunks of 2^15 elements on the global thread
// pool (an optimizer's update of a large network streams four to seven arrays
// of n values through memory once per step). The chunk length is a multiple of every
// vector length and the partition depends on n only, so each element takes
// the same vector or scalar path, and gets the same bits, whatever the
// thread count (f(0, n) on one thread).
template <class F>
void for_chunks(std::size_t n, F&& f) {
  constexpr std::size_t chunk = std::size_t(1) << 15;
  const std::size_t chunks = (n + chunk - 1) / chunk;
  thread_pool& pool = thread_pool::global();
  // One task, f(0, n), without the pool when there is one chunk or one thread;
  // f is compiled once, inside the task.
  const std::size_t tasks = chunks <= 1 || pool.size() <= 1 ? 1 : chunks;
  pool.run(
      tasks, [&](std::size_t c) { f(c * chunk, tasks == 1 ? n : std::min(n, (c + 1) * chunk)); }, tasks > 1);
}

template <class T, class Arch = default_arch>
bool adam_update(T* w, const T* g, T* m, T* v, T* vh, std::size_t n, T alpha, T b1, T b2, T eps, bool amsgrad) {
  std::size_t i = 0;
  bool bad = false;  // a SIMD lane saw a non-finite w
  T tail(0);         // the scalar loop's running sum of w - w
  if constexpr (simd_v<T, Arch>) {
    using B = xsimd::batch<T, Arch>;
    constexpr std::size_t L = B::size;
    const B va(alpha), vb1(b1), vb2(b2), veps(eps);
    B nf(T(0));
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
      nf += wi - wi;
    }
    bad = xsimd::hadd(nf) != T(0);
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
    tail += w[i] - w[i];
  }
  return !bad && tail == T(0);
}

template <class T, class Arch = default_arch>
bool adagrad_update(T* w, const T* g, T* acc, std::size_t n, T lr, T eps) {
  std::size_t i = 0;
  bool bad = false;  // a SIMD lane saw a non-finite w
  T tail(0);         // the scalar loop's running sum of w - w
  if constexpr (simd_v<T, Arch>) {
    using B = xsimd::batch<T, Arch>;
    constexpr std::size_t L = B::size;
    const B vlr(lr), veps(eps);
    B nf(T(0));
    for (; i + L <= n; i += L) {
      const B gi = B::load_unaligned(g + i);
      const B ai = xsimd::fma(gi, gi, B::load_unaligned(acc + i));
      ai.store_unaligned(acc + i);
      const B wi = B::load_unaligned(w + i) - vlr * gi / xsimd::sqrt(ai + veps);
      wi.store_unaligned(w + i);
      nf += wi - wi;
    }
    bad = xsimd::hadd(nf) != T(0);
  }
  for (; i < n; ++i) {
    acc[i] += g[i] * g[i];
    w[i] -= lr * g[i] / std::sqrt(acc[i] + eps);
    tail += w[i] - w[i];
  }
  return !bad && tail == T(0);
}

// m is unused (may be null) when mom == 0.
template <class T, class Arch = default_arch>
bool sgd_update(T* w, const T* g, T* m, std::size_t n, T lr, T mom, bool nesterov) {
  std::size_t i = 0;
  bool bad = false;  // a SIMD lane saw a non-finite w
  T tail(0);         // the scalar loop's running sum of w - w
  if constexpr (simd_v<T, Arch>) {
    using B = xsimd::batch<T, Arch>;
    constexpr std::size_t L = B::size;
    const B vlr(lr), vmom(mom);
    B nf(T(0));
    if (mom == T(0)) {
      for (; i + L <= n; i += L) {
        const B wi = B::load_unaligned(w + i) - vlr * B::load_unaligned(g + i);
        wi.store_unaligned(w + i);
        nf += wi - wi;
      }
    } else {
      for (; i + L <= n; i += L) {
        const B lg = vlr * B::load_unaligned(g + i);
        const B mi = vmom * B::load_unaligned(m + i) - lg;
        mi.store_unaligned(m + i);
        const B wi = B::load_unaligned(w + i) + (nesterov ? vmom * mi - lg : mi);
        wi.store_unaligned(w + i);
        nf += wi - wi;
      }
    }
    bad = xsimd::hadd(nf) != T(0);
  }
  if (mom == T(0)) {
    for (; i < n; ++i) {
      w[i] -= lr * g[i];
      tail += w[i] - w[i];
    }
    return !bad && tail == T(0);
  }
  for (; i < n; ++i) {
    m[i] = mom * m[i] - lr * g[i];
    w[i] += nesterov ? mom * m[i] - lr * g[i] : m[i];
    tail += w[i] - w[i];
  }
  return !bad && tail == T(0);
}

// r1 = 1 - rho. avg is used only when centered, mb only when mom > 0.
template <class T, class Arch = default_arch>
bool rmsprop_update(T* w, const T* g, T* vel, T* mb, T* avg, std::size_t n, T lr, T r, T r1, T eps, T mom,
                    bool centered) {
  std::size_t i = 0;
  bool bad = false;  // a SIMD lane saw a non-finite w
  T tail(0);         // the scalar loop's running sum of w - w
  const bool use_mom = mom > T(0);
  if constexpr (simd_v<T, Arch>) {
    using B = xsimd::batch<T, Arch>;
    constexpr std::size_t L = B::size;
    const B vlr(lr), vr(r), vr1(r1), veps(eps), vmom(mom);
    B nf(T(0));
    for (; i + L <= n; i += L) {
      const B gi = B::load_unaligned(g + i);
      const B ve = vr * B::load_unaligned(vel + i) + vr1 * gi * gi;
      ve.store_unaligned(vel + i);
      B denom;
      if (centered) {
        const B ai = vr * B::load_unaligned(avg + i) + vr1 * gi;
        ai.store_unaligned(avg + i);
        denom = ve - ai * ai + veps;
      } else {
        denom = ve + veps;
      }
      const B inc = vlr * gi / xsimd::sqrt(denom);
      B wi;
      if (use_mom) {
        const B mi = vmom * B::load_unaligned(mb + i) + inc;
        mi.store_unaligned(mb + i);
        wi = B::load_unaligned(w + i) - mi;
      } else {
        wi = B::load_unaligned(w + i) - inc;
      }
      wi.store_unaligned(w + i);
      nf += wi - wi;
    }
    bad = xsimd::hadd(nf) != T(0);
  }
  for (; i < n; ++i) {
    vel[i] = r * vel[i] + r1 * g[i] * g[i];
    T denom;
    if (centered) {
      avg[i] = r * avg[i] + r1 * g[i];
      denom = vel[i] - avg[i] * avg[i] + eps;
    } else {
      denom = vel[i] + eps;
    }
    const T inc = lr * g[i] / std::sqrt(denom);
    if (use_mom) {
      mb[i] = mom * mb[i] + inc;
      w[i] -= mb[i];
    } else {
      w[i] -= inc;
    }
    tail += w[i] - w[i];
  }
  return !bad && tail == T(0);
}

}  // namespace ctnn::kernels::cpu
