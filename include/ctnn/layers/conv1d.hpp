// ctnn/layers/conv1d.hpp — conv1d<F, K, Stride = 1, Padding = valid, Activation, Regularizer, Init>.
//
// keras.layers.Conv1D on a channels-last sequence shape<L, C>: F filters of
// width K moved by Stride, padding::valid (OL = (L - K) / Stride + 1) or
// padding::same (OL = ceil(L / Stride), padded as Keras); output shape<OL, F>.
// Parameters: the kernel [K, C, F] (Keras' layout), then the bias [F]; Glorot
// uniform with fan_in = K C, fan_out = K F as Keras. It is conv2d's bound layer
// on shape<1, L, C> with a 1 x K kernel (the same memory), so it shares
// conv2d's kernels on every backend. Requires a rank-2 input and, with valid
// padding, K <= L (compile errors naming the position and sizes). Not there:
// padding "causal", dilation, ONNX mapping (docs/layers.md).
#pragma once
#include <array>
#include <cstddef>
#include <string>
#include <type_traits>

#include "../core/compile_message.hpp"
#include "conv2d.hpp"

namespace ctnn {

template <class Spec, Shape In, class P, class Backend>
struct conv1d_layer;

namespace detail {
template <std::size_t Pos, std::size_t F, std::size_t K, class In>
constexpr diag::message conv1d_rank_text() {
  diag::message m;
  m << "layer " << Pos << " (conv1d<" << F << ", " << K << ">): input has rank " << In::rank << " (";
  m.dims(In::dims) << "); conv1d takes rank 2 (steps x channels)";
  return m;
}
template <std::size_t Pos, std::size_t F, std::size_t K, class In>
constexpr diag::message conv1d_kernel_text() {
  diag::message m;
  m << "layer " << Pos << " (conv1d<" << F << ", " << K << ">): the kernel of width " << K << " does not fit the input ";
  m.dims(In::dims) << " with padding::valid";
  return m;
}
}  // namespace detail

template <std::size_t F, std::size_t K, std::size_t Stride = 1, padding Pad = padding::valid,
          Activation Act = identity, Regularizer Reg = no_regularizer, Initializer Init = glorot_uniform>
struct conv1d {
  static_assert(F > 0, "conv1d: the number of filters must be > 0");
  static_assert(K > 0, "conv1d: the kernel width must be > 0");
  static_assert(Stride > 0, "conv1d: the stride must be > 0");
  using is_layer_spec = void;
  using activation = Act;
  using regularizer = Reg;
  using initializer = Init;
  static constexpr std::size_t filters = F, kernel_width = K, stride = Stride;
  static constexpr padding pad = Pad;
  using as_conv2d = conv2d<F, 1, K, Stride, Pad, Act, Reg, Init>;  // on shape<1, L, C>

  static std::string name() {
    std::string s = "conv1d<" + std::to_string(F) + ", " + std::to_string(K) + ", " + std::to_string(Stride) + ", " +
                    padding_name(Pad);
    if (!std::is_same_v<Act, identity>) s += ", " + Act::name();
    if (Reg::active) s += ", " + Reg::name();
    if (!std::is_same_v<Init, glorot_uniform>) s += ", " + Init::name();
    return s + ">";
  }

  template <Shape In, std::size_t Pos>
  static constexpr bool check() {
    constexpr bool rank_ok = diag::require<In::rank == 2, &detail::conv1d_rank_text<Pos, F, K, In>>();
    if constexpr (rank_ok && Pad == padding::valid)
      return diag::require<(K <= In::dims[0]), &detail::conv1d_kernel_text<Pos, F, K, In>>();
    return rank_ok;
  }

  template <Shape In, class P, class Backend>
  using bind = conv1d_layer<conv1d, In, precision::policy_of_t<P>, Backend>;
};

namespace layer_kind {
struct conv1d {};  // the kind tag of conv1d_layer (its member `kind`)
}  // namespace layer_kind

// conv2d's bound layer on shape<1, L, C>, seen as shape<L, C> -> shape<OL, F>.
template <class Spec, Shape In, class P, class Backend>
struct conv1d_layer : conv2d_layer<typename Spec::as_conv2d, shape<1, dim_or<In, 0>(), dim_or<In, 1>()>, P, Backend> {
  using base = conv2d_layer<typename Spec::as_conv2d, shape<1, dim_or<In, 0>(), dim_or<In, 1>()>, P, Backend>;
  using kind = layer_kind::conv1d;
  using spec = Spec;
  using in_shape = In;
  using out_shape = shape<base::geometry.ow, Spec::filters>;
  static constexpr auto buffers = detail::with_regularizer_buffers<typename Spec::regularizer>(
      std::array<buffer, 3>{buffer::parameter("kernel", {Spec::kernel_width, base::C, Spec::filters}),
                            buffer::parameter("bias", {Spec::filters}),
                            buffer::cache("columns", base::geometry.ow * base::K)});
  static_assert(count_of(buffers, role::parameter) == base::parameter_count);
  static std::string name() { return Spec::name(); }
};

}  // namespace ctnn
