// ctnn/layers/layer_normalization.hpp — layer_normalization<Epsilon = 1e-3>.
//
// keras.layers.LayerNormalization(axis=-1, epsilon=Epsilon) with center and
// scale: each position's C values (the last axis) normalised by their own
// mean and biased variance, y = gamma (x - mean) / sqrt(var + Epsilon) + beta;
// the same in training and inference (no moving statistics). Parameters:
// gamma[C] (init 1), beta[C] (init 0). Output shape = input shape. Cache: the
// mean and 1 / sqrt(var + Epsilon) of each position (2 per position). The
// formulas run in ops<Backend> (has_layer_ops: layer_norm_forward / _backward).
#pragma once
#include <array>
#include <cstddef>
#include <string>
#include <type_traits>

#include "../core/backend.hpp"
#include "../core/backend.hpp"
#include "../core/concepts.hpp"
#include "../core/format.hpp"
#include "../core/plan.hpp"
#include "../core/precision.hpp"
#include "../core/shape.hpp"

namespace ctnn {

template <class Spec, Shape In, class Pol, class Backend>
struct layer_normalization_layer;

template <auto Epsilon = 1e-3>
struct layer_normalization {
  static_assert(std::is_floating_point_v<decltype(Epsilon)>, "layer_normalization: epsilon must be a floating-point number");
  static_assert(Epsilon > 0 && Epsilon < 1e30, "layer_normalization: epsilon must be finite and > 0");
  using is_layer_spec = void;
  static constexpr double epsilon = double(Epsilon);
  static std::string name() {
    if (std::is_same_v<layer_normalization, layer_normalization<>>) return "layer_normalization";
    return "layer_normalization<" + detail::format_number(Epsilon) + ">";
  }
  template <Shape In, class P, class Backend>
  using bind = layer_normalization_layer<layer_normalization, In, precision::policy_of_t<P>, Backend>;
};

namespace layer_kind {
struct layer_normalization {};  // the kind tag of layer_normalization_layer (its member `kind`)
}  // namespace layer_kind

template <class Spec, Shape In, class Pol, class Backend>
struct layer_normalization_layer {
  using kind = layer_kind::layer_normalization;
  using spec = Spec;
  using T = typename Pol::compute_type;
  static constexpr std::size_t C = last_dim_v<In>;
  static constexpr std::size_t P = In::size / C;  // positions per sample
  using variable_type = typename Pol::variable_type;
  using compute_type = T;
  using in_shape = In;
  using out_shape = In;
  static constexpr std::array<buffer, 3> buffers{buffer::parameter("gamma", {C}), buffer::parameter("beta", {C}),
                                                 buffer::cache("statistics", 2 * P)};  // means, then inverse stds
  static constexpr std::size_t parameter_count = count_of(buffers, role::parameter);
  static constexpr std::size_t state_count = 0;
  static constexpr std::size_t cache_per_sample = count_of(buffers, role::cache);
  static std::string name() { return Spec::name(); }

  static void init(layer_slot<T> s, rng&) {
    for (std::size_t c = 0; c < C; ++c) {
      s.params[c] = T(1);
      s.params[C + c] = T(0);
    }
  }
  // The cache holds batch * 2P values: the batch's P-position means, then its inverse stds.
  static void forward(layer_slot<T> s, const T* x, T* y, run_info r) {
    ops<Backend>::template layer_norm_forward<C>(x, y, s.params, s.params + C, s.cache, s.cache + r.batch * P,
                                                 r.batch * P, Spec::epsilon);
  }
  static void backward(layer_slot<T> s, const T* x, const T*, T* dy, T* dx, run_info r) {
    ops<Backend>::template layer_norm_backward<C>(x, dy, dx, s.params, s.cache, s.cache + r.batch * P, s.grads,
                                                  s.grads + C, r.batch * P);
  }
};

}  // namespace ctnn
