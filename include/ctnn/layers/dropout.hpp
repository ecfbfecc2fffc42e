// ctnn/layers/dropout.hpp — dropout<Rate>.
//
// keras.layers.Dropout: in training (run_info::training), each value is kept
// with probability 1 - Rate and scaled by 1 / (1 - Rate) (inverted dropout),
// or set to 0; at inference the layer is the identity. The mask is drawn from
// run_info::gen, the model's generator (seeded by make_model), one uniform
// draw per value: kept when u >= Rate. The mask (0 or the scale) is kept in the
// cache for backward, which multiplies dy by it. Rate in [0, 1) (compile-time
// check). Output shape = input shape; no parameters.
#pragma once
#include <algorithm>
#include <array>
#include <cstddef>
#include <stdexcept>
#include <string>
#include <type_traits>

#include "../core/backend.hpp"
#include "../core/concepts.hpp"
#include "../core/format.hpp"
#include "../core/plan.hpp"
#include "../core/precision.hpp"
#include "../core/shape.hpp"

namespace ctnn {

template <class Spec, Shape In, class P, class Backend>
struct dropout_layer;

template <auto Rate>
struct dropout {
  static_assert(std::is_floating_point_v<decltype(Rate)>, "dropout: the rate must be a floating-point number");
  static_assert(Rate >= 0 && Rate < 1, "dropout: the rate must be in [0, 1)");
  using is_layer_spec = void;
  static constexpr auto rate = Rate;
  static std::string name() { return "dropout<" + detail::format_number(Rate) + ">"; }

  template <Shape In, class P, class Backend>
  using bind = dropout_layer<dropout, In, precision::policy_of_t<P>, Backend>;
};

template <class Spec, Shape In, class P, class Backend>
struct dropout_layer {
  static_assert(P::uniform, "dropout: this backend has no mixed-precision specialization of this layer");
  static_assert(Backend::memory::host_accessible, "dropout: this backend has no specialization of this layer");
  static constexpr double Rate = double(Spec::rate);
  using T = typename P::compute_type;
  using variable_type = typename P::variable_type;
  using compute_type = T;
  using in_shape = In;
  using out_shape = In;
  static constexpr std::array<buffer, 1> buffers{buffer::cache("mask", In::size)};
  static constexpr std::size_t parameter_count = 0;
  static constexpr std::size_t state_count = 0;
  static constexpr std::size_t cache_per_sample = count_of(buffers, role::cache);
  static std::string name() { return Spec::name(); }

  static void init(layer_slot<T>, rng&) {}

  static void forward(layer_slot<T> s, const T* x, T* y, run_info r) {
    const std::size_t n = r.batch * In::size;
    if (!r.training) {
      std::copy(x, x + n, y);
      return;
    }
    if (!r.gen) throw std::invalid_argument("dropout: training needs a random generator (run_info::gen is null)");
    const T scale = T(1) / (T(1) - T(Rate));
    for (std::size_t i = 0; i < n; ++i) {
      const T m = r.gen->uniform() >= Rate ? scale : T(0);
      s.cache[i] = m;
      y[i] = x[i] * m;
    }
  }

  static void backward(layer_slot<T> s, const T*, const T*, T* dy, T* dx, run_info r) {
    if (!dx) return;
    const std::size_t n = r.batch * In::size;
    if (!r.training) {
      std::copy(dy, dy + n, dx);
      return;
    }
    for (std::size_t i = 0; i < n; ++i) dx[i] = dy[i] * s.cache[i];
  }
};

}  // namespace ctnn
