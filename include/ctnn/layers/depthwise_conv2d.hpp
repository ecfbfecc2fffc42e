// ctnn/layers/depthwise_conv2d.hpp — depthwise_conv2d<KH, KW, Stride, Padding, M, Act, Reg, Init> and
// separable_conv2d<F, KH, KW, Stride, Padding, M, Act, Reg, Init> (MobileNet's building blocks).
//
// depthwise_conv2d is keras.layers.DepthwiseConv2D on a channels-last shape<H, W, C>
// (a rank-2 shape<H, W> is one channel): each input channel c convolved with its
// own M filters of KHxKW (M, the depth multiplier, default 1), output channel
// c M + m, plus a bias, then the activation. Output shape<OH, OW, C M> with
// conv2d's output sizes (layers/padding.hpp). Parameters in Keras' layout and
// order: `kernel` [KH, KW, C, M], `bias` [C M]; Glorot uniform with Keras' fans of
// that shape (fan_in = KH KW C, fan_out = KH KW M); zero bias. The regularizer
// applies to the kernel (Keras' depthwise_regularizer).
//
// separable_conv2d is keras.layers.SeparableConv2D: the depthwise step (no bias,
// stride and padding as given) then a pointwise 1x1 convolution to F filters,
// plus a bias, then the activation. Parameters: `depthwise_kernel` [KH, KW, C, M],
// `pointwise_kernel` [1, 1, C M, F], `bias` [F], both kernels Glorot uniform
// with Keras' fans (KH KW C, KH KW M; C M, F). The regularizer applies to both
// kernels (Keras' depthwise_regularizer and pointwise_regularizer set to the
// same). Cache: the depthwise step's output (OH OW C M per sample), its
// gradient in place during backward.
//
// Both run through the op set's depthwise_forward / depthwise_backward<G, M>
// (backends/cpu/depthwise.hpp: vectorized over channels for M = 1; CUDA and the
// simulated device have them too) and, for the pointwise step, the dense
// products over the batch's OH OW positions. A rank other than 2 or 3, or a
// kernel larger than the input with padding::valid, is a compile error naming
// the position and the sizes. Not there (as for conv2d): dilation, use_bias=False.
#pragma once
#include <array>
#include <cstddef>
#include <string>
#include <string_view>
#include <type_traits>

#include "../core/backend.hpp"
#include "../core/backend.hpp"
#include "../core/compile_message.hpp"
#include "../core/concepts.hpp"
#include "../core/plan.hpp"
#include "../core/shape.hpp"
#include "../regularizers/penalties.hpp"
#include "activation.hpp"
#include "initializers.hpp"
#include "padding.hpp"

namespace ctnn {

template <class Spec, Shape In, class P, class Backend>
struct depthwise_conv2d_layer;
template <class Spec, Shape In, class P, class Backend>
struct separable_conv2d_layer;

namespace detail {
template <std::size_t Pos, class Spec, class In>
constexpr diag::message depthwise_rank_text() {
  diag::message m;
  m << "layer " << Pos << " (" << Spec::kind_name << "<" << Spec::kernel_height << ", " << Spec::kernel_width
    << ">): input has rank " << In::rank << " (";
  m.dims(In::dims) << "); " << Spec::kind_name << " takes rank 3 (height x width x channels) or 2 (height x width)";
  return m;
}
template <std::size_t Pos, class Spec, class In>
constexpr diag::message depthwise_kernel_text() {
  diag::message m;
  m << "layer " << Pos << " (" << Spec::kind_name << "<" << Spec::kernel_height << ", " << Spec::kernel_width
    << ">): the " << Spec::kernel_height << "x" << Spec::kernel_width << " kernel does not fit the input ";
  m.dims(In::dims) << " with padding::valid";
  return m;
}
// The checks both specs share: rank 2 or 3, and a kernel that fits with valid padding.
template <class Spec, Shape In, std::size_t Pos>
constexpr bool depthwise_check() {
  constexpr bool rank_ok = In::rank == 2 || In::rank == 3;  // (not the require's value: one error at a time)
  if constexpr (!rank_ok)
    return diag::require<rank_ok, &depthwise_rank_text<Pos, Spec, In>>();
  else if constexpr (Spec::pad == padding::valid)
    return diag::require<(Spec::kernel_height <= In::dims[0] && Spec::kernel_width <= In::dims[1]),
                         &depthwise_kernel_text<Pos, Spec, In>>();
  else
    return true;
}
inline std::string depthwise_name(std::string s, std::size_t stride, padding pad, std::size_t m,
                                  const std::string& act, const std::string& reg, const std::string& init) {
  s += ", " + std::to_string(stride) + ", " + padding_name(pad);
  if (m != 1 || !act.empty() || !reg.empty() || !init.empty()) s += ", " + std::to_string(m);
  if (!act.empty()) s += ", " + act;
  if (!reg.empty()) s += ", " + reg;
  if (!init.empty()) s += ", " + init;
  return s + ">";
}
template <class Act, class Reg, class Init>
std::string depthwise_options(std::string s, std::size_t stride, padding pad, std::size_t m) {
  return depthwise_name(std::move(s), stride, pad, m, std::is_same_v<Act, identity> ? std::string() : Act::name(),
                        Reg::active ? Reg::name() : std::string(),
                        std::is_same_v<Init, glorot_uniform> ? std::string() : Init::name());
}
}  // namespace detail

template <std::size_t KH, std::size_t KW, std::size_t Stride = 1, padding Pad = padding::valid,
          std::size_t DepthMultiplier = 1, Activation Act = identity, Regularizer Reg = no_regularizer,
          Initializer Init = glorot_uniform>
struct depthwise_conv2d {
  static_assert(KH > 0 && KW > 0, "depthwise_conv2d: the kernel height and width must be > 0");
  static_assert(Stride > 0, "depthwise_conv2d: the stride must be > 0");
  static_assert(DepthMultiplier > 0, "depthwise_conv2d: the depth multiplier must be > 0");
  using is_layer_spec = void;
  using activation = Act;
  using regularizer = Reg;
  using initializer = Init;
  static constexpr const char* kind_name = "depthwise_conv2d";
  static constexpr std::size_t kernel_height = KH, kernel_width = KW, stride = Stride, depth_multiplier = DepthMultiplier;
  static constexpr padding pad = Pad;

  static std::string name() {
    return detail::depthwise_options<Act, Reg, Init>("depthwise_conv2d<" + std::to_string(KH) + ", " +
                                                         std::to_string(KW),
                                                     Stride, Pad, DepthMultiplier);
  }
  template <Shape In, std::size_t Pos>
  static constexpr bool check() {
    return detail::depthwise_check<depthwise_conv2d, In, Pos>();
  }
  template <Shape In, class P, class Backend>
  using bind = depthwise_conv2d_layer<depthwise_conv2d, In, precision::policy_of_t<P>, Backend>;
};

template <std::size_t F, std::size_t KH, std::size_t KW, std::size_t Stride = 1, padding Pad = padding::valid,
          std::size_t DepthMultiplier = 1, Activation Act = identity, Regularizer Reg = no_regularizer,
          Initializer Init = glorot_uniform>
struct separable_conv2d {
  static_assert(F > 0, "separable_conv2d: the number of filters must be > 0");
  static_assert(KH > 0 && KW > 0, "separable_conv2d: the kernel height and width must be > 0");
  static_assert(Stride > 0, "separable_conv2d: the stride must be > 0");
  static_assert(DepthMultiplier > 0, "separable_conv2d: the depth multiplier must be > 0");
  using is_layer_spec = void;
  using activation = Act;
  using regularizer = Reg;
  using initializer = Init;
  static constexpr const char* kind_name = "separable_conv2d";
  static constexpr std::size_t filters = F, kernel_height = KH, kernel_width = KW, stride = Stride,
                               depth_multiplier = DepthMultiplier;
  static constexpr padding pad = Pad;

  static std::string name() {
    return detail::depthwise_options<Act, Reg, Init>("separable_conv2d<" + std::to_string(F) + ", " +
                                                         std::to_string(KH) + ", " + std::to_string(KW),
                                                     Stride, Pad, DepthMultiplier);
  }
  template <Shape In, std::size_t Pos>
  static constexpr bool check() {
    return detail::depthwise_check<separable_conv2d, In, Pos>();
  }
  template <Shape In, class P, class Backend>
  using bind = separable_conv2d_layer<separable_conv2d, In, precision::policy_of_t<P>, Backend>;
};

namespace layer_kind {
struct depthwise_conv2d {};  // the kind tag of depthwise_conv2d_layer (its member `kind`)
struct separable_conv2d {};  // ... and of separable_conv2d_layer
}  // namespace layer_kind

template <class Spec, Shape In, class P, class Backend>
struct depthwise_conv2d_layer
    : detail::kernel_regularization<typename Spec::regularizer, Backend, typename P::compute_type,
                                    Spec::kernel_height * Spec::kernel_width * dim_or<In, 2>() * Spec::depth_multiplier> {
  using kind = layer_kind::depthwise_conv2d;
  using spec = Spec;
  static constexpr std::size_t KH = Spec::kernel_height, KW = Spec::kernel_width, M = Spec::depth_multiplier;
  using Act = typename Spec::activation;
  using Reg = typename Spec::regularizer;
  using T = typename P::compute_type;
  using O = ops<Backend>;
  static constexpr std::size_t H = dim_or<In, 0>(), W = dim_or<In, 1>(), C = dim_or<In, 2>();
  static constexpr kernels::conv_geometry geometry = window_geometry(H, W, C, C * M, KH, KW, Spec::stride, Spec::pad);
  using variable_type = typename P::variable_type;
  using compute_type = T;
  using in_shape = In;
  using out_shape = shape<geometry.oh, geometry.ow, C * M>;
  static constexpr std::size_t kernel_count = KH * KW * C * M;
  static_assert(kernel_count == depthwise_conv2d_layer::regularized_count);
  static constexpr auto buffers = detail::with_regularizer_buffers<Reg>(
      std::array<buffer, 2>{buffer::parameter("kernel", {KH, KW, C, M}), buffer::parameter("bias", {C * M})});
  static constexpr std::size_t parameter_count = count_of(buffers, role::parameter);
  static constexpr std::size_t state_count = 0;
  static constexpr std::size_t cache_per_sample = 0;
  static std::string name() { return Spec::name(); }

  static void init(layer_slot<T> s, rng& g) {
    Spec::initializer::fill(s.params, kernel_count, KH * KW * C, KH * KW * M, g);
    for (std::size_t j = 0; j < C * M; ++j) s.params[kernel_count + j] = T(0);
    detail::init_regularizer<Reg>(s);
  }
  static void forward(layer_slot<T> s, const T* x, T* y, run_info r) {
    O::template depthwise_forward<geometry, M>(x, s.params, s.params + kernel_count, y, r.batch);
    Act::template forward<Backend>(y, r.batch * geometry.oh * geometry.ow, C * M);
  }
  // dy is turned into dL/dz in place.
  static void backward(layer_slot<T> s, const T* x, const T* y, T* dy, T* dx, run_info r) {
    Act::template backward<Backend>(y, dy, r.batch * geometry.oh * geometry.ow, C * M);
    O::template depthwise_backward<geometry, M>(x, dy, s.params, s.grads, s.grads + kernel_count, dx, r.batch);
  }

};

template <class Spec, Shape In, class P, class Backend>
struct separable_conv2d_layer  // the regularizer on both kernels
    : detail::kernel_regularization<typename Spec::regularizer, Backend, typename P::compute_type,
                                    (Spec::kernel_height * Spec::kernel_width + Spec::filters) * dim_or<In, 2>() *
                                        Spec::depth_multiplier> {
  using kind = layer_kind::separable_conv2d;
  using spec = Spec;
  static constexpr std::size_t F = Spec::filters, KH = Spec::kernel_height, KW = Spec::kernel_width,
                               M = Spec::depth_multiplier;
  using Act = typename Spec::activation;
  using Reg = typename Spec::regularizer;
  using T = typename P::compute_type;
  using O = ops<Backend>;
  static constexpr std::size_t H = dim_or<In, 0>(), W = dim_or<In, 1>(), C = dim_or<In, 2>(), CM = C * M;
  static constexpr kernels::conv_geometry geometry = window_geometry(H, W, C, CM, KH, KW, Spec::stride, Spec::pad);
  static constexpr std::size_t positions = geometry.oh * geometry.ow;  // per sample
  using variable_type = typename P::variable_type;
  using compute_type = T;
  using in_shape = In;
  using out_shape = shape<geometry.oh, geometry.ow, F>;
  static constexpr std::size_t depthwise_count = KH * KW * CM, pointwise_count = CM * F;
  static constexpr std::size_t kernel_count = depthwise_count + pointwise_count;  // both kernels, then the bias
  static_assert(kernel_count == separable_conv2d_layer::regularized_count);
  static constexpr auto buffers = detail::with_regularizer_buffers<Reg>(std::array<buffer, 4>{
      buffer::parameter("depthwise_kernel", {KH, KW, C, M}), buffer::parameter("pointwise_kernel", {1, 1, CM, F}),
      buffer::parameter("bias", {F}), buffer::cache("depthwise", positions * CM)});
  static constexpr std::size_t parameter_count = count_of(buffers, role::parameter);
  static constexpr std::size_t state_count = 0;
  static constexpr std::size_t cache_per_sample = count_of(buffers, role::cache);
  static std::string name() { return Spec::name(); }

  static void init(layer_slot<T> s, rng& g) {
    Spec::initializer::fill(s.params, depthwise_count, KH * KW * C, KH * KW * M, g);
    Spec::initializer::fill(s.params + depthwise_count, pointwise_count, CM, F, g);
    for (std::size_t j = 0; j < F; ++j) s.params[kernel_count + j] = T(0);
    detail::init_regularizer<Reg>(s);
  }
  static void forward(layer_slot<T> s, const T* x, T* y, run_info r) {
    O::template depthwise_forward<geometry, M>(x, s.params, static_cast<const T*>(nullptr), s.cache, r.batch);
    O::template dense_forward<CM, F>(s.cache, s.params + depthwise_count, s.params + kernel_count, y,
                                     r.batch * positions);
    Act::template forward<Backend>(y, r.batch * positions, F);
  }
  // dy is turned into dL/dz in place; the cache's depthwise output, once the pointwise kernel's
  // gradient has read it, is overwritten by its own gradient.
  static void backward(layer_slot<T> s, const T* x, const T* y, T* dy, T* dx, run_info r) {
    const std::size_t rows = r.batch * positions;
    Act::template backward<Backend>(y, dy, rows, F);
    O::template dense_backward_weights<CM, F>(s.cache, dy, s.grads + depthwise_count, s.grads + kernel_count, rows);
    O::template dense_backward_input<CM, F>(dy, s.params + depthwise_count, s.cache, rows);
    O::template depthwise_backward<geometry, M>(x, s.cache, s.params, s.grads, static_cast<T*>(nullptr), dx,
                                                r.batch);
  }

};

}  // namespace ctnn
