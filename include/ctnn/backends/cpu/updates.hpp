// ctnn/backends/cpu/updates.hpp — the optimizers' per-parameter updates on the CPU.
//
// Each function applies one step to n parameters w from gradients g and the
// optimizer's slots: the rule of kernels/functors.hpp (fn::adam_update, ...;
// the formulas of optimizers/*.hpp, which call these through ops<B>) run by
// map.hpp (xsimd::batch<T, Arch> for float and double, the same rule on
// scalars for the last n % L elements and other types; chunks of 2^15 on the
// thread pool). Element-wise only, so results do not depend on how the loop is
// split. Each returns whether every updated w is finite (map's running sum of
// w - w: no second pass over memory). Unused slots may be null: vh without
// amsgrad, m when mom == 0, avg unless centered, mb unless mom > 0.
#pragma once
#include <cstddef>

#include "../../kernels/functors.hpp"
#include "arch.hpp"
#include "map.hpp"

namespace ctnn::kernels::cpu {

template <class T, class Arch = default_arch>
bool adam_update(T* w, const T* g, T* m, T* v, T* vh, std::size_t n, T alpha, T b1, T b2, T eps, bool amsgrad) {
  if (amsgrad) return map<Arch>(fn::amsgrad_update<T>{alpha, b1, b2, eps}, n, w, g, m, v, vh);
  return map<Arch>(fn::adam_update<T>{alpha, b1, b2, eps}, n, w, g, m, v);
}

template <class T, class Arch = default_arch>
bool adagrad_update(T* w, const T* g, T* acc, std::size_t n, T lr, T eps) {
  return map<Arch>(fn::adagrad_update<T>{lr, eps}, n, w, g, acc);
}

template <class T, class Arch = default_arch>
bool sgd_update(T* w, const T* g, T* m, std::size_t n, T lr, T mom, bool nesterov) {
  if (mom == T(0)) return map<Arch>(fn::sgd_update<T>{lr}, n, w, g);
  return map<Arch>(fn::momentum_update<T>{lr, mom, nesterov}, n, w, g, m);
}

// r1 = 1 - rho.
template <class T, class Arch = default_arch>
bool rmsprop_update(T* w, const T* g, T* vel, T* mb, T* avg, std::size_t n, T lr, T r, T r1, T eps, T mom,
                    bool centered) {
  const bool use_mom = mom > T(0);
  if (centered && use_mom) return map<Arch>(fn::rmsprop_update<T, true, true>{lr, r, r1, eps, mom}, n, w, g, vel, avg, mb);
  if (centered) return map<Arch>(fn::rmsprop_update<T, true, false>{lr, r, r1, eps, mom}, n, w, g, vel, avg);
  if (use_mom) return map<Arch>(fn::rmsprop_update<T, false, true>{lr, r, r1, eps, mom}, n, w, g, vel, mb);
  return map<Arch>(fn::rmsprop_update<T, false, false>{lr, r, r1, eps, mom}, n, w, g, vel);
}

}  // namespace ctnn::kernels::cpu
