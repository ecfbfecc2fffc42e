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
#include "../backends/cpu/ops.hpp"
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
  static std::string name() {
    std::string s = "add<";
    std::size_t i = 0;
    ((s += (i++ ? ", " : "") + Branch::name()), ...);
    return s + ">";
  }
  static std::string summary_name() { return "add"; }
  template <Shape In, std::size_t Pos>
  static constexpr bool check() {
    return detail::check_sum_branches<In, Pos, Branch...>();
  }
  template <Shape In, class P, class Backend>
  using bind = sum_layer<add, In, precision::policy_of_t<P>, Backend>;
};

template <class Spec, Shape In, class P, class Backend>
struct sum_layer {
  using kind = layer_kind::graph;
  using spec = Spec;
  using T = typename P::compute_type;
  using O = ops<Backend>;
  using variable_type = typename P::variable_type;
  using compute_type = T;
  using branch_specs = typename Spec::template branches<In>;

 private:
  template <class... Br>
  static auto bind_branches(std::tuple<Br...>*) -> std::tuple<typename Br::template bind<In, P, Backend>...>;
  template <class... Br>
  static auto identities(std::tuple<Br...>*) -> std::integer_sequence<bool, is_identity_branch_v<Br>...>;
  template <bool... I>
  static constexpr std::array<bool, sizeof...(I)> as_array(std::integer_sequence<bool, I...>) {
    return {I...};
  }

 public:
  using children = decltype(bind_branches(static_cast<branch_specs*>(nullptr)));
  static constexpr std::size_t n = std::tuple_size_v<children>;
  static constexpr std::array<bool, n> identity = as_array(decltype(identities(static_cast<branch_specs*>(nullptr))){});
  using in_shape = In;
  using out_shape = typename detail::type_at_t<0, children>::out_shape;
  static constexpr std::size_t out_size = out_shape::size;

 private:
  template <class... L>
  static auto offsets_of(std::tuple<L...>*) -> detail::graph_offsets<P, L...>;
  template <class... L>
  static constexpr auto buffers_of(std::tuple<L...>*, const auto& own) {
    return detail::graph_buffers<P, std::remove_cvref_t<decltype(own)>, L...>(own);
  }
  // own caches: each branch's output (none for an identity), then dy's copy and a dx scratch
  static constexpr std::array<std::size_t, n + 2> own = [] {
    std::array<std::size_t, n + 2> a{};
    for (std::size_t k = 0; k < n; ++k) a[k] = identity[k] ? 0 : out_size;
    a[n] = out_size;
    a[n + 1] = In::size;
    return a;
  }();
  static constexpr auto own_buffers = [] {
    std::array<buffer, n + 2> a{};
    for (std::size_t k = 0; k < n + 2; ++k) a[k] = buffer::cache(k < n ? "output" : "scratch", own[k]);
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
  static std::string name() { return Spec::name(); }
  static std::string summary_name() { return Spec::summary_name(); }

  static void init(layer_slot<T> s, rng& g) { forwarded::init(s, g); }

  static void forward(layer_slot<T> s, const T* x, T* y, run_info r) {
    const std::size_t m = out_size * r.batch;
    forwarded::each([&]<std::size_t K, class C>() {
      const T* out = x;
      if constexpr (!identity[K]) {
        out = cache(s, K, r.batch);
        C::forward(detail::child_slot<K, offsets>(s, r.batch), x, cache(s, K, r.batch), r);
      }
      if constexpr (K == 0) O::copy(out, y, m);
      else O::accumulate(y, out, m);
    });
  }

  static void backward(layer_slot<T> s, const T* x, const T*, T* dy, T* dx, run_info r) {
    const std::size_t m = out_size * r.batch, mi = In::size * r.batch;
    T* dyk = cache(s, n, r.batch);
    T* dxk = cache(s, n + 1, r.batch);
    forwarded::each([&]<std::size_t K, class C>() {
      if constexpr (identity[K]) {
        if (dx) (K == 0) ? O::copy(dy, dx, mi) : O::accumulate(dx, dy, mi);
      } else {
        O::copy(dy, dyk, m);
        T* d = dx ? (K == 0 ? dx : dxk) : nullptr;
        C::backward(detail::child_slot<K, offsets>(s, r.batch), x, cache(s, K, r.batch), dyk, d, r);
        if (dx && K > 0) O::accumulate(dx, dxk, mi);
      }
    });
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
};

}  // namespace ctnn
