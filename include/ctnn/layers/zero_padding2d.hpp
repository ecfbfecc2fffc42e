// ctnn/layers/zero_padding2d.hpp — zero_padding2d<Top, Bottom = Top, Left = Top, Right = Left>.
//
// keras.layers.ZeroPadding2D(padding=((Top, Bottom), (Left, Right))) on a
// channels-last input shape<H, W, C>: output shape<Top + H + Bottom,
// Left + W + Right, C>, x placed at (Top, Left) in zeros; the gradient is dy
// at those positions. No parameters. A rank other than 3 is a compile error
// naming the position (docs/layers.md).
#pragma once
#include <cstddef>
#include <string>

#include "../core/backend.hpp"
#include "../core/backend.hpp"
#include "../core/compile_message.hpp"
#include "../core/concepts.hpp"
#include "../core/plan.hpp"
#include "../core/precision.hpp"
#include "../core/shape.hpp"
#include "padding.hpp"

namespace ctnn {

template <class Spec, Shape In, class P, class Backend>
struct zero_padding2d_layer;

namespace detail {
// "layer 2 (zero_padding2d<1, 1, 2, 2>): input has rank 1 (784); it takes rank 3 (height x width x channels)"
template <std::size_t Pos, class Spec, class In>
constexpr diag::message resize2d_rank_text() {
  diag::message m;
  m << "layer " << Pos << " (" << Spec::spec_name << "): input has rank " << In::rank << " (";
  m.dims(In::dims) << "); it takes rank 3 (height x width x channels)";
  return m;
}
}  // namespace detail

template <std::size_t Top, std::size_t Bottom = Top, std::size_t Left = Top, std::size_t Right = Left>
struct zero_padding2d {
  using is_layer_spec = void;
  static constexpr std::size_t top = Top, bottom = Bottom, left = Left, right = Right;
  static constexpr const char* spec_name = "zero_padding2d";
  static std::string name() {
    return "zero_padding2d<" + std::to_string(Top) + ", " + std::to_string(Bottom) + ", " + std::to_string(Left) +
           ", " + std::to_string(Right) + ">";
  }
  template <Shape In, std::size_t Pos>
  static constexpr bool check() {
    return diag::require<In::rank == 3, &detail::resize2d_rank_text<Pos, zero_padding2d, In>>();
  }
  template <Shape In, class P, class Backend>
  using bind = zero_padding2d_layer<zero_padding2d, In, precision::policy_of_t<P>, Backend>;
};

namespace layer_kind {
struct zero_padding2d {};  // the kind tag of zero_padding2d_layer (its member `kind`)
}  // namespace layer_kind

template <class Spec, Shape In, class Pol, class Backend>
struct zero_padding2d_layer {
  using kind = layer_kind::zero_padding2d;
  using spec = Spec;
  using T = typename Pol::compute_type;
  static constexpr std::size_t H = dim_or<In, 0>(), W = dim_or<In, 1>(), C = dim_or<In, 2>();
  static constexpr kernels::conv_geometry geometry{
      H, W, C, C, 1, 1, 1, Spec::top + H + Spec::bottom, Spec::left + W + Spec::right, Spec::top, Spec::left};
  using variable_type = typename Pol::variable_type;
  using compute_type = T;
  using in_shape = In;
  using out_shape = shape<geometry.oh, geometry.ow, C>;
  // A constant channel does not stay constant (the padding is 0): strip_pruning must not fold through it.
  static constexpr bool keeps_channels = false;
  static constexpr auto buffers = no_buffers;
  static constexpr std::size_t parameter_count = 0;
  static constexpr std::size_t state_count = 0;
  static constexpr std::size_t cache_per_sample = 0;
  static std::string name() { return Spec::name(); }

  static void init(layer_slot<T>, rng&) {}
  static void forward(layer_slot<T>, const T* x, T* y, run_info r) {
    ops<Backend>::template zero_pad_forward<geometry>(x, y, r.batch);
  }
  static void backward(layer_slot<T>, const T*, const T*, T* dy, T* dx, run_info r) {
    if (dx) ops<Backend>::template zero_pad_backward<geometry>(dy, dx, r.batch);
  }
};

}  // namespace ctnn
