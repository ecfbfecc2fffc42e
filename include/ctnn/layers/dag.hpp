// ctnn/layers/dag.hpp — dag<node<...>...>: named nodes wired as a DAG (Keras's functional API), one layer.
//
// dag<Node...> is one layer over one input, named "in", whose nodes are listed in order:
// node<"b", Spec, "a"> applies the layer spec Spec to node "a" (no name: to the node before,
// "in" for the first); node<"s", add_join, "a", "b", ...> sums nodes of one shape and
// node<"c", concatenate_join<Axis>, "a", "b", ...> joins them along Axis (keras.layers.Add /
// Concatenate; Axis as in concatenate<Axis, ...>). A node reads only nodes listed before it, so
// there is no cycle; the last node is the output, every other node must be read. Names: letters,
// digits, '_', not "in". Each check fails with a first line naming the dag's position and the node
// (unknown name, a read of itself or a later node, duplicate names, several inputs to a layer, an
// unread node, join shapes). Output: the last node's. Variables: node N's named "N.name" (nested:
// "N.0.kernel"). Backward: a node's dy sums its readers'; the dy rows share buffers whose lifetimes
// do not overlap (constexpr interval colouring, detail::dag_table). docs/graphs.md.
#pragma once
#include <array>
#include <cstddef>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>

#include "../core/backend.hpp"
#include "../core/backend.hpp"
#include "../core/compile_message.hpp"
#include "branch.hpp"
#include "concatenate.hpp"
#include "graph_nodes.hpp"

namespace ctnn {

// A node's name, as a template argument ("a", "block_1").
template <std::size_t N>
struct node_name {
  char s[N]{};
  constexpr node_name(const char (&t)[N]) {
    for (std::size_t i = 0; i < N; ++i) s[i] = t[i];
  }
  constexpr std::string_view view() const { return {s, N - 1}; }
};

// The joins of a node with several inputs.
struct add_join {
  static std::string name() { return "add"; }
};
template <long long Axis>
struct concatenate_join {
  static constexpr long long axis = Axis;
  static std::string name() { return "concatenate<" + std::to_string(Axis) + ">"; }
};

template <node_name Name, class Spec, node_name... From>
struct node {
  using is_dag_node = void;
  static constexpr std::string_view id = Name.view();
  using spec = Spec;
  static constexpr std::size_t reads = sizeof...(From);
  static constexpr std::array<std::string_view, sizeof...(From)> from{From.view()...};
  static std::string name() {
    std::string t = "node<" + std::string(id) + ", " + Spec::name();
    for (std::string_view f : from) t += ", " + std::string(f);
    return t + ">";
  }
};

template <class Spec, Shape In, class P, class Backend>
struct dag_layer;

namespace detail {
template <class S>
inline constexpr bool is_join_v = std::is_same_v<S, add_join>;
template <long long A>
inline constexpr bool is_join_v<concatenate_join<A>> = true;
// (by a member: nvcc's front end does not match a partial specialization on node<Name, ...>)
template <class N>
inline constexpr bool is_node_v = requires { typename N::is_dag_node; };

enum class dag_problem { none, bad_name, duplicate, unknown, later, several, unread };
struct dag_problem_at {
  dag_problem kind = dag_problem::none;
  std::size_t node = 0, read = 0;
};

// What the wiring of nodes N... is, independent of shapes: each node's reads (flat: node k's are
// src[first[k] .. first[k + 1]), a node's index or `input`), the first problem found, and the
// colouring of the dy rows.
template <class... N>
struct dag_table {
  static constexpr std::size_t n = sizeof...(N);
  static constexpr std::size_t input = n, none = n + 1;
  static constexpr std::array<std::string_view, n> names{N::id...};
  static constexpr std::array<bool, n> joins{is_join_v<typename N::spec>...};
  static constexpr std::array<std::size_t, n + 1> first = [] {
    constexpr std::array<std::size_t, n> c{(N::reads ? N::reads : 1)...};
    std::array<std::size_t, n + 1> a{};
    for (std::size_t k = 0; k < n; ++k) a[k + 1] = a[k] + c[k];
    return a;
  }();
  static constexpr std::size_t total = first[n];
  static constexpr std::size_t find(std::string_view s) {
    for (std::size_t i = 0; i < n; ++i)
      if (names[i] == s) return i;
    return s == "in" ? input : none;
  }
  // the name each read is written with ("" for an implicit read of the node before)
  static constexpr std::array<std::string_view, total> written = [] {
    std::array<std::string_view, total> a{};
    std::size_t r = 0;
    (
        [&] {
          if constexpr (N::reads == 0) ++r;
          else
            for (std::string_view f : N::from) a[r++] = f;
        }(),
        ...);
    return a;
  }();
  static constexpr std::array<std::size_t, total> owner = [] {
    std::array<std::size_t, total> a{};
    for (std::size_t k = 0; k < n; ++k)
      for (std::size_t r = first[k]; r < first[k + 1]; ++r) a[r] = k;
    return a;
  }();
  static constexpr std::array<std::size_t, total> src = [] {
    std::array<std::size_t, total> a{};
    for (std::size_t r = 0; r < total; ++r) {
      const std::size_t k = owner[r];
      a[r] = written[r].empty() ? (k == 0 ? input : k - 1) : find(written[r]);
    }
    return a;
  }();
  static constexpr bool valid_name(std::string_view s) {
    if (s.empty() || s == "in") return false;
    for (char c : s)
      if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_')) return false;
    return true;
  }
  // the last node reading node i (0 when none does)
  static constexpr std::array<std::size_t, n> last_reader = [] {
    std::array<std::size_t, n> a{};
    for (std::size_t r = 0; r < total; ++r)
      if (src[r] < n) a[src[r]] = owner[r];
    return a;
  }();

  static constexpr dag_problem_at first_problem = [] {
    for (std::size_t k = 0; k < n; ++k) {
      if (!valid_name(names[k])) return dag_problem_at{dag_problem::bad_name, k, 0};
      for (std::size_t j = 0; j < k; ++j)
        if (names[j] == names[k]) return dag_problem_at{dag_problem::duplicate, k, 0};
      for (std::size_t r = first[k]; r < first[k + 1]; ++r) {
        if (src[r] == none) return dag_problem_at{dag_problem::unknown, k, r};
        if (src[r] < n && src[r] >= k) return dag_problem_at{dag_problem::later, k, r};
      }
      if (!joins[k] && first[k + 1] - first[k] > 1) return dag_problem_at{dag_problem::several, k, 0};
    }
    for (std::size_t k = 0; k + 1 < n; ++k)
      if (last_reader[k] == 0) return dag_problem_at{dag_problem::unread, k, 0};
    return dag_problem_at{};
  }();

  // Read r is the first to reach its source in backward order (nodes last to first, each node's
  // reads first to last): it writes the source's dy (or dx); the later ones add to it.
  static constexpr std::array<bool, total> first_contribution = [] {
    std::array<bool, total> a{};
    for (std::size_t r = 0; r < total; ++r) {
      a[r] = true;
      for (std::size_t q = 0; q < total; ++q)
        if (src[q] == src[r] && (owner[q] > owner[r] || (owner[q] == owner[r] && q < r))) a[r] = false;
    }
    return a;
  }();
  // dy of node k (k < n - 1) lives while backward runs nodes last_reader[k] down to k: rows whose
  // intervals [k, last_reader[k]] do not meet share a colour. Greedy by decreasing last reader (the
  // order in which backward first writes them) is optimal for intervals.
  static constexpr std::array<std::size_t, n> colour = [] {
    std::array<std::size_t, n> c{};
    std::array<bool, n> done{};
    for (std::size_t step = 0; step + 1 < n; ++step) {
      std::size_t k = n;
      for (std::size_t i = 0; i + 1 < n; ++i)
        if (!done[i] && (k == n || last_reader[i] > last_reader[k])) k = i;
      for (std::size_t col = 0;; ++col) {
        bool free = true;
        for (std::size_t j = 0; j + 1 < n; ++j)
          if (done[j] && c[j] == col && j <= last_reader[k] && k <= last_reader[j]) free = false;
        if (free) {
          c[k] = col;
          break;
        }
      }
      done[k] = true;
    }
    return c;
  }();
  static constexpr std::size_t colours = [] {
    std::size_t m = 0;
    for (std::size_t k = 0; k + 1 < n; ++k) m = colour[k] + 1 > m ? colour[k] + 1 : m;
    return m;
  }();
};

// The bound child of a join node over inputs of shapes Ins... (no variables, no caches): the
// dag runs join / split.
template <class J, class P, class Backend, Shape... Ins>
struct dag_join_layer {
  using kind = layer_kind::dag_join;
  using T = typename P::compute_type;
  using O = ops<Backend>;
  using variable_type = typename P::variable_type;
  using compute_type = T;
  static constexpr std::size_t m = sizeof...(Ins);
  using in_shape = pack_at_t<0, Ins...>;
  static constexpr bool concat = !std::is_same_v<J, add_join>;
  static constexpr std::size_t axis = [] {
    if constexpr (concat) return resolve_axis(J::axis, in_shape::rank);
    else return std::size_t{0};
  }();
  using out_shape = std::conditional_t<concat, decltype(joined_shape<axis, in_shape, Ins...>()), in_shape>;
  static constexpr std::array<buffer, 0> buffers{};
  static constexpr std::size_t parameter_count = 0, state_count = 0, cache_per_sample = 0;
  static std::string name() { return J::name(); }
  static void init(layer_slot<T>, rng&) {}

  static constexpr std::size_t outer = [] {
    std::size_t o = 1;
    for (std::size_t i = 0; i < axis; ++i) o *= out_shape::dims[i];
    return o;
  }();
  static constexpr std::size_t row = out_shape::size / outer;
  static constexpr std::array<std::size_t, m> run{(Ins::size / outer)...};  // a read's run in one row
  static constexpr std::array<std::size_t, m> before = [] {
    std::array<std::size_t, m> b{};
    for (std::size_t k = 1; k < m; ++k) b[k] = b[k - 1] + run[k - 1];
    return b;
  }();

  // y from the inputs: their sum, or their runs side by side.
  static void join(const std::array<const T*, m>& in, T* y, std::size_t batch) {
    for (std::size_t k = 0; k < m; ++k) {
      if constexpr (!concat) {
        if (k == 0) O::copy(in[k], y, out_shape::size * batch);
        else O::accumulate(y, in[k], out_shape::size * batch);
      } else {
        for (std::size_t o = 0; o < batch * outer; ++o) O::copy(in[k] + o * run[k], y + o * row + before[k], run[k]);
      }
    }
  }
  // Each input's dy (d[k]; null: not wanted) from dy: written where first[k], else added.
  static void split(const T* dy, const std::array<T*, m>& d, const std::array<bool, m>& first, std::size_t batch) {
    for (std::size_t k = 0; k < m; ++k) {
      if (!d[k]) continue;
      if constexpr (!concat) {
        if (first[k]) O::copy(dy, d[k], out_shape::size * batch);
        else O::accumulate(d[k], dy, out_shape::size * batch);
      } else {
        for (std::size_t o = 0; o < batch * outer; ++o) {
          if (first[k]) O::copy(dy + o * row + before[k], d[k] + o * run[k], run[k]);
          else O::accumulate(d[k] + o * run[k], dy + o * row + before[k], run[k]);
        }
      }
    }
  }
};

// The nodes bound one after another on In: step<K>::layer (a join's: dag_join_layer).
template <Shape In, class P, class Backend, class... N>
struct dag_bind {
  using table = dag_table<N...>;
  static constexpr std::size_t n = table::n;
  template <std::size_t K>
  struct step;
  template <std::size_t I>
  struct lazy_out {
    using type = typename step<I>::layer::out_shape;
  };
  template <std::size_t I>
  using out_of = typename std::conditional_t<I == n, std::type_identity<In>, lazy_out<I>>::type;
  template <std::size_t K>
  struct step {
    using spec = typename pack_at_t<K, N...>::spec;
    static constexpr std::size_t r0 = table::first[K];
    using in_shape = out_of<table::src[r0]>;
    static auto pick() {
      if constexpr (is_join_v<spec>)
        return []<std::size_t... R>(std::index_sequence<R...>) {
          return std::type_identity<dag_join_layer<spec, P, Backend, out_of<table::src[r0 + R]>...>>{};
        }(std::make_index_sequence<table::first[K + 1] - r0>{});
      else
        return std::type_identity<typename spec::template bind<in_shape, P, Backend>>{};
    }
    using layer = typename decltype(pick())::type;
  };
  template <class Seq>
  struct collect;
  template <std::size_t... K>
  struct collect<std::index_sequence<K...>> {
    using type = std::tuple<typename step<K>::layer...>;
  };
  using type = typename collect<std::make_index_sequence<n>>::type;
};

// "N." + the name of buffer Bi of child L (node N), in static storage.
template <class N, class L, std::size_t Bi>
struct node_buffer_name {
  static constexpr std::string_view base = L::buffers[Bi].name;
  static constexpr std::array<char, N::id.size() + 1 + base.size()> text = [] {
    std::array<char, N::id.size() + 1 + base.size()> a{};
    for (std::size_t i = 0; i < N::id.size(); ++i) a[i] = N::id[i];
    a[N::id.size()] = '.';
    for (std::size_t i = 0; i < base.size(); ++i) a[N::id.size() + 1 + i] = base[i];
    return a;
  }();
  static constexpr std::string_view value{text.data(), text.size()};
};
template <class P, class N, class C, std::size_t M, std::size_t... Bi>
constexpr void put_node_buffers(std::array<buffer, M>& a, std::size_t& k, std::index_sequence<Bi...>) {
  const std::size_t k0 = k;
  ((a[k] = C::buffers[Bi], a[k].name = node_buffer_name<N, C, Bi>::value, ++k), ...);
  align_child_buffers<C>(a, k0, k);
  a[k++] = buffer::make(role::cache, elem::u8, "pad", {graph_pad(layer_role_bytes<P>(C::buffers, role::cache))});
}
}  // namespace detail

namespace diag {
template <class Layer, bool Ok>
struct dag_wiring_invalid {
  static_assert(Ok, "dag: a node's name or the names it reads are invalid (see the first error)");
  static constexpr bool value = Ok;
};
template <class Layer, class Node, bool Ok>
struct dag_join_shapes_differ {
  static_assert(Ok, "dag: the inputs of a join node differ in shape");
  static constexpr bool value = Ok;
};
constexpr message& put(message& m, std::string_view s) {
  for (char c : s) m << c;
  return m;
}
// "layer 2 (dag): node b reads q, which is no node of this dag" and the like (no quotes: the
// compilers print them escaped)
template <std::size_t Pos, class... N>
constexpr message dag_wiring_text() {
  using table = detail::dag_table<N...>;
  using kind = detail::dag_problem;
  constexpr auto p = table::first_problem;
  message m;
  m << "layer " << Pos << " (dag): node ";
  put(m, table::names[p.node]);
  if constexpr (p.kind == kind::bad_name) {
    m << ": a node name is letters, digits and _, not empty and not in (the input)";
  } else if constexpr (p.kind == kind::duplicate) {
    m << ": two nodes have this name";
  } else if constexpr (p.kind == kind::unknown) {
    put(m << " reads ", table::written[p.read]) << ", which is no node of this dag";
  } else if constexpr (p.kind == kind::later) {
    put(m << " reads ", table::written[p.read]) << ", which is not listed before it (a cycle, or a use before the definition)";
  } else if constexpr (p.kind == kind::several) {
    m << " reads " << (table::first[p.node + 1] - table::first[p.node])
      << " nodes; only a join (add_join, concatenate_join<Axis>) takes several";
  } else {
    m << " is read by no node (only the last node is the output of the dag)";
  }
  return m;
}
// "layer 2 (dag): node out (add): c yields 8 but b yields 16"
template <std::size_t Pos, class Table, std::size_t K, std::size_t R, class J, class Out, class First>
constexpr message dag_join_text() {
  message m;
  m << "layer " << Pos << " (dag): node ";
  put(m, Table::names[K]) << " (";
  if constexpr (std::is_same_v<J, add_join>) m << "add";
  else m << "concatenate<" << J::axis << ">";
  auto name_of = [](std::size_t i) { return i == Table::input ? std::string_view{"in"} : Table::names[i]; };
  put(m << "): ", name_of(Table::src[Table::first[K] + R])) << " yields ";
  m.dims(Out::dims);
  put(m << " but ", name_of(Table::src[Table::first[K]])) << " yields ";
  m.dims(First::dims);
  if constexpr (!std::is_same_v<J, add_join>) {
    if constexpr (detail::axis_fits<J::axis, First>())
      m << "; all dims but axis " << detail::resolve_axis(J::axis, First::rank) << " must match";
    else
      m << "; axis " << J::axis << " is outside rank " << First::rank;
  }
  return m;
}
}  // namespace diag

template <class... N>
struct dag {
  static_assert(sizeof...(N) >= 1, "dag: give at least one node");
  static_assert((detail::is_node_v<N> && ...), "dag: every argument is a node<\"name\", Spec, \"from\"...>");
  using is_layer_spec = void;
  static std::string name() { return detail::join_names<N...>("dag<"); }
  static constexpr std::string summary_name() { return "dag"; }
  template <Shape In, std::size_t Pos>
  static constexpr bool check();
  template <Shape In, class P, class Backend>
  using bind = dag_layer<dag, In, precision::policy_of_t<P>, Backend>;
};

namespace detail {
// Node K and the ones after it, on the shapes the nodes before them yield (stops at the first failure).
template <Shape In, std::size_t Pos, std::size_t K, class... N>
constexpr bool check_dag_nodes() {
  using table = dag_table<N...>;
  if constexpr (K == table::n) {
    return true;
  } else {
    using B = dag_bind<In, precision::float32, cpu<>, N...>;
    using S = typename pack_at_t<K, N...>::spec;
    constexpr std::size_t r0 = table::first[K], m = table::first[K + 1] - r0;
    constexpr bool ok = [] {
      if constexpr (is_join_v<S>) {
        using First = typename B::template out_of<table::src[r0]>;
        return []<std::size_t... R>(std::index_sequence<R...>) {
          return (true && ... && [] {
            using Out = typename B::template out_of<table::src[r0 + R]>;
            constexpr bool same = [] {
              if constexpr (std::is_same_v<S, add_join>) return Out{} == First{};
              else if constexpr (!axis_fits<S::axis, First>()) return false;
              else return same_but_axis<resolve_axis(S::axis, First::rank), Out, First>();
            }();
            constexpr bool located = diag::require<same, &diag::dag_join_text<Pos, table, K, R, S, Out, First>>();
            return located && diag::dag_join_shapes_differ<diag::layer<Pos>, pack_at_t<K, N...>, same>::value;
          }());
        }(std::make_index_sequence<m>{});
      } else {
        return check_spec_v<S> && check_layer<S, typename B::template out_of<table::src[r0]>, Pos>();
      }
    }();
    if constexpr (!ok) return false;
    else return check_dag_nodes<In, Pos, K + 1, N...>();
  }
}
}  // namespace detail

template <class... N>
template <Shape In, std::size_t Pos>
constexpr bool dag<N...>::check() {
  using table = detail::dag_table<N...>;
  constexpr bool wired = table::first_problem.kind == detail::dag_problem::none;
  if constexpr (!wired) {
    constexpr bool located = diag::require<wired, &diag::dag_wiring_text<Pos, N...>>();
    return located && diag::dag_wiring_invalid<diag::layer<Pos>, wired>::value;
  } else {
    return detail::check_dag_nodes<In, Pos, 0, N...>();
  }
}

template <class... N, Shape In, class P, class Backend>
struct dag_layer<dag<N...>, In, P, Backend>
    : detail::graph_layer<dag_layer<dag<N...>, In, P, Backend>, typename detail::dag_bind<In, P, Backend, N...>::type, P, Backend> {
  using base = detail::graph_layer<dag_layer, typename detail::dag_bind<In, P, Backend, N...>::type, P, Backend>;
  using typename base::O;
  using typename base::T;
  using typename base::children;
  using typename base::forwarded;
  using typename base::offsets;
  using base::n;
  using spec = dag<N...>;
  using table = detail::dag_table<N...>;
  using in_shape = In;
  using out_shape = typename detail::type_at_t<n - 1, children>::out_shape;
  static constexpr bool is_dag = true;

 private:
  template <class... L>
  static constexpr std::array<std::size_t, n> sizes_of(std::tuple<L...>*) {
    return {L::out_shape::size...};
  }
  static constexpr std::size_t size_of(std::size_t i) { return i == table::input ? In::size : out_size[i]; }

 public:
  static constexpr std::array<std::size_t, n> out_size = sizes_of(static_cast<children*>(nullptr));
  // own caches: node k's output (k < n - 1; the last writes y), a dy row per colour, a dx scratch row
  static constexpr std::size_t colours = table::colours;
  static constexpr std::array<std::size_t, n + colours + 1> own = [] {
    std::array<std::size_t, n + colours + 1> a{};
    for (std::size_t k = 0; k + 1 < n; ++k) {
      a[k] = out_size[k];
      std::size_t& c = a[n + table::colour[k]];
      c = out_size[k] > c ? out_size[k] : c;
    }
    for (std::size_t r = 0; r < table::total; ++r)  // a layer's dx added to a dy already written
      if (!table::joins[table::owner[r]] && !table::first_contribution[r] && size_of(table::src[r]) > a[n + colours])
        a[n + colours] = size_of(table::src[r]);
    return a;
  }();

 private:
  static constexpr auto make_buffers() {
    constexpr std::size_t kids = []<class... L>(std::tuple<L...>*) {
      return (std::size_t{0} + ... + (std::tuple_size_v<decltype(L::buffers)> + 1));
    }(static_cast<children*>(nullptr));
    std::array<buffer, kids + own.size()> a{};
    std::size_t k = 0;
    [&]<std::size_t... J>(std::index_sequence<J...>) {
      (detail::put_node_buffers<P, detail::pack_at_t<J, N...>, detail::type_at_t<J, children>>(
           a, k, std::make_index_sequence<std::tuple_size_v<decltype(detail::type_at_t<J, children>::buffers)>>{}),
       ...);
    }(std::make_index_sequence<n>{});
    for (std::size_t i = 0; i < own.size(); ++i)
      a[k++] = buffer::cache(i < n ? "output" : i < n + colours ? "dy" : "scratch", own[i]);
    return a;
  }

 public:
  static constexpr auto buffers = make_buffers();
  static constexpr std::size_t parameter_count = count_of(buffers, role::parameter);
  static constexpr std::size_t state_count = count_of(buffers, role::state);
  static constexpr std::size_t cache_per_sample = count_of(buffers, role::cache);
  static std::string name() { return spec::name(); }
  static constexpr std::string summary_name() { return "dag"; }
  // summary's row of node k: "b = dense<16>(a)"
  static std::string child_label(std::size_t k, const std::string& child) {
    std::string t = std::string(table::names[k]) + " = " + child + "(";
    for (std::size_t r = table::first[k]; r < table::first[k + 1]; ++r) {
      t += r > table::first[k] ? ", " : "";
      t += table::src[r] == table::input ? std::string("in") : std::string(table::names[table::src[r]]);
    }
    return t + ")";
  }

  static void forward(layer_slot<T> s, const T* x, T* y, run_info r) {
    forwarded::each([&]<std::size_t K, class C>() {
      T* out = K + 1 == n ? y : base::cache(s, K, r.batch);
      constexpr std::size_t r0 = table::first[K];
      if constexpr (table::joins[K]) {
        std::array<const T*, C::m> in{};
        for (std::size_t q = 0; q < C::m; ++q) in[q] = output(s, x, table::src[r0 + q], r.batch);
        C::join(in, out, r.batch);
      } else {
        C::forward(detail::child_slot<K, offsets>(s, r.batch), output(s, x, table::src[r0], r.batch), out, r);
      }
    });
  }

  // dy (the last node's) is used as scratch, as every dy row is.
  static void backward(layer_slot<T> s, const T* x, const T* y, T* dy, T* dx, run_info r) {
    [&]<std::size_t... I>(std::index_sequence<I...>) {
      (step<n - 1 - I>(s, x, y, dy, dx, r), ...);
    }(std::make_index_sequence<n>{});
  }

  static std::string check_metadata(std::string_view name, const std::byte* bytes)
    requires(forwarded::has_metadata_checks)
  {
    std::string why;
    forwarded::each([&]<std::size_t J, class C>() {
      if constexpr (requires(const std::byte* p) { C::check_metadata(std::string_view{}, p); }) {
        const std::string head = std::string(table::names[J]) + ".";
        if (name.substr(0, head.size()) == head) why = C::check_metadata(name.substr(head.size()), bytes);
      }
    });
    return why;
  }

 private:
  // Node i's output (i == input: x).
  static const T* output(const layer_slot<T>& s, const T* x, std::size_t i, std::size_t batch) {
    return i == table::input ? x : base::cache(s, i, batch);
  }
  // Where node i's dy goes (i == input: dx, null when not wanted).
  static T* dy_row(const layer_slot<T>& s, T* dx, std::size_t i, std::size_t batch) {
    return i == table::input ? dx : base::cache(s, n + table::colour[i], batch);
  }
  template <std::size_t K>
  static void step(const layer_slot<T>& s, const T* x, const T* y, T* dy, T* dx, run_info r) {
    using C = detail::type_at_t<K, children>;
    constexpr std::size_t r0 = table::first[K];
    T* dk = K + 1 == n ? dy : dy_row(s, dx, K, r.batch);
    if constexpr (table::joins[K]) {
      std::array<T*, C::m> d{};
      std::array<bool, C::m> first{};
      for (std::size_t q = 0; q < C::m; ++q) {
        d[q] = dy_row(s, dx, table::src[r0 + q], r.batch);
        first[q] = table::first_contribution[r0 + q];
      }
      C::split(dk, d, first, r.batch);
    } else {
      constexpr std::size_t i = table::src[r0];
      const T* out = K + 1 == n ? y : base::cache(s, K, r.batch);
      T* target = dy_row(s, dx, i, r.batch);
      T* d = target && !table::first_contribution[r0] ? base::cache(s, n + colours, r.batch) : target;
      C::backward(detail::child_slot<K, offsets>(s, r.batch), output(s, x, i, r.batch), out, dk, d, r);
      if (d != target) O::accumulate(target, d, size_of(i) * r.batch);
    }
  }
};

}  // namespace ctnn
