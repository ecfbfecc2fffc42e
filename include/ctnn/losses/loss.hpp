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
// detail::step_loss_into: the same, but a per-step output <S, U> under a step mask with S steps
// (masking, embedding<..., mask_zero>) gets Keras' weights: a masked step 0, the loss the mean
// over the unmasked steps of the per-step loss (docs/sequences.md, "The loss under a mask"); a
// class loss on <S, K> (step_labels<S>, or one-hot rows) scores each step's K classes.
#pragma once
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <type_traits>

#include "../backends/cpu/backend.hpp"
#include "../core/backend_ops.hpp"
#include "../core/concepts.hpp"
#include "../core/output_rule.hpp"
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
// A class loss (its output: class scores) on an output <S, K> scores every step (Keras' losses on
// [batch, S, K]): K classes per row, batch * S rows, a target row per step.
template <class L, class Out>
constexpr bool per_step_classes() {
  if constexpr (Out::rank == 2 && requires { L::accepts.rule; }) return L::accepts.rule == output_rule::class_scores;
  else return false;
}

// Whether row i of a step mask (its producer's values, read on the host) is unmasked.
inline bool step_unmasked(const sequence_mask& mask, std::size_t i) {
  if (mask.value_bytes == sizeof(float)) return static_cast<const float*>(mask.data)[i] != 0.0f;
  if (mask.value_bytes == sizeof(double)) return static_cast<const double*>(mask.data)[i] != 0.0;
  if (mask.value_bytes == 2)  // float16_t / bfloat16_t (a 16-bit policy): +-0 has no bit set but the sign
    return (static_cast<const std::uint16_t*>(mask.data)[i] & 0x7fffu) != 0;
  throw std::invalid_argument("loss: a step mask of " + std::to_string(mask.value_bytes) + "-byte values");
}

// Checks a batch's targets on the host (before they are fed) where the loss can reject them
// (per step: a label's index in the message is sample * S + step).
template <class Out, class L, class Target>
void check_loss_targets(const L& loss, const Target* host_targets, std::size_t batch) {
  if constexpr (per_step_classes<L, Out>() && std::is_integral_v<Target>) {
    constexpr std::size_t S = Out::dims[0], K = Out::dims[1];
    if constexpr (requires { loss.template check_targets<K>(host_targets, batch); }) {
      try {
        loss.template check_targets<K>(host_targets, batch * S);
      } catch (const std::out_of_range& e) {
        throw std::out_of_range(std::string(e.what()) + " (labels per step: that index is sample * " + std::to_string(S) +
                                " + step)");
      }
    }
  } else if constexpr (requires { loss.template check_targets<Out::size>(host_targets, batch); }) {
    loss.template check_targets<Out::size>(host_targets, batch);
  }
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

// The loss of a batch whose output has the shape Out, with the pass's step mask (null or unset:
// loss_into). When Out is <S, U> and the mask has S steps, as Keras 3 (losses/loss.py,
// apply_mask with "sum_over_batch_size"): each step (b, t) is a sample of the loss (its loss
// the mean over U for the element-wise losses), a masked step gets weight 0 and an unmasked one
// total / valid (total = batch * S, valid = the unmasked steps), so the batch's loss is the sum
// over the unmasked steps divided by valid (0 when none is); here loss_sum gets batch times
// that (the trainer divides by batch) and dy that mean's gradient (masked steps: 0). Host
// backends only (the mask is read on the host): a device backend throws std::logic_error.
template <class Out, class B, class L, class T, class Target>
void step_loss_into(const L& loss, const T* y, const Target* t, T* dy, std::size_t batch, const sequence_mask* mask,
                    step_scalars* s) {
  constexpr bool per_step = Out::rank == 2;
  if (!per_step || !mask || !mask->data || mask->steps != Out::dims[0] || batch == 0) {
    if constexpr (per_step_classes<L, Out>()) {  // every step a sample of the loss: the mean over batch * S rows
      constexpr std::size_t S = Out::dims[0], K = Out::dims[1];
      if constexpr (!B::memory::host_accessible) {
        throw std::logic_error("loss: a per-step class loss runs on host backends only (not on " + B::name() + " yet)");
      } else {
        step_scalars part;  // loss_sum: the sum over the rows; dy: the gradient of their mean, times the loss scale
        part.loss_scale = s->loss_scale;
        loss_into<K, B>(loss, y, t, dy, batch * S, &part);
        s->loss_sum += part.loss_sum / double(S);  // batch times the mean (the trainer divides by batch)
        if (part.non_finite) s->non_finite = 1;
      }
    } else {
      loss_into<Out::size, B>(loss, y, t, dy, batch, s);
    }
    return;
  }
  if constexpr (per_step) {
    constexpr std::size_t S = Out::dims[0], U = Out::dims[1];
    if constexpr (!B::memory::host_accessible) {
      throw std::logic_error("loss: a per-step loss under a step mask runs on host backends only (not on " + B::name() +
                             " yet)");
    } else {
      const std::size_t rows = batch * S, tw = std::is_same_v<Target, T> ? U : 1;  // target values per step
      auto used = [&](std::size_t i) { return step_unmasked(*mask, i); };
      std::size_t valid = 0;
      for (std::size_t i = 0; i < rows; ++i) valid += used(i);
      if (dy) ops<B>::fill_zero(dy, rows * U);
      step_scalars part;  // the runs' sums; dy of each run: the gradient of its mean, times the loss scale
      part.loss_scale = s->loss_scale;
      for (std::size_t i = 0; i < rows;) {
        if (!used(i)) {
          ++i;
          continue;
        }
        std::size_t j = i + 1;
        while (j < rows && used(j)) ++j;
        loss_into<U, B>(loss, y + i * U, t + i * tw, dy ? dy + i * U : nullptr, j - i, &part);
        if (dy) ops<B>::scale(dy + i * U, (j - i) * U, T(double(j - i) / double(valid)));
        i = j;
      }
      if (valid) s->loss_sum += part.loss_sum * double(batch) / double(valid);
      if (part.non_finite) s->non_finite = 1;
    }
  }
}
}  // namespace detail


}  // namespace ctnn
