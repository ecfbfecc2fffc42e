// ctnn/layers/concatenate.hpp — concatenate<Axis, Branch...>: parallel branches, outputs joined.
//
// y = concat(B_1(x), ..., B_n(x)) along Axis of the branches' outputs (sample axes only: 0 is
// the first after the batch; negative counts from the end, -1 = channels), as
// keras.layers.Concatenate(axis) over the branches' outputs. Each Branch is a layer spec (one
// layer, branch<...>, branch<> for x itself, or another graph layer). Requires n >= 1, the
// same rank from every branch, Axis inside it, and every dimension but Axis equal (else a
// compile error naming the position, the branch and both shapes). Output: the shared dims with
// Axis the sum of the branches'. Variables: branch K's named "K.name". Copies run as
// ops<B>::copy of contiguous runs (one per sample and outer index). docs/graphs.md.
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
struct concat_layer;

namespace detail {
constexpr std::size_t resolve_axis(long long axis, std::size_t rank) {
  return axis < 0 ? std::size_t(static_cast<long long>(rank) + axis) : std::size_t(axis);
}
template <long long Axis, class... Out>
constexpr bool axis_fits() {
  using F = pack_at_t<0, Out...>;
  return (Axis < 0 ? -Axis <= static_cast<long long>(F::rank) : Axis < static_cast<long long>(F::rank));
}
template <std::size_t A, class Out, class First>
constexpr bool same_but_axis() {
  if constexpr (Out::rank != First::rank || A >= First::rank) {
    return false;
  } else {
    for (std::size_t i = 0; i < Out::rank; ++i)
      if (i != A && Out::dims[i] != First::dims[i]) return false;
    return true;
  }
}
// The joined shape of Outs along A.
template <std::size_t A, class First, class... Out>
constexpr auto joined_shape() {
  constexpr std::size_t total = (std::size_t{0} + ... + Out::dims[A]);
  return []<std::size_t... I>(std::index_sequence<I...>) {
    return shape<(I == A ? total : First::dims[I])...>{};
  }(std::make_index_sequence<First::rank>{});
}
}  // namespace detail

template <long long Axis, class... Branch>
struct concatenate {
  static_assert(sizeof...(Branch) >= 1, "concatenate: give at least one branch");
  using is_layer_spec = void;
  static constexpr long long axis = Axis;
  template <Shape In>
  using branches = std::tuple<Branch...>;
  static std::string name() { return detail::join_names<Branch...>("concatenate<" + std::to_string(Axis) + ", "); }
  static std::string summary_name() { return "concatenate<" + std::to_string(Axis) + ">"; }
  template <Shape In, std::size_t Pos>
  static constexpr bool check() {
    if constexpr (!(true && ... && (detail::check_spec_v<Branch> && detail::check_layer<Branch, In, Pos>()))) {
      return false;
    } else {
      using First = detail::out_shape_of<detail::pack_at_t<0, Branch...>, In>;
      constexpr std::size_t A = detail::axis_fits<Axis, First>() ? detail::resolve_axis(Axis, First::rank) : First::rank;
      return []<std::size_t... K>(std::index_sequence<K...>) {
        return (true && ... && [] {
          using Out = detail::out_shape_of<detail::pack_at_t<K, Branch...>, In>;
          constexpr bool same = detail::same_but_axis<A, Out, First>();
          constexpr bool located = diag::require<same, &diag::concatenate_shapes_text<Pos, Axis, K + 1, A, Out, First>>();
          return located && diag::concatenate_branch_shapes_differ<diag::layer<Pos>, diag::branch<K + 1>, same>::value;
        }());
      }(std::index_sequence_for<Branch...>{});
    }
  }
  template <Shape In, class P, class Backend>
  using bind = concat_layer<concatenate, In, precision::policy_of_t<P>, Backend>;
};

template <class Spec, Shape In, class P, class Backend>
struct concat_layer : detail::parallel_layer<concat_layer<Spec, In, P, Backend>, Spec, In, P, Backend> {
  using base = detail::parallel_layer<concat_layer, Spec, In, P, Backend>;
  using typename base::O;
  using typename base::T;
  using typename base::children;
  using base::n;

 private:
  template <class... L>
  static auto joined(std::tuple<L...>*) -> decltype(detail::joined_shape<detail::resolve_axis(Spec::axis, detail::type_at_t<0, std::tuple<L...>>::out_shape::rank),
                                                                         typename detail::type_at_t<0, std::tuple<L...>>::out_shape,
                                                                         typename L::out_shape...>());
  template <class... L>
  static constexpr std::array<std::size_t, sizeof...(L)> widths(std::tuple<L...>*) {
    return {L::out_shape::dims[detail::resolve_axis(Spec::axis, L::out_shape::rank)]...};
  }
  template <class... L>
  static constexpr std::array<std::size_t, sizeof...(L)> sizes(std::tuple<L...>*) {
    return {L::out_shape::size...};
  }

 public:
  using out_shape = decltype(joined(static_cast<children*>(nullptr)));
  static constexpr std::size_t axis = detail::resolve_axis(Spec::axis, out_shape::rank);
  // outer: the product of the dims before the axis; inner: after it; width[k]: branch k's axis dim
  static constexpr std::size_t outer = [] {
    std::size_t o = 1;
    for (std::size_t i = 0; i < axis; ++i) o *= out_shape::dims[i];
    return o;
  }();
  static constexpr std::size_t inner = out_shape::size / outer / out_shape::dims[axis];
  static constexpr std::array<std::size_t, n> width = widths(static_cast<children*>(nullptr));
  static constexpr std::array<std::size_t, n> size = sizes(static_cast<children*>(nullptr));
  static constexpr std::size_t widest = [] {
    std::size_t w = 0;
    for (std::size_t k = 0; k < n; ++k) w = size[k] > w ? size[k] : w;
    return w;
  }();
  // own caches: each branch's output (none for an identity), then a dy slice and a dx scratch
  static constexpr auto own = base::own_caches(size, widest);
  static constexpr auto buffers = base::buffers_of(own);
  static constexpr std::size_t parameter_count = count_of(buffers, role::parameter);
  static constexpr std::size_t state_count = count_of(buffers, role::state);
  static constexpr std::size_t cache_per_sample = count_of(buffers, role::cache);

 private:
  friend base;
  // Where branch K's run starts in one joined row, and its length.
  template <std::size_t K>
  static constexpr std::size_t before = [] {
    std::size_t b = 0;
    for (std::size_t k = 0; k < K; ++k) b += width[k];
    return b * inner;
  }();
  static constexpr std::size_t row = out_shape::dims[axis] * inner;
  // Branch K's rows into their place in y.
  template <std::size_t K>
  static void join(const T* part, T* y, std::size_t batch) {
    constexpr std::size_t run = width[K] * inner;
    for (std::size_t o = 0; o < batch * outer; ++o) O::copy(part + o * run, y + o * row + before<K>, run);
  }
  // Branch K's slice of dy, gathered into dyk.
  template <std::size_t K>
  static T* dy_of(T* dy, T* dyk, std::size_t batch) {
    constexpr std::size_t run = width[K] * inner;
    for (std::size_t o = 0; o < batch * outer; ++o) O::copy(dy + o * row + before<K>, dyk + o * run, run);
    return dyk;
  }
};

}  // namespace ctnn
