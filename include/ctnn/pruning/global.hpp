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
  if constexpr (is_global<L>()) return L::kernel_count;
  else return 0;
}

template <class... L>
struct first_global_schedule {
  using type = void;
};
template <class L0, class... L>
  requires(is_global<L0>())
struct first_global_schedule<L0, L...> {
  using type = typename L0::schedule;
};
template <class L0, class... L>
  requires(!is_global<L0>())
struct first_global_schedule<L0, L...> {
  using type = typename first_global_schedule<L...>::type;
};
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

template <class Layers>
struct global_group;
template <class... L>
struct global_group<std::tuple<L...>> {
  using schedule = typename first_global_schedule<L...>::type;  // void when no layer is global
  static constexpr std::size_t layers = (std::size_t(is_global<L>()) + ... + 0);
  static constexpr std::size_t weights = (global_weights_of<L>() + ... + 0);
  // positions from 1 (0: none) of the first global layer and of the first whose schedule differs from its
  static constexpr std::size_t first_position = first_true({is_global<L>()...});
  static constexpr std::size_t differing_position = first_true({!global_schedule_is<L, schedule>()...});
  static constexpr bool same_schedule =
      diag::prune_global_schedules_differ<diag::layer<differing_position>, diag::first_global_layer<first_position>,
                                          differing_position == 0>::value;
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
