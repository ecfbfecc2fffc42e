// ctnn/regularizers/penalties.hpp — weight penalties added to the loss: their types, without the
// CPU backend's ops (layers include this; regularizers.hpp adds the ops a direct call needs).
//
// no_regularizer adds nothing. l2<Lambda> adds Lambda * sum(w^2) (the Keras
// formula; keras.regularizers.L2) and so contributes 2 * Lambda * w to the
// gradient. A regularizer applies to a layer's kernel, not its bias, as
// Keras' kernel_regularizer. Lambda must be finite and >= 0 (checked at
// compile time).
//
// add_penalty<B>(w, n, s) adds the penalty to a step's scalars s (core/plan.hpp,
// B's memory; ops<B>::add_penalty, nothing waits); add_gradient<B>(w, g, n) runs
// ops<B>::add_penalty_gradient; penalty<B>(w, n) returns it (waits). B defaults to cpu<>.
// dynamic_l2 / dynamic_l1: the same penalties with a run-time factor, kept in
// the layer's metadata buffer "l2" / "l1" (one f32, saved with the weights, 0
// after init) and read by the ops where they run (never on the host), so a tuner
// changes it without instantiating new code. It is checked where it is set
// (set_regularization, train/runtime_factors.hpp) and loaded (check_factor, for
// load_weights); one made bad behind their back (set_metadata_value) gives a NaN
// penalty and gradient, so the step reports a non-finite loss (fit raises).
#pragma once
#include <array>
#include <cmath>
#include <cstddef>
#include <cstring>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>

#include "../backends/cpu/backend.hpp"
#include "../core/backend.hpp"
#include "../core/concepts.hpp"  // layer_slot
#include "../core/format.hpp"
#include "../core/plan.hpp"

namespace ctnn {

struct no_regularizer {
  static constexpr bool active = false;
  static constexpr std::string name() { return ""; }
  template <class B = cpu<>, class T>
  static T penalty(const T*, std::size_t) {
    return T(0);
  }
  template <class B = cpu<>, class T>
  static void add_penalty(const T*, std::size_t, step_scalars*) {}
  template <class B = cpu<>, class T>
  static void add_gradient(const T*, T*, std::size_t) {}
};

template <auto Lambda>
struct l2 {
  static_assert(std::is_arithmetic_v<decltype(Lambda)>, "l2: the factor must be a number");
  static_assert(Lambda >= 0 && Lambda < 1e30, "l2: the factor must be finite and >= 0");
  static constexpr bool active = true;
  static constexpr double lambda = double(Lambda);
  static constexpr std::string name() { return "l2<" + detail::format_number(Lambda) + ">"; }
  template <class B = cpu<>, class T>
  static T penalty(const T* w, std::size_t n) {
    return T(Lambda) * T(ops<B>::sum_squares(w, n));
  }
  template <class B = cpu<>, class T>
  static void add_penalty(const T* w, std::size_t n, step_scalars* s) {
    ops<B>::add_penalty(w, n, T(0), T(Lambda), s);
  }
  template <class B = cpu<>, class T>
  static void add_gradient(const T* w, T* g, std::size_t n) {
    ops<B>::add_penalty_gradient(w, g, n, T(0), T(Lambda));
  }
};

namespace detail {
// "" when the factor a file holds (4 bytes, any alignment) is finite and >= 0, else what is wrong.
inline std::string check_regularization_factor(const char* who, const std::byte* bytes) {
  float f;
  std::memcpy(&f, bytes, sizeof f);
  if (f >= 0 && std::isfinite(f)) return {};
  return std::string(who) + ": the factor is " + format_number(double(f)) + ", not finite and >= 0";
}
}  // namespace detail

// l2 with its factor read from the layer's metadata buffer "l2" (B's memory).
struct dynamic_l2 {
  static constexpr bool active = true;
  static constexpr std::array<buffer, 1> factor_buffers{buffer::make(role::metadata, elem::f32, "l2", {1})};
  static constexpr std::string name() { return "dynamic_l2"; }
  template <class B = cpu<>, class T>
  static void add_penalty(const T* w, std::size_t n, const float* factor, step_scalars* s) {
    ops<B>::add_penalty(w, n, T(0), T(1), factor, s);
  }
  template <class B = cpu<>, class T>
  static void add_gradient(const T* w, T* g, std::size_t n, const float* factor) {
    ops<B>::add_penalty_gradient(w, g, n, T(0), T(1), factor);
  }
  static std::string check_factor(const std::byte* bytes) { return detail::check_regularization_factor("dynamic_l2", bytes); }
};

// l1 with its factor read from the layer's metadata buffer "l1" (B's memory).
struct dynamic_l1 {
  static constexpr bool active = true;
  static constexpr std::array<buffer, 1> factor_buffers{buffer::make(role::metadata, elem::f32, "l1", {1})};
  static constexpr std::string name() { return "dynamic_l1"; }
  template <class B = cpu<>, class T>
  static void add_penalty(const T* w, std::size_t n, const float* factor, step_scalars* s) {
    ops<B>::add_penalty(w, n, T(1), T(0), factor, s);
  }
  template <class B = cpu<>, class T>
  static void add_gradient(const T* w, T* g, std::size_t n, const float* factor) {
    ops<B>::add_penalty_gradient(w, g, n, T(1), T(0), factor);
  }
  static std::string check_factor(const std::byte* bytes) { return detail::check_regularization_factor("dynamic_l1", bytes); }
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
// The factor: the first f32 of the layer's metadata block (B's memory; only the ops read it).
template <class Slot>
const float* regularizer_factor(const Slot& s) {
  return reinterpret_cast<const float*>(s.metadata);
}
template <class Reg, class B, class Slot>
void add_regularizer_penalty(const Slot& s, std::size_t n, step_scalars* sc) {
  if constexpr (requires { Reg::factor_buffers; }) Reg::template add_penalty<B>(s.params, n, regularizer_factor(s), sc);
  else Reg::template add_penalty<B>(s.params, n, sc);
}
template <class Reg, class B, class Slot>
void add_regularizer_gradient(const Slot& s, std::size_t n) {
  if constexpr (requires { Reg::factor_buffers; })
    Reg::template add_gradient<B>(s.params, s.grads, n, regularizer_factor(s));
  else Reg::template add_gradient<B>(s.params, s.grads, n);
}
// A layer's check_metadata for its regularizer's factor (io/weights.hpp calls it on a file's bytes).
template <class Reg>
std::string check_regularizer_metadata(const std::byte* bytes) {
  if constexpr (requires { Reg::check_factor(bytes); }) return Reg::check_factor(bytes);
  else return {};
}

// What a layer whose regularizer applies to its first KernelCount parameters (its kernel or
// kernels) offers the model, as a base of the bound layer: add_penalty (the penalty added to the
// step's scalars in Backend's memory; nothing waits), penalty (its value, on a host backend),
// check_metadata (the run-time factor a weights file holds) and add_penalty_gradient.
template <class Reg, class Backend, class T, std::size_t KernelCount>
struct kernel_regularization {
  static constexpr std::size_t regularized_count = KernelCount;
  static void add_penalty(layer_slot<T> s, step_scalars* sc) { add_regularizer_penalty<Reg, Backend>(s, KernelCount, sc); }
  static T penalty(layer_slot<T> s)
    requires(Backend::memory::host_accessible)
  {
    step_scalars sc;
    add_penalty(s, &sc);
    return T(sc.penalty);
  }
  static std::string check_metadata(std::string_view, const std::byte* bytes) {
    return check_regularizer_metadata<Reg>(bytes);
  }
  static void add_penalty_gradient(layer_slot<T> s) { add_regularizer_gradient<Reg, Backend>(s, KernelCount); }
};
}  // namespace detail

// A regularizer: active, name(), and the templates add_penalty<B, T>(w, n, s) and
// add_gradient<B, T>(w, g, n) (a dynamic one: with its factor pointer) for the layer's
// backend and variable type.
template <class R>
concept Regularizer = requires {
  { R::active } -> std::convertible_to<bool>;
  { R::name() } -> std::convertible_to<std::string>;
};

}  // namespace ctnn
