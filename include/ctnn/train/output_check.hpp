// ctnn/train/output_check.hpp — a loss's or metric's `accepts` (core/output_rule.hpp)
// checked against the network's output shape Out and the dataset's target kind K.
//
// check_output<X, Out, K>() is true or fails to compile with a first error
// line such as
//   "sparse_categorical_crossentropy: the output of the network is 26x26x10
//    (rank 3); it takes one score per class (rank 1): end the network with
//    flatten and dense<classes>"
// or, for the wrong kind of target, "mean_squared_error takes dense target
// vectors; the dataset has sparse class labels: use
// sparse_categorical_crossentropy instead" (accepts.instead).
#pragma once
#include <cstddef>

#include "../core/compile_message.hpp"
#include "../core/output_rule.hpp"
#include "../core/targets.hpp"

namespace ctnn::detail {

template <class X>
concept declares_output = requires {
  { X::accepts.name } -> std::convertible_to<const char*>;
  X::accepts.rule;
};

template <class X, class Out>
constexpr diag::message output_rank_text() {
  diag::message m;
  m << X::accepts.name << ": the output of the network is ";
  m.dims(Out::dims) << " (rank " << Out::rank
                    << "); it takes one score per class (rank 1): end the network with flatten and dense<classes>";
  return m;
}

template <class X, class Out>
constexpr diag::message output_classes_text() {
  diag::message m;
  m << X::accepts.name << ": the output of the network has " << Out::size
    << " value per sample; it takes at least 2 class scores (sparse class labels)";
  return m;
}

template <class X, class Out, std::size_t Width>
constexpr diag::message output_width_text() {
  diag::message m;
  m << X::accepts.name << ": the output of the network has " << Out::size << " values per sample (";
  m.dims(Out::dims) << "), the targets " << Width;
  return m;
}

template <class X, bool Sparse>
constexpr diag::message output_targets_text() {
  diag::message m;
  m << X::accepts.name << " takes " << (Sparse ? "dense target vectors" : "sparse class labels") << "; the dataset has "
    << (Sparse ? "sparse class labels" : "dense target vectors");
  if constexpr (X::accepts.instead != nullptr) m << ": use " << X::accepts.instead << " instead";
  return m;
}

template <class X, class Out, std::size_t Steps>
constexpr diag::message step_labels_text() {
  diag::message m;
  m << X::accepts.name << ": the dataset has " << Steps << " labels per sample (step_labels), the output of the network is ";
  m.dims(Out::dims) << "; a per-step loss takes an output <" << Steps << ", classes>";
  return m;
}

// PerStep (a loss, not a metric): class scores at every step of an output <S, K>, as Keras'
// losses on [batch, S, K]: with step_labels<S> (a sparse loss) or dense targets of S * K
// values (one one-hot row per step); losses/loss.hpp's step_loss_into averages over the steps.
template <class X, class Out, class K, bool PerStep = false>
constexpr bool check_output() {
  if constexpr (!declares_output<X>) {
    return true;
  } else {
    constexpr accepts_output a = X::accepts;
    constexpr bool sparse = is_sparse_v<K> || is_step_labels_v<K>;
    constexpr bool kind_ok = a.targets == target_rule::either || (a.targets == target_rule::sparse) == sparse;
    constexpr bool per_step = PerStep && a.rule == output_rule::class_scores && Out::rank == 2;
    // Each diag::require is named only where it applies: naming it instantiates it.
    if constexpr (!kind_ok) {
      return diag::require<kind_ok, &output_targets_text<X, sparse>>();
    } else if constexpr (is_step_labels_v<K>) {
      constexpr bool fits = per_step && Out::dims[0] == K::width;
      if constexpr (!fits) return diag::require<false, &step_labels_text<X, Out, K::width>>();
      else return diag::require<(Out::dims[1] >= 2), &output_classes_text<X, shape<Out::dims[1]>>>();
    } else if constexpr (per_step && !sparse) {
      return diag::require<Out::size == K::width, &output_width_text<X, Out, K::width>>();
    } else if constexpr (a.rule == output_rule::class_scores && Out::rank != 1) {
      return diag::require<false, &output_rank_text<X, Out>>();
    } else if constexpr (sparse) {
      if constexpr (a.rule == output_rule::class_scores) return diag::require<(Out::size >= 2), &output_classes_text<X, Out>>();
      else return true;
    } else {
      return diag::require<Out::size == K::width, &output_width_text<X, Out, K::width>>();
    }
  }
}

}  // namespace ctnn::detail
