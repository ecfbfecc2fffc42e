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
// A graph layer (residual, add, concatenate, branch, dag) is followed by its children's rows,
// indented; a dag's as its nodes: "b = dense<16>(a)" (docs/graphs.md).
#pragma once
#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdio>
#include <iostream>
#include <ostream>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "../core/sequential.hpp"
#include "../core/type_at.hpp"
#include "../core/separate.hpp"

namespace ctnn {

namespace detail {
inline std::string group_thousands(std::size_t v) {
  std::string s = std::to_string(v);
  for (int i = int(s.size()) - 3; i > 0; i -= 3) s.insert(std::size_t(i), ",");
  return s;
}
template <Shape S>
std::string keras_shape() {
  std::string s = "(None";
  for (auto d : S::dims) s += ", " + std::to_string(d);
  return s + ")";
}
inline std::string pad(std::string s, std::size_t w, bool right = false) {
  if (s.size() >= w) return s + " ";
  return right ? std::string(w - s.size(), ' ') + s : s + std::string(w - s.size(), ' ');
}
struct summary_row {
  std::string name, shape;
  std::size_t parameters;
};
// The table itself: a template of nothing, so that it is compiled only in
// a program that prints a summary, and once however many networks it prints
// (cold: printed once, optimized for size).
template <class = void>
[[gnu::cold]] void print_summary(std::ostream& out, const summary_row* rows, std::size_t n,
                                        std::size_t parameters, std::size_t states, std::size_t parameter_bytes,
                                        std::size_t state_bytes) {
  std::size_t w = 28;
  for (std::size_t i = 0; i < n; ++i) w = std::max(w, rows[i].name.size() + 2);
  const std::string rule(w + 36, '=');
  out << "Model: sequential\n" << rule << "\n"
      << pad("Layer (type)", w) << pad("Output Shape", 22) << pad("Param #", 14, true) << "\n"
      << rule << "\n";
  for (std::size_t i = 0; i < n; ++i)
    out << pad(rows[i].name, w) << pad(rows[i].shape, 22) << pad(group_thousands(rows[i].parameters), 14, true)
        << "\n";
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
CTNN_INSTANCE(template void print_summary<void>(std::ostream&, const summary_row*, std::size_t, std::size_t,
                                               std::size_t, std::size_t, std::size_t);)
}  // namespace detail

namespace detail {
// Layer L's row, then (a graph layer: branch, add, concatenate, residual) its children's,
// indented two spaces per level under their parent's short name.
template <class L>
void summary_rows(std::vector<summary_row>& rows, std::size_t depth) {
  std::string name = L::name();
  if constexpr (requires { typename L::children; }) {
    name = L::summary_name();
  }
  rows.push_back({std::string(2 * depth, ' ') + name, keras_shape<typename L::out_shape>(), std::size_t(L::parameter_count)});
  if constexpr (requires { typename L::children; })
    [&]<class... C>(std::tuple<C...>*) {
      std::size_t k = 0;
      ([&] {
        const std::size_t at = rows.size();
        summary_rows<C>(rows, depth + 1);
        if constexpr (requires { L::child_label(k, rows[at].name); })  // a dag's node: "b = dense<16>(a)"
          rows[at].name = std::string(2 * depth + 2, ' ') + L::child_label(k, rows[at].name.substr(2 * depth + 2));
        ++k;
      }(), ...);
    }(static_cast<typename L::children*>(nullptr));
}
}  // namespace detail

template <Network Net>
void summary(std::ostream& out = std::cout) {
  using layers = typename Net::template bound<float, cpu<>>;
  std::vector<detail::summary_row> rows{{"input", detail::keras_shape<typename Net::input_type>(), 0}};
  [&]<class... L>(std::tuple<L...>*) {
    (detail::summary_rows<L>(rows, 0), ...);
  }(static_cast<layers*>(nullptr));
  detail::print_summary(out, rows.data(), rows.size(), Net::parameter_count, Net::state_count, Net::parameter_bytes,
                        Net::state_bytes);
}

}  // namespace ctnn
