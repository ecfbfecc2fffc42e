// ctnn/pruning/global.hpp — global magnitude pruning: one threshold across layers.
//
// Every layer of a network wrapped as prune_low_magnitude<L, S,
// global_magnitude> joins one group. At a pruning step the group's kernels are
// ranked together by |w| and the keep_count(W, s) largest are kept (W: the
// group's kernel weights, s: the shared schedule's sparsity at that step;
// ties: the earlier layer, then the earlier weight), so a layer of small
// weights loses more than one of large weights. TFMOT has no global pruning;
// this is torch.nn.utils.prune.global_unstructured's rule with TFMOT's
// schedules and rounding.
// Compile-time facts (Net: the network type):
//   pruning::global_weights<Net>  W, the group's kernel weights
//   pruning::global_nnz<Net>      the weights the group keeps at its final
//                                 sparsity (exact: the masks keep this many)
// The per-layer kept counts are decided at run time (global_sparsities(m),
// global_kept(m) in pruning/update_pruning_step.hpp); strip_pruning stores
// each layer with NNZ = min(its kernel size, global_nnz) (a bound that always
// holds), and strip_pruning_to<Target>(m) takes tighter NNZs chosen from
// global_kept(m), checked when it strips. Every layer of the group must have
// the same schedule (a compile error naming the first that differs).
#pragma once
#include <cstddef>
#include <initializer_list>
#include <tuple>
#include <type_traits>

#include "../core/type_at.hpp"
#include "diagnostics.hpp"
#include "prune.hpp"

namespace ctnn::pruning {

namespace detail {
template <class L>
constexpr bool is_global() {
  if constexpr (PrunedLayer<L>) return std::is_same_v<typename L::pattern, global_magnitude>;
  else return false;
}
template <class L>
constexpr std::size_t global_weights_of() {
  if constexpr (is_global<L>()) return L::masked_count;
  else return 0;
}

template <class L, class S>
constexpr bool global_schedule_is() {
  if constexpr (is_global<L>()) return std::is_same_v<typename L::schedule, S>;
  else return true;
}
template <class S>
constexpr double final_sparsity_of() {
  if constexpr (std::is_void_v<S>) return 0.0;
  else return S::final_sparsity;
}

constexpr std::size_t first_true(std::initializer_list<bool> v) {
  std::size_t i = 0;
  for (bool b : v) {
    ++i;
    if (b) return i;
  }
  return 0;
}
// The schedule of the layer at position Pos (from 1) of pack P; void for 0. By
// index, not by peeling the list (depth and memory linear in the layers).
template <std::size_t Pos, class P>
struct schedule_at {
  using type = typename ctnn::detail::at_t<Pos - 1, P>::schedule;
};
template <class P>
struct schedule_at<0, P> {
  using type = void;
};

// The first error names both positions ("layer 3 (prune_low_magnitude): its global_magnitude
// schedule differs from that of layer 1; ..."); the sentence follows.
template <std::size_t Differing, std::size_t First>
constexpr bool check_same_schedule() {
  if constexpr (Differing != 0) {
    constexpr bool located = diag::require<false, &diag::prune_global_text<Differing, First>>();
    constexpr bool said =
        diag::prune_global_schedules_differ<diag::layer<Differing>, diag::first_global_layer<First>, Differing == 0>::value;
    return located && said;
  } else {
    return true;
  }
}

template <class Layers>
struct global_group;
template <class... L>
struct global_group<std::tuple<L...>> {
  // positions from 1 (0: none) of the first global layer and of the first whose schedule differs from its
  static constexpr std::size_t first_position = first_true({is_global<L>()...});
  using schedule = typename schedule_at<first_position, ctnn::detail::pack<L...>>::type;  // void when no layer is global
  // (lists, not folds: clang nests a fold of N terms N deep and stops at 256)
  static constexpr std::size_t layers = ctnn::detail::sum_of({std::size_t{0}, std::size_t(is_global<L>())...});
  static constexpr std::size_t weights = ctnn::detail::sum_of({std::size_t{0}, std::size_t(global_weights_of<L>())...});
  static constexpr std::size_t differing_position = first_true({!global_schedule_is<L, schedule>()...});
  static constexpr bool same_schedule = check_same_schedule<differing_position, first_position>();
  static_assert(same_schedule);  // (the message is the diagnostic's above)
  static constexpr std::size_t final_nnz =
      layers ? ctnn::detail::keep_count(weights, final_sparsity_of<schedule>()) : 0;
};
template <class Net>
using global_group_of = global_group<typename Net::template bound<precision::float32>>;
}  // namespace detail

template <class Net>
inline constexpr std::size_t global_weights = detail::global_group_of<Net>::weights;
template <class Net>
inline constexpr std::size_t global_nnz = detail::global_group_of<Net>::final_nnz;

}  // namespace ctnn::pruning
