// ctnn/core/concepts.hpp — the concepts at ctnn's public entry points.
//
// Each public concept is built from small named sub-concepts, so a failed
// constraint names the missing piece ("does not satisfy has_backward").
//   LayerSpec  — a user-facing, stateless layer description with bind<In, T, B>.
//   BoundLayer — a spec bound to an input shape, element type and backend.
//   Loss, Metric, Optimizer, Schedule, Dataset, Callback — see each below.
#pragma once
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "backend.hpp"
#include "rng.hpp"
#include "shape.hpp"

namespace ctnn {

// Pointers a bound layer works on; all of them point into the model's arena.
template <class T>
struct layer_slot {
  T* params = nullptr;  // parameter_count trainable values
  T* grads = nullptr;   // parameter_count gradients (written by backward)
  T* state = nullptr;   // state_count non-trainable values (moving statistics)
  T* cache = nullptr;   // cache_per_sample * batch scratch kept from forward to backward
};

// What a forward/backward call needs to know about the current step.
struct run_info {
  std::size_t batch = 0;
  bool training = false;
  rng* gen = nullptr;  // the model's generator (dropout masks)
};

// ---- LayerSpec ----
template <class S>
concept has_bind = requires { typename S::template bind<shape<1>, float, cpu>; };
template <class S>
concept has_spec_name = requires { { S::spec() } -> std::convertible_to<std::string>; };
template <class S>
concept LayerSpec = has_spec_name<S> && requires { typename S::is_layer_spec; };

// ---- BoundLayer ----
template <class L>
concept has_shapes = Shape<typename L::in_shape> && Shape<typename L::out_shape>;
template <class L>
concept has_parameter_count = requires {
  { L::parameter_count } -> std::convertible_to<std::size_t>;
  { L::state_count } -> std::convertible_to<std::size_t>;
  { L::cache_per_sample } -> std::convertible_to<std::size_t>;
};
template <class L>
concept has_init = requires(layer_slot<typename L::value_type> s, rng& g) { L::init(s, g); };
template <class L>
concept has_forward = requires(layer_slot<typename L::value_type> s, const typename L::value_type* x,
                               typename L::value_type* y, run_info r) { L::forward(s, x, y, r); };
template <class L>
concept has_backward = requires(layer_slot<typename L::value_type> s, const typename L::value_type* x,
                                const typename L::value_type* y, typename L::value_type* dy,
                                typename L::value_type* dx, run_info r) { L::backward(s, x, y, dy, dx, r); };
template <class L>
concept BoundLayer = has_shapes<L> && has_parameter_count<L> && has_init<L> && has_forward<L> && has_backward<L>;

// ---- Schedule: a learning rate as a function of the update count ----
template <class S>
concept Schedule = requires(const S& s, std::int64_t step) {
  { s(step) } -> std::convertible_to<double>;
  { s.describe() } -> std::convertible_to<std::string>;
};

// ---- Optimizer ----
template <class O>
concept has_slots = requires { { O::slots_per_parameter } -> std::convertible_to<std::size_t>; };
template <class O>
concept has_update = requires(O& o, float* w, const float* g, float* slots, std::size_t n, std::int64_t it) {
  o.update(w, g, slots, n, it);
};
template <class O>
concept has_learning_rate = requires(const O& o, std::int64_t it) {
  { o.learning_rate(it) } -> std::convertible_to<double>;
};
template <class O>
concept Optimizer = has_slots<O> && has_update<O> && has_learning_rate<O>;

}  // namespace ctnn
