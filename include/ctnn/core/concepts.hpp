// ctnn/core/concepts.hpp — the concepts at ctnn's public entry points.
//
// Each public concept is built from small named sub-concepts, so a failed
// constraint names the missing piece ("does not satisfy has_backward").
//   LayerSpec  — a user-facing, stateless layer description: name() and
//                bind<In, P, B> (P a precision policy or element type, B a backend).
//   BoundLayer — a spec bound to an input shape, a precision and a backend:
//                shapes, its declared buffers (core/plan.hpp), init, forward, backward.
//   Schedule, Optimizer — below; Loss, Metric, Dataset, Callback beside their kinds.
// No concept names a fixed element type: each is checked for the element
// type the caller will use (the model's variable_type).
#pragma once
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <type_traits>

#include "../backends/cpu/backend.hpp"
#include "plan.hpp"
#include "precision.hpp"
#include "rng.hpp"
#include "shape.hpp"

namespace ctnn {

// Typed pointers into the model's plan that one bound layer works on: its
// blocks of the parameter, gradient and state regions (W: the policy's
// variable_type), its first cache buffer (C: compute_type; a buffer of
// another element kind is reached through `at`), its mask and metadata blocks.
template <class W, class C = W>
struct layer_slot {
  W* params = nullptr;  // parameter buffers, in declaration order
  W* grads = nullptr;   // their gradients (written by backward)
  W* state = nullptr;   // state buffers (moving statistics)
  C* cache = nullptr;   // cache buffers, batch * per-sample extent each
  std::uint8_t* mask = nullptr;
  std::byte* metadata = nullptr;
  C* derived = nullptr;  // its derived block (role::derived: decoded weights), when it declares one
};

// The other replicas of a data-parallel job, as a synchronized layer (batch_normalization's
// Synchronized) sees them in training: average(context, values, n) replaces n doubles on every
// rank by their mean over the ranks (distributed/data_parallel.hpp sets it during fit).
struct cross_replica {
  void* context = nullptr;
  void (*average)(void* context, double* values, std::size_t n) = nullptr;
};

// Told by the model's backward, layer by layer from the last, that a layer's gradients (float
// variables, written in place) are final: ready(context, layer's gradients, n, the model's whole
// gradient region, its size, whether this step's loss and penalty are finite: a step with a
// non-finite loss ends after backward). data_parallel's buckets.
struct gradient_listener {
  void* context = nullptr;
  void (*ready)(void* context, float* gradients, std::size_t n, float* region, std::size_t region_size,
                bool loss_finite) = nullptr;
};

// A per-step mask of the batch ([batch, steps], 1 = use, 0 = skip; Keras' _keras_mask), in the
// producer's cache and its compute type: set by masking / embedding<..., mask_zero> in forward,
// read by the recurrent layers with as many steps (forward and backward). The model owns one
// per pass (cleared at each forward); docs/sequences.md ("Masking") and docs/design.md.
struct sequence_mask {
  const void* data = nullptr;
  std::size_t steps = 0;
  std::size_t value_bytes = 0;  // sizeof the producer's compute type
};

// What a forward/backward call needs to know about the current step.
struct run_info {
  std::size_t batch = 0;
  bool training = false;
  rng* gen = nullptr;                      // the model's generator (dropout masks)
  const cross_replica* replicas = nullptr;  // set in data-parallel training, else none
  sequence_mask* mask = nullptr;            // the model's step mask (null: none can be carried)
};

// ---- LayerSpec ----
template <class S>
concept has_spec_name = requires { { S::name() } -> std::convertible_to<std::string>; };
// bind is an alias of a namespace-level *_layer template, so naming it instantiates nothing.
template <class S>
concept has_bind = requires { typename S::template bind<shape<1>, precision::float32, cpu<>>; };
template <class S>
concept LayerSpec = has_spec_name<S> && has_bind<S> && requires { typename S::is_layer_spec; };

// ---- BoundLayer ----
template <class L>
concept has_shapes = Shape<typename L::in_shape> && Shape<typename L::out_shape>;
template <class L>
concept has_buffers = std::same_as<typename std::remove_cvref_t<decltype(L::buffers)>::value_type, buffer>;
template <class L>
concept has_value_types = requires {
  typename L::variable_type;
  typename L::compute_type;
};
template <class L>
using slot_of = layer_slot<typename L::variable_type, typename L::compute_type>;
template <class L>
concept has_init = requires(slot_of<L> s, rng& g) { L::init(s, g); };
template <class L>
concept has_forward = requires(slot_of<L> s, const typename L::compute_type* x, typename L::compute_type* y,
                               run_info r) { L::forward(s, x, y, r); };
template <class L>
concept has_backward = requires(slot_of<L> s, const typename L::compute_type* x, const typename L::compute_type* y,
                                typename L::compute_type* dy, typename L::compute_type* dx,
                                run_info r) { L::backward(s, x, y, dy, dx, r); };
template <class L>
concept BoundLayer = has_shapes<L> && has_value_types<L> && has_buffers<L> && has_init<L> && has_forward<L> &&
                     has_backward<L>;

// ---- Schedule: a learning rate as a function of the update count ----
template <class S>
concept has_schedule_name = requires(const S& s) { { s.name() } -> std::convertible_to<std::string>; };
template <class S>
concept Schedule = has_schedule_name<S> && requires(const S& s, std::int64_t step) {
  { s(step) } -> std::convertible_to<double>;
};

// ---- Optimizer ----
// One update of n parameters w (flat, the model's parameter region, or one
// layer's part of it) from their gradients g with the optimizer's slots (slot k
// of parameter i at slots[k * stride() + i]: slot_stride, the whole region's
// size when w is a part of it; 0: n), at update `iteration` (0-based) with
// learning rate lr.
template <class T>
struct update_args {
  T* w = nullptr;
  const T* g = nullptr;
  T* slots = nullptr;
  std::size_t n = 0;
  std::int64_t iteration = 0;
  double learning_rate = 0;
  std::size_t slot_stride = 0;
  constexpr std::size_t stride() const noexcept { return slot_stride ? slot_stride : n; }
};

// slots_per_parameter(): the slot arrays this object uses (Adam: 3 only with
// amsgrad); max_slots_per_parameter: their most, a constant (constexpr plans).
template <class O>
concept has_slots = requires(const O& o) {
  { o.slots_per_parameter() } -> std::convertible_to<std::size_t>;
  { O::max_slots_per_parameter } -> std::convertible_to<std::size_t>;
};
template <class O, class T>
concept has_update = requires(const O& o, const update_args<T>& a) { o.template update<cpu<>>(a); };
template <class O, class T>
concept has_init_slots = requires(const O& o, T* s, std::size_t n) { o.init_slots(s, n); };
template <class O>
concept has_learning_rate = requires(const O& o, std::int64_t it) {
  { o.learning_rate(it) } -> std::convertible_to<double>;
};
template <class O>
concept has_optimizer_name = requires(const O& o) { { o.name() } -> std::convertible_to<std::string>; };
// T: the element type of the variables it updates (the model's variable_type).
template <class O, class T = float>
concept Optimizer = has_slots<O> && has_update<O, T> && has_init_slots<O, T> && has_learning_rate<O> &&
                    has_optimizer_name<O>;

}  // namespace ctnn
