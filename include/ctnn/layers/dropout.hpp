// ctnn/layers/dropout.hpp — dropout<Rate>.
//
// keras.layers.Dropout: in training (run_info::training), each value is kept
// with probability 1 - Rate and scaled by 1 / (1 - Rate) (inverted dropout),
// or set to 0; at inference the layer is the identity. The mask is drawn from
// run_info::gen, the model's generator (seeded by make_model) by
// ops<Backend>::dropout_forward: on the CPU one uniform draw per value, kept
// when u >= Rate (CUDA hashes one seed drawn from it). The mask (0 or the
// scale) is kept in the cache for backward, which multiplies dy by it. Rate in
// [0, 1) (compile-time check). Output shape = input shape; no parameters.
//
// dynamic_dropout: the same layer with its rate a run-time value, kept in the
// layer's metadata buffer "rate" (one f32, saved with the weights; 0 after
// init). set_dropout_rate(model, r) sets every dynamic_dropout of a model, so
// a tuner changes the rate without instantiating new code. A rate outside
// [0, 1) throws std::invalid_argument when set and when a training pass meets
// it (the op reads it where it lives; ops<cuda>'s kernel cannot throw, so a
// rate outside [0, 1) there makes the outputs NaN: a non-finite loss).
#pragma once
#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>
#include <cstring>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>

#include "../core/backend.hpp"
#include "../core/concepts.hpp"
#include "../core/diagnostics.hpp"
#include "../core/format.hpp"
#include "../core/plan.hpp"
#include "../core/precision.hpp"
#include "../core/separate.hpp"
#include "../core/shape.hpp"

namespace ctnn {

namespace detail {
// dropout's name, "dropout<" + rate + ">", and its training pass's messages: built once in the
// compiled part (core/separate.hpp), not in every program that holds a dropout layer.
CTNN_DECL std::string dropout_name(const std::string& rate)
#if CTNN_DEFINITIONS
{
  return "dropout<" + rate + ">";
}
#else
;
#endif
[[noreturn, gnu::cold, gnu::noinline]] CTNN_DECL void throw_dropout_no_generator(const char* who)
#if CTNN_DEFINITIONS
{
  throw std::invalid_argument(std::string(who) + ": training needs a random generator (run_info::gen is null)");
}
#else
;
#endif
[[noreturn, gnu::cold, gnu::noinline]] CTNN_DECL void throw_dropout_rate(const char* who, const std::invalid_argument& e)
#if CTNN_DEFINITIONS
{
  throw std::invalid_argument(std::string(who) + ": " + e.what());
}
#else
;
#endif
}  // namespace detail

template <class Spec, Shape In, class P, class Backend>
struct dropout_layer;

template <auto Rate>
struct dropout {
  static_assert(std::is_floating_point_v<decltype(Rate)>, "dropout: the rate must be a floating-point number");
  static_assert(diag::require<(Rate >= 0 && Rate < 1), &diag::dropout_rate_text<Rate>>());
  static_assert(Rate >= 0 && Rate < 1, "dropout: the rate must be in [0, 1)");
  using is_layer_spec = void;
  static constexpr auto rate = Rate;
  static std::string name() { return detail::dropout_name(detail::format_number(Rate)); }

  template <Shape In, class P, class Backend>
  using bind = dropout_layer<dropout, In, precision::policy_of_t<P>, Backend>;
};

namespace detail {
// The body of dropout and dynamic_dropout over n values through ops<B>. At inference
// y = x; in training (a generator needed, checked first) ops<B>::dropout_forward draws
// the mask from r.gen into `mask` for backward (the rate a value, or dynamic_dropout's
// float in B's memory, checked there: its message is prefixed with `who`).
template <class B, class T, class R>
void dropout_forward(T* mask, const T* x, T* y, std::size_t n, R rate, const run_info& r, const char* who) {
  if (!r.training) return ops<B>::copy(x, y, n);
  if (!r.gen) throw_dropout_no_generator(who);
  try {
    ops<B>::dropout_forward(x, y, mask, n, rate, *r.gen);
  } catch (const std::invalid_argument& e) {
    throw_dropout_rate(who, e);
  }
}

// dx = dy * mask in training, dx = dy at inference; nothing when dx is null.
template <class B, class T>
void dropout_backward(const T* mask, const T* dy, T* dx, std::size_t n, const run_info& r) {
  if (!dx) return;
  if (!r.training) return ops<B>::copy(dy, dx, n);
  ops<B>::dropout_backward(mask, dy, dx, n);
}
}  // namespace detail

namespace layer_kind {
struct dropout {};  // the kind tag of dropout_layer (its member `kind`)
}  // namespace layer_kind

template <class Spec, Shape In, class P, class Backend>
struct dropout_layer {
  using kind = layer_kind::dropout;  // what it is, for tools that map layers (onnx/export.hpp, onnx/import.hpp)
  using spec = Spec;
  static constexpr double Rate = double(Spec::rate);
  using T = typename P::compute_type;
  using variable_type = typename P::variable_type;
  using compute_type = T;
  using in_shape = In;
  using out_shape = In;
  // Channels apart; the identity at inference (strip_pruning reads it).
  static constexpr bool keeps_channels = true;
  static constexpr bool draws_random = true;  // a training pass draws masks (a device runner does not replay it)
  static constexpr std::array<buffer, 1> buffers{buffer::cache("mask", In::size)};
  static constexpr std::size_t parameter_count = 0;
  static constexpr std::size_t state_count = 0;
  static constexpr std::size_t cache_per_sample = count_of(buffers, role::cache);
  static constexpr std::string name() { return Spec::name(); }

  static void init(layer_slot<T>, rng&) {}

  static void forward(layer_slot<T> s, const T* x, T* y, run_info r) {
    detail::dropout_forward<Backend>(s.cache, x, y, r.batch * In::size, Rate, r, "dropout");
  }
  static void backward(layer_slot<T> s, const T*, const T*, T* dy, T* dx, run_info r) {
    detail::dropout_backward<Backend>(s.cache, dy, dx, r.batch * In::size, r);
  }
};

template <class Spec, Shape In, class P, class Backend>
struct dynamic_dropout_layer;

struct dynamic_dropout {
  using is_layer_spec = void;
  static constexpr std::string name() { return "dynamic_dropout"; }

  template <Shape In, class P, class Backend>
  using bind = dynamic_dropout_layer<dynamic_dropout, In, precision::policy_of_t<P>, Backend>;
};

template <class Spec, Shape In, class P, class Backend>
struct dynamic_dropout_layer {
  using T = typename P::compute_type;
  using variable_type = typename P::variable_type;
  using compute_type = T;
  using in_shape = In;
  using out_shape = In;
  // Channels apart; the identity at inference (strip_pruning reads it).
  static constexpr bool keeps_channels = true;
  static constexpr bool draws_random = true;  // a training pass draws masks (a device runner does not replay it)
  static constexpr std::array<buffer, 2> buffers{buffer::cache("mask", In::size),
                                                 buffer::make(role::metadata, elem::f32, "rate", {1})};
  static constexpr std::size_t parameter_count = 0;
  static constexpr std::size_t state_count = 0;
  static constexpr std::size_t cache_per_sample = count_of(buffers, role::cache);
  static constexpr std::string name() { return Spec::name(); }

  // The rate of a slot in host memory (tests; a device model's is read through a host view).
  static double rate(layer_slot<T> s) {
    float r;
    std::memcpy(&r, s.metadata, sizeof r);
    return double(r);
  }
  // The rate as a file holds it (io/weights.hpp checks it before loading): "" when in [0, 1).
  static std::string check_metadata(std::string_view, const std::byte* bytes) {
    float r;
    std::memcpy(&r, bytes, sizeof r);
    if (r >= 0 && r < 1) return {};
    return "the dropout rate is " + detail::format_number(double(r)) + ", outside [0, 1)";
  }
  static void init(layer_slot<T> s, rng&) {
    const float zero = 0;
    std::memcpy(s.metadata, &zero, sizeof zero);
  }

  // dropout_layer's body with the rate read from the metadata by the op (in the backend's memory).
  static void forward(layer_slot<T> s, const T* x, T* y, run_info r) {
    detail::dropout_forward<Backend>(s.cache, x, y, r.batch * In::size, reinterpret_cast<const float*>(s.metadata), r,
                                     "dynamic_dropout");
  }
  static void backward(layer_slot<T> s, const T*, const T*, T* dy, T* dx, run_info r) {
    detail::dropout_backward<Backend>(s.cache, dy, dx, r.batch * In::size, r);
  }
};

}  // namespace ctnn
