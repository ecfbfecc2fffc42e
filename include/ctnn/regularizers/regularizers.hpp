// ctnn/regularizers/regularizers.hpp — weight penalties added to the loss.
//
// no_regularizer adds nothing. l2<Lambda> adds Lambda * sum(w^2) (the Keras
// formula; keras.regularizers.L2) and so contributes 2 * Lambda * w to the
// gradient. A regularizer applies to a layer's kernel, not its bias, as
// Keras' kernel_regularizer. Lambda must be finite and >= 0 (checked at
// compile time).
//
// penalty<B>(w, n) and add_gradient<B>(w, g, n) run through ops<B>
// (sum_squares / sum_abs, add_penalty_gradient); B defaults to cpu<>.
// dynamic_l2 / dynamic_l1: the same penalties with a run-time factor, kept in
// the layer's metadata buffer "l2" / "l1" (one f32, saved with the weights, 0
// after init), so a tuner changes it without instantiating new code
// (set_regularization in train/runtime_factors.hpp). A layer that takes a
// regularizer declares its factor_buffers and calls the detail:: helpers
// below, which call the compile-time forms exactly as before.
#pragma once
#include <array>
#include <cmath>
#include <cstddef>
#include <cstring>
#include <stdexcept>
#include <string>
#include <type_traits>

#include "../backends/cpu/ops.hpp"
#include "../core/format.hpp"
#include "../core/plan.hpp"

namespace ctnn {

struct no_regularizer {
  static constexpr bool active = false;
  static std::string name() { return ""; }
  template <class B = cpu<>, class T>
  static T penalty(const T*, std::size_t) {
    return T(0);
  }
  template <class B = cpu<>, class T>
  static void add_gradient(const T*, T*, std::size_t) {}
};

template <auto Lambda>
struct l2 {
  static_assert(std::is_arithmetic_v<decltype(Lambda)>, "l2: the factor must be a number");
  static_assert(Lambda >= 0 && Lambda < 1e30, "l2: the factor must be finite and >= 0");
  static constexpr bool active = true;
  static constexpr double lambda = double(Lambda);
  static std::string name() { return "l2<" + detail::format_number(Lambda) + ">"; }
  template <class B = cpu<>, class T>
  static T penalty(const T* w, std::size_t n) {
    return T(Lambda) * T(ops<B>::sum_squares(w, n));
  }
  template <class B = cpu<>, class T>
  static void add_gradient(const T* w, T* g, std::size_t n) {
    ops<B>::add_penalty_gradient(w, g, n, T(0), T(Lambda));
  }
};

namespace detail {
inline double regularization_factor(const std::byte* metadata, const char* who) {
  float f;
  std::memcpy(&f, metadata, sizeof f);
  if (!(f >= 0) || !std::isfinite(f))
    throw std::invalid_argument(std::string(who) + ": the factor must be finite and >= 0, got " + format_number(f));
  return double(f);
}
}  // namespace detail

// l2 with its factor read from the layer's metadata buffer "l2".
struct dynamic_l2 {
  static constexpr bool active = true;
  static constexpr std::array<buffer, 1> factor_buffers{buffer::make(role::metadata, elem::f32, "l2", {1})};
  static std::string name() { return "dynamic_l2"; }
  template <class B = cpu<>, class T>
  static T penalty(const T* w, std::size_t n, const std::byte* metadata) {
    const T f = T(detail::regularization_factor(metadata, "dynamic_l2"));
    return f * T(ops<B>::sum_squares(w, n));
  }
  template <class B = cpu<>, class T>
  static void add_gradient(const T* w, T* g, std::size_t n, const std::byte* metadata) {
    ops<B>::add_penalty_gradient(w, g, n, T(0), T(detail::regularization_factor(metadata, "dynamic_l2")));
  }
};

// l1 with its factor read from the layer's metadata buffer "l1".
struct dynamic_l1 {
  static constexpr bool active = true;
  static constexpr std::array<buffer, 1> factor_buffers{buffer::make(role::metadata, elem::f32, "l1", {1})};
  static std::string name() { return "dynamic_l1"; }
  template <class B = cpu<>, class T>
  static T penalty(const T* w, std::size_t n, const std::byte* metadata) {
    const T f = T(detail::regularization_factor(metadata, "dynamic_l1"));
    return f * T(ops<B>::sum_abs(w, n));
  }
  template <class B = cpu<>, class T>
  static void add_gradient(const T* w, T* g, std::size_t n, const std::byte* metadata) {
    ops<B>::add_penalty_gradient(w, g, n, T(detail::regularization_factor(metadata, "dynamic_l1")), T(0));
  }
};

namespace detail {
// A layer's buffers followed by its regularizer's factor buffers (if it has any).
template <class Reg, std::size_t N>
constexpr auto with_regularizer_buffers(std::array<buffer, N> b) {
  if constexpr (requires { Reg::factor_buffers; }) {
    std::array<buffer, N + Reg::factor_buffers.size()> r{};
    for (std::size_t i = 0; i < N; ++i) r[i] = b[i];
    for (std::size_t i = 0; i < Reg::factor_buffers.size(); ++i) r[N + i] = Reg::factor_buffers[i];
    return r;
  } else {
    return b;
  }
}
// The layer's metadata block starts with the factor (its only metadata buffer).
template <class Reg, class Slot>
void init_regularizer(const Slot& s) {
  if constexpr (requires { Reg::factor_buffers; }) std::memset(s.metadata, 0, 4 * Reg::factor_buffers.size());
}
template <class Reg, class T, class B, class Slot>
T regularizer_penalty(const Slot& s, std::size_t n) {
  if constexpr (requires { Reg::factor_buffers; }) return Reg::template penalty<B>(s.params, n, s.metadata);
  else return Reg::template penalty<B>(s.params, n);
}
template <class Reg, class B, class Slot>
void add_regularizer_gradient(const Slot& s, std::size_t n) {
  if constexpr (requires { Reg::factor_buffers; }) Reg::template add_gradient<B>(s.params, s.grads, n, s.metadata);
  else Reg::template add_gradient<B>(s.params, s.grads, n);
}
}  // namespace detail

// A regularizer: active, name(), and the templates penalty<B, T>(w, n) and
// add_gradient<B, T>(w, g, n) for the layer's backend and variable type.
template <class R>
concept Regularizer = requires {
  { R::active } -> std::convertible_to<bool>;
  { R::name() } -> std::convertible_to<std::string>;
};

}  // namespace ctnn
