// ctnn/layers/add.hpp — add<Branch...>: parallel branches over one input, their outputs summed.
//
// y = B_1(x) + ... + B_n(x), as keras.layers.Add over the branches' outputs. Each Branch is a
// layer spec: one layer (dense<8>), a sequence (branch<conv2d<...>, batch_normalization<>>),
// the identity (branch<>), or another graph layer. Requires n >= 1 and the same output shape
// from every branch (else a compile error naming the layer's position, the branch and both
// shapes). Output: that shape. Variables: branch K's named "K.name". dL/dB_k = dy for every
// branch; dx sums the branches' dx. residual<...> (layers/residual.hpp) binds the same layer.
// docs/graphs.md.
#pragma once
#include <array>
#include <cstddef>
#include <string>
#include <tuple>

#include "../core/backend.hpp"
#include "../core/backend.hpp"
#include "branch.hpp"
#include "graph_nodes.hpp"

namespace ctnn {

template <class Spec, Shape In, class P, class Backend>
struct sum_layer;

namespace detail {
// Checks each branch on In, then that all yield the shape of the first (the message names
// graph layer Pos's Kind: "add", ...).
template <Shape In, std::size_t Pos, class... Br>
constexpr bool check_sum_branches() {
  if constexpr (!(true && ... && (check_spec_v<Br> && check_layer<Br, In, Pos>()))) {
    return false;
  } else {
    using First = out_shape_of<pack_at_t<0, Br...>, In>;
    return []<std::size_t... K>(std::index_sequence<K...>) {
      return (true && ... && [] {
        using Out = out_shape_of<pack_at_t<K, Br...>, In>;
        constexpr bool same = Out{} == First{};
        constexpr bool located = diag::require<same, &diag::add_shapes_text<Pos, K + 1, Out, First>>();
        return located && diag::add_branch_shapes_differ<diag::layer<Pos>, diag::branch<K + 1>, same>::value;
      }());
    }(std::index_sequence_for<Br...>{});
  }
}
}  // namespace detail

template <class... Branch>
struct add {
  static_assert(sizeof...(Branch) >= 1, "add: give at least one branch");
  using is_layer_spec = void;
  template <Shape In>
  using branches = std::tuple<Branch...>;
  static std::string name() { return detail::join_names<Branch...>("add<"); }
  static constexpr std::string summary_name() { return "add"; }
  template <Shape In, std::size_t Pos>
  static constexpr bool check() {
    return detail::check_sum_branches<In, Pos, Branch...>();
  }
  template <Shape In, class P, class Backend>
  using bind = sum_layer<add, In, precision::policy_of_t<P>, Backend>;
};

template <class Spec, Shape In, class P, class Backend>
struct sum_layer : detail::parallel_layer<sum_layer<Spec, In, P, Backend>, Spec, In, P, Backend> {
  using base = detail::parallel_layer<sum_layer, Spec, In, P, Backend>;
  using typename base::O;
  using typename base::T;
  using typename base::children;
  using base::n;
  using out_shape = typename detail::type_at_t<0, children>::out_shape;
  static constexpr std::size_t out_size = out_shape::size;
  // own caches: each branch's output (none for an identity), then dy's copy and a dx scratch
  static constexpr auto own = base::own_caches(detail::filled<n>(out_size), out_size);
  static constexpr auto buffers = base::buffers_of(own);
  static constexpr std::size_t parameter_count = count_of(buffers, role::parameter);
  static constexpr std::size_t state_count = count_of(buffers, role::state);
  static constexpr std::size_t cache_per_sample = count_of(buffers, role::cache);

 private:
  friend base;
  // Branch K's output into y: the first copied, the others added.
  template <std::size_t K>
  static void join(const T* part, T* y, std::size_t batch) {
    if constexpr (K == 0) O::copy(part, y, out_size * batch);
    else O::accumulate(y, part, out_size * batch);
  }
  // dy for branch K: dy itself for an identity branch, else a copy (the branch overwrites it).
  template <std::size_t K>
  static T* dy_of(T* dy, T* dyk, std::size_t batch) {
    if constexpr (base::identity[K]) {
      return dy;
    } else {
      O::copy(dy, dyk, out_size * batch);
      return dyk;
    }
  }
};

}  // namespace ctnn
