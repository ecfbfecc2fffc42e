// ctnn/layers/branch.hpp — branch<L...>: a sequence of layers as one layer (a sub-network).
//
// y = L_n(...L_1(x)): the specs are bound one after another as in sequential, and the
// whole is a layer, so it is a branch of add / concatenate and nests in any graph layer.
// branch<> is the identity (y = x). Variables: the children's, named "J.name" (J from 0).
// Caches: the children's, their outputs but the last, two backward scratch rows of the
// widest inner input. Checks: each child's own check, with the position of the graph
// layer in the network (its message names the child). docs/graphs.md.
#pragma once
#include <algorithm>
#include <array>
#include <cstddef>
#include <string>
#include <tuple>

#include "../core/backend.hpp"
#include "../core/backend.hpp"
#include "graph_nodes.hpp"

namespace ctnn {

template <class Spec, Shape In, class P, class Backend>
struct chain_layer;

template <class... Specs>
struct branch {
  using is_layer_spec = void;
  static std::string name() { return detail::join_names<Specs...>("branch<"); }
  template <Shape In, std::size_t Pos>
  static constexpr bool check();
  template <Shape In, class P, class Backend>
  using bind = chain_layer<branch, In, precision::policy_of_t<P>, Backend>;
};

namespace detail {
// Binds Specs one after another from In: type = std::tuple of the bound layers, out = the last output shape.
template <Shape In, class P, class B, class Acc, class... S>
struct bind_chain {
  using type = Acc;
  using out = In;
};
template <Shape In, class P, class B, class... A, class S0, class... S>
struct bind_chain<In, P, B, std::tuple<A...>, S0, S...> {
  using L0 = typename S0::template bind<In, P, B>;
  using next = bind_chain<typename L0::out_shape, P, B, std::tuple<A..., L0>, S...>;
  using type = typename next::type;
  using out = typename next::out;
};

// Checks each spec on the shape the ones before it yield; stops at the first that fails.
template <Shape In, std::size_t Pos, class... S>
constexpr bool check_chain() {
  if constexpr (sizeof...(S) == 0) {
    return true;
  } else {
    using S0 = pack_at_t<0, S...>;
    if constexpr (!check_spec_v<S0> || !check_layer<S0, In, Pos>()) {
      return false;
    } else {
      return []<class F, class... R>(std::type_identity<F>, std::type_identity<R>...) {
        return check_chain<typename F::template bind<In, precision::float32, cpu<>>::out_shape, Pos, R...>();
      }(std::type_identity<S>{}...);
    }
  }
}

// The output shape of spec S on In (after its check passed).
template <class S, Shape In>
using out_shape_of = typename S::template bind<In, precision::float32, cpu<>>::out_shape;
}  // namespace detail

template <class... Specs>
template <Shape In, std::size_t Pos>
constexpr bool branch<Specs...>::check() {
  return detail::check_chain<In, Pos, Specs...>();
}

template <class... Specs, Shape In, class P, class Backend>
struct chain_layer<branch<Specs...>, In, P, Backend>
    : detail::graph_layer<chain_layer<branch<Specs...>, In, P, Backend>,
                          typename detail::bind_chain<In, P, Backend, std::tuple<>, Specs...>::type, P, Backend> {
  using base = detail::graph_layer<chain_layer, typename detail::bind_chain<In, P, Backend, std::tuple<>, Specs...>::type, P, Backend>;
  using typename base::O;
  using typename base::T;
  using typename base::children;
  using typename base::forwarded;
  using typename base::offsets;
  using base::n;
  using spec = branch<Specs...>;
  using in_shape = In;
  using out_shape = typename detail::bind_chain<In, P, Backend, std::tuple<>, Specs...>::out;

 private:
  template <std::size_t J>
  using child = detail::type_at_t<J, children>;
  static constexpr std::size_t widest_inner = [] {
    std::size_t w = 0;
    [&]<std::size_t... J>(std::index_sequence<J...>) {
      ((w = J + 1 < n ? std::max(w, detail::type_at_t<J, children>::out_shape::size) : w), ...);
    }(std::make_index_sequence<n>{});
    return w;
  }();

 public:
  // own caches: the outputs of children 0 .. n-2, then two scratch rows of the widest inner input
  static constexpr std::array<std::size_t, (n > 0 ? n + 1 : 0)> own = [] {
    std::array<std::size_t, (n > 0 ? n + 1 : 0)> a{};
    if constexpr (n > 0) {
      [&]<std::size_t... J>(std::index_sequence<J...>) {
        ((a[J] = J + 1 < n ? detail::type_at_t<J, children>::out_shape::size : 0), ...);
      }(std::make_index_sequence<n>{});
      a[n - 1] = widest_inner;
      a[n] = widest_inner;
    }
    return a;
  }();
  static constexpr auto buffers = base::buffers_of(own);
  static constexpr std::size_t parameter_count = count_of(buffers, role::parameter);
  static constexpr std::size_t state_count = count_of(buffers, role::state);
  static constexpr std::size_t cache_per_sample = count_of(buffers, role::cache);
  static std::string name() { return spec::name(); }
  static constexpr std::string summary_name() { return n == 0 ? "identity" : "branch"; }

  static void forward(layer_slot<T> s, const T* x, T* y, run_info r) {
    if constexpr (n == 0) {
      O::copy(x, y, In::size * r.batch);
    } else {
      forwarded::each([&]<std::size_t J, class C>() {
        const T* in = J == 0 ? x : base::cache(s, J - 1, r.batch);
        T* out = J + 1 == n ? y : base::cache(s, J, r.batch);
        C::forward(detail::child_slot<J, offsets>(s, r.batch), in, out, r);
      });
    }
  }

  // dy is used as scratch (the children turn it into dL/dz in place).
  static void backward(layer_slot<T> s, const T* x, const T* y, T* dy, T* dx, run_info r) {
    if constexpr (n == 0) {
      if (dx) O::copy(dy, dx, In::size * r.batch);
    } else {
      T* cur = dy;
      [&]<std::size_t... I>(std::index_sequence<I...>) {
        (step<n - 1 - I>(s, x, y, cur, dx, r), ...);
      }(std::make_index_sequence<n>{});
    }
  }

 private:
  template <std::size_t J>
  static void step(const layer_slot<T>& s, const T* x, const T* y, T*& cur, T* dx, run_info r) {
    const T* in = J == 0 ? x : base::cache(s, J - 1, r.batch);
    const T* out = J + 1 == n ? y : base::cache(s, J, r.batch);
    T* d = J == 0 ? dx : base::cache(s, n - 1 + J % 2, r.batch);
    child<J>::backward(detail::child_slot<J, offsets>(s, r.batch), in, out, cur, d, r);
    cur = d;
  }
};

}  // namespace ctnn
