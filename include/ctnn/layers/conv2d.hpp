// ctnn/layers/conv2d.hpp — conv2d<F, KH, KW, Stride, Padding, Activation, Regularizer>.
//
// A 2D convolution over a channels-last input shape<H, W, C> (a rank-2
// shape<H, W> is taken as one channel, so images need no reshape), as
// keras.layers.Conv2D: F filters of KHxKW, the same stride on both axes,
// padding::valid (default) or padding::same. Output shape<OH, OW, F> with
// valid: OH = (H - KH) / Stride + 1; same: OH = ceil(H / Stride) (and the
// same for W); the formulas are in layers/padding.hpp. Parameters: the kernel
// [KH, KW, C, F] (Keras' layout), then the bias [F]. Init as Keras:
// Glorot-uniform with fan_in = KH*KW*C, fan_out = KH*KW*F; zero bias. The
// regularizer applies to the kernel. Requires a rank-2 or 3 input and, with valid
// padding, a kernel that fits (compile errors naming the position and sizes).
// Runs as im2col + GEMM (backends/cpu/conv.hpp; y and dx of a 3x3 stride-1 layer with 16 or
// more channels in and out by Winograd F(4x4, 3x3) or F(2x2, 3x3), its dW by F(3x3, 4x4) or F(3x3, 2x2)
// where the cache holds x and a partial dW, backends/cpu/winograd.hpp); the activation's
// rule runs inside conv_forward where the backend takes one (ops<cpu>); cache: the im2col matrix.
#pragma once
#include <array>
#include <cmath>
#include <cstddef>
#include <string>
#include <string_view>
#include <type_traits>

#include "../core/backend.hpp"
#include "../core/concepts.hpp"
#include "../core/diagnostics.hpp"
#include "../core/format.hpp"
#include "../core/shape.hpp"
#include "../core/plan.hpp"
#include "../core/backend.hpp"
#include "../regularizers/penalties.hpp"
#include "activation.hpp"
#include "initializers.hpp"
#include "padding.hpp"

namespace ctnn {

template <class Spec, Shape In, class P, class Backend>
struct conv2d_layer;

template <std::size_t F, std::size_t KH, std::size_t KW, std::size_t Stride = 1, padding Pad = padding::valid,
          Activation Act = identity, Regularizer Reg = no_regularizer, Initializer Init = glorot_uniform>
struct conv2d {
  static_assert(F > 0, "conv2d: the number of filters must be > 0");
  static_assert(KH > 0 && KW > 0, "conv2d: the kernel height and width must be > 0");
  static_assert(Stride > 0, "conv2d: the stride must be > 0");
  using is_layer_spec = void;
  using activation = Act;
  using regularizer = Reg;
  using initializer = Init;
  static constexpr std::size_t filters = F, kernel_height = KH, kernel_width = KW, stride = Stride;
  static constexpr padding pad = Pad;

  static constexpr std::string name() {  // a constant where the options' names are (train/summary.hpp)
    constexpr bool act = !std::is_same_v<Act, identity>, init = !std::is_same_v<Init, glorot_uniform>;
    using sv = std::string_view;
    return detail::concat({"conv2d<", detail::decimal(F), ", ", detail::decimal(KH), ", ", detail::decimal(KW), ", ",
                           detail::decimal(Stride), ", ", padding_name(Pad), act ? ", " : "",
                           act ? sv(Act::name()) : sv(), Reg::active ? ", " : "", Reg::active ? sv(Reg::name()) : sv(),
                           init ? ", " : "", init ? sv(Init::name()) : sv(), ">"});
  }

  template <Shape In, std::size_t Pos>
  static constexpr bool check() {
    constexpr bool located = diag::require<In::rank == 2 || In::rank == 3, &diag::conv2d_rank_text<Pos, F, KH, KW, In>>();
    constexpr bool rank_ok =
        located && diag::conv2d_input_rank<diag::layer<Pos>, diag::input_rank<In::rank>,
                                    In::rank == 2 || In::rank == 3>::value;
    if constexpr (rank_ok && Pad == padding::valid) {
      constexpr std::size_t H = In::dims[0], W = In::dims[1];
      constexpr bool located = diag::require<(KH <= H && KW <= W), &diag::conv2d_kernel_text<Pos, F, KH, KW, In>>();
      return located && diag::conv2d_kernel_larger_than_input<diag::layer<Pos>, diag::input_height<H>, diag::input_width<W>,
                                                   diag::window_height<KH>, diag::window_width<KW>,
                                                   (KH <= H && KW <= W)>::value;
    }
    return rank_ok;
  }

  template <Shape In, class P, class Backend>
  using bind = conv2d_layer<conv2d, In, precision::policy_of_t<P>, Backend>;
};

namespace layer_kind {
struct conv2d {};  // the kind tag of conv2d_layer (its member `kind`)
}  // namespace layer_kind

// The bound convolution (im2col + GEMM through ops<Backend>).
template <class Spec, Shape In, class P, class Backend>
struct conv2d_layer
    : detail::kernel_regularization<typename Spec::regularizer, Backend, typename P::compute_type,
                                    Spec::kernel_height * Spec::kernel_width * dim_or<In, 2>() * Spec::filters> {
  using kind = layer_kind::conv2d;  // what it is, for tools that map layers (onnx/export.hpp, onnx/import.hpp)
  using spec = Spec;
  static constexpr std::size_t F = Spec::filters, KH = Spec::kernel_height, KW = Spec::kernel_width;
  using Act = typename Spec::activation;
  using Reg = typename Spec::regularizer;
  using T = typename P::compute_type;
  using O = ops<Backend>;
  static constexpr std::size_t H = dim_or<In, 0>(), W = dim_or<In, 1>(), C = dim_or<In, 2>();
  static constexpr kernels::conv_geometry geometry = window_geometry(H, W, C, F, KH, KW, Spec::stride, Spec::pad);
  using variable_type = typename P::variable_type;
  using compute_type = T;
  using in_shape = In;
  using out_shape = shape<geometry.oh, geometry.ow, F>;
  static constexpr std::size_t K = KH * KW * C;  // one im2col row
  static constexpr std::size_t kernel_count = K * F;
  static_assert(kernel_count == conv2d_layer::regularized_count);
  static constexpr auto buffers = detail::with_regularizer_buffers<Reg>(
      std::array<buffer, 3>{buffer::parameter("kernel", {KH, KW, C, F}), buffer::parameter("bias", {F}),
                            buffer::cache("columns", geometry.oh * geometry.ow * K)});
  static constexpr std::size_t parameter_count = count_of(buffers, role::parameter);
  static constexpr std::size_t state_count = 0;
  static constexpr std::size_t cache_per_sample = count_of(buffers, role::cache);
  static constexpr std::string name() { return Spec::name(); }

  static void init(layer_slot<T> s, rng& g) {
    Spec::initializer::fill(s.params, kernel_count, KH * KW * C, KH * KW * F, g);
    for (std::size_t j = 0; j < F; ++j) s.params[kernel_count + j] = T(0);
    detail::init_regularizer<Reg>(s);
  }

  static void forward(layer_slot<T> s, const T* x, T* y, run_info r) {
    if constexpr (requires { O::template conv_forward<geometry>(x, s.params, s.params, y, s.cache, r.batch,
                                                                Act::template rule<T>()); }) {
      // the activation's rule runs as each output is stored (a backend's conv_forward with an epilogue)
      O::template conv_forward<geometry>(x, s.params, s.params + kernel_count, y, s.cache, r.batch,
                                         Act::template rule<T>());
    } else {
      O::template conv_forward<geometry>(x, s.params, s.params + kernel_count, y, s.cache, r.batch);
      Act::template forward<Backend>(y, r.batch * geometry.oh * geometry.ow, F);
    }
  }

  // dy is turned into dL/dz in place (a relu layer's backend may instead read the mask with dy in its
  // dW kernel: ops::conv_backward_relu); the im2col matrix in the cache is reused.
  static void backward(layer_slot<T> s, const T*, const T* y, T* dy, T* dx, run_info r) {
    if constexpr (std::is_same_v<Act, relu> && requires {
                    O::template conv_backward_relu<geometry>(y, dy, s.params, s.grads, s.grads, dx, s.cache, r.batch);
                  }) {
      O::template conv_backward_relu<geometry>(y, dy, s.params, s.grads, s.grads + kernel_count, dx, s.cache, r.batch);
    } else {
      Act::template backward<Backend>(y, dy, r.batch * geometry.oh * geometry.ow, F);
      O::template conv_backward<geometry>(dy, s.params, s.grads, s.grads + kernel_count, dx, s.cache, r.batch);
    }
  }

};

}  // namespace ctnn
