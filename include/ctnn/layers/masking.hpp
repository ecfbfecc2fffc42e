// ctnn/layers/masking.hpp — masking<Value>: keras.layers.Masking (Keras 3).
//
// Input shape<Steps, Features>, output the same. A step whose features all equal Value is
// masked: its output is zeros (Keras: inputs * mask) and the step mask ([batch, Steps], 1 =
// use) is published through run_info::mask, where the recurrent layers with Steps steps read
// it (masked steps carry the state and the output forward, layers/recurrent.hpp). Backward:
// dx = dy * mask. One mask producer per network (a second one in the same pass throws).
// No parameters. docs/sequences.md ("Masking").
#pragma once
#include <array>
#include <cstddef>
#include <stdexcept>
#include <string>

#include "../core/backend.hpp"
#include "../core/compile_message.hpp"
#include "../core/concepts.hpp"
#include "../core/format.hpp"
#include "../core/plan.hpp"
#include "../core/shape.hpp"
#include "../core/backend.hpp"
#include "../kernels/functors.hpp"
#include "../kernels/rows.hpp"

namespace ctnn {

namespace layer_kind {
struct masking {};
}  // namespace layer_kind

namespace detail {
template <double V>
struct not_value_fn {  // m = 1 where any of the step's values differs from V
  template <class X>
  CTNN_HOST_DEVICE void operator()(X& m, X x) const {
    using fn::select;
    m = select(x != X(V), X(1), m);
  }
};
struct times_fn {  // d = a * m
  template <class X>
  CTNN_HOST_DEVICE void operator()(X& d, X a, X m) const { d = a * m; }
};
inline constexpr char masking_name[] = "masking";
template <std::size_t Pos, class In>
constexpr diag::message masking_rank_text() {
  diag::message m;
  m << "layer " << Pos << " (masking): input has rank " << In::rank << " (";
  m.dims(In::dims) << "); masking takes shape<steps, features>";
  return m;
}

// Publishes a [batch, steps] mask in T (the producer's cache) for the layers after it.
template <class T>
void publish_mask(const run_info& r, const T* m, std::size_t steps, const char* who) {
  if (!r.mask) return;
  if (r.mask->data)
    throw std::invalid_argument(std::string(who) + ": a step mask is already set in this pass (one mask producer per network)");
  *r.mask = sequence_mask{m, steps, sizeof(T)};
}
}  // namespace detail

template <class Spec, Shape In, class P, class Backend>
struct masking_layer;

template <double Value = 0.0>
struct masking {
  using is_layer_spec = void;
  using kind = layer_kind::masking;
  static constexpr double mask_value = Value;
  static std::string name() { return "masking<" + detail::format_number(Value) + ">"; }
  template <Shape In, std::size_t Pos>
  static constexpr bool check() {
    return diag::require<In::rank == 2, &detail::masking_rank_text<Pos, In>>();
  }
  template <Shape In, class P, class Backend>
  using bind = masking_layer<masking, In, precision::policy_of_t<P>, Backend>;
};

template <class Spec, Shape In, class P, class Backend>
struct masking_layer {
  using kind = layer_kind::masking;
  using spec = Spec;
  using T = typename P::compute_type;
  using O = ops<Backend>;
  using variable_type = typename P::variable_type;
  using compute_type = T;
  using in_shape = In;
  using out_shape = In;
  static constexpr std::size_t S = In::rank == 2 ? In::dims[0] : 1, F = In::rank == 2 ? In::dims[1] : 1;
  static constexpr std::array<buffer, 1> buffers{buffer::cache("mask", S)};  // [batch, S], 1 = use
  static constexpr std::size_t parameter_count = 0;
  static constexpr std::size_t state_count = 0;
  static constexpr std::size_t cache_per_sample = count_of(buffers, role::cache);
  static std::string name() { return Spec::name(); }
  static void init(layer_slot<T>, rng&) {}

  // per feature column f: one pass over the batch's steps (rows of F values)
  static void forward(layer_slot<T> s, const T* x, T* y, run_info r) {
    const std::size_t rows = r.batch * S;
    if (rows == 0) return;
    O::fill_zero(s.cache, rows);
    for (std::size_t f = 0; f < F; ++f)
      O::map_rows(detail::not_value_fn<Spec::mask_value>{}, rows, 1, kernels::rows<T>{s.cache, 1},
                  kernels::rows<const T>{x + f, F});
    for (std::size_t f = 0; f < F; ++f)
      O::map_rows(detail::times_fn{}, rows, 1, kernels::rows<T>{y + f, F}, kernels::rows<const T>{x + f, F},
                  kernels::rows<const T>{s.cache, 1});
    detail::publish_mask(r, static_cast<const T*>(s.cache), S, "masking");
  }
  static void backward(layer_slot<T> s, const T*, const T*, T* dy, T* dx, run_info r) {
    if (!dx) return;
    for (std::size_t f = 0; f < F; ++f)
      O::map_rows(detail::times_fn{}, r.batch * S, 1, kernels::rows<T>{dx + f, F}, kernels::rows<const T>{dy + f, F},
                  kernels::rows<const T>{s.cache, 1});
  }
};

}  // namespace ctnn
