// ctnn/pruning/strip.hpp — strip_pruning: a trained pruned model to a compact network type.
//
// stripped_t<Net> replaces, in a network type, every
//   prune_low_magnitude<dense<N, Act, Options...>, S, Pattern>  by  sparse_dense<K, N, NNZ, Act>
// where K is the layer's input width and NNZ its pruned_layer's final_nnz (a
// compile-time constant from the schedule's final sparsity and the pattern),
// and every prune_low_magnitude<conv2d<...>, ...> by the conv2d itself (its
// kernel keeps its dense storage, with the pruned weights 0). Regularizers
// are dropped from the stripped dense layers (stripping is for inference).
// A prune_low_magnitude<dense<N, ...>, S, units> becomes dense<U, ...> with U
// = max(round_half_even(N (1 - final sparsity)), 1) units, and the next layer
// (which must be an unpruned dense layer) loses the matching inputs; the
// removed units' constant outputs act(b_j) move into its bias, so the
// predictions do not change. Other layers stay. strip_pruning(m) returns a model of stripped_t<Net>
// (same precision, backend and seed) holding m's weights: each pruned dense
// kernel is packed from the weights its mask keeps, every other parameter,
// state and metadata buffer is copied. It throws std::invalid_argument naming
// the layer when a mask keeps more weights than NNZ (the schedule has not
// reached its final sparsity: train to its end step first). The stripped
// model's predictions equal the masked model's up to float rounding (the
// sums run in another order). copy_variables(from, to) moves trained weights
// between two network types that share buffers (a dense model into its pruned type).
#pragma once
#include <cstddef>
#include <cstring>
#include <stdexcept>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "../layers/sparse_dense.hpp"
#include "../train/model.hpp"
#include "prune.hpp"

namespace ctnn {

namespace pruning::detail {
template <class Spec, class Bound>
struct strip_spec {
  using type = Spec;
};
template <class L, class S, class P, class Bound>
struct strip_spec<prune_low_magnitude<L, S, P>, Bound> {
  using type = L;
};
template <long long N, class Act, class O1, class O2, class S, class P, class Bound>
struct strip_spec<prune_low_magnitude<dense<N, Act, O1, O2>, S, P>, Bound> {
  using type = sparse_dense<Bound::K, static_cast<std::size_t>(N), Bound::final_nnz, Act>;
};

template <long long N, class Act, class O1, class O2, class S, class Bound>
struct strip_spec<prune_low_magnitude<dense<N, Act, O1, O2>, S, units>, Bound> {
  using type = dense<static_cast<long long>(Bound::final_units), Act, O1, O2>;
};
template <class L>
constexpr bool units_pruned() {
  if constexpr (PrunedLayer<L>) return std::is_same_v<typename L::pattern, units>;
  else return false;
}
template <class L>
inline constexpr bool is_dense_layer_v = false;
template <class Spec, class In, class P, class B>
inline constexpr bool is_dense_layer_v<dense_layer<Spec, In, P, B>> = true;

template <class In, class Bound, class... Ls, std::size_t... I>
auto strip_all(std::index_sequence<I...>) -> sequential<In, typename strip_spec<Ls, std::tuple_element_t<I, Bound>>::type...>;

template <class Net>
struct stripped;
template <class In, class... Ls>
struct stripped<sequential<In, Ls...>> {
  using bound = typename sequential<In, Ls...>::template bound<float>;
  using type = decltype(strip_all<In, bound, Ls...>(std::index_sequence_for<Ls...>{}));
};

template <class M>
std::vector<variable_ref> variables(const M& m) {
  std::vector<variable_ref> v;
  m.for_each_variable([&](const variable_ref& r) { v.push_back(r); });
  return v;
}
inline const variable_ref* find(const std::vector<variable_ref>& vs, std::size_t layer, std::string_view name) {
  for (const auto& v : vs)
    if (v.layer == layer && v.name == name) return &v;
  return nullptr;
}
}  // namespace pruning::detail

template <class Net>
using stripped_t = typename pruning::detail::stripped<Net>::type;

// Copies every buffer of `from` into the buffer of `to` with the same layer,
// name, role and shape (a trained dense model into its pruned network type,
// whose masks stay as they are); returns how many were copied.
template <class A, class B>
std::size_t copy_variables(const A& from, B& to) {
  const auto src = pruning::detail::variables(from);
  std::size_t n = 0;
  to.for_each_variable([&](const variable_ref& d) {
    const auto* s = pruning::detail::find(src, d.layer, d.name);
    if (!s || s->kind != d.kind || s->rank != d.rank || s->dims != d.dims || s->element_bytes != d.element_bytes) return;
    std::memcpy(d.data, s->data, d.extent * d.element_bytes);
    ++n;
  });
  return n;
}

namespace pruning::detail {
// Layer I (dense, pruned by units) keeps its unmasked columns; layer I + 1
// (dense) keeps the matching rows, and the constant output act(b_j) of every
// removed unit j moves into its bias: b' = b + sum_j act(b_j) W[j, :].
template <std::size_t I, class S, class Next, class Backend>
void strip_units(const std::vector<variable_ref>& src, const std::vector<variable_ref>& dst) {
  using V = typename S::variable_type;
  using Act = typename S::inner::Act;
  constexpr std::size_t K = S::rows, N = S::cols, M = Next::out_shape::size;
  const V* w = reinterpret_cast<const V*>(find(src, I, "kernel")->data);
  const V* b = reinterpret_cast<const V*>(find(src, I, "bias")->data);
  const auto* keep = reinterpret_cast<const std::uint8_t*>(find(src, I, "kernel_mask")->data);
  const V* wn = reinterpret_cast<const V*>(find(src, I + 1, "kernel")->data);
  const V* bn = reinterpret_cast<const V*>(find(src, I + 1, "bias")->data);
  V* dw = reinterpret_cast<V*>(find(dst, I, "kernel")->data);
  V* db = reinterpret_cast<V*>(find(dst, I, "bias")->data);
  V* dwn = reinterpret_cast<V*>(find(dst, I + 1, "kernel")->data);
  V* dbn = reinterpret_cast<V*>(find(dst, I + 1, "bias")->data);
  const std::size_t kept_n = find(dst, I, "bias")->extent;
  std::vector<std::size_t> cols;
  for (std::size_t j = 0; j < N; ++j)
    if (keep[j]) cols.push_back(j);
  if (cols.size() != kept_n)
    throw std::invalid_argument("strip_pruning: layer " + std::to_string(I + 1) + " keeps " + std::to_string(cols.size()) +
                                " units, not the " + std::to_string(kept_n) +
                                " its final sparsity gives; train until the schedule's end step");
  for (std::size_t k = 0; k < K; ++k)
    for (std::size_t c = 0; c < kept_n; ++c) dw[k * kept_n + c] = w[k * N + cols[c]];
  for (std::size_t c = 0; c < kept_n; ++c) db[c] = b[cols[c]];
  std::vector<double> bias(bn, bn + M);
  for (std::size_t j = 0; j < N; ++j) {
    if (keep[j]) continue;
    V a = b[j];
    Act::template forward<Backend>(&a, 1, 1);
    for (std::size_t o = 0; o < M; ++o) bias[o] += double(a) * double(wn[j * M + o]);
  }
  for (std::size_t o = 0; o < M; ++o) dbn[o] = V(bias[o]);
  for (std::size_t c = 0; c < kept_n; ++c)
    for (std::size_t o = 0; o < M; ++o) dwn[c * M + o] = wn[cols[c] * M + o];
}
}  // namespace pruning::detail

template <class Net, class P, class B>
model<stripped_t<Net>, P, B> strip_pruning(const model<Net, P, B>& m) {
  using src_layers = typename model<Net, P, B>::layers;
  using dst_model = model<stripped_t<Net>, P, B>;
  using dst_layers = typename dst_model::layers;
  using V = typename dst_model::variable_type;
  dst_model out(m.seed());
  const auto src = pruning::detail::variables(m);
  const auto dst = pruning::detail::variables(out);
  [&]<std::size_t... I>(std::index_sequence<I...>) {
    (
        [&] {
          using S = std::tuple_element_t<I, src_layers>;
          using D = std::tuple_element_t<I, dst_layers>;
          constexpr bool after_units = [] {
            if constexpr (I == 0) return false;
            else return pruning::detail::units_pruned<std::tuple_element_t<I - 1, src_layers>>();
          }();
          if constexpr (after_units) {
            // done with the unit-pruned layer before it
          } else if constexpr (pruning::detail::units_pruned<S>()) {
            static_assert(I + 1 < std::tuple_size_v<src_layers> &&
                              pruning::detail::is_dense_layer_v<std::tuple_element_t<I + 1, src_layers>>,
                          "strip_pruning: a layer pruned by units must be followed by an unpruned dense layer");
            pruning::detail::strip_units<I, S, std::tuple_element_t<I + 1, src_layers>, B>(src, dst);
          } else if constexpr (PrunedLayer<S> && requires { D::NNZ; }) {
            const V* w = reinterpret_cast<const V*>(pruning::detail::find(src, I, "kernel")->data);
            const auto* keep = reinterpret_cast<const std::uint8_t*>(pruning::detail::find(src, I, "kernel_mask")->data);
            V* values = reinterpret_cast<V*>(pruning::detail::find(dst, I, "values")->data);
            std::byte* meta = pruning::detail::find(dst, I, "offsets")->data;
            const std::size_t kept = kernels::cpu::sparse::pack(w, keep, D::K, D::N, values, D::NNZ, D::offsets(meta),
                                                                D::bitmap(meta));
            if (kept > D::NNZ)
              throw std::invalid_argument("strip_pruning: layer " + std::to_string(I + 1) + " keeps " +
                                          std::to_string(kept) + " weights, more than the " + std::to_string(D::NNZ) +
                                          " its final sparsity allows; train until the schedule's end step");
            const auto* bs = pruning::detail::find(src, I, "bias");
            std::memcpy(pruning::detail::find(dst, I, "bias")->data, bs->data, bs->extent * bs->element_bytes);
          } else {
            for (const auto& d : dst) {
              if (d.layer != I) continue;
              const auto* s = pruning::detail::find(src, I, d.name);
              std::memcpy(d.data, s->data, d.extent * d.element_bytes);
              if constexpr (PrunedLayer<S>) {  // a pruned conv2d: its kernel with the mask applied
                if (d.name == "kernel") {
                  const auto* keep = reinterpret_cast<const std::uint8_t*>(pruning::detail::find(src, I, "kernel_mask")->data);
                  V* w = reinterpret_cast<V*>(d.data);
                  for (std::size_t i = 0; i < d.extent; ++i)
                    if (!keep[i]) w[i] = V(0);
                }
              }
            }
          }
        }(),
        ...);
  }(std::make_index_sequence<std::tuple_size_v<src_layers>>{});
  return out;
}

}  // namespace ctnn
