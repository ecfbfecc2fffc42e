// ctnn/layers/time_distributed.hpp — time_distributed<Layer>: keras.layers.TimeDistributed (Keras 3).
//
// Applies Layer (a layer on a flat input, as dense) to every step of an input
// <Steps, Features> with the same variables: output <Steps, N> where Layer gives <N> on
// <Features>. time_distributed<dense<N>> is Keras' Dense on a sequence (Dense works on the
// last axis: kernel [Features, N]), e.g. a per-step classifier after a recurrent layer with
// return_sequences. The steps are Layer's samples (batch * Steps rows, [sample][step] order,
// no copy); the variables are Layer's, under Layer's names (Keras' TimeDistributed(Dense)
// and Dense alike: kernel, bias). A step mask passes through to the layers after it.
// docs/sequences.md ("Per-step dense").
#pragma once
#include <array>
#include <cstddef>
#include <string>
#include <string_view>

#include "../core/backend.hpp"
#include "../core/compile_message.hpp"
#include "../core/concepts.hpp"
#include "../core/plan.hpp"
#include "../core/shape.hpp"
#include "../regularizers/penalties.hpp"

namespace ctnn {

namespace layer_kind {
struct time_distributed {};
}  // namespace layer_kind

namespace detail {
template <std::size_t Pos, class In>
constexpr diag::message time_distributed_rank_text() {
  diag::message m;
  m << "layer " << Pos << " (time_distributed): input has rank " << In::rank << " (";
  m.dims(In::dims) << "); time_distributed takes shape<steps, features>";
  return m;
}
template <class L>
struct regularizer_of {
  using type = no_regularizer;
};
template <class L>
  requires requires { typename L::Reg; }
struct regularizer_of<L> {
  using type = typename L::Reg;
};
template <Shape In>
using step_shape_t = shape<(In::rank == 2 ? In::dims[1] : 1)>;
}  // namespace detail

template <class Spec, Shape In, class P, class Backend>
struct time_distributed_layer;

template <class Layer>
struct time_distributed {
  using is_layer_spec = void;
  using kind = layer_kind::time_distributed;
  using layer = Layer;
  static std::string name() { return "time_distributed<" + Layer::name() + ">"; }
  template <Shape In, std::size_t Pos>
  static constexpr bool check() {
    if constexpr (In::rank != 2) {
      return diag::require<false, &detail::time_distributed_rank_text<Pos, In>>();
    } else if constexpr (requires { Layer::template check<detail::step_shape_t<In>, Pos>(); }) {
      return Layer::template check<detail::step_shape_t<In>, Pos>();
    } else {
      return true;
    }
  }
  template <Shape In, class P, class Backend>
  using bind = time_distributed_layer<time_distributed, In, precision::policy_of_t<P>, Backend>;
};

// The bound layer: Layer bound to one step's shape, run on batch * Steps rows; its buffers
// (caches per step, so Steps times per sample).
template <class Spec, Shape In, class P, class Backend>
struct time_distributed_layer {
  using kind = layer_kind::time_distributed;
  using spec = Spec;
  using Inner = typename Spec::layer::template bind<detail::step_shape_t<In>, P, Backend>;
  using T = typename P::compute_type;
  using variable_type = typename P::variable_type;
  using compute_type = T;
  static_assert(Inner::out_shape::rank == 1, "time_distributed: the wrapped layer must give a flat output per step");
  static_assert(Inner::state_count == 0, "time_distributed: the wrapped layer must not keep state (moving statistics)");
  static constexpr std::size_t S = In::rank == 2 ? In::dims[0] : 1;
  using in_shape = In;
  using out_shape = shape<S, Inner::out_shape::size>;
  static constexpr auto buffers = [] {
    auto b = Inner::buffers;
    for (auto& d : b)
      if (d.kind == role::cache) d.extent *= S, d.dims[0] *= S;
    return b;
  }();
  static constexpr std::size_t parameter_count = Inner::parameter_count;
  static constexpr std::size_t state_count = 0;
  static constexpr std::size_t cache_per_sample = count_of(buffers, role::cache);
  static constexpr bool draws_random = requires { requires bool(Inner::draws_random); };
  static std::string name() { return Spec::name(); }

  static void init(layer_slot<T> s, rng& g) { Inner::init(s, g); }
  static run_info steps_of(run_info r) {
    r.batch *= S;
    return r;
  }
  // the wrapped layer's derived buffer (a stripped sparse layer's decoded weights,
  // layers/sparse_dense.hpp), rewritten by the model's refresh through this slot: its forward
  // then decodes as it would alone, at the batch it sees (batch x Steps rows)
  static void derive(layer_slot<T> s)
    requires requires(layer_slot<T> a) { Inner::derive(a); }
  {
    Inner::derive(s);
  }
  static void forward(layer_slot<T> s, const T* x, T* y, run_info r) { Inner::forward(s, x, y, steps_of(r)); }
  static void backward(layer_slot<T> s, const T* x, const T* y, T* dy, T* dx, run_info r) {
    Inner::backward(s, x, y, dy, dx, steps_of(r));
  }

  // the wrapped layer's regularizer (dense<N, Act, l2<...>>), per variable as its own
  using Reg = typename detail::regularizer_of<Inner>::type;
  static void add_penalty(layer_slot<T> s, step_scalars* sc)
    requires requires(layer_slot<T> a, step_scalars* b) { Inner::add_penalty(a, b); }
  {
    Inner::add_penalty(s, sc);
  }
  static void add_penalty_gradient(layer_slot<T> s)
    requires requires(layer_slot<T> a) { Inner::add_penalty_gradient(a); }
  {
    Inner::add_penalty_gradient(s);
  }
  static std::string check_metadata(std::string_view name, const std::byte* bytes)
    requires requires(std::string_view a, const std::byte* b) { Inner::check_metadata(a, b); }
  {
    return Inner::check_metadata(name, bytes);
  }
};

}  // namespace ctnn
