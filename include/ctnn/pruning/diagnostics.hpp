// ctnn/pruning/diagnostics.hpp — the compile-time messages of the pruning wrapper.
//
// As core/diagnostics.hpp: each check is a class template whose arguments
// carry the layer's position and the numbers involved, and whose
// static_assert is one sentence naming the component. Sparsities are shown
// in thousandths (sparsity_permille<1200> is 1.2), since a class template
// argument list prints integers most readably.
#pragma once
#include <cstddef>
#include <cstdint>

#include "../core/compile_message.hpp"
#include "../core/diagnostics.hpp"

namespace ctnn::diag {

template <std::int64_t> struct sparsity_permille {};
template <std::int64_t> struct begin_step {};
template <std::int64_t> struct end_step {};
template <std::int64_t> struct frequency {};
template <std::size_t> struct n_kept {};
template <std::size_t> struct m_group {};
template <std::size_t> struct block_rows {};
template <std::size_t> struct block_cols {};
template <std::size_t> struct kernel_cols {};

template <class Layer, class Sparsity, bool Ok>
struct prune_sparsity_out_of_range {
  static_assert(Ok, "prune_low_magnitude: the schedule's sparsity for this layer must be >= 0 and < 1");
  static constexpr bool value = Ok;
};
template <class Layer, class Begin, class End, bool Ok>
struct prune_schedule_ends_before_it_begins {
  static_assert(Ok, "prune_low_magnitude: the schedule for this layer ends before it begins (end_step <= begin_step)");
  static constexpr bool value = Ok;
};
template <class Layer, class Begin, class Frequency, bool Ok>
struct prune_schedule_bad_steps {
  static_assert(Ok, "prune_low_magnitude: the schedule for this layer needs begin_step >= 0, frequency > 0 and power >= 1");
  static constexpr bool value = Ok;
};
template <class Layer, class N, class M, bool Ok>
struct prune_n_of_m_invalid {
  static_assert(Ok, "prune_low_magnitude: N:M sparsity for this layer needs 0 < N < M (N kept of every M)");
  static constexpr bool value = Ok;
};
template <class Layer, class Rows, class M, bool Ok>
struct prune_n_of_m_rows {
  static_assert(Ok, "prune_low_magnitude: N:M sparsity for this layer needs the kernel's input dimension to be a multiple of M");
  static constexpr bool value = Ok;
};
template <class Layer, class Rows, class Cols, class BR, class BC, bool Ok>
struct prune_block_does_not_tile {
  static_assert(Ok, "prune_low_magnitude: the pruning block for this layer does not tile its kernel matrix");
  static constexpr bool value = Ok;
};
template <std::size_t> struct first_global_layer {};
template <class Layer, class FirstGlobal, bool Ok>
struct prune_global_schedules_differ {
  static_assert(Ok, "prune_low_magnitude: every layer pruned with global_magnitude must have the same schedule (one "
                    "threshold, one sparsity for the group): this layer's differs from the first global layer's");
  static constexpr bool value = Ok;
};
// First-line messages (diag::require): the position, the wrapper, the values.
// "layer 2 (prune_low_magnitude): final sparsity 1.2 of the schedule is not in [0, 1)"
template <std::size_t Pos, class S>
constexpr message prune_sparsity_text() {
  message m;
  const bool final_bad = !(S::final_sparsity >= 0 && S::final_sparsity < 1);
  m << "layer " << Pos << " (prune_low_magnitude): " << (final_bad ? "final" : "initial") << " sparsity ";
  m.decimal(final_bad ? S::final_sparsity : S::initial_sparsity) << " of the schedule is not in [0, 1)";
  return m;
}
// "layer 1 (prune_low_magnitude): int is not a pruning pattern (unstructured, n_of_m<N, M>, ...)"
template <std::size_t Pos, class Pattern>
constexpr message prune_pattern_text() {
  message m;
  m << "layer " << Pos << " (prune_low_magnitude): ";
  m.type<Pattern>() << " is not a pruning pattern (unstructured, n_of_m<N, M>, block<R, C>, units, global_magnitude)";
  return m;
}
// "layer 1 (prune_low_magnitude): the schedule ends at step 100, before it begins (step 500)"
template <std::size_t Pos, class S>
constexpr message prune_order_text() {
  message m;
  m << "layer " << Pos << " (prune_low_magnitude): the schedule ends at step " << S::end_step
    << ", before it begins (step " << S::begin_step << ")";
  return m;
}
template <std::size_t Pos, class S>
constexpr message prune_steps_text() {
  message m;
  m << "layer " << Pos << " (prune_low_magnitude): the schedule needs begin_step >= 0, frequency > 0 and power >= 1; it has "
    << S::begin_step << ", " << S::frequency << " and ";
  m.decimal(S::power);
  return m;
}
// "layer 3 (prune_low_magnitude): n_of_m<4, 2> needs 0 < N < M (N kept of every M)"
template <std::size_t Pos, std::size_t N, std::size_t M>
constexpr message prune_n_of_m_text() {
  message m;
  m << "layer " << Pos << " (prune_low_magnitude): n_of_m<" << N << ", " << M << "> needs 0 < N < M (N kept of every M)";
  return m;
}
template <std::size_t Pos, std::size_t N, std::size_t M, std::size_t Rows>
constexpr message prune_n_of_m_rows_text() {
  message m;
  m << "layer " << Pos << " (prune_low_magnitude): n_of_m<" << N << ", " << M << "> needs the kernel rows (" << Rows
    << ") to be a multiple of " << M;
  return m;
}
template <std::size_t Pos, std::size_t BR, std::size_t BC, std::size_t Rows, std::size_t Cols>
constexpr message prune_block_text() {
  message m;
  m << "layer " << Pos << " (prune_low_magnitude): block<" << BR << ", " << BC << "> does not tile the " << Rows << "x"
    << Cols << " kernel";
  return m;
}
// "layer 3 (prune_low_magnitude): its global_magnitude schedule differs from that of layer 1, ..."
template <std::size_t Pos, std::size_t First>
constexpr message prune_global_text() {
  message m;
  m << "layer " << Pos << " (prune_low_magnitude): its global_magnitude schedule differs from that of layer " << First
    << "; one group has one threshold and one schedule";
  return m;
}
// "layer 2 (prune_low_magnitude): the wrapped layer (input 784) has no kernel to prune; wrap dense, conv2d or a recurrent layer"
template <std::size_t Pos, class In>
constexpr message prune_not_prunable_text() {
  message m;
  m << "layer " << Pos << " (prune_low_magnitude): the wrapped layer (input ";
  m.dims(In::dims) << ") has no kernel to prune; wrap dense, conv2d or a recurrent layer";
  return m;
}
template <class Layer, bool Ok>
struct prune_not_prunable {
  static_assert(Ok, "prune_low_magnitude: this layer has no kernel to prune (dense, conv2d, simple_rnn, lstm and gru are prunable)");
  static constexpr bool value = Ok;
};

// strip_pruning<layout::csc> / <layout::rows> (pruning/strip.hpp) on a layer with more than 1 weight
// in OneIn kept: "layout::csc, layer 1, 80.0 % sparse: below 88.9 % its batch-1 kernel runs under
// 0.67x dense; strip to layout::bitmap (layout::block<R, C> for block-pruned layers)". Layout and
// sparsity come first.
template <class Layout, std::size_t Pos, std::size_t Kept, std::size_t Total>
constexpr message strip_layout_too_dense_text() {
  message m;
  const std::size_t permille = ((Total - Kept) * 1000 + Total / 2) / Total, floor = 1000 - 1000 / Layout::kept_one_in;
  m << Layout::spelled << ", layer " << Pos << ", " << permille / 10 << '.' << permille % 10 << " % sparse (" << Kept
    << " of " << Total << " weights kept): below " << floor / 10 << '.' << floor % 10
    << " % its batch-1 kernel runs under 0.67x dense; strip to layout::bitmap (layout::block<R, C> for block-pruned "
       "layers)";
  return m;
}
template <class Layer, class Sparsity, bool Ok>
struct strip_layout_too_dense {
  static_assert(Ok, "strip_pruning: layout::csc and layout::rows are retired below 1 weight in 9 kept (88.9 % "
                    "sparsity), where their per-weight gathers make them slower than dense by more than 1.5x at "
                    "batch 1; strip this layer to layout::bitmap, or prune it in blocks and strip to layout::block");
  static constexpr bool value = Ok;
};

}  // namespace ctnn::diag
