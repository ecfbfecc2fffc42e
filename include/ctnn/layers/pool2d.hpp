// ctnn/layers/pool2d.hpp — what max_pool2d and average_pool2d share.
//
// pool2d_spec<Kind, Pool, Stride, Pad>: a PoolxPool window moved by Stride
// (Keras' default: the pool size) over a channels-last input shape<H, W, C>,
// padding::valid (default) or padding::same; output shape<OH, OW, C> with the
// Keras formulas of layers/padding.hpp. Requires a rank-3 input and, with
// valid padding, a window that fits (compile errors naming the position and
// sizes). Kind supplies the name, the forward/backward kernels and whether
// it keeps one index per output value in the cache (max pooling does).
#pragma once
#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <type_traits>

#include "../core/backend.hpp"
#include "../core/concepts.hpp"
#include "../core/diagnostics.hpp"
#include "../core/format.hpp"
#include "../core/shape.hpp"
#include "../core/plan.hpp"
#include "../core/precision.hpp"
#include "../core/backend.hpp"
#include "padding.hpp"

namespace ctnn {

template <class Spec, Shape In, class P, class Backend>
struct pool2d_layer;

namespace detail {

template <class Kind, std::size_t Pool, std::size_t Stride, padding Pad>
struct pool2d_spec {
  static_assert(Pool > 0, "pool2d: the pool size must be > 0");
  static_assert(Stride > 0, "pool2d: the stride must be > 0");
  using is_layer_spec = void;
  using kind = Kind;
  static constexpr std::size_t pool_size = Pool, stride = Stride;
  static constexpr padding pad = Pad;

  static constexpr std::string name() {  // a constant (train/summary.hpp)
    constexpr bool stride = Stride != Pool || Pad != padding::valid, pad = Pad != padding::valid;
    using sv = std::string_view;
    return detail::concat({Kind::name, "<", detail::decimal(Pool), stride ? ", " : "",
                           stride ? sv(detail::decimal(Stride)) : sv(), pad ? ", " : "", pad ? padding_name(Pad) : "",
                           ">"});
  }

  template <Shape In, std::size_t Pos>
  static constexpr bool check() {
    constexpr bool located = diag::require<In::rank == 3, &diag::pool2d_rank_text<Pos, Kind, Pool, In>>();
    constexpr bool rank_ok =
        located && diag::pool2d_input_not_rank3<diag::layer<Pos>, diag::input_rank<In::rank>, In::rank == 3>::value;
    if constexpr (rank_ok && Pad == padding::valid) {
      constexpr std::size_t H = In::dims[0], W = In::dims[1];
      constexpr bool located = diag::require<(Pool <= H && Pool <= W), &diag::pool2d_window_text<Pos, Kind, Pool, In>>();
      return located && diag::pool2d_window_larger_than_input<diag::layer<Pos>, diag::input_height<H>, diag::input_width<W>,
                                                   diag::window_height<Pool>, diag::window_width<Pool>,
                                                   (Pool <= H && Pool <= W)>::value;
    }
    return rank_ok;
  }

  template <Shape In, class P, class Backend>
  using bind = pool2d_layer<pool2d_spec, In, precision::policy_of_t<P>, Backend>;
};

}  // namespace detail

namespace layer_kind {
struct pool2d {};  // the kind tag of pool2d_layer (its member `kind`)
}  // namespace layer_kind

// The bound pooling layer: Spec::kind says which kernels (through ops<Backend>)
// and whether it keeps one uint32 index per output value in its cache.
template <class Spec, Shape In, class P, class Backend>
struct pool2d_layer {
  using kind = layer_kind::pool2d;  // what it is, for tools that map layers (onnx/export.hpp, onnx/import.hpp)
  using spec = Spec;
  using Kind = typename Spec::kind;
  using T = typename P::compute_type;
  static constexpr std::size_t H = dim_or<In, 0>(), W = dim_or<In, 1>(), C = dim_or<In, 2>();
  static constexpr kernels::conv_geometry geometry =
      window_geometry(H, W, C, C, Spec::pool_size, Spec::pool_size, Spec::stride, Spec::pad);
  using variable_type = typename P::variable_type;
  using compute_type = T;
  using in_shape = In;
  using out_shape = shape<geometry.oh, geometry.ow, C>;
  // Each channel pooled apart; a constant channel stays that constant (strip_pruning reads it).
  static constexpr bool keeps_channels = true;
  static constexpr auto buffers = [] {
    if constexpr (Kind::keeps_indices)
      return std::array<buffer, 1>{buffer::cache("argmax", out_shape::size, elem::u32)};
    else
      return no_buffers;
  }();
  static constexpr std::size_t parameter_count = 0;
  static constexpr std::size_t state_count = 0;
  static constexpr std::size_t cache_per_sample = count_of(buffers, role::cache);
  static constexpr std::string name() { return Spec::name(); }

  // The index cache, when the kind keeps one, is the layer's first cache buffer (uint32).
  static std::uint32_t* indices(layer_slot<T> s) { return reinterpret_cast<std::uint32_t*>(s.cache); }

  static void init(layer_slot<T>, rng&) {}
  static void forward(layer_slot<T> s, const T* x, T* y, run_info r) {
    Kind::template forward<ops<Backend>, geometry>(x, y, indices(s), r.batch);
  }
  static void backward(layer_slot<T> s, const T*, const T*, T* dy, T* dx, run_info r) {
    if (dx) Kind::template backward<ops<Backend>, geometry>(dy, dx, indices(s), r.batch);
  }
};

}  // namespace ctnn
