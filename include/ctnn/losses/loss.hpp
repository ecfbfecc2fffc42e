// ctnn/losses/loss.hpp — the Loss concept and how a loss meets a network.
//
// A loss has name() and compute<N, Backend>(y, targets, dy, batch) on host
// memory, returning the sum of per-sample losses and writing the gradient of
// the batch mean into dy (when not null). The built-in losses also have
// accumulate<N, Backend>(y, targets, dy, batch, scalars): the same through the
// batched loss ops of ops<Backend> into a step_scalars (core/plan.hpp) in the
// backend's memory, dy times its loss_scale, nothing waited for; and,
// where targets can be invalid, check_targets<N>(host targets, batch).
// detail::loss_into / check_loss_targets call them (or compute, on a host backend).
// Its target kind is `target_kind` (sparse losses) or
// `target_kind_for<N>` (dense losses, sized by the network's output).
#pragma once
#include <cmath>
#include <cstddef>
#include <string>

#include "../backends/cpu/backend.hpp"
#include "../core/backend_ops.hpp"
#include "../core/plan.hpp"
#include "../core/targets.hpp"

namespace ctnn {

template <class L>
concept has_loss_name = requires(const L& l) { { l.name() } -> std::convertible_to<std::string>; };
template <class L>
concept has_target_kind = requires { typename L::target_kind; } || requires { typename L::template target_kind_for<2>; };
template <class L, std::size_t N>
struct loss_target_kind {
  using type = typename L::target_kind;
};
template <class L, std::size_t N>
  requires requires { typename L::template target_kind_for<N>; }
struct loss_target_kind<L, N> {
  using type = typename L::template target_kind_for<N>;
};
template <class L, std::size_t N>
using loss_target_kind_t = typename loss_target_kind<L, N>::type;

// compute<N, B, T> for outputs of element type T (the model's compute_type).
template <class L, class T>
concept has_compute = requires(const L& l, const T* y, const target_element_t<loss_target_kind_t<L, 2>, T>* t, T* dy,
                               std::size_t n) {
  { l.template compute<2, cpu<>>(y, t, dy, n) } -> std::convertible_to<double>;
};
template <class L, class T = float>
concept Loss = has_loss_name<L> && has_target_kind<L> && has_compute<L, T>;

namespace detail {
// Checks a batch's targets on the host (before they are fed) where the loss can reject them.
template <std::size_t N, class L, class Target>
void check_loss_targets(const L& loss, const Target* host_targets, std::size_t batch) {
  if constexpr (requires { loss.template check_targets<N>(host_targets, batch); })
    loss.template check_targets<N>(host_targets, batch);
}
// The loss of a batch into the scalars s (B's memory): accumulate<N, B> (the loss ops apply
// s->loss_scale to dy themselves, on every backend), or for a loss that has only compute,
// compute on a host backend (its sum and finiteness added to s on the host).
template <std::size_t N, class B, class L, class T, class Target>
void loss_into(const L& loss, const T* y, const Target* t, T* dy, std::size_t batch, step_scalars* s) {
  if constexpr (requires { loss.template accumulate<N, B>(y, t, dy, batch, s); }) {
    loss.template accumulate<N, B>(y, t, dy, batch, s);
  } else {
    static_assert(B::memory::host_accessible,
                  "loss: a loss without accumulate<N, B>(y, targets, dy, batch, scalars) runs only on a host backend");
    const double sum = loss.template compute<N, B>(y, t, dy, batch);
    s->loss_sum += sum;
    if (!std::isfinite(sum)) s->non_finite = 1;
    if (dy && s->loss_scale != 1.0) ops<B>::scale(dy, batch * N, T(s->loss_scale));
  }
}
}  // namespace detail


}  // namespace ctnn
