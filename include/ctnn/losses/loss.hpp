// ctnn/losses/loss.hpp — the Loss concept and how a loss meets a network.
//
// A loss has name() and compute<N, Backend>(y, targets, dy, batch), returning
// the sum of per-sample losses and writing the gradient of the batch mean into
// dy (when not null); its kernels run through ops<Backend>.
// Its target kind is `target_kind` (sparse losses) or
// `target_kind_for<N>` (dense losses, sized by the network's output).
#pragma once
#include <cstddef>
#include <string>

#include "../backends/cpu/backend.hpp"
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


}  // namespace ctnn
