// ctnn/train/summary.hpp — a Keras-style summary table of a network type.
//
// summary<Net>(out) prints one row per layer (its spec, output shape with the
// batch as "None", parameter count) and the totals, e.g.
//   Layer (type)                Output Shape        Param #
//   flatten                     (None, 784)               0
//   dense<256, relu>            (None, 256)         200,960
//   Total params: 203,530 (795.04 KB)
//   Trainable params: 203,530 (795.04 KB)
//   Non-trainable params: 0 (0.00 KB)
// The sizes count each value at its element size under float32 (Net::parameter_bytes,
// Net::state_bytes; Keras 3's weight_memory_size): an int8 layer's kernel 1 byte a weight.
// A network whose plan (float32, cpu<>) holds derived values (role::derived: stripped sparse
// layers' decoded weights, not parameters, never saved) gets one more line:
//   Decoded weights (not saved): 245,760 bytes (240.00 KB)
// A graph layer (residual, add, concatenate, branch, dag) is followed by its children's rows,
// indented; a dag's as its nodes: "b = dense<16>(a)" (docs/graphs.md).
// The rows are data: summary_table<Net> is a constexpr array of plain descriptors (name,
// depth, output shape, parameter count), and one function that is not a template,
// detail::print_summary, formats them (the compiled part holds it: core/separate.hpp), so a
// program generates no formatting code per layer. A name is a constant where the layer's
// name() can run at compile time (dense, conv2d, pooling, flatten, ...), otherwise the row
// points at the layer's name() (a rate printed as a float: dropout<0.5>).
#pragma once
#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdio>
#include <iostream>
#include <ostream>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "../core/sequential.hpp"
#include "../core/separate.hpp"

namespace ctnn {

namespace detail {
// One row of the summary: a layer (or a graph layer's child, `depth` levels down), as data.
struct summary_entry {
  const char* name;             // the row's name when it is a compile-time constant, else nullptr
  std::string (*name_of)();     // otherwise the function that returns it (the layer's name())
  std::string (*label)(std::size_t, const std::string&);  // a dag's node: the dag's child_label, else nullptr
  std::size_t child;            // the index among its parent's children (for label)
  std::size_t depth;            // nesting: indented two spaces per level
  const std::size_t* dims;      // the output shape, without the batch
  std::size_t rank;
  std::size_t parameters;
};

// The table: the rows formatted, then the totals. Not a template: one body for every
// network (cold: printed once, optimized for size).
CTNN_LAZY [[gnu::cold]] CTNN_DECL void print_summary(std::ostream& out, const summary_entry* rows, std::size_t n,
                                           std::size_t parameters, std::size_t states, std::size_t parameter_bytes,
                                           std::size_t state_bytes)
#if CTNN_DEFINITIONS
{
  auto group_thousands = [](std::size_t v) {
    std::string s = std::to_string(v);
    for (int i = int(s.size()) - 3; i > 0; i -= 3) s.insert(std::size_t(i), ",");
    return s;
  };
  auto pad = [](std::string s, std::size_t w, bool right = false) {
    if (s.size() >= w) return s + " ";
    return right ? std::string(w - s.size(), ' ') + s : s + std::string(w - s.size(), ' ');
  };
  std::vector<std::string> names(n), shapes(n);
  for (std::size_t i = 0; i < n; ++i) {
    const summary_entry& r = rows[i];
    std::string name = r.name ? std::string(r.name) : r.name_of();
    if (r.label) name = r.label(r.child, name);
    names[i] = std::string(2 * r.depth, ' ') + name;
    std::string shape = "(None";
    for (std::size_t d = 0; d < r.rank; ++d) shape += ", " + std::to_string(r.dims[d]);
    shapes[i] = shape + ")";
  }
  std::size_t w = 28;
  for (std::size_t i = 0; i < n; ++i) w = std::max(w, names[i].size() + 2);
  const std::string rule(w + 36, '=');
  out << "Model: sequential\n" << rule << "\n"
      << pad("Layer (type)", w) << pad("Output Shape", 22) << pad("Param #", 14, true) << "\n"
      << rule << "\n";
  for (std::size_t i = 0; i < n; ++i)
    out << pad(names[i], w) << pad(shapes[i], 22) << pad(group_thousands(rows[i].parameters), 14, true) << "\n";
  auto kb = [](std::size_t bytes) {
    char b[64];
    std::snprintf(b, sizeof b, " (%.2f KB)", double(bytes) / 1024.0);
    return std::string(b);
  };
  out << rule << "\n"
      << "Total params: " << group_thousands(parameters + states) << kb(parameter_bytes + state_bytes) << "\n"
      << "Trainable params: " << group_thousands(parameters) << kb(parameter_bytes) << "\n"
      << "Non-trainable params: " << group_thousands(states) << kb(state_bytes) << "\n";
}
#else
;
#endif

template <class L>
concept summary_graph = requires { typename L::children; };

// A row's name: a graph layer's short one (its children follow), a layer's name().
template <class L>
constexpr std::string row_name() {
  if constexpr (summary_graph<L>) return L::summary_name();
  else return L::name();
}
template <class L>
concept constant_row_name = requires { typename std::integral_constant<std::size_t, row_name<L>().size()>; };
// The name as characters in static storage, computed by the compiler.
template <class L>
struct row_name_chars {
  static constexpr std::size_t size = row_name<L>().size();
  static constexpr std::array<char, size + 1> chars = [] {
    std::array<char, size + 1> a{};
    const std::string s = row_name<L>();
    for (std::size_t i = 0; i < size; ++i) a[i] = s[i];
    return a;
  }();
};

// Rows of L and of its children, depth first.
template <class L>
constexpr std::size_t summary_rows() {
  if constexpr (summary_graph<L>)
    return []<class... C>(std::tuple<C...>*) {
      return (std::size_t(1) + ... + summary_rows<C>());
    }(static_cast<typename L::children*>(nullptr));
  else return 1;
}
template <class L>
constexpr void summary_fill(summary_entry*& at, std::size_t depth,
                            std::string (*label)(std::size_t, const std::string&), std::size_t child) {
  summary_entry e{nullptr, nullptr, label, child, depth, L::out_shape::dims.data(), L::out_shape::rank,
                  std::size_t(L::parameter_count)};
  if constexpr (constant_row_name<L>) e.name = row_name_chars<L>::chars.data();
  else if constexpr (summary_graph<L>) e.name_of = &L::summary_name;
  else e.name_of = &L::name;
  *at++ = e;
  if constexpr (summary_graph<L>) {
    std::string (*child_label)(std::size_t, const std::string&) = nullptr;
    if constexpr (requires { L::child_label(std::size_t(0), std::string()); }) child_label = &L::child_label;
    std::size_t k = 0;
    [&]<class... C>(std::tuple<C...>*) {
      (summary_fill<C>(at, depth + 1, child_label, k++), ...);
    }(static_cast<typename L::children*>(nullptr));
  }
}
template <Network Net>
constexpr auto make_summary_table() {
  using layers = typename Net::template bound<float, cpu<>>;
  return [&]<class... L>(std::tuple<L...>*) {
    std::array<summary_entry, (std::size_t(1) + ... + summary_rows<L>())> t{};
    t[0] = summary_entry{"input", nullptr, nullptr, 0, 0, Net::input_type::dims.data(), Net::input_type::rank, 0};
    summary_entry* at = t.data() + 1;
    (summary_fill<L>(at, 0, nullptr, 0), ...);
    return t;
  }(static_cast<layers*>(nullptr));
}
}  // namespace detail

// The summary's rows of Net as plain data: "input", then each layer and its children.
template <Network Net>
inline constexpr auto summary_table = detail::make_summary_table<Net>();

template <Network Net>
void summary(std::ostream& out = std::cout) {
  detail::print_summary(out, summary_table<Net>.data(), summary_table<Net>.size(), Net::parameter_count,
                        Net::state_count, Net::parameter_bytes, Net::state_bytes);
  constexpr std::size_t derived = Net::template plan<float, cpu<>>::bytes(role::derived, 1);
  if constexpr (derived > 0) {
    char b[96];
    std::snprintf(b, sizeof b, "Decoded weights (not saved): %zu bytes (%.2f KB)\n", derived, double(derived) / 1024.0);
    out << b;
  }
}

}  // namespace ctnn
