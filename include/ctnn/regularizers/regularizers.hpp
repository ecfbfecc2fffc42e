// ctnn/regularizers/regularizers.hpp — weight penalties added to the loss.
//
// no_regularizer adds nothing. l2<Lambda> adds Lambda * sum(w^2) (the Keras
// formula; keras.regularizers.L2) and so contributes 2 * Lambda * w to the
// gradient. A regularizer applies to a layer's kernel, not its bias, as
// Keras' kernel_regularizer. Lambda must be finite and >= 0 (checked at
// compile time).
#pragma once
#include <cstddef>
#include <string>
#include <type_traits>

#include "../core/format.hpp"

namespace ctnn {

struct no_regularizer {
  static constexpr bool active = false;
  static std::string name() { return ""; }
  template <class T>
  static T penalty(const T*, std::size_t) {
    return T(0);
  }
  template <class T>
  static void add_gradient(const T*, T*, std::size_t) {}
};

template <auto Lambda>
struct l2 {
  static_assert(std::is_arithmetic_v<decltype(Lambda)>, "l2: the factor must be a number");
  static_assert(Lambda >= 0 && Lambda < 1e30, "l2: the factor must be finite and >= 0");
  static constexpr bool active = true;
  static constexpr double lambda = double(Lambda);
  static std::string name() { return "l2<" + detail::format_number(Lambda) + ">"; }
  template <class T>
  static T penalty(const T* w, std::size_t n) {
    T s = 0;
    for (std::size_t i = 0; i < n; ++i) s += w[i] * w[i];
    return T(Lambda) * s;
  }
  template <class T>
  static void add_gradient(const T* w, T* g, std::size_t n) {
    const T f = T(2) * T(Lambda);
    for (std::size_t i = 0; i < n; ++i) g[i] += f * w[i];
  }
};

// A regularizer: active, name(), and the templates penalty<T>(w, n) and
// add_gradient<T>(w, g, n) for the layer's variable type.
template <class R>
concept Regularizer = requires {
  { R::active } -> std::convertible_to<bool>;
  { R::name() } -> std::convertible_to<std::string>;
};

}  // namespace ctnn
