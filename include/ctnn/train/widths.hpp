// ctnn/train/widths.hpp — the run-time widths of dense<up_to<Max>> layers, and strip_to.
//
// set_width<I>(m, n) makes layer I (0-based; a dense<up_to<Max>>, else a
// compile error) compute with its first n units; width<I>(m) reads it.
// set_units(m, n) sets every dense<up_to> layer of m (the tuner's "units")
// and returns how many it set (0 when the network has none). A width outside
// [1, Max] throws std::invalid_argument naming the layer. The width is the
// layer's "units" metadata buffer: saved and loaded with the weights.
// strip_to<Target>(m): a model of the static network type Target (the same
// layers, dense<n, Act> for each dense<up_to<Max>, Act>, and the layers after
// one taking its n inputs) holding m's weights: the first n columns of an
// up_to layer's kernel and bias, the first rows of its consumer's kernel.
// Target's width above Max is a compile error; a layer whose active width is
// not Target's width throws std::invalid_argument naming it. Host models
// (the width is read on the host). Details: docs/tuning.md, "Widths".
#pragma once
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <stdexcept>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "../core/plan.hpp"
#include "../core/type_at.hpp"
#include "../layers/dense.hpp"
#include "model.hpp"

namespace ctnn {

namespace detail {
template <class L>
inline constexpr bool is_up_to_layer_v = std::is_same_v<typename L::kind, layer_kind::dense_up_to>;
template <class L>
constexpr bool up_to_layer() {
  if constexpr (requires { typename L::kind; }) return is_up_to_layer_v<L>;
  else return false;
}
template <class L>
constexpr bool dense_kind() {
  if constexpr (requires { typename L::kind; }) return std::is_same_v<typename L::kind, layer_kind::dense>;
  else return false;
}
// Whether S (a static dense layer of the model) takes fewer inputs in the target's layer D: it follows an up_to layer.
template <class S, class D>
constexpr bool narrowed_dense() {
  if constexpr (dense_kind<S>() && dense_kind<D>()) return S::K != D::K;
  else return false;
}
inline std::string layer_here(const char* fn, std::size_t i, const std::string& name) {
  return std::string(fn) + ": layer " + std::to_string(i + 1) + " (" + name + ")";
}
// f(layer's buffer `name` of model m), through m's host view (written back for a non-const m).
template <class M, class F>
void with_variable(M& m, std::size_t layer, std::string_view name, F&& f) {
  m.with_variables([&](const std::vector<variable_ref>& vs) { f(*find_variable(vs, layer, name)); });
}
template <class L>
void write_width(std::byte* at, std::size_t i, std::size_t n, const char* fn) {
  if (n == 0 || n > L::max_units)
    throw std::invalid_argument(layer_here(fn, i, L::name()) + ": the active width " + std::to_string(n) +
                                " is outside [1, " + std::to_string(L::max_units) + "]");
  const auto v = std::uint32_t(n);
  std::memcpy(at, &v, sizeof v);
}
}  // namespace detail

template <std::size_t I, class Net, class P, class B>
void set_width(model<Net, P, B>& m, std::size_t n) {
  using L = detail::type_at_t<I, typename model<Net, P, B>::layers>;
  static_assert(detail::up_to_layer<L>(), "set_width: layer I is not a dense<up_to<Max>> layer");
  detail::with_variable(m, I, "units",
                        [&](const variable_ref& u) { detail::write_width<L>(u.data, I, n, "set_width"); });
}

template <std::size_t I, class Net, class P, class B>
std::size_t width(const model<Net, P, B>& m) {
  using L = detail::type_at_t<I, typename model<Net, P, B>::layers>;
  static_assert(detail::up_to_layer<L>(), "width: layer I is not a dense<up_to<Max>> layer");
  std::uint32_t v;
  detail::with_variable(m, I, "units", [&](const variable_ref& u) { std::memcpy(&v, u.data, sizeof v); });
  return v;
}

template <class Net, class P, class B>
std::size_t set_units(model<Net, P, B>& m, std::size_t n) {
  using layers = typename model<Net, P, B>::layers;
  std::size_t count = 0;
  [&]<std::size_t... I>(std::index_sequence<I...>) {
    (void)std::initializer_list<int>{(
        [&] {
          using L = detail::type_at_t<I, layers>;
          if constexpr (detail::up_to_layer<L>()) {
            detail::with_variable(m, I, "units",
                                  [&](const variable_ref& u) { detail::write_width<L>(u.data, I, n, "set_units"); });
            ++count;
          }
        }(),
        0)...};
  }(std::make_index_sequence<std::tuple_size_v<layers>>{});
  return count;
}

template <class Target, class Net, class P, class B>
model<Target, P, B> strip_to(const model<Net, P, B>& m) {
  using src_layers = typename model<Net, P, B>::layers;
  using dst_model = model<Target, P, B>;
  using dst_layers = typename dst_model::layers;
  using V = typename dst_model::variable_type;
  static_assert(std::tuple_size_v<src_layers> == std::tuple_size_v<dst_layers>,
                "strip_to: the target network must have as many layers as the model");
  dst_model out(m.seed());
  auto values = [](const variable_ref* v) { return static_cast<V*>(static_cast<void*>(v->data)); };
  // both models' variables through host views held until the copy is done (written back to out's memory)
  m.with_variables([&](const std::vector<variable_ref>& src) {
  out.with_variables([&](const std::vector<variable_ref>& dst) {
  [&]<std::size_t... I>(std::index_sequence<I...>) {
    (void)std::initializer_list<int>{(
        [&] {
          using S = detail::type_at_t<I, src_layers>;
          using D = detail::type_at_t<I, dst_layers>;
          constexpr bool up_to = detail::up_to_layer<S>();
          if constexpr (up_to || detail::narrowed_dense<S, D>()) {
            static_assert(detail::dense_kind<D>(),
                          "strip_to: a dense<up_to<Max>> layer, and a dense layer after one, must be a static dense "
                          "layer of the target");
            static_assert(std::is_same_v<typename S::Act, typename D::Act>,
                          "strip_to: a dense layer of the target must have the model's activation");
            static_assert(D::N <= S::N, "strip_to: a width of the target is above the model's up_to<Max>");
            static_assert(D::K <= S::K, "strip_to: a layer of the target takes more inputs than the model's");
            const std::string here = detail::layer_here("strip_to", I, S::name());
            if constexpr (up_to) {
              std::uint32_t n;
              std::memcpy(&n, detail::find_variable(src, I, "units")->data, sizeof n);
              if (n != D::N)
                throw std::invalid_argument(here + " computes with " + std::to_string(n) + " units but the target's " +
                                            D::name() + " has " + std::to_string(D::N));
            } else {
              static_assert(D::N == S::N, "strip_to: a static dense layer of the target must keep the model's units");
            }
            const V* w = values(detail::find_variable(src, I, "kernel"));
            const V* b = values(detail::find_variable(src, I, "bias"));
            V* dw = values(detail::find_variable(dst, I, "kernel"));
            V* db = values(detail::find_variable(dst, I, "bias"));
            for (std::size_t k = 0; k < D::K; ++k) std::copy(w + k * S::N, w + k * S::N + D::N, dw + k * D::N);
            std::copy(b, b + D::N, db);
          } else {
            for (const auto& d : dst) {
              if (d.layer != I) continue;
              const auto* s = detail::find_variable(src, I, d.name);
              if (!s || s->extent != d.extent || s->element_bytes != d.element_bytes)
                throw std::invalid_argument(detail::layer_here("strip_to", I, S::name()) + "'s " + std::string(d.name) +
                                            " (" + std::to_string(d.extent) +
                                            " values) has no counterpart of that size in the model");
              std::memcpy(d.data, s->data, d.extent * d.element_bytes);
            }
          }
        }(),
        0)...};  // a list, not a fold: clang nests a fold of N terms N deep (limit 256)
  }(std::make_index_sequence<std::tuple_size_v<src_layers>>{});
  });
  });
  return out;
}

}  // namespace ctnn
