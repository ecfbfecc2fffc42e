// ctnn/pruning/strip_csc.hpp — strip_pruning_csc: stripping to the layout built for inference speed.
//
// As strip_pruning (pruning/strip.hpp), except that every pruned dense layer
// (unstructured, N:M, blocks) becomes sparse_dense_csc<K, N, NNZ, Act>
// (layers/sparse_dense_csc.hpp), whose inference work falls with NNZ, at 2
// bytes of row index per weight instead of the bitmap's 1 bit per kernel
// entry: choose it for speed at high sparsity, strip_pruning for size.
// stripped_csc_t<Net> is the network type; units-pruned and conv2d layers
// strip as in strip_pruning.
#pragma once
#include <cstddef>
#include <cstring>
#include <stdexcept>
#include <string>
#include <tuple>
#include <utility>

#include "../layers/sparse_dense_csc.hpp"
#include "strip.hpp"

namespace ctnn {

namespace pruning::detail {
template <class Spec, class Bound>
struct strip_spec_csc {
  using type = typename strip_spec<Spec, Bound>::type;
};
template <long long N, class Act, class O1, class O2, class S, class P, class Bound>
  requires(!std::is_same_v<P, units>)
struct strip_spec_csc<prune_low_magnitude<dense<N, Act, O1, O2>, S, P>, Bound> {
  using type = sparse_dense_csc<Bound::K, static_cast<std::size_t>(N), Bound::final_nnz, Act>;
};
template <class In, class Bound, class... Ls, std::size_t... I>
auto strip_all_csc(std::index_sequence<I...>)
    -> sequential<In, typename strip_spec_csc<Ls, std::tuple_element_t<I, Bound>>::type...>;
template <class Net>
struct stripped_csc;
template <class In, class... Ls>
struct stripped_csc<sequential<In, Ls...>> {
  using bound = typename sequential<In, Ls...>::template bound<float>;
  using type = decltype(strip_all_csc<In, bound, Ls...>(std::index_sequence_for<Ls...>{}));
};
}  // namespace pruning::detail

template <class Net>
using stripped_csc_t = typename pruning::detail::stripped_csc<Net>::type;

template <class Net, class P, class B>
model<stripped_csc_t<Net>, P, B> strip_pruning_csc(const model<Net, P, B>& m) {
  using src_layers = typename model<Net, P, B>::layers;
  using dst_model = model<stripped_csc_t<Net>, P, B>;
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
          } else if constexpr (pruning::detail::units_pruned<S>()) {
            static_assert(I + 1 < std::tuple_size_v<src_layers> &&
                              pruning::detail::is_dense_layer_v<std::tuple_element_t<I + 1, src_layers>>,
                          "strip_pruning: a layer pruned by units must be followed by an unpruned dense layer");
            pruning::detail::strip_units<I, S, std::tuple_element_t<I + 1, src_layers>, B>(src, dst);
          } else if constexpr (PrunedLayer<S> && requires { D::NNZ; }) {
            const V* w = reinterpret_cast<const V*>(pruning::detail::find(src, I, "kernel")->data);
            const auto* keep = reinterpret_cast<const std::uint8_t*>(pruning::detail::find(src, I, "kernel_mask")->data);
            V* values = reinterpret_cast<V*>(pruning::detail::find(dst, I, "values")->data);
            std::byte* meta = pruning::detail::find(dst, I, "columns")->data;
            const std::size_t kept =
                kernels::cpu::csc::pack(w, keep, D::K, D::N, values, D::NNZ, D::columns(meta), D::rows(meta));
            if (kept > D::NNZ)
              throw std::invalid_argument("strip_pruning_csc: layer " + std::to_string(I + 1) + " keeps " +
                                          std::to_string(kept) + " weights, more than the " + std::to_string(D::NNZ) +
                                          " its final sparsity allows; train until the schedule's end step");
            const auto* bs = pruning::detail::find(src, I, "bias");
            std::memcpy(pruning::detail::find(dst, I, "bias")->data, bs->data, bs->extent * bs->element_bytes);
          } else {
            for (const auto& d : dst) {
              if (d.layer != I) continue;
              const auto* s = pruning::detail::find(src, I, d.name);
              std::memcpy(d.data, s->data, d.extent * d.element_bytes);
              if constexpr (PrunedLayer<S>) {
                if (d.name == "kernel") {
                  const auto* keep =
                      reinterpret_cast<const std::uint8_t*>(pruning::detail::find(src, I, "kernel_mask")->data);
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
