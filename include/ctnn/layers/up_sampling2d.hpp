// ctnn/layers/up_sampling2d.hpp — up_sampling2d<SH = 2, SW = SH>.
//
// keras.layers.UpSampling2D(size=(SH, SW), interpolation="nearest") on a
// channels-last input shape<H, W, C>: output shape<H SH, W SW, C>,
// y[r, s, c] = x[r / SH, s / SW, c]; the gradient sums each SH x SW block.
// No parameters. A rank other than 3 is a compile error naming the position
// (docs/layers.md). Bilinear interpolation is not provided.
#pragma once
#include <cstddef>
#include <string>

#include "zero_padding2d.hpp"

namespace ctnn {

template <class Spec, Shape In, class P, class Backend>
struct up_sampling2d_layer;

template <std::size_t SH = 2, std::size_t SW = SH>
struct up_sampling2d {
  static_assert(SH > 0 && SW > 0, "up_sampling2d: the sizes must be > 0");
  using is_layer_spec = void;
  static constexpr std::size_t rows = SH, cols = SW;
  static constexpr const char* spec_name = "up_sampling2d";
  static std::string name() { return "up_sampling2d<" + std::to_string(SH) + ", " + std::to_string(SW) + ">"; }
  template <Shape In, std::size_t Pos>
  static constexpr bool check() {
    return diag::require<In::rank == 3, &detail::resize2d_rank_text<Pos, up_sampling2d, In>>();
  }
  template <Shape In, class P, class Backend>
  using bind = up_sampling2d_layer<up_sampling2d, In, precision::policy_of_t<P>, Backend>;
};

namespace layer_kind {
struct up_sampling2d {};  // the kind tag of up_sampling2d_layer (its member `kind`)
}  // namespace layer_kind

template <class Spec, Shape In, class Pol, class Backend>
struct up_sampling2d_layer {
  using kind = layer_kind::up_sampling2d;
  using spec = Spec;
  using T = typename Pol::compute_type;
  static constexpr std::size_t H = dim_or<In, 0>(), W = dim_or<In, 1>(), C = dim_or<In, 2>();
  static constexpr kernels::conv_geometry geometry{H, W, C, C, Spec::rows, Spec::cols, 1, H * Spec::rows,
                                                   W * Spec::cols, 0, 0};
  using variable_type = typename Pol::variable_type;
  using compute_type = T;
  using in_shape = In;
  using out_shape = shape<geometry.oh, geometry.ow, C>;
  static constexpr bool keeps_channels = true;  // each channel repeated apart
  static constexpr auto buffers = no_buffers;
  static constexpr std::size_t parameter_count = 0;
  static constexpr std::size_t state_count = 0;
  static constexpr std::size_t cache_per_sample = 0;
  static std::string name() { return Spec::name(); }

  static void init(layer_slot<T>, rng&) {}
  static void forward(layer_slot<T>, const T* x, T* y, run_info r) {
    ops<Backend>::template up_sample_forward<geometry>(x, y, r.batch);
  }
  static void backward(layer_slot<T>, const T*, const T*, T* dy, T* dx, run_info r) {
    if (dx) ops<Backend>::template up_sample_backward<geometry>(dy, dx, r.batch);
  }
};

}  // namespace ctnn
