// ctnn/pruning/prune.hpp — prune_low_magnitude<Layer, Schedule, Pattern>: a pruned layer spec.
//
// Wraps a dense, conv2d, simple_rnn, lstm or gru spec (as
// tfmot.sparsity.keras.prune_low_magnitude): the bound layer is the wrapped
// one (same forward, backward, parameters) plus a uint8 mask buffer per
// pruned weight, "<weight>_mask" of its shape (role::mask, saved with the
// weights). The pruned weights are the layer's `prunable_weights` (the
// recurrent layers: kernel and recurrent_kernel, as TFMOT's RNN cells), else
// its kernel; each is a matrix of `rows` (K of a dense layer, KH*KW*C of a
// convolution, features or units of a recurrent kernel) by `cols` (its last
// axis: units, filters, gates * units) and is pruned on its own (its own
// top-k, as TFMOT's per-weight masks); the bias is never pruned. Pattern
// (pruning/masks.hpp): unstructured (TFMOT's default), n_of_m<N, M>,
// block<R, C>, units (dense and conv2d only), global_magnitude
// (pruning/global.hpp). final_nnz, the weights kept at the schedule's final
// sparsity, is a compile-time constant: per pruned weight
// max(round_half_even(n (1 - s)), 1) of its n candidates (TFMOT's top-k;
// global_magnitude: their size, a bound). Masks change only in the training
// step (pruning/update_pruning_step.hpp).
// Compile errors (one sentence, the layer's position in the instantiation):
// a sparsity outside [0, 1), a schedule that ends before it begins, N:M with
// N >= M or N = 0, rows not a multiple of M, a block that does not tile.
// Details: docs/pruning.md, "Pruned layers" and "Which weights go (patterns)".
#pragma once
#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <type_traits>

#include "../core/compile_message.hpp"
#include "../core/concepts.hpp"
#include "../core/plan.hpp"
#include "../core/shape.hpp"
#include "../layers/conv2d.hpp"
#include "../layers/dense.hpp"
#include "diagnostics.hpp"
#include "schedules.hpp"

namespace ctnn {

// ---- patterns ----
struct unstructured {
  static std::string name() { return ""; }
};
template <std::size_t N, std::size_t M>
struct n_of_m {
  static constexpr std::size_t n = N, m = M;
  static std::string name() { return "n_of_m<" + std::to_string(N) + ", " + std::to_string(M) + ">"; }
};
template <std::size_t R, std::size_t C>
struct block {
  static constexpr std::size_t rows = R, cols = C;
  static std::string name() { return "block<" + std::to_string(R) + ", " + std::to_string(C) + ">"; }
};

// Whole units (kernel columns: a dense layer's outputs, a convolution's
// filters) by the L2 norm of their weights; strip_pruning makes the layer
// narrower and the next one's input with it.
struct units {
  static std::string name() { return "units"; }
};

// Global magnitude: every layer of a network pruned with global_magnitude
// joins one group, ranked together by |w| (one threshold across them, so the
// layers whose weights matter more keep more; pruning/global.hpp). The
// group's layers share one schedule; its final sparsity is the group's.
struct global_magnitude {
  static std::string name() { return "global_magnitude"; }
};

template <class P>
inline constexpr bool is_n_of_m_v = false;
template <std::size_t N, std::size_t M>
inline constexpr bool is_n_of_m_v<n_of_m<N, M>> = true;
template <class P>
inline constexpr bool is_block_v = false;
template <std::size_t R, std::size_t C>
inline constexpr bool is_block_v<block<R, C>> = true;
// The patterns prune_low_magnitude takes (its third argument).
template <class P>
inline constexpr bool is_pruning_pattern_v = std::is_same_v<P, unstructured> || std::is_same_v<P, units> ||
                                             std::is_same_v<P, global_magnitude> || is_n_of_m_v<P> || is_block_v<P>;

namespace detail {
// tf.math.round: half to even.
constexpr double round_half_even(double v) {
  const double f = double(std::int64_t(v));  // v >= 0 here
  const double d = v - f;
  if (d > 0.5) return f + 1;
  if (d < 0.5) return f;
  return (std::int64_t(f) % 2 == 0) ? f : f + 1;
}
// How many of n candidates TFMOT's top-k keeps at sparsity s.
constexpr std::size_t keep_count(std::size_t n, double s) {
  const double k = round_half_even(double(n) * (1.0 - s));
  return k < 1 ? 1 : std::size_t(k);
}
template <class P>
constexpr std::size_t kept_in(std::size_t rows, std::size_t cols, double s) {
  if constexpr (is_n_of_m_v<P>) return rows / P::m * P::n * cols;
  else if constexpr (is_block_v<P>) return keep_count((rows / P::rows) * (cols / P::cols), s) * P::rows * P::cols;
  else if constexpr (std::is_same_v<P, units>) return keep_count(cols, s) * rows;
  else if constexpr (std::is_same_v<P, global_magnitude>) return rows * cols;  // only the group's total is known
  else return keep_count(rows * cols, s);
}
template <class P, std::size_t Rows, std::size_t Cols>
constexpr std::size_t kept_at(double s) {
  return kept_in<P>(Rows, Cols, s);
}
template <class L>
concept prunable_layer = requires {
  L::kernel_count;
  requires requires { L::K; } || requires { L::prunable_weights; };
};

// One weight prune_low_magnitude prunes: where it starts in its layer's parameters
// (elements), its matrix (rows x cols, cols its last axis) and its mask's name.
struct pruned_weight {
  std::size_t at = 0, rows = 0, cols = 0;
  std::string_view name{}, mask{};
};
constexpr std::string_view mask_name_of(std::string_view w) {
  return w == "kernel" ? "kernel_mask" : w == "recurrent_kernel" ? "recurrent_kernel_mask" : "";
}
// The names of the weights a layer has pruned: its prunable_weights, else its kernel.
template <class L>
constexpr auto prunable_names() {
  if constexpr (requires { L::prunable_weights; }) return L::prunable_weights;
  else return std::array<std::string_view, 1>{"kernel"};
}
template <class L>
constexpr auto pruned_weights_of() {
  constexpr auto names = prunable_names<L>();
  std::array<pruned_weight, names.size()> out{};
  for (std::size_t i = 0; i < names.size(); ++i) {
    std::size_t at = 0;
    for (const buffer& b : L::buffers) {
      if (b.kind != role::parameter) continue;
      if (b.name == names[i]) {
        const std::size_t cols = b.dims[b.rank - 1];
        out[i] = {at, b.extent / cols, cols, b.name, mask_name_of(b.name)};
        break;
      }
      at += b.extent;
    }
  }
  return out;
}
}  // namespace detail

template <class Spec, class Inner>
struct pruned_layer;

template <LayerSpec Layer, PruningSchedule Schedule, class Pattern = unstructured>
struct prune_low_magnitude {
  using is_layer_spec = void;
  using layer_spec = Layer;
  using schedule = Schedule;
  using pattern = Pattern;

  static std::string name() {
    std::string s = "prune_low_magnitude<" + Layer::name() + ", " + Schedule::name();
    if (!std::is_same_v<Pattern, unstructured>) s += ", " + Pattern::name();
    return s + ">";
  }

  template <Shape In, std::size_t Pos>
  static constexpr bool check() {
    using S = Schedule;
    // the first error names the position and the values; the sentences below follow
    if constexpr (!is_pruning_pattern_v<Pattern>) {
      constexpr bool located = diag::require<false, &diag::prune_pattern_text<Pos, Pattern>>();
      static_assert(is_pruning_pattern_v<Pattern>,
                    "prune_low_magnitude: the third argument must be a pruning pattern (unstructured, n_of_m<N, M>, "
                    "block<R, C>, units or global_magnitude)");
      return located;
    } else if constexpr (!(S::initial_sparsity >= 0 && S::initial_sparsity < 1 && S::final_sparsity >= 0 &&
                    S::final_sparsity < 1)) {
      constexpr bool located = diag::require<false, &diag::prune_sparsity_text<Pos, S>>();
      (void)located;
    } else if constexpr (!(S::begin_step >= 0 && S::frequency > 0 && S::power >= 1)) {
      constexpr bool located = diag::require<false, &diag::prune_steps_text<Pos, S>>();
      (void)located;
    } else if constexpr (!(S::end_step == -1 || S::end_step > S::begin_step)) {
      constexpr bool located = diag::require<false, &diag::prune_order_text<Pos, S>>();
      (void)located;
    }
    constexpr auto permille = [](double v) { return std::int64_t(v * 1000 + (v < 0 ? -0.5 : 0.5)); };
    constexpr bool s0 = diag::prune_sparsity_out_of_range<diag::layer<Pos>, diag::sparsity_permille<permille(S::initial_sparsity)>,
                                                          (S::initial_sparsity >= 0 && S::initial_sparsity < 1)>::value;
    constexpr bool s1 = diag::prune_sparsity_out_of_range<diag::layer<Pos>, diag::sparsity_permille<permille(S::final_sparsity)>,
                                                          (S::final_sparsity >= 0 && S::final_sparsity < 1)>::value;
    constexpr bool steps = diag::prune_schedule_bad_steps<diag::layer<Pos>, diag::begin_step<S::begin_step>,
                                                          diag::frequency<S::frequency>,
                                                          (S::begin_step >= 0 && S::frequency > 0 && S::power >= 1)>::value;
    constexpr bool order = diag::prune_schedule_ends_before_it_begins<diag::layer<Pos>, diag::begin_step<S::begin_step>,
                                                                      diag::end_step<S::end_step>,
                                                                      (S::end_step == -1 || S::end_step > S::begin_step)>::value;
    bool ok = s0 && s1 && steps && order;
    if constexpr (requires { Layer::template check<In, Pos>(); }) {
      if (!Layer::template check<In, Pos>()) return false;
    }
    using inner = typename Layer::template bind<In, precision::float32, cpu<>>;
    // the first error names the position ("layer 2 (prune_low_magnitude): ..."); the sentence follows
    constexpr bool prunable = detail::prunable_layer<inner>;
    if constexpr (!prunable) {
      constexpr bool located = diag::require<prunable, &diag::prune_not_prunable_text<Pos, In>>();
      constexpr bool said = diag::prune_not_prunable<diag::layer<Pos>, prunable>::value;
      (void)located, (void)said;
    } else {
      // every pruned weight (a recurrent layer's kernel, then its recurrent_kernel) meets the pattern
      constexpr auto weights = detail::pruned_weights_of<inner>();
      ok = ok && [&]<std::size_t... I>(std::index_sequence<I...>) {
        return (check_weight<Pos, weights[I].rows, weights[I].cols>() && ...);
      }(std::make_index_sequence<weights.size()>{});
      static_assert(!std::is_same_v<Pattern, units> || weights.size() == 1,
                    "prune_low_magnitude: the units pattern removes whole units of a dense or conv2d layer; a "
                    "recurrent layer is pruned unstructured, n_of_m, block or global_magnitude");
    }
    return ok && prunable;
  }

  template <std::size_t Pos, std::size_t Rows, std::size_t Cols>
  static constexpr bool check_weight() {
    if constexpr (is_n_of_m_v<Pattern>) {
      if constexpr (!(Pattern::n > 0 && Pattern::n < Pattern::m)) {
        constexpr bool located = diag::require<false, &diag::prune_n_of_m_text<Pos, Pattern::n, Pattern::m>>();
        (void)located;
      } else if constexpr (!(Rows % Pattern::m == 0)) {
        constexpr bool located = diag::require<false, &diag::prune_n_of_m_rows_text<Pos, Pattern::n, Pattern::m, Rows>>();
        (void)located;
      }
      constexpr bool nm = diag::prune_n_of_m_invalid<diag::layer<Pos>, diag::n_kept<Pattern::n>, diag::m_group<Pattern::m>,
                                                     (Pattern::n > 0 && Pattern::n < Pattern::m)>::value;
      constexpr bool fits = diag::prune_n_of_m_rows<diag::layer<Pos>, diag::kernel_rows<Rows>, diag::m_group<Pattern::m>,
                                                    (Pattern::m > 0 && Rows % Pattern::m == 0)>::value;
      return nm && fits;
    } else if constexpr (is_block_v<Pattern>) {
      if constexpr (!(Pattern::rows > 0 && Pattern::cols > 0 && Rows % Pattern::rows == 0 && Cols % Pattern::cols == 0)) {
        constexpr bool located = diag::require<false, &diag::prune_block_text<Pos, Pattern::rows, Pattern::cols, Rows, Cols>>();
        (void)located;
      }
      return diag::prune_block_does_not_tile<
          diag::layer<Pos>, diag::kernel_rows<Rows>, diag::kernel_cols<Cols>, diag::block_rows<Pattern::rows>,
          diag::block_cols<Pattern::cols>,
          (Pattern::rows > 0 && Pattern::cols > 0 && Rows % Pattern::rows == 0 && Cols % Pattern::cols == 0)>::value;
    } else {
      return true;
    }
  }

  template <Shape In, class P, class Backend>
  using bind = pruned_layer<prune_low_magnitude, typename Layer::template bind<In, P, Backend>>;
};

template <class S>
inline constexpr bool is_pruned_spec_v = false;
template <class L, class S, class P>
inline constexpr bool is_pruned_spec_v<prune_low_magnitude<L, S, P>> = true;

namespace detail {
// The layer's buffers, then one mask per pruned weight (its shape, one byte per weight).
template <std::size_t N, std::size_t W>
constexpr std::array<buffer, N + W> with_masks(const std::array<buffer, N>& in, const std::array<pruned_weight, W>& ws) {
  std::array<buffer, N + W> out{};
  for (std::size_t i = 0; i < N; ++i) out[i] = in[i];
  for (std::size_t k = 0; k < W; ++k)
    for (std::size_t i = 0; i < N; ++i)
      if (in[i].kind == role::parameter && in[i].name == ws[k].name) {
        buffer m = in[i];
        m.kind = role::mask;
        m.type = elem::u8;
        m.name = ws[k].mask;
        out[N + k] = m;
      }
  return out;
}
template <class P, std::size_t W>
constexpr std::size_t kept_of(const std::array<pruned_weight, W>& ws, double s) {
  std::size_t n = 0;
  for (const auto& w : ws) n += kept_in<P>(w.rows, w.cols, s);
  return n;
}
// The pruned weights lie one after the other from the layer's first parameter (their masks
// too): the pruning step walks them as one run of masked_count values.
template <std::size_t W>
constexpr bool one_run(const std::array<pruned_weight, W>& ws) {
  std::size_t at = 0;
  for (const auto& w : ws) {
    if (w.at != at || w.mask.empty()) return false;
    at += w.rows * w.cols;
  }
  return true;
}
}  // namespace detail

// The bound pruned layer: the wrapped layer's computation, plus its mask.
template <class Spec, class Inner>
struct pruned_layer : Inner {
  using inner = Inner;
  using spec = Spec;
  using schedule = typename Spec::schedule;
  using pattern = typename Spec::pattern;
  static constexpr bool is_pruned = true;
  // the pruned weights (pruned_weight: start, rows, cols, mask), one run from the first parameter
  static constexpr auto pruned = detail::pruned_weights_of<Inner>();
  static_assert(detail::one_run(pruned), "prune_low_magnitude: the pruned weights must be the layer's first parameters");
  static constexpr std::size_t rows = pruned[0].rows, cols = pruned[0].cols;  // the kernel's
  static constexpr std::size_t masked_count = [] {
    std::size_t n = 0;
    for (const auto& w : pruned) n += w.rows * w.cols;
    return n;
  }();
  static constexpr auto buffers = detail::with_masks(Inner::buffers, pruned);
  static constexpr std::size_t final_nnz = detail::kept_of<pattern>(pruned, schedule::final_sparsity);
  static constexpr std::size_t final_units = detail::keep_count(cols, schedule::final_sparsity);  // units pattern
  static std::string name() { return Spec::name(); }

  template <class Slot>
  static void init(Slot s, rng& g) {
    Inner::init(s, g);
    for (std::size_t i = 0; i < masked_count; ++i) s.mask[i] = 1;
  }
};

template <class L>
concept PrunedLayer = requires { requires L::is_pruned; };

}  // namespace ctnn
