// ctnn/pruning/strip.hpp — strip_pruning: a trained pruned model to a compact network type.
//
// stripped_t<Net, Layout = layout::fastest> replaces, in a network type, every
// prune_low_magnitude<dense<N, Act, ...>, S, Pattern> by Layout::layer<K, N,
// NNZ, Act> (pruning/layout.hpp: the layout contract; layout::fastest: csc
// where at most 1 weight in 9 is kept, bitmap otherwise, block<R, C> for
// Pattern block<R, C>; layout::csc and layout::rows take only layers keeping
// at most 1 weight in 9, else a compile error naming the layer), NNZ the pruned layer's
// final_nnz (global_magnitude: min(K N, pruning::global_nnz<Net>)); a pruned
// conv2d, simple_rnn, lstm or gru by the layer itself (masked weights 0: no
// sparse recurrent layer); regularizers of the sparse
// layers are dropped. Pattern units: the layer becomes dense<U> / conv2d<U>,
// U = max(round_half_even(N (1 - final sparsity)), 1), and the layers after it
// shrink down to the next unpruned dense or conv2d through the layers that
// declare keeps_channels (activations and batch_norm too); a removed unit's
// constant output moves into the consumer's bias (a same-padded conv2d cannot
// take a non-zero one: an error at strip time).
//   strip_pruning<Layout>(m)       a model of stripped_t<Net, Layout> holding m's weights
//   strip_pruning_to<Target>(m)    the same into a network type Target of the user's choice
//   strip_pruning_csc(m)           strip_pruning<layout::csc>(m)
//   copy_variables(from, to)       every buffer of `from` into the same buffer of `to`
// Throws std::invalid_argument naming the layer when a mask keeps more weights
// than NNZ (train to the schedule's end step) or a buffer of Target has no
// counterpart. Predictions equal the masked model's up to float rounding.
// Details: docs/pruning.md, "Stripping to a compact network type".
#pragma once
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <initializer_list>
#include <cstring>
#include <stdexcept>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "../layers/activation.hpp"
#include "../layers/batch_norm.hpp"
#include "../layers/conv2d.hpp"
#include "../layers/dense.hpp"
#include "../layers/dropout.hpp"
#include "../layers/global_average_pool.hpp"
#include "../layers/pool2d.hpp"
#include "../layers/reshape.hpp"
#include "../layers/sparse_dense.hpp"
#include "../layers/sparse_dense_block.hpp"
#include "../layers/sparse_dense_csc.hpp"
#include "../train/model.hpp"
#include "global.hpp"
#include "layout.hpp"
#include "prune.hpp"

namespace ctnn {

namespace layout {
// strip_pruning's default layout for a pruned dense layer of Total weights keeping Kept, by target
// architecture (docs/pruning.md, "Which layout"): csc where it may be chosen (at most 1 weight in
// per_weight_kept_one_in kept, 88.9 % sparsity: layers/sparse_dense_csc.hpp; there it measured
// faster than bitmap at batches 1 to 64 on AVX-512 and AVX2), bitmap otherwise (csc is retired
// below that sparsity). The same on every architecture; default_for<Arch> (Kept = 0): the layout
// at high sparsity.
template <class Arch, long long Kept = 0, long long Total = 1>
using default_for =
    std::conditional_t<(Kept * static_cast<long long>(per_weight_kept_one_in) > Total), bitmap, csc>;
// The default tag: default_for<the build's architecture, NNZ, K N>, except that a layer pruned with
// block<R, C> strips to block<R, C> (one vector FMA per kept block: the fastest on every arch).
struct fastest {
  template <long long K, long long N, long long NNZ, class Act>
  using layer = typename default_for<kernels::cpu::default_arch, NNZ, K * N>::template layer<K, N, NNZ, Act>;
  static std::string name() { return "fastest"; }
};
}  // namespace layout

namespace pruning::detail {
// ---- the stripped network type ----
template <class Layout, std::size_t GlobalNNZ, class Spec, class Bound>
struct strip_spec {
  using type = Spec;
};
template <class Layout, std::size_t G, class L, class S, class P, class Bound>
struct strip_spec<Layout, G, prune_low_magnitude<L, S, P>, Bound> {
  using type = L;
};
template <class Layout, std::size_t G, long long N, class Act, class O1, class O2, class S, class P, class Bound>
struct strip_spec<Layout, G, prune_low_magnitude<dense<N, Act, O1, O2>, S, P>, Bound> {
  static constexpr std::size_t nnz =
      std::is_same_v<P, global_magnitude> ? std::min(Bound::kernel_count, G) : Bound::final_nnz;
  using type = typename Layout::template layer<static_cast<long long>(Bound::K), N, static_cast<long long>(nnz), Act>;
};
template <std::size_t G, long long N, class Act, class O1, class O2, class S, std::size_t R, std::size_t C, class Bound>
struct strip_spec<layout::fastest, G, prune_low_magnitude<dense<N, Act, O1, O2>, S, block<R, C>>, Bound> {
  using type = typename layout::block<R, C>::template layer<static_cast<long long>(Bound::K), N,
                                                            static_cast<long long>(Bound::final_nnz), Act>;
};
template <class Layout, std::size_t G, long long N, class Act, class O1, class O2, class S, class Bound>
struct strip_spec<Layout, G, prune_low_magnitude<dense<N, Act, O1, O2>, S, units>, Bound> {
  using type = dense<static_cast<long long>(Bound::final_units), Act, O1, O2>;
};
template <class Layout, std::size_t G, std::size_t F, std::size_t KH, std::size_t KW, std::size_t St, padding Pad,
          class Act, class Reg, class Init, class S, class Bound>
struct strip_spec<Layout, G, prune_low_magnitude<conv2d<F, KH, KW, St, Pad, Act, Reg, Init>, S, units>, Bound> {
  using type = conv2d<Bound::final_units, KH, KW, St, Pad, Act, Reg, Init>;
};

// A layout that declares kept_one_in (csc, rows: layers/sparse_dense_csc.hpp) takes a pruned dense
// layer (not units-pruned) only when it keeps at most 1 weight in kept_one_in (a global_magnitude
// layer: when its group does, GW weights keeping G, since a layer's own share is known only after
// training); otherwise the first error names the layout, the layer (Pos) and its sparsity, and the
// layout to use instead.
template <class Layout, std::size_t G, std::size_t GW, class Spec, class Bound, std::size_t Pos>
struct layout_takes {
  static constexpr bool value = true;
};
template <class Layout, std::size_t G, std::size_t GW, long long N, class Act, class O1, class O2, class S, class P,
          class Bound, std::size_t Pos>
  requires(requires { Layout::kept_one_in; } && !std::is_same_v<P, units>)
struct layout_takes<Layout, G, GW, prune_low_magnitude<dense<N, Act, O1, O2>, S, P>, Bound, Pos> {
  static constexpr bool global = std::is_same_v<P, global_magnitude>;
  static constexpr std::size_t total = global ? GW : Bound::kernel_count;
  static constexpr std::size_t kept = global ? G : Bound::final_nnz;
  static constexpr bool ok = kept * Layout::kept_one_in <= total;
  static constexpr bool located = diag::require<ok, &diag::strip_layout_too_dense_text<Layout, Pos, kept, total>>();
  static constexpr bool value =
      located && diag::strip_layout_too_dense<diag::layer<Pos>,
                                              diag::sparsity_permille<std::int64_t(((total - kept) * 1000 + total / 2) /
                                                                                   total)>,
                                              ok>::value;
};
template <class Layout, std::size_t G, std::size_t GW, class Spec, class Bound, std::size_t Pos>
struct checked_strip_spec : strip_spec<Layout, G, Spec, Bound> {
  static_assert(layout_takes<Layout, G, GW, Spec, Bound, Pos>::value);
};

template <class Layout, std::size_t G, std::size_t GW, class In, class Bound, class... Ls, std::size_t... I>
auto strip_all(std::index_sequence<I...>)
    -> sequential<In,
                  typename checked_strip_spec<Layout, G, GW, Ls, ctnn::detail::type_at_t<I, Bound>, I + 1>::type...>;

template <class Net, class Layout>
struct stripped;
template <class Layout, class In, class... Ls>
struct stripped<sequential<In, Ls...>, Layout> {
  using bound = typename sequential<In, Ls...>::template bound<float>;
  static constexpr std::size_t global = global_group<bound>::final_nnz;
  using type = decltype(strip_all<Layout, global, global_group<bound>::weights, In, bound, Ls...>(
      std::index_sequence_for<Ls...>{}));
};

// ---- bound layer kinds ----
template <class L>
constexpr bool units_pruned() {
  if constexpr (PrunedLayer<L>) return std::is_same_v<typename L::pattern, units>;
  else return false;
}
template <class L>
inline constexpr bool is_dense_layer_v = false;
template <class Spec, class In, class P, class B>
inline constexpr bool is_dense_layer_v<dense_layer<Spec, In, P, B>> = true;
template <class L>
struct conv2d_layer_traits {
  static constexpr bool value = false;
};
template <class Spec, class In, class P, class B>
struct conv2d_layer_traits<conv2d_layer<Spec, In, P, B>> {
  static constexpr bool value = true;
  static constexpr padding pad = Spec::pad;
};
template <class L>
inline constexpr bool is_batch_norm_layer_v = false;
template <class Spec, class In, class P, class B>
inline constexpr bool is_batch_norm_layer_v<batch_norm_layer<Spec, In, P, B>> = true;
template <class L>
struct activation_layer_traits {
  static constexpr bool value = false;
};
template <class A, class In, class P, class B>
struct activation_layer_traits<activation_layer<A, In, P, B>> {
  static constexpr bool value = true;
  using act = A;
};
// Layers that keep every channel apart and a constant channel constant (at inference):
// each says so itself (static constexpr bool keeps_channels, beside the layer).
template <class L>
inline constexpr bool keeps_channels_v = [] {
  if constexpr (requires { L::keeps_channels; }) return bool(L::keeps_channels);
  else return false;
}();
template <class>
inline constexpr bool always_false_v = false;

// ---- the variables of a model (core/plan.hpp) ----
using ctnn::detail::find_variable;
inline const variable_ref* find_role(const std::vector<variable_ref>& vs, std::size_t layer, role r) {
  for (const auto& v : vs)
    if (v.layer == layer && v.kind == r) return &v;
  return nullptr;
}
// Variable v's values as V, the type its elements have (checked: a logic error otherwise). The
// model's arena is storage whose V objects exist implicitly, so the bytes are viewed, not converted.
template <class V>
V* values_of(const variable_ref& v) {
  if (v.element_bytes != sizeof(V))
    throw std::logic_error("strip_pruning: layer " + std::to_string(v.layer + 1) + "'s " + std::string(v.name) +
                           " holds " + std::to_string(v.element_bytes) + "-byte elements, not " +
                           std::to_string(sizeof(V)));
  return static_cast<V*>(static_cast<void*>(v.data));
}
template <class V>
const V* src_data(const std::vector<variable_ref>& vs, std::size_t layer, std::string_view name) {
  const auto* v = find_variable(vs, layer, name);
  if (!v) throw std::logic_error("strip_pruning: layer " + std::to_string(layer + 1) + " has no " + std::string(name));
  return values_of<V>(*v);
}
template <class V>
V* dst_data(const std::vector<variable_ref>& vs, std::size_t layer, std::string_view name) {
  const auto* v = find_variable(vs, layer, name);
  if (!v) throw std::logic_error("strip_pruning: layer " + std::to_string(layer + 1) + " has no " + std::string(name));
  return values_of<V>(*v);
}
}  // namespace pruning::detail

template <class Net, class Layout = layout::fastest>
using stripped_t = typename pruning::detail::stripped<Net, Layout>::type;

// Copies every buffer of `from` into the buffer of `to` with the same layer,
// name, role and shape (a trained dense model into its pruned network type,
// whose masks stay as they are); returns how many were copied.
template <class A, class B>
std::size_t copy_variables(const A& from, B& to) {
  std::size_t n = 0;
  from.with_variables([&](const std::vector<variable_ref>& src) {
    to.for_each_variable([&](const variable_ref& d) {
      const auto* s = pruning::detail::find_variable(src, d.layer, d.name);
      if (!s || s->kind != d.kind || s->rank != d.rank || s->dims != d.dims || s->element_bytes != d.element_bytes)
        return;
      std::memcpy(d.data, s->data, d.extent * d.element_bytes);
      ++n;
    });
  });
  return n;
}

namespace pruning::detail {
// What removing units or filters of one layer leaves to the layers after it.
struct channel_cut {
  std::size_t layer = 0;             // the pruned layer (0-based)
  std::vector<std::size_t> kept;     // the kept channels, ascending
  std::vector<double> value;         // per channel: the constant a removed one carries (kept: unused)
  std::vector<std::uint8_t> keep;    // per channel: 1 when kept
};

// Layer I (dense or conv2d, pruned by units) keeps its unmasked kernel columns and their biases.
template <std::size_t I, class S, class Backend, class V>
channel_cut strip_units(const std::vector<variable_ref>& src, const std::vector<variable_ref>& dst) {
  using Act = typename S::inner::Act;
  constexpr std::size_t K = S::rows, N = S::cols;
  const V* w = src_data<V>(src, I, "kernel");
  const V* b = src_data<V>(src, I, "bias");
  const auto* mask = src_data<std::uint8_t>(src, I, "kernel_mask");
  V* dw = dst_data<V>(dst, I, "kernel");
  V* db = dst_data<V>(dst, I, "bias");
  const std::size_t kept_n = find_variable(dst, I, "bias")->extent;
  channel_cut cut;
  cut.layer = I;
  cut.value.assign(N, 0.0);
  cut.keep.assign(N, 0);
  for (std::size_t j = 0; j < N; ++j)
    if (mask[j]) {
      cut.kept.push_back(j);
      cut.keep[j] = 1;
    }
  if (cut.kept.size() != kept_n)
    throw std::invalid_argument("strip_pruning: layer " + std::to_string(I + 1) + " keeps " +
                                std::to_string(cut.kept.size()) + " units, not the " + std::to_string(kept_n) +
                                " its final sparsity gives; train until the schedule's end step");
  for (std::size_t k = 0; k < K; ++k)
    for (std::size_t c = 0; c < kept_n; ++c) dw[k * kept_n + c] = w[k * N + cut.kept[c]];
  for (std::size_t c = 0; c < kept_n; ++c) db[c] = b[cut.kept[c]];
  for (std::size_t j = 0; j < N; ++j)
    if (!cut.keep[j]) {
      V a = b[j];
      Act::template forward<Backend>(&a, 1, 1);
      cut.value[j] = double(a);
    }
  return cut;
}

// The consumer of a cut: rows r = p * C + c of a [Rows x M] matrix (p: position,
// c: channel) keep the kept channels; the removed ones' constants go into the bias.
template <class V>
void cut_rows(const channel_cut& cut, std::size_t rows, std::size_t m, const V* w, const V* b, V* dw, V* db) {
  const std::size_t C = cut.keep.size(), U = cut.kept.size(), P = rows / C;
  std::vector<double> bias(b, b + m);
  for (std::size_t p = 0; p < P; ++p)
    for (std::size_t c = 0; c < C; ++c) {
      if (cut.keep[c] || cut.value[c] == 0.0) continue;
      for (std::size_t o = 0; o < m; ++o) bias[o] += cut.value[c] * double(w[(p * C + c) * m + o]);
    }
  for (std::size_t o = 0; o < m; ++o) db[o] = V(bias[o]);
  for (std::size_t p = 0; p < P; ++p)
    for (std::size_t u = 0; u < U; ++u)
      std::copy(w + (p * C + cut.kept[u]) * m, w + (p * C + cut.kept[u] + 1) * m, dw + (p * U + u) * m);
}

// Layers J, J + 1, ... after a cut of C channels, down to the consumer; marks them done.
template <std::size_t J, class Layers, std::size_t C, class Backend, class V>
void shrink_after(channel_cut& cut, const std::vector<variable_ref>& src, const std::vector<variable_ref>& dst,
                  std::vector<bool>& done) {
  if constexpr (J >= std::tuple_size_v<Layers>) {
    static_assert(always_false_v<Layers>,
                  "strip_pruning: a layer pruned by units or filters must be followed, through layers that keep "
                  "channels, by an unpruned dense or conv2d layer");
  } else {
    using L = ctnn::detail::type_at_t<J, Layers>;
    done[J] = true;
    const std::string here = "strip_pruning: layer " + std::to_string(J + 1);
    if constexpr (PrunedLayer<L>) {
      static_assert(always_false_v<L>,
                    "strip_pruning: the dense or conv2d layer after one pruned by units or filters must not be pruned "
                    "itself");
    } else if constexpr (is_dense_layer_v<L>) {
      static_assert(L::K % C == 0, "strip_pruning: the dense layer after a unit- or filter-pruned layer must read "
                                   "whole channels (its input width a multiple of the channels)");
      constexpr std::size_t M = L::out_shape::size;
      cut_rows<V>(cut, L::K, M, src_data<V>(src, J, "kernel"), src_data<V>(src, J, "bias"), dst_data<V>(dst, J, "kernel"),
                  dst_data<V>(dst, J, "bias"));
    } else if constexpr (conv2d_layer_traits<L>::value) {
      static_assert(L::C == C, "strip_pruning: the conv2d after a filter-pruned layer must read its channels");
      if constexpr (conv2d_layer_traits<L>::pad == padding::same)
        for (std::size_t c = 0; c < C; ++c)
          if (!cut.keep[c] && cut.value[c] != 0.0)
            throw std::invalid_argument(
                here + " (conv2d, padding::same) cannot take the constant output " + std::to_string(cut.value[c]) +
                " of the filter " + std::to_string(c) + " removed from layer " + std::to_string(cut.layer + 1) +
                " into its bias (its border windows read zero padding there); use padding::valid");
      // kernel [KH, KW, C, F] as rows (kh, kw, c) = p * C + c of an [KH KW C x F] matrix
      cut_rows<V>(cut, L::K, L::F, src_data<V>(src, J, "kernel"), src_data<V>(src, J, "bias"),
                  dst_data<V>(dst, J, "kernel"), dst_data<V>(dst, J, "bias"));
    } else if constexpr (is_batch_norm_layer_v<L>) {
      static_assert(L::C == C, "strip_pruning: the batch_norm after a unit- or filter-pruned layer must normalize its "
                               "channels (the last axis)");
      const V* gamma = src_data<V>(src, J, "gamma");
      const V* beta = src_data<V>(src, J, "beta");
      const V* mean = src_data<V>(src, J, "moving_mean");
      const V* var = src_data<V>(src, J, "moving_variance");
      for (const char* name : {"gamma", "beta", "moving_mean", "moving_variance"}) {
        const V* s = src_data<V>(src, J, name);
        V* d = dst_data<V>(dst, J, name);
        for (std::size_t u = 0; u < cut.kept.size(); ++u) d[u] = s[cut.kept[u]];
      }
      for (std::size_t c = 0; c < C; ++c)
        if (!cut.keep[c])
          cut.value[c] = double(gamma[c]) * (cut.value[c] - double(mean[c])) / std::sqrt(double(var[c]) + L::Epsilon) +
                         double(beta[c]);
      shrink_after<J + 1, Layers, C, Backend, V>(cut, src, dst, done);
    } else if constexpr (activation_layer_traits<L>::value) {
      using A = typename activation_layer_traits<L>::act;
      static_assert(!std::is_same_v<A, softmax>, "strip_pruning: a softmax mixes channels: it cannot follow a "
                                                  "unit- or filter-pruned layer before the next dense or conv2d");
      for (std::size_t c = 0; c < C; ++c)
        if (!cut.keep[c]) {
          V a = V(cut.value[c]);
          A::template forward<Backend>(&a, 1, 1);
          cut.value[c] = double(a);
        }
      shrink_after<J + 1, Layers, C, Backend, V>(cut, src, dst, done);
    } else if constexpr (keeps_channels_v<L>) {
      shrink_after<J + 1, Layers, C, Backend, V>(cut, src, dst, done);
    } else {
      static_assert(always_false_v<L>,
                    "strip_pruning: only activations, batch_norm, pooling, dropout, global_average_pool and flatten "
                    "may stand between a unit- or filter-pruned layer and the next dense or conv2d layer");
    }
  }
}
}  // namespace pruning::detail

// Strips model m into the network type Target: the same layers as stripped_t<Net>
// (any layout per layer, any NNZ that holds the kept weights).
template <class Target, class Net, class P, class B>
model<Target, P, B> strip_pruning_to(const model<Net, P, B>& m) {
  using src_layers = typename model<Net, P, B>::layers;
  using dst_model = model<Target, P, B>;
  using dst_layers = typename dst_model::layers;
  using V = typename dst_model::variable_type;
  static_assert(std::tuple_size_v<src_layers> == std::tuple_size_v<dst_layers>,
                "strip_pruning_to: the target network must have as many layers as the pruned one");
  dst_model out(m.seed());
  std::vector<bool> done(std::tuple_size_v<src_layers>, false);
  // both models' variables through host views held until the copy is done (written back to out's memory)
  m.with_variables([&](const std::vector<variable_ref>& src) {
  out.with_variables([&](const std::vector<variable_ref>& dst) {
  [&]<std::size_t... I>(std::index_sequence<I...>) {
    (void)std::initializer_list<int>{(
        [&] {
          using S = ctnn::detail::type_at_t<I, src_layers>;
          using D = ctnn::detail::type_at_t<I, dst_layers>;
          if (done[I]) return;  // shrunk with a unit- or filter-pruned layer before it
          const std::string here = "strip_pruning: layer " + std::to_string(I + 1);
          if constexpr (pruning::detail::units_pruned<S>()) {
            auto cut = pruning::detail::strip_units<I, S, B, V>(src, dst);
            pruning::detail::shrink_after<I + 1, src_layers, S::cols, B, V>(cut, src, dst, done);
          } else if constexpr (PrunedLayer<S> && requires { D::NNZ; }) {
            static_assert(D::K == S::rows && D::N == S::cols,
                          "strip_pruning_to: a sparse layer of the target must have the pruned layer's inputs and units");
            const V* w = pruning::detail::src_data<V>(src, I, "kernel");
            const auto* keep = pruning::detail::src_data<std::uint8_t>(src, I, "kernel_mask");
            V* values = pruning::detail::dst_data<V>(dst, I, "values");
            std::byte* meta = pruning::detail::find_role(dst, I, role::metadata)->data;
            const std::size_t kept = D::template pack<V>(w, keep, values, meta);
            if (kept > D::NNZ)
              throw std::invalid_argument(here + " keeps " + std::to_string(kept) + " weights, more than the " +
                                          std::to_string(D::NNZ) +
                                          " its stripped type stores (from its final sparsity); train until the "
                                          "schedule's end step");
            const auto* bs = pruning::detail::find_variable(src, I, "bias");
            std::memcpy(pruning::detail::find_variable(dst, I, "bias")->data, bs->data, bs->extent * bs->element_bytes);
          } else {
            for (const auto& d : dst) {
              if (d.layer != I) continue;
              const auto* s = pruning::detail::find_variable(src, I, d.name);
              if (!s || s->extent != d.extent || s->element_bytes != d.element_bytes)
                throw std::invalid_argument(here + "'s " + std::string(d.name) + " (" + std::to_string(d.extent) +
                                            " values) has no counterpart of that size in the pruned model");
              std::memcpy(d.data, s->data, d.extent * d.element_bytes);
              if constexpr (PrunedLayer<S>) {  // a pruned conv2d or recurrent layer: each pruned weight masked
                for (const auto& p : S::pruned)
                  if (d.name == p.name) {
                    const auto* keep = pruning::detail::src_data<std::uint8_t>(src, I, p.mask);
                    V* w = pruning::detail::values_of<V>(d);
                    for (std::size_t i = 0; i < d.extent; ++i)
                      if (!keep[i]) w[i] = V(0);
                  }
              }
            }
          }
        }(),
        0)...};  // a list, not a fold: clang nests a fold of N terms N deep (limit 256)
  }(std::make_index_sequence<std::tuple_size_v<src_layers>>{});
  });
  });
  return out;
}

// Strips model m into stripped_t<Net, Layout>: strip_pruning(m) (layout::fastest: the
// architecture's default, block<R, C> for block-pruned layers), strip_pruning<layout::bitmap>(m)
// (the smallest files), strip_pruning<layout::csc>(m) (for speed at high sparsity).
// (The return type, model<stripped_t<Net, Layout>, P, B>, is deduced: clang 19 would bind the
// network to a Layout that is none before it checks the constraint, a hard error that hid the
// overload below.)
template <SparseLayout Layout = layout::fastest, class Net, class P, class B>
auto strip_pruning(const model<Net, P, B>& m) {
  return strip_pruning_to<stripped_t<Net, Layout>>(m);
}

namespace detail {
// "strip_pruning<ctnn::unstructured>: not a sparse layout (layout::fastest, bitmap, csc, ...)"
template <class Layout>
constexpr diag::message not_a_layout_text() {
  diag::message m;
  m << "strip_pruning<";
  m.type<Layout>() << ">: not a sparse layout (layout::fastest, bitmap, csc, rows, block<R, C>); a pruning pattern "
                      "goes to prune_low_magnitude";
  return m;
}
}  // namespace detail
// strip_pruning<X>(m) with an X that is no layout: the first error names X, then the layout
// contract's missing piece.
template <class Layout, class Net, class P, class B>
  requires(!SparseLayout<Layout>)
int strip_pruning(const model<Net, P, B>&) {
  constexpr bool located = diag::require<false, &detail::not_a_layout_text<Layout>>();
  static_assert(SparseLayout<Layout>);
  return located;
}

// The documented spelling of strip_pruning<layout::csc>(m).
template <class Net, class P, class B>
model<stripped_t<Net, layout::csc>, P, B> strip_pruning_csc(const model<Net, P, B>& m) {
  return strip_pruning<layout::csc>(m);
}

}  // namespace ctnn
