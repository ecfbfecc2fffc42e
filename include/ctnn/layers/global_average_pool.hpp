// ctnn/layers/global_average_pool.hpp — global_average_pool.
//
// keras.layers.GlobalAveragePooling2D (and 1D): for an input shape<..., C> of
// rank >= 2, y[c] is the mean of x over every position (all axes but the
// last). Output shape<C>. The gradient spreads dy[c] / positions evenly. No
// parameters, no cache. A rank-1 input is a compile error naming the position.
#pragma once
#include <cstddef>
#include <string>
#include <type_traits>

#include "../core/backend.hpp"
#include "../core/concepts.hpp"
#include "../core/diagnostics.hpp"
#include "../core/shape.hpp"
#include "../core/plan.hpp"
#include "../core/precision.hpp"
#include "../core/backend.hpp"

namespace ctnn {

template <Shape In, class P, class Backend>
struct global_average_pool_layer;

struct global_average_pool {
  using is_layer_spec = void;
  static constexpr std::string name() { return "global_average_pool"; }

  template <Shape In, std::size_t Pos>
  static constexpr bool check() {
    constexpr bool located = diag::require<(In::rank >= 2), &diag::global_average_pool_rank_text<Pos, In>>();
    return located && diag::global_average_pool_input_rank<diag::layer<Pos>, diag::input_rank<In::rank>, (In::rank >= 2)>::value;
  }

  template <Shape In, class P, class Backend>
  using bind = global_average_pool_layer<In, precision::policy_of_t<P>, Backend>;
};

namespace layer_kind {
struct global_average_pool {};  // the kind tag of global_average_pool_layer (its member `kind`)
}  // namespace layer_kind

template <Shape In, class Pol, class Backend>
struct global_average_pool_layer {
  using kind = layer_kind::global_average_pool;  // what it is, for tools that map layers (onnx/export.hpp, onnx/import.hpp)
  using T = typename Pol::compute_type;
  static constexpr std::size_t C = last_dim_v<In>;
  static constexpr std::size_t P = In::size / C;  // positions
  using variable_type = typename Pol::variable_type;
  using compute_type = T;
  using in_shape = In;
  using out_shape = shape<C>;
  // Each channel averaged apart; a constant channel stays that constant (strip_pruning reads it).
  static constexpr bool keeps_channels = true;
  static constexpr auto buffers = no_buffers;
  static constexpr std::size_t parameter_count = 0;
  static constexpr std::size_t state_count = 0;
  static constexpr std::size_t cache_per_sample = 0;
  static constexpr std::string name() { return global_average_pool::name(); }

  static void init(layer_slot<T>, rng&) {}
  static void forward(layer_slot<T>, const T* x, T* y, run_info r) {
    ops<Backend>::template global_average_forward<P, C>(x, y, r.batch);
  }
  static void backward(layer_slot<T>, const T*, const T*, T* dy, T* dx, run_info r) {
    if (dx) ops<Backend>::template global_average_backward<P, C>(dy, dx, r.batch);
  }
};

}  // namespace ctnn
