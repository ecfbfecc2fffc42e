// ctnn/train/summary.hpp — a Keras-style summary table of a network type.
//
// summary<Net>(out) prints one row per layer (its spec, output shape with the
// batch as "None", parameter count) and the totals, e.g.
//   Layer (type)                Output Shape        Param #
//   flatten                     (None, 784)               0
//   dense<256, relu>            (None, 256)         200,960
//   Total params: 203,530 (795.04 KB)
#pragma once
#include <cstddef>
#include <cstdio>
#include <iostream>
#include <ostream>
#include <string>
#include <tuple>
#include <utility>

#include "../core/sequential.hpp"

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
}  // namespace detail

template <Network Net>
void summary(std::ostream& out = std::cout) {
  using layers = typename Net::template bound<float, cpu<>>;
  std::size_t w = 28;
  [&]<std::size_t... I>(std::index_sequence<I...>) {
    ((w = std::max(w, std::tuple_element_t<I, layers>::name().size() + 2)), ...);
  }(std::make_index_sequence<Net::layer_count>{});
  const std::string rule(w + 36, '=');
  out << "Model: sequential\n" << rule << "\n"
      << detail::pad("Layer (type)", w) << detail::pad("Output Shape", 22) << detail::pad("Param #", 14, true) << "\n"
      << rule << "\n";
  out << detail::pad("input", w) << detail::pad(detail::keras_shape<typename Net::input_type>(), 22)
      << detail::pad("0", 14, true) << "\n";
  [&]<std::size_t... I>(std::index_sequence<I...>) {
    ((out << detail::pad(std::tuple_element_t<I, layers>::name(), w)
          << detail::pad(detail::keras_shape<typename std::tuple_element_t<I, layers>::out_shape>(), 22)
          << detail::pad(detail::group_thousands(std::tuple_element_t<I, layers>::parameter_count), 14, true) << "\n"),
     ...);
  }(std::make_index_sequence<Net::layer_count>{});
  char kb[64];
  std::snprintf(kb, sizeof kb, " (%.2f KB)", double(Net::parameter_count * sizeof(float)) / 1024.0);
  out << rule << "\n"
      << "Total params: " << detail::group_thousands(Net::parameter_count + Net::state_count) << kb << "\n"
      << "Trainable params: " << detail::group_thousands(Net::parameter_count) << "\n"
      << "Non-trainable params: " << detail::group_thousands(Net::state_count) << "\n";
}

}  // namespace ctnn
