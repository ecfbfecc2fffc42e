// ctnn/layers/quantized_conv2d.hpp — quantized_conv2d<F, KH, KW, Stride, Padding, Activation, Scheme>: an int8
// 2D convolution (inference).
//
// Computes y ~ activation(conv2d(x, W) + b) as conv2d<F, KH, KW, Stride, Padding, Activation> does
// (channels-last input shape<H, W, C>, output shape<OH, OW, F>) with W stored as int8 per output
// channel (symmetric, zero point 0, [-127, 127], scale kernel_scale[f]); kernel: W [F, K]
// (K = KH KW C, in conv2d's kernel order (kh, kw, c)) packed by kernels::cpu::int8::pack as
// quantized_dense's ({F, Kp}, Kp = padded_k(K)). The forward pass quantizes the input and runs the
// packed int8 GEMM of backends/cpu/int8.hpp (the path of the backend's architecture: vnni, avx2
// or scalar) on its windows: read in place from the input by the vector paths (an implicit
// im2col, backends/cpu/int8_conv.hpp; a bordered copy where there is padding, the kernel
// re-packed by rows where KW C % 4 != 0), gathered into an im2col matrix [batch OH OW, Kp] by the
// scalar one (padding: the input's zero point, as TFLite, so a padded position adds nothing);
// then, per Scheme
// (quantization/arithmetic.hpp, docs/quantization.md):
//   quantization::full_integer  input quantized with the calibrated (input_scale, input_zero_point),
//     int32 bias (scale input_scale * kernel_scale[f]), each output requantized to int8 with
//     TFLite's fixed-point multiplier and rounding, identity or relu as the int8 clamp, then
//     dequantized (exact between two such layers, as quantized_dense).
//   quantization::dynamic_range  each sample's input quantized symmetrically on the fly (scale
//     max|x| / 127 over the sample's H W C values, as TFLite's hybrid convolution), padding 0,
//     float bias, float output, any element-wise activation after it.
// The buffers are state (saved, never trained), with quantized_dense's names and order (its
// saturation counts too: input values and outputs clamped): Kp F + 20 F + 32 bytes of values (full
// integer), Kp F + 12 F (dynamic range), against 4 K F + 4 F for conv2d; the kernel on a 64-byte
// boundary of the state block, as there (kernel_offset).
// Pool (default void): a max_pool2d<P, S, Pad> taken in the store of a full-integer layer (quantized_t
// pairs a conv and the max_pool2d after it where int8::pool_fusable holds: windows without padding
// that do not overlap): y receives the pooled tensor [OH', OW', F] (the pool's out_shape), the max
// over each window's int32 sums requantized once (exact: backends/cpu/int8_conv.hpp proves it; the
// unfused convolution and pooling run where int8::requant_monotone is false), and the saturation
// count of the outputs is that of the pooled values; the next layer, quantization::fused_pool<that
// max_pool2d, Out8>, only hands them on (aliases its input). The name, the buffers, the weights file
// and the ONNX export are the unpooled layer's and the max_pool2d's.
// The vector paths' kernel for KW C % 4 != 0 (pack_windows) is re-packed only when the kernel's
// bytes differ from those it was last packed from (one memcmp of Kp F bytes a call).
// Made by quantize_dynamic / quantize_full_integer (quantization/convert.hpp) or convert_qat
// (quantization/qat.hpp); backward throws.
#pragma once
#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "../backends/cpu/int8.hpp"
#include "../backends/cpu/int8_conv.hpp"
#include "../backends/cpu/int8_pool.hpp"
#include "../backends/cpu/pooling.hpp"
#include "../core/backend.hpp"
#include "../core/concepts.hpp"
#include "../core/plan.hpp"
#include "../core/shape.hpp"
#include "../kernels/conv_reference.hpp"
#include "../quantization/arithmetic.hpp"
#include "activation.hpp"
#include "max_pool2d.hpp"
#include "padding.hpp"
#include "pool2d.hpp"
#include "quantized_dense.hpp"

namespace ctnn {

template <class Spec, Shape In, class P, class Backend>
struct quantized_conv2d_layer;
template <class Spec, Shape In, class P, class Backend>
struct fused_pool_layer;

namespace quantization::detail {
template <class S>
inline constexpr bool is_max_pool2d_v = false;
template <std::size_t P, std::size_t S, padding Pad>
inline constexpr bool is_max_pool2d_v<max_pool2d<P, S, Pad>> = true;
}  // namespace quantization::detail

template <std::size_t F, std::size_t KH, std::size_t KW, std::size_t Stride = 1, padding Pad = padding::valid,
          Activation Act = identity, class Scheme = quantization::full_integer, class IO = quantization::float_io,
          class Pool = void>
struct quantized_conv2d {
  static_assert(F > 0, "quantized_conv2d: the number of filters must be > 0");
  static_assert(KH > 0 && KW > 0, "quantized_conv2d: the kernel height and width must be > 0");
  static_assert(Stride > 0, "quantized_conv2d: the stride must be > 0");
  static_assert(quantization::is_scheme_v<Scheme>,
                "quantized_conv2d: the scheme is quantization::full_integer or quantization::dynamic_range (or "
                "either in quantization::reduce_range<...>)");
  static_assert(!quantization::is_full_integer_v<Scheme> || std::is_same_v<Act, identity> ||
                    std::is_same_v<Act, relu>,
                "quantized_conv2d: a full-integer layer fuses identity or relu only (other activations have no int8 "
                "kernel yet: use quantization::dynamic_range)");
  static_assert(quantization::is_int8_io_v<IO> &&
                    (quantization::is_full_integer_v<Scheme> || std::is_same_v<IO, quantization::float_io>),
                "quantized_conv2d: IO is quantization::int8_io<In8, Out8>, int8 only for a full-integer layer");
  static_assert(std::is_void_v<Pool> ||
                    (quantization::is_full_integer_v<Scheme> && quantization::detail::is_max_pool2d_v<Pool>),
                "quantized_conv2d: Pool is void or a max_pool2d<...> fused into a full-integer layer's store");
  using is_layer_spec = void;
  using activation = Act;
  using scheme = Scheme;
  using io = IO;
  using pool = Pool;  // void: none
  static constexpr std::size_t filters = F, kernel_height = KH, kernel_width = KW, stride = Stride;
  static constexpr padding pad = Pad;
  static std::string name() {
    std::string s = "quantized_conv2d<" + std::to_string(F) + ", " + std::to_string(KH) + ", " + std::to_string(KW) +
                    ", " + std::to_string(Stride) + ", " + padding_name(Pad);
    if (!std::is_same_v<Act, identity>) s += ", " + Act::name();
    return s + ", " + Scheme::name() + ">";
  }
  template <Shape In, std::size_t Pos>
  static constexpr bool check() {
    static_assert(In::rank == 2 || In::rank == 3,
                  "quantized_conv2d: the input must be shape<H, W, C> or shape<H, W> (the float layer's input)");
    if constexpr (In::rank == 2 || In::rank == 3)
      static_assert(Pad == padding::same || (KH <= In::dims[0] && KW <= In::dims[1]),
                    "quantized_conv2d: with padding::valid the kernel must fit in the input");
    return true;
  }
  template <Shape In, class P, class Backend>
  using bind = quantized_conv2d_layer<quantized_conv2d, In, precision::float32, Backend>;
};

namespace layer_kind {
struct quantized_conv2d {};
}  // namespace layer_kind

template <class Spec, Shape In, class P, class Backend>
struct quantized_conv2d_layer {
  using kind = layer_kind::quantized_conv2d;
  using spec = Spec;
  static constexpr std::size_t F = Spec::filters, KH = Spec::kernel_height, KW = Spec::kernel_width;
  static constexpr std::size_t H = dim_or<In, 0>(), W = dim_or<In, 1>(), C = dim_or<In, 2>();
  static constexpr kernels::conv_geometry geometry = window_geometry(H, W, C, F, KH, KW, Spec::stride, Spec::pad);
  static constexpr std::size_t K = KH * KW * C, N = F;  // one im2col row; N: the converter's name for the units
  static constexpr std::size_t Kp = kernels::cpu::int8::padded_k(K);
  using Act = typename Spec::activation;
  static constexpr bool full = quantization::is_full_integer_v<typename Spec::scheme>;
  static constexpr auto weights = quantization::weight_range_v<typename Spec::scheme>;  // the product's
  static constexpr std::int32_t weight_max = Spec::scheme::weight_max;
  using T = float;
  using variable_type = float;
  using compute_type = float;
  using in_shape = In;
  using out_shape = shape<geometry.oh, geometry.ow, F>;
  static std::string name() { return Spec::name(); }
  // the max pooling fused into the store (Spec::pool), over the outputs geometry describes
  using Pool = typename Spec::pool;
  static constexpr bool pooled = !std::is_void_v<Pool>;
  static constexpr kernels::conv_geometry pool_geometry = [] {
    if constexpr (pooled)
      return window_geometry(geometry.oh, geometry.ow, F, F, Pool::pool_size, Pool::pool_size, Pool::stride, Pool::pad);
    else
      return geometry;
  }();
  static_assert(!pooled || kernels::cpu::int8::pool_fusable(geometry, pool_geometry),
                "quantized_conv2d: the fused max_pool2d must have windows without padding, inside the outputs, "
                "that do not overlap (quantized_t fuses only such a pool)");
  // the buffers and their views: quantized_dense's ({F, Kp} kernel)
  using dense_like =
      quantized_dense_layer<quantized_dense<K, F, Act, typename Spec::scheme, typename Spec::io>, shape<K>, P, Backend>;
  using input_element = typename dense_like::input_element;  // int8 next to another full-integer layer
  using output_element = typename dense_like::output_element;
  static constexpr auto buffers = dense_like::buffers;
  static constexpr std::size_t parameter_count = 0;
  static constexpr std::size_t state_count = count_of(buffers, role::state);
  static constexpr std::size_t cache_per_sample = 0;
  static constexpr std::size_t state_bytes = layer_role_bytes<precision::float32>(buffers, role::state);
  static constexpr std::size_t b_kernel = dense_like::b_kernel;
  static constexpr std::size_t kernel_offset = dense_like::kernel_offset;  // a multiple of 64
  using views = typename dense_like::views;
  static views view(std::byte* base) { return dense_like::view(base); }

  // load_weights' check of a file's kernel: quantized_dense's (weights in [-127, 127], padding 0, kernel_sum)
  static std::string check_state(std::string_view name, const std::byte* bytes, const std::byte* const* state,
                                 std::size_t n) {
    return dense_like::check_kernel("filter", name, bytes, state, n);
  }

  // A fresh layer: zero weights and bias, unit scales, zero points 0 (the converter fills it).
  static void init(layer_slot<T> s, rng& g) { dense_like::init(s, g); }

  static void forward(layer_slot<T> s, const T* x, T* y, run_info r) {
    using Arch = typename Backend::arch;
    namespace i8 = kernels::cpu::int8;
    using Win = i8::windows<geometry>;
    constexpr std::size_t in = geometry.in_size(), P_ = geometry.oh * geometry.ow;
    constexpr bool in8 = Spec::io::input;
    const auto v = view(reinterpret_cast<std::byte*>(s.state));
    const std::size_t m = r.batch, rows = m * P_;
    // the vector paths read the windows in place (an implicit im2col: int8_conv.hpp); the scalar
    // path multiplies an im2col matrix
    const bool implicit = i8::int8_path_of<Arch>() != i8::int8_path::scalar;
    thread_local std::vector<std::int8_t> xq, image, cols;
    thread_local std::vector<std::int32_t> acc;
    if (!in8 || !full) {
      xq.resize(m * in + Win::slack);
      std::memset(xq.data() + m * in, 0, Win::slack);
    }
    // The image the vector paths read the windows of the int8 input xs from (pad: the value of a
    // padded position): xs itself, or a bordered copy where the windows reach the padding, or where
    // they read past an input that is not this layer's buffer (the int8 of the layer before).
    const auto image_of = [&](const std::int8_t* xs, std::int8_t pad) {
      if (Win::in_place && !(xs != xq.data() && Win::over_reads)) return xs;
      image.resize(m * Win::image_size + Win::slack);
      i8::window_image<geometry>(xs, m, pad, image.data());
      return static_cast<const std::int8_t*>(image.data());
    };
    // The product of the int8 input xs (pad: the value of a padded position) with the kernel,
    // stored by the epilogue e (an int8::requant<Y> or int8::store_i32).
    const auto product = [&](const std::int8_t* xs, std::int8_t pad, auto e) -> std::size_t {
      if (implicit) {
        const std::int8_t* img = image_of(xs, pad);
        const std::int8_t* packed = windows_kernel(v.kernel);
        if constexpr (std::is_same_v<decltype(e), i8::store_i32>) {
          i8::conv_s8<geometry, Arch, weights>(img, m, packed, v.kernel_sum, e.c, e.ldc);
          return 0;
        } else {
          return i8::conv_s8_requantize<geometry, typename decltype(e)::value_type, Arch, weights>(img, m, packed,
                                                                                                    v.kernel_sum, e);
        }
      }
      cols.resize(rows * Kp);
      for (std::size_t n = 0; n < m; ++n) i8::im2col_s8(geometry, xs + n * in, pad, cols.data() + n * P_ * Kp, Kp);
      if constexpr (std::is_same_v<decltype(e), i8::store_i32>) {
        i8::gemm_s8<Arch, weights>(rows, F, K, cols.data(), Kp, v.kernel, v.kernel_sum, e.c, e.ldc);
        return 0;
      } else {
        return i8::gemm_s8_requantize<typename decltype(e)::value_type, Arch, weights>(rows, F, K, cols.data(), Kp,
                                                                                        v.kernel, v.kernel_sum, e);
      }
    };
    if constexpr (full) {
      const float in_scale = *v.in_scale, out_scale = *v.out_scale;
      const std::int32_t in_zp = *v.in_zp, out_zp = *v.out_zp;
      for (const auto& [zp, what] : {std::pair{in_zp, "input"}, std::pair{out_zp, "output"}})
        if (zp < quantization::qmin || zp > quantization::qmax)
          throw std::invalid_argument(Spec::name() + ": the " + what + " zero point " + std::to_string(zp) +
                                      " is outside [-128, 127] (a corrupt weights file?)");
      // between full-integer layers (Spec::io) x holds the previous layer's int8 values (nothing to
      // clamp) and y receives this layer's (quantized_dense's forward_int8)
      std::size_t clamped = 0;
      const std::int8_t* xs = xq.data();
      if constexpr (in8)
        xs = reinterpret_cast<const std::int8_t*>(x);
      else
        clamped = i8::quantize<Arch>(x, m * in, in_scale, in_zp, quantization::qmin, quantization::qmax, xq.data());
      const auto e =
          i8::requant_for(F, static_cast<const std::int32_t*>(v.bias), in_zp, v.kernel_sum, v.mult, v.shift, out_zp,
                          std::is_same_v<Act, relu>, out_scale, reinterpret_cast<output_element*>(y), &Spec::name,
                          "filter");
      std::size_t out_clamped = 0;
      if constexpr (!pooled) {
        out_clamped = product(xs, std::int8_t(in_zp), e);
      } else if (i8::requant_monotone(e, F, K)) {
        // the pool in the store: the max of each window's sums, requantized once
        if (implicit) {
          out_clamped = i8::conv_s8_pool_requantize<geometry, pool_geometry, output_element, Arch, weights>(
              image_of(xs, std::int8_t(in_zp)), m, windows_kernel(v.kernel), v.kernel_sum, e);
        } else {
          acc.resize(rows * F);
          product(xs, std::int8_t(in_zp), i8::store_i32{acc.data(), F});
          thread_local std::vector<std::int32_t> pooled_sums;
          pooled_sums.resize(m * pool_geometry.oh * pool_geometry.ow * F);
          i8::max_pool_i32<geometry, pool_geometry>(acc.data(), m, pooled_sums.data());
          out_clamped = i8::requantize_rows<output_element, Arch>(m * pool_geometry.oh * pool_geometry.ow, F,
                                                                  pooled_sums.data(), e);
        }
      } else {
        // a requantization the max does not commute with (int8_conv.hpp): the outputs, then the pool
        thread_local std::vector<output_element> unpooled;
        unpooled.resize(rows * F);
        auto eu = e;
        eu.y = unpooled.data();
        out_clamped = product(xs, std::int8_t(in_zp), eu);
        if constexpr (std::is_same_v<output_element, std::int8_t>) {
          i8::max_pool_s8<pool_geometry, Arch>(unpooled.data(), reinterpret_cast<std::int8_t*>(y), m);
        } else {
          thread_local std::vector<unsigned char> where;  // (the argmax the float kernel writes)
          where.resize(m * pool_geometry.out_size() * sizeof(std::uint32_t));
          kernels::cpu::max_pool_forward<pool_geometry, Arch>(unpooled.data(), y, where.data(), m);
        }
      }
      dense_like::count(v.saturated, clamped);
      dense_like::count(v.saturated + 2, out_clamped);
    } else {
      thread_local std::vector<float> sample_scale;
      sample_scale.resize(m);
      for (std::size_t n = 0; n < m; ++n) {
        const float amax = i8::abs_max<Arch>(x + n * in, in);
        sample_scale[n] = amax / 127.0f;
        i8::quantize<Arch>(x + n * in, in, amax > 0 ? sample_scale[n] : 1.0f, 0, -127, 127, xq.data() + n * in);
      }
      acc.resize(rows * F);
      product(xq.data(), 0, i8::store_i32{acc.data(), F});
      const auto* bias = static_cast<const float*>(v.bias);
      for (std::size_t i = 0; i < rows; ++i) {
        const float sc = sample_scale[i / P_];
        for (std::size_t j = 0; j < F; ++j) y[i * F + j] = float(acc[i * F + j]) * (sc * v.kernel_scale[j]) + bias[j];
      }
      Act::template forward<Backend>(y, rows, F);
    }
  }

  static void backward(layer_slot<T>, const T*, const T*, T*, T*, run_info) {
    throw std::logic_error(Spec::name() + ": an int8 layer runs inference only (train the qat_t network of "
                                          "quantization/qat.hpp, then convert_qat)");
  }

  // (the vector paths' kernel)
  // The kernel the vector paths multiply: the layer's own, or (KW C % 4 != 0) pack_windows' form of
  // it, re-packed only when the kernel's bytes differ from those it was packed from (a copy kept
  // beside it, per thread and layer type: a memcmp of Kp F bytes a call instead of the packing).
  static const std::int8_t* windows_kernel(const std::int8_t* kernel) {
    namespace i8 = kernels::cpu::int8;
    if constexpr (!i8::windows<geometry>::over_reads) {
      return kernel;
    } else {
      constexpr std::size_t bytes = i8::packed_bytes(K, F);
      thread_local std::vector<std::int8_t> from, packed;
      if (from.size() != bytes || std::memcmp(from.data(), kernel, bytes) != 0) {
        packed.resize(i8::packed_bytes(i8::windows<geometry>::k, F));
        i8::pack_windows<geometry>(kernel, packed.data());
        from.assign(kernel, kernel + bytes);
      }
      return packed.data();
    }
  }
};

namespace quantization {
// A max_pool2d that the quantized_conv2d before it took in its store (quantized_conv2d<..., Pool =
// Spec>): its input holds the pooled values already (at the front of that layer's output block), so
// it aliases its input; Out8: int8 values (the conv's int8_io output), else float. Made by
// quantized_t; float_between_t unwraps it (and the conv's Pool). Its name, kind, window and weights
// (none) are Spec's, as int8_pass's: a summary, spec string, weights file or ONNX export sees
// max_pool2d.
template <class Spec, bool Out8>
struct fused_pool : Spec {
  static_assert(detail::is_max_pool2d_v<Spec>, "fused_pool: the layer is a max_pool2d");
  using float_spec = Spec;
  static constexpr bool out8 = Out8;
  template <Shape In, class P, class Backend>
  using bind = fused_pool_layer<fused_pool, In, P, Backend>;
};
}  // namespace quantization

// The bound fused_pool: the pooled values as its input has them (int8 or float).
template <class Spec, Shape In, class P, class Backend>
struct fused_pool_layer {
  using kind = layer_kind::pool2d;  // the tools see the max_pool2d (spec::kind, pool_size, stride, pad)
  using spec = Spec;
  using Kind = typename Spec::kind;
  using T = float;
  using variable_type = float;
  using compute_type = float;
  using element = std::conditional_t<Spec::out8, std::int8_t, float>;
  using input_element = element;
  using output_element = element;
  static constexpr std::size_t H = dim_or<In, 0>(), W = dim_or<In, 1>(), C = dim_or<In, 2>();
  static constexpr kernels::conv_geometry geometry =
      window_geometry(H, W, C, C, Spec::pool_size, Spec::pool_size, Spec::stride, Spec::pad);
  using in_shape = In;
  using out_shape = shape<geometry.oh, geometry.ow, C>;
  static constexpr bool keeps_channels = true;
  static constexpr bool aliases_input = true;  // the model passes the conv's block on
  static constexpr auto buffers = no_buffers;
  static constexpr std::size_t parameter_count = 0;
  static constexpr std::size_t state_count = 0;
  static constexpr std::size_t cache_per_sample = 0;
  static std::string name() { return Spec::name(); }

  static void init(layer_slot<T>, rng&) {}
  // (run only inside a composite's own buffers: the pooled values are the first ones of x)
  static void forward(layer_slot<T>, const T* x, T* y, run_info r) {
    std::memcpy(y, x, r.batch * out_shape::size * sizeof(element));
  }
  static void backward(layer_slot<T>, const T*, const T*, T*, T*, run_info) {
    throw std::logic_error(Spec::name() + (Spec::out8 ? " on int8 values" : "") +
                           " runs inference only (fused into the quantized_conv2d before it)");
  }
};

}  // namespace ctnn
