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

template <class X, class Out, class K>
constexpr bool check_output() {
  if constexpr (!declares_output<X>) {
    return true;
  } else {
    constexpr accepts_output a = X::accepts;
    constexpr bool sparse = is_sparse_v<K>;
    constexpr bool kind_ok = a.targets == target_rule::either || (a.targets == target_rule::sparse) == sparse;
    // Each diag::require is named only where it applies: naming it instantiates it.
    if constexpr (!kind_ok) {
      return diag::require<kind_ok, &output_targets_text<X, sparse>>();
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
