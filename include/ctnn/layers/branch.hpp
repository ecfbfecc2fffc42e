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
#include "../backends/cpu/ops.hpp"
#include "graph_nodes.hpp"

namespace ctnn {

template <class Spec, Shape In, class P, class Backend>
struct chain_layer;

template <class... Specs>
struct branch {
  using is_layer_spec = void;
  static std::string name() {
    std::string s = "branch<";
    std::size_t i = 0;
    ((s += (i++ ? ", " : "") + Specs::name()), ...);
    return s + ">";
  }
  template <Shape In, std::size_t Pos>
  static constexpr bool check();
  template <Shape In, class P, class Backend>
  using bind = chain_layer<branch, In, precision::policy_of_t<P>, Backend>;
};

template <class S>
inline constexpr bool is_identity_branch_v = std::is_same_v<S, branch<>>;

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
struct chain_layer<branch<Specs...>, In, P, Backend> {
  using kind = layer_kind::graph;
  using spec = branch<Specs...>;
  using T = typename P::compute_type;
  using O = ops<Backend>;
  using variable_type = typename P::variable_type;
  using compute_type = T;
  using children = typename detail::bind_chain<In, P, Backend, std::tuple<>, Specs...>::type;
  using in_shape = In;
  using out_shape = typename detail::bind_chain<In, P, Backend, std::tuple<>, Specs...>::out;
  static constexpr std::size_t n = sizeof...(Specs);

 private:
  template <class... L>
  static constexpr auto offsets_of(std::tuple<L...>*) -> detail::graph_offsets<P, L...>;
  template <class... L>
  static constexpr auto buffers_of(std::tuple<L...>*, const auto& own) {
    return detail::graph_buffers<P, std::remove_cvref_t<decltype(own)>, L...>(own);
  }
  template <std::size_t J>
  using child = detail::type_at_t<J, children>;
  // own caches: the outputs of children 0 .. n-2, then two scratch rows of the widest inner input
  static constexpr std::size_t widest_inner = [] {
    std::size_t w = 0;
    [&]<std::size_t... J>(std::index_sequence<J...>) {
      ((w = J + 1 < n ? std::max(w, detail::type_at_t<J, children>::out_shape::size) : w), ...);
    }(std::make_index_sequence<n>{});
    return w;
  }();
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
  static constexpr auto own_buffers = [] {
    std::array<buffer, own.size()> a{};
    for (std::size_t k = 0; k < own.size(); ++k) a[k] = buffer::cache(k + 2 < own.size() ? "output" : "scratch", own[k]);
    return a;
  }();

 public:
  using offsets = decltype(offsets_of(static_cast<children*>(nullptr)));
  using forwarded = detail::graph_children<offsets, children, T, Backend>;
  static constexpr auto buffers = buffers_of(static_cast<children*>(nullptr), own_buffers);
  static constexpr std::size_t parameter_count = count_of(buffers, role::parameter);
  static constexpr std::size_t state_count = count_of(buffers, role::state);
  static constexpr std::size_t cache_per_sample = count_of(buffers, role::cache);
  static constexpr bool draws_random = forwarded::draws_random;
  static std::string name() { return spec::name(); }
  static std::string summary_name() { return n == 0 ? "identity" : "branch"; }

  static void init(layer_slot<T> s, rng& g) { forwarded::init(s, g); }

  static void forward(layer_slot<T> s, const T* x, T* y, run_info r) {
    if constexpr (n == 0) {
      O::copy(x, y, In::size * r.batch);
    } else {
      forwarded::each([&]<std::size_t J, class C>() {
        const T* in = J == 0 ? x : cache(s, J - 1, r.batch);
        T* out = J + 1 == n ? y : cache(s, J, r.batch);
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

  static void add_penalty(layer_slot<T> s, step_scalars* sc) { forwarded::add_penalty(s, sc); }
  static T penalty(layer_slot<T> s)
    requires(Backend::memory::host_accessible)
  {
    step_scalars sc;
    add_penalty(s, &sc);
    return T(sc.penalty);
  }
  static void add_penalty_gradient(layer_slot<T> s) { forwarded::add_penalty_gradient(s); }
  static std::string check_metadata(std::string_view name, const std::byte* bytes)
    requires(forwarded::has_metadata_checks)
  {
    return forwarded::check_metadata(name, bytes);
  }

 private:
  static T* cache(const layer_slot<T>& s, std::size_t k, std::size_t batch) {
    return detail::own_cache<offsets>(s, own, k, batch);
  }
  template <std::size_t J>
  static void step(const layer_slot<T>& s, const T* x, const T* y, T*& cur, T* dx, run_info r) {
    const T* in = J == 0 ? x : cache(s, J - 1, r.batch);
    const T* out = J + 1 == n ? y : cache(s, J, r.batch);
    T* d = J == 0 ? dx : cache(s, n - 1 + J % 2, r.batch);
    child<J>::backward(detail::child_slot<J, offsets>(s, r.batch), in, out, cur, d, r);
    cur = d;
  }
};

}  // namespace ctnn
