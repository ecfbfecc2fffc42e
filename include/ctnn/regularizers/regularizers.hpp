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

#include "../core/format.hpp"

namespace ctnn {

struct no_regularizer {
  static constexpr bool active = false;
  static std::string describe() { return ""; }
  template <class T>
  static T penalty(const T*, std::size_t) {
    return T(0);
  }
  template <class T>
  static void add_gradient(const T*, T*, std::size_t) {}
};

template <float Lambda>
struct l2 {
  static_assert(Lambda >= 0.0f && Lambda < 1e30f, "l2: the factor must be finite and >= 0");
  static constexpr bool active = true;
  static constexpr float lambda = Lambda;
  static std::string describe() { return "l2<" + detail::format_number(Lambda) + ">"; }
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

template <class R>
concept Regularizer = requires(const float* w, float* g, std::size_t n) {
  { R::active } -> std::convertible_to<bool>;
  R::penalty(w, n);
  R::add_gradient(w, g, n);
  { R::describe() } -> std::convertible_to<std::string>;
};

}  // namespace ctnn
