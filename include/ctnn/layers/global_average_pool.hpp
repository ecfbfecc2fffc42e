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
#include "../kernels/cpu/pooling.hpp"

namespace ctnn {

struct global_average_pool {
  using is_layer_spec = void;
  static std::string spec() { return "global_average_pool"; }

  template <Shape In, std::size_t Pos>
  static constexpr bool check() {
    return diag::global_average_pool_input_rank<diag::layer<Pos>, diag::input_rank<In::rank>, (In::rank >= 2)>::value;
  }

  template <Shape In, class T, class Backend>
  struct bind {
    static_assert(std::is_same_v<Backend, cpu>,
                  "global_average_pool: this backend has no specialization of this layer");
    static constexpr std::size_t C = last_dim_v<In>;
    static constexpr std::size_t P = In::size / C;  // positions
    using value_type = T;
    using in_shape = In;
    using out_shape = shape<C>;
    static constexpr std::size_t parameter_count = 0;
    static constexpr std::size_t state_count = 0;
    static constexpr std::size_t cache_per_sample = 0;
    static std::string name() { return spec(); }

    static void init(layer_slot<T>, rng&) {}
    static void forward(layer_slot<T>, const T* x, T* y, run_info r) {
      kernels::cpu::global_average_forward<P, C>(x, y, r.batch);
    }
    static void backward(layer_slot<T>, const T*, const T*, T* dy, T* dx, run_info r) {
      if (dx) kernels::cpu::global_average_backward<P, C>(dy, dx, r.batch);
    }
  };
};

}  // namespace ctnn
