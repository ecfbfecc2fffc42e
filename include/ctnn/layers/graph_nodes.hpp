// ctnn/layers/graph_nodes.hpp — what the graph layers (branch, add, concatenate, residual) share.
//
// A graph layer is ONE bound layer of its network that holds bound sub-layers (its children):
// its buffer list is theirs, in order, each name prefixed by the child's index ("1.kernel";
// nested: "0.1.kernel"), a pad cache after each child (8-byte alignment of the next), then the
// graph layer's own caches (the children's outputs, backward scratch), so the model, the plan,
// weights files, optimizers and regularizers see the children's variables with no change.
// child_slot<J> hands child J its part of each block. The first-line messages of the graph
// checks are here (diag::*_text). graph_layer<D, Children, P, B> is the base of every graph
// layer (what they forward to their children, the own caches); parallel_layer<D, Spec, In, P, B>
// that of add / concatenate (forward, backward; D gives join<K> and dy_of<K>). docs/graphs.md.
#pragma once
#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>

#include "../core/backend.hpp"
#include "../core/backend.hpp"
#include "../core/compile_message.hpp"
#include "../core/concepts.hpp"
#include "../core/plan.hpp"
#include "../core/sequential.hpp"
#include "../core/shape.hpp"
#include "../core/type_at.hpp"

namespace ctnn {

namespace layer_kind {
struct graph {};     // the kind tag of the graph layers (branch, add, concatenate, residual, dag)
struct dag_join {};  // a dag's join node (layers/dag.hpp: a child with no variables, run by the dag)
}  // namespace layer_kind

template <class... Specs>
struct branch;
template <class S>
inline constexpr bool is_identity_branch_v = std::is_same_v<S, branch<>>;

namespace detail {

constexpr std::size_t decimal_digits(std::size_t v) {
  std::size_t n = 1;
  while (v >= 10) v /= 10, ++n;
  return n;
}

// "J." + the name of buffer Bi of child L, in static storage.
template <std::size_t J, class L, std::size_t Bi>
struct child_buffer_name {
  static constexpr std::string_view base = L::buffers[Bi].name;
  static constexpr std::size_t digits = decimal_digits(J);
  static constexpr std::array<char, digits + 1 + base.size()> text = [] {
    std::array<char, digits + 1 + base.size()> a{};
    std::size_t v = J;
    for (std::size_t i = digits; i-- > 0; v /= 10) a[i] = char('0' + v % 10);
    a[digits] = '.';
    for (std::size_t i = 0; i < base.size(); ++i) a[digits + 1 + i] = base[i];
    return a;
  }();
  static constexpr std::string_view value{text.data(), text.size()};
};

inline constexpr std::size_t graph_cache_align = 8;
constexpr std::size_t graph_pad(std::size_t bytes) { return (graph_cache_align - bytes % graph_cache_align) % graph_cache_align; }

template <std::size_t N>
constexpr std::array<std::size_t, N> filled(std::size_t v) {
  std::array<std::size_t, N> a{};
  for (std::size_t& e : a) e = v;
  return a;
}

// head + the specs' names, ", " between, then ">".
template <class... S>
std::string join_names(std::string head) {
  std::size_t i = 0;
  ((head += (i++ ? ", " : "") + S::name()), ...);
  return head + ">";
}

// The children's offsets inside the graph layer's blocks (P: the layer's policy).
template <class P, class... L>
struct graph_offsets {
  static constexpr std::size_t count = sizeof...(L);
  static constexpr std::array<std::size_t, count + 1> prefix(std::array<std::size_t, count> a) {
    std::array<std::size_t, count + 1> p{};
    for (std::size_t j = 0; j < count; ++j) p[j + 1] = p[j] + a[j];
    return p;
  }
  // byte regions: child j starts at the next multiple of its largest buffer alignment (buffer::aligned:
  // an int8 layer's kernel), so that its offsets inside its own region hold inside the graph layer's
  // (put_child_buffers gives its first buffer of the role that alignment)
  static constexpr std::array<std::size_t, count + 1> aligned_prefix(std::array<std::size_t, count> a,
                                                                     std::array<std::size_t, count> align) {
    std::array<std::size_t, count + 1> p{};
    for (std::size_t j = 0; j < count; ++j) p[j + 1] = align_up(p[j] + a[j], j + 1 < count ? align[j + 1] : 1);
    return p;
  }
  static constexpr auto params = prefix({count_of(L::buffers, role::parameter)...});  // elements
  static constexpr auto state =
      aligned_prefix({layer_role_bytes<P>(L::buffers, role::state)...}, {role_alignment(L::buffers, role::state)...});
  static constexpr auto mask =
      aligned_prefix({layer_role_bytes<P>(L::buffers, role::mask)...}, {role_alignment(L::buffers, role::mask)...});
  static constexpr auto metadata = aligned_prefix({layer_role_bytes<P>(L::buffers, role::metadata)...},
                                                  {role_alignment(L::buffers, role::metadata)...});
  static constexpr auto derived = aligned_prefix({layer_role_bytes<P>(L::buffers, role::derived)...},
                                                 {role_alignment(L::buffers, role::derived)...});
  // cache bytes per sample, each child's padded to graph_cache_align
  static constexpr auto cache = prefix({(layer_role_bytes<P>(L::buffers, role::cache) +
                                         graph_pad(layer_role_bytes<P>(L::buffers, role::cache)))...});
};

// Child C's buffers a[k0, k), each role's first one given the largest alignment of C's buffers of
// that role (where graph_offsets starts C's part of the region).
template <class C, std::size_t N>
constexpr void align_child_buffers(std::array<buffer, N>& a, std::size_t k0, std::size_t k) {
  std::array<bool, role_count> seen{};
  for (std::size_t i = k0; i < k; ++i)
    if (!seen[std::size_t(a[i].kind)]) {
      seen[std::size_t(a[i].kind)] = true;
      if (const std::size_t r = role_alignment(C::buffers, a[i].kind); r > a[i].align) a[i].align = r;
    }
}

// Child C's buffers (child J), prefixed, then its pad cache, into a from k.
template <class P, std::size_t J, class C, std::size_t N, std::size_t... Bi>
constexpr void put_child_buffers(std::array<buffer, N>& a, std::size_t& k, std::index_sequence<Bi...>) {
  const std::size_t k0 = k;
  ((a[k] = C::buffers[Bi], a[k].name = child_buffer_name<J, C, Bi>::value, ++k), ...);
  align_child_buffers<C>(a, k0, k);
  a[k++] = buffer::make(role::cache, elem::u8, "pad", {graph_pad(layer_role_bytes<P>(C::buffers, role::cache))});
}
template <class P, std::size_t N, class... L, std::size_t... J>
constexpr void put_children_buffers(std::array<buffer, N>& a, std::size_t& k, std::index_sequence<J...>) {
  (put_child_buffers<P, J, L>(a, k, std::make_index_sequence<std::tuple_size_v<decltype(L::buffers)>>{}), ...);
}

// The children's buffers, prefixed, each followed by its pad cache; then Own (the graph layer's caches).
template <class P, class Own, class... L>
constexpr auto graph_buffers(const Own& own) {
  constexpr std::size_t n = (std::size_t{0} + ... + (std::tuple_size_v<decltype(L::buffers)> + 1));
  std::array<buffer, n + std::tuple_size_v<Own>> a{};
  std::size_t k = 0;
  put_children_buffers<P, n + std::tuple_size_v<Own>, L...>(a, k, std::index_sequence_for<L...>{});
  for (const buffer& b : own) a[k++] = b;
  return a;
}

template <class L>
concept draws_random_child = requires { requires bool(L::draws_random); };

template <class T>
T* advance_bytes(T* p, std::size_t bytes) {
  return p ? reinterpret_cast<T*>(reinterpret_cast<std::byte*>(p) + bytes) : p;
}

// Child J's part of the graph layer's slot s (caches laid out for `batch` samples).
template <std::size_t J, class Off, class T>
layer_slot<T> child_slot(const layer_slot<T>& s, std::size_t batch) {
  return {s.params ? s.params + Off::params[J] : nullptr,
          s.grads ? s.grads + Off::params[J] : nullptr,
          advance_bytes(s.state, Off::state[J]),
          advance_bytes(s.cache, Off::cache[J] * batch),
          advance_bytes(s.mask, Off::mask[J]),
          advance_bytes(s.metadata, Off::metadata[J]),
          Off::derived[J + 1] > Off::derived[J] ? advance_bytes(s.derived, Off::derived[J]) : nullptr};
}

// The graph layer's own cache k (compute type, extents own[0..k) before it) after the children's.
template <class Off, std::size_t N, class T>
T* own_cache(const layer_slot<T>& s, const std::array<std::size_t, N>& own, std::size_t k, std::size_t batch) {
  std::size_t at = Off::cache[Off::count];
  for (std::size_t i = 0; i < k; ++i) at += own[i] * sizeof(T);
  return advance_bytes(s.cache, at * batch);
}

// What every graph layer forwards to its children: init, penalties, metadata checks, randomness.
template <class Off, class Children, class T, class B>
struct graph_children;
template <class Off, class... L, class T, class B>
struct graph_children<Off, std::tuple<L...>, T, B> {
  static constexpr bool draws_random = any_of_v<draws_random_child<L>...>;
  template <class F>
  static void each(F&& f) {
    [&]<std::size_t... J>(std::index_sequence<J...>) {
      (f.template operator()<J, L>(), ...);
    }(std::index_sequence_for<L...>{});
  }
  static void init(layer_slot<T> s, rng& g) {
    each([&]<std::size_t J, class C>() { C::init(child_slot<J, Off>(s, 0), g); });
  }
  static void add_penalty(layer_slot<T> s, step_scalars* sc) {
    each([&]<std::size_t J, class C>() {
      if constexpr (requires { C::add_penalty(s, sc); }) C::add_penalty(child_slot<J, Off>(s, 0), sc);
    });
  }
  static void add_penalty_gradient(layer_slot<T> s) {
    each([&]<std::size_t J, class C>() {
      if constexpr (requires { C::add_penalty_gradient(s); }) C::add_penalty_gradient(child_slot<J, Off>(s, 0));
    });
  }
  // the children's derived buffers (decoded weights: layers/sparse_dense.hpp), rewritten by the model
  static constexpr bool derives = (false || ... || requires(layer_slot<T> s) { L::derive(s); });
  static void derive(layer_slot<T> s) {
    each([&]<std::size_t J, class C>() {
      if constexpr (requires { C::derive(s); })
        if (Off::derived[J + 1] > Off::derived[J]) C::derive(child_slot<J, Off>(s, 0));
    });
  }
  static constexpr bool has_metadata_checks =
      (false || ... || requires(const std::byte* p) { L::check_metadata(std::string_view{}, p); });
  // "J.rest": child J's check of "rest"
  static std::string check_metadata(std::string_view name, const std::byte* bytes) {
    std::string why;
    each([&]<std::size_t J, class C>() {
      if constexpr (requires(const std::byte* p) { C::check_metadata(std::string_view{}, p); }) {
        const std::string head = std::to_string(J) + ".";
        if (name.substr(0, head.size()) == head) why = C::check_metadata(name.substr(head.size()), bytes);
      }
    });
    return why;
  }
};


// The base of a graph layer D with bound children L...: their offsets and forwarded calls (init,
// penalties, metadata checks), and D's own caches (extents D::own, after the children's).
template <class D, class Children, class P, class Backend>
struct graph_layer;
template <class D, class... L, class P, class Backend>
struct graph_layer<D, std::tuple<L...>, P, Backend> {
  using kind = layer_kind::graph;
  using T = typename P::compute_type;
  using O = ops<Backend>;
  using variable_type = typename P::variable_type;
  using compute_type = T;
  using children = std::tuple<L...>;
  static constexpr std::size_t n = sizeof...(L);
  static constexpr bool parallel = false;  // true: add / concatenate (branches over one input)
  using offsets = graph_offsets<P, L...>;
  using forwarded = graph_children<offsets, children, T, Backend>;
  static constexpr bool draws_random = forwarded::draws_random;

  static void init(layer_slot<T> s, rng& g) { forwarded::init(s, g); }
  static void add_penalty(layer_slot<T> s, step_scalars* sc) { forwarded::add_penalty(s, sc); }
  static T penalty(layer_slot<T> s)
    requires(Backend::memory::host_accessible)
  {
    step_scalars sc;
    add_penalty(s, &sc);
    return T(sc.penalty);
  }
  static void add_penalty_gradient(layer_slot<T> s) { forwarded::add_penalty_gradient(s); }
  static void derive(layer_slot<T> s)
    requires(forwarded::derives)
  {
    forwarded::derive(s);
  }
  static std::string check_metadata(std::string_view name, const std::byte* bytes)
    requires(forwarded::has_metadata_checks)
  {
    return forwarded::check_metadata(name, bytes);
  }

 protected:
  // The children's buffers, then D's own caches of these extents ("output"s, the last two "scratch").
  template <std::size_t N>
  static constexpr auto buffers_of(const std::array<std::size_t, N>& own) {
    std::array<buffer, N> a{};
    for (std::size_t k = 0; k < N; ++k) a[k] = buffer::cache(k + 2 < N ? "output" : "scratch", own[k]);
    return graph_buffers<P, std::array<buffer, N>, L...>(a);
  }
  // D's own cache k.
  static T* cache(const layer_slot<T>& s, std::size_t k, std::size_t batch) {
    return own_cache<offsets>(s, D::own, k, batch);
  }
};

template <class Spec, Shape In, class P, class Backend>
struct bound_branches {
  template <class... Br>
  static auto bind(std::tuple<Br...>*) -> std::tuple<typename Br::template bind<In, P, Backend>...>;
  using type = decltype(bind(static_cast<typename Spec::template branches<In>*>(nullptr)));
};

// The base of add / concatenate (D): branch K's output goes to own cache K (none for an identity
// branch, which reads x), D::join<K> puts it into y; backward hands branch K D::dy_of<K> (own
// cache n is its scratch) and sums the branches' dx (own cache n + 1: the scratch row).
template <class D, class Spec, Shape In, class P, class Backend>
struct parallel_layer : graph_layer<D, typename bound_branches<Spec, In, P, Backend>::type, P, Backend> {
  using base = graph_layer<D, typename bound_branches<Spec, In, P, Backend>::type, P, Backend>;
  using typename base::O;
  using typename base::T;
  using typename base::forwarded;
  using typename base::offsets;
  using base::n;
  using spec = Spec;
  using in_shape = In;
  using branch_specs = typename Spec::template branches<In>;
  static constexpr bool parallel = true;

 private:
  template <class... Br>
  static constexpr std::array<bool, sizeof...(Br)> identities(std::tuple<Br...>*) {
    return {is_identity_branch_v<Br>...};
  }

 public:
  static constexpr std::array<bool, n> identity = identities(static_cast<branch_specs*>(nullptr));
  static std::string name() { return Spec::name(); }
  static constexpr std::string summary_name() { return Spec::summary_name(); }

  static void forward(layer_slot<T> s, const T* x, T* y, run_info r) {
    forwarded::each([&]<std::size_t K, class C>() {
      const T* out = x;
      if constexpr (!identity[K]) {
        out = base::cache(s, K, r.batch);
        C::forward(child_slot<K, offsets>(s, r.batch), x, base::cache(s, K, r.batch), r);
      }
      D::template join<K>(out, y, r.batch);
    });
  }

  static void backward(layer_slot<T> s, const T* x, const T*, T* dy, T* dx, run_info r) {
    const std::size_t mi = In::size * r.batch;
    T* dyk = base::cache(s, n, r.batch);
    T* dxk = base::cache(s, n + 1, r.batch);
    forwarded::each([&]<std::size_t K, class C>() {
      T* d_out = D::template dy_of<K>(dy, dyk, r.batch);
      if constexpr (identity[K]) {
        if (dx) (K == 0) ? O::copy(d_out, dx, mi) : O::accumulate(dx, d_out, mi);
      } else {
        T* d = dx ? (K == 0 ? dx : dxk) : nullptr;
        C::backward(child_slot<K, offsets>(s, r.batch), x, base::cache(s, K, r.batch), d_out, d, r);
        if (dx && K > 0) O::accumulate(dx, dxk, mi);
      }
    });
  }

 protected:
  // Own caches: each branch's output (size[k]; none for an identity), a dy row of dy_row, a dx row.
  static constexpr std::array<std::size_t, n + 2> own_caches(const std::array<std::size_t, n>& size, std::size_t dy_row) {
    std::array<std::size_t, n + 2> a{};
    for (std::size_t k = 0; k < n; ++k) a[k] = identity[k] ? 0 : size[k];
    a[n] = dy_row;
    a[n + 1] = In::size;
    return a;
  }
};

}  // namespace detail

namespace diag {
template <std::size_t> struct branch {};

template <class Layer, class Branch, bool Ok>
struct add_branch_shapes_differ {
  static_assert(Ok, "add: the outputs of two branches differ in shape");
  static constexpr bool value = Ok;
};
template <class Layer, class Branch, bool Ok>
struct concatenate_branch_shapes_differ {
  static_assert(Ok, "concatenate: two branches' outputs differ in rank or in a dimension other than the axis");
  static constexpr bool value = Ok;
};
template <class Layer, bool Ok>
struct residual_needs_projection {
  static_assert(Ok, "residual: the block changes the shape and no dense or 1x1 conv2d projection maps the input to it");
  static constexpr bool value = Ok;
};
template <class Layer, bool Ok>
struct residual_projection_mismatch {
  static_assert(Ok, "residual_with: the projection's output differs from the block's");
  static constexpr bool value = Ok;
};

// "layer 2 (add): branch 2 yields 16 but branch 1 yields 8"
template <std::size_t Pos, std::size_t K, class Out, class First>
constexpr message add_shapes_text() {
  message m;
  m << "layer " << Pos << " (add): branch " << K << " yields ";
  m.dims(Out::dims) << " but branch 1 yields ";
  m.dims(First::dims);
  return m;
}
// "layer 2 (concatenate<-1>): branch 2 yields 4x4x8 but branch 1 yields 5x5x3; all dims but axis 2 must match"
template <std::size_t Pos, long long Axis, std::size_t K, std::size_t A, class Out, class First>
constexpr message concatenate_shapes_text() {
  message m;
  m << "layer " << Pos << " (concatenate<" << Axis << ">): branch " << K << " yields ";
  m.dims(Out::dims) << " but branch 1 yields ";
  m.dims(First::dims) << "; all dims but axis " << A << " must match";
  return m;
}
// "layer 2 (residual): the block maps 8x8x4 to 3x3x8; ..."
template <std::size_t Pos, class In, class Out>
constexpr message residual_projection_text() {
  message m;
  m << "layer " << Pos << " (residual): the block maps ";
  m.dims(In::dims) << " to ";
  m.dims(Out::dims) << "; no dense or 1x1 conv2d projection gives x that shape; name one with residual_with<Projection, ...>";
  return m;
}
// "layer 2 (residual_with): the block yields 4x4x8 but the projection yields 4x4x16"
template <std::size_t Pos, class Out, class Proj>
constexpr message residual_with_text() {
  message m;
  m << "layer " << Pos << " (residual_with): the block yields ";
  m.dims(Out::dims) << " but the projection yields ";
  m.dims(Proj::dims);
  return m;
}
}  // namespace diag

}  // namespace ctnn
