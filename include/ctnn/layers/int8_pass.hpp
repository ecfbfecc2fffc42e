// ctnn/layers/int8_pass.hpp — quantization::int8_pass<Spec>: max_pool2d, average_pool2d,
// global_average_pool, flatten, reshape or dropout run on the int8 tensor between two full-integer
// layers (inference).
//
// A max of int8 values that share one scale and zero point is the int8 value of the max (the
// dequantization s (q - z) is increasing in q), a mean of them is the mean of the int8 values
// (rounded back to int8), and flatten / reshape move no value: so between two full-integer layers
// (quantized_conv2d, quantized_dense, quantized_dense_block) these layers take the producer's int8
// values and hand int8 values on, with the producer's scale and zero point (as TFLite's and
// XNNPACK's int8 MAX_POOL_2D and AVERAGE_POOL_2D, whose output tensor keeps its input's
// quantization). quantized_t (quantization/convert.hpp) wraps them so where both neighbours are
// full-integer layers (through other int8_pass layers); quantization::float_between_t unwraps
// them. The wrapped spec keeps its name, shape rules and weights (none): int8_pass<max_pool2d<2>>
// is "max_pool2d<2>" in a summary, a spec string and a weights file, as int8_io is invisible there.
//   max_pool2d<Pool, Stride, Padding>: y[oh, ow, c] = max of x[r, s, c] over the window's positions
//     inside the input (padding never takes part, as the float layer), by
//     kernels::cpu::int8::max_pool_s8<G, Arch> (backends/cpu/int8_pool.hpp).
//   average_pool2d<Pool, Stride, Padding>: y[oh, ow, c] = the sum of x[r, s, c] over the window's
//     positions inside the input divided by their count, rounded half away from zero (TFLite's
//     int8 AVERAGE_POOL_2D), by kernels::cpu::int8::average_pool_s8<G, Arch>
//     (backends/cpu/int8_pool.hpp).
//   global_average_pool: y[c] = the sum of x[p, c] over every position p divided by their count,
//     rounded half away from zero: TFLite's int8 AVERAGE_POOL_2D with one window over the whole
//     spatial extent (its MEAN, which the converter writes for GlobalAveragePooling2D, computes
//     z + round((sum of (x - z)) / count) with an output scale of its own; with this one's (the
//     input's) the two differ only on an exact half whose sign differs around 0 and around z),
//     by kernels::cpu::int8::global_average_pool_s8<P, C, Arch>; kind global_average_pool
//     (onnx/export.hpp writes its ReduceMean between a DQ and a Q of the producer's parameters).
//   max_pool2d, average_pool2d: kind pool2d, spec::kind the float layer's (max_pool_kind, average_pool_kind):
//     onnx/export.hpp writes the float MaxPool or AveragePool between the producer's
//     DequantizeLinear and a QuantizeLinear with the same scale and zero point (onnxruntime runs
//     that pattern on int8).
//   flatten, reshape<D...>, dropout<Rate>: the input's memory (aliases_input), as the float layers
//     (dropout is the identity at inference; kind dropout, so the ONNX export writes nothing for it).
// No buffers; no cache; backward throws (the int8 layers are inference types).
// Docs: docs/quantization.md.
#pragma once
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>
#include <type_traits>

#include "../backends/cpu/int8_pool.hpp"
#include "../core/backend.hpp"
#include "../core/concepts.hpp"
#include "../core/plan.hpp"
#include "../core/shape.hpp"
#include "average_pool2d.hpp"
#include "dropout.hpp"
#include "global_average_pool.hpp"
#include "max_pool2d.hpp"
#include "padding.hpp"
#include "pool2d.hpp"
#include "reshape.hpp"

namespace ctnn {

template <class Spec, Shape In, class P, class Backend>
struct int8_pool2d_layer;
template <class Spec, Shape In, class P, class Backend>
struct int8_reshape_layer;
template <class Spec, Shape In, class P, class Backend>
struct int8_global_average_pool_layer;

namespace quantization {
namespace detail {
template <class S>
inline constexpr bool is_reshape_spec_v = false;
template <>
inline constexpr bool is_reshape_spec_v<flatten> = true;
template <std::size_t... D>
inline constexpr bool is_reshape_spec_v<reshape<D...>> = true;
template <class S>
inline constexpr bool is_dropout_spec_v = false;
template <auto Rate>
inline constexpr bool is_dropout_spec_v<dropout<Rate>> = true;
template <class S>
inline constexpr bool is_max_pool_spec_v = false;
template <std::size_t Pool, std::size_t Stride, padding Pad>
inline constexpr bool is_max_pool_spec_v<max_pool2d<Pool, Stride, Pad>> = true;
template <class S>
inline constexpr bool is_average_pool_spec_v = false;
template <std::size_t Pool, std::size_t Stride, padding Pad>
inline constexpr bool is_average_pool_spec_v<average_pool2d<Pool, Stride, Pad>> = true;
template <class S>
inline constexpr bool is_global_average_pool_spec_v = std::is_same_v<S, global_average_pool>;
}  // namespace detail

// Whether Spec runs on an int8 tensor (int8_pass<Spec> exists).
template <class Spec>
inline constexpr bool int8_passes_v =
    detail::is_reshape_spec_v<Spec> || detail::is_max_pool_spec_v<Spec> || detail::is_average_pool_spec_v<Spec> ||
    detail::is_global_average_pool_spec_v<Spec> || detail::is_dropout_spec_v<Spec>;

template <class Spec>
struct int8_pass : Spec {
  static_assert(int8_passes_v<Spec>, "int8_pass: the layer is max_pool2d, average_pool2d, global_average_pool, "
                                     "flatten, reshape or dropout (the layers that run on int8 values)");
  using float_spec = Spec;  // the same layer on float values (float_between_t)
  template <Shape In, class P, class Backend>
  using bind = std::conditional_t<
      detail::is_reshape_spec_v<Spec> || detail::is_dropout_spec_v<Spec>, int8_reshape_layer<int8_pass, In, P, Backend>,
      std::conditional_t<detail::is_global_average_pool_spec_v<Spec>,
                         int8_global_average_pool_layer<int8_pass, In, P, Backend>,
                         int8_pool2d_layer<int8_pass, In, P, Backend>>>;
};
}  // namespace quantization

// The bound int8 max or average pooling: int8 in, int8 out (the plan's activation block 1 byte a value).
template <class Spec, Shape In, class P, class Backend>
struct int8_pool2d_layer {
  using kind = layer_kind::pool2d;  // the tools see the float pooling (spec::kind, pool_size, stride, pad)
  using spec = Spec;
  using Kind = typename Spec::kind;
  using T = float;
  using variable_type = float;
  using compute_type = float;
  using input_element = std::int8_t;
  using output_element = std::int8_t;
  static constexpr std::size_t H = dim_or<In, 0>(), W = dim_or<In, 1>(), C = dim_or<In, 2>();
  static constexpr kernels::conv_geometry geometry =
      window_geometry(H, W, C, C, Spec::pool_size, Spec::pool_size, Spec::stride, Spec::pad);
  using in_shape = In;
  using out_shape = shape<geometry.oh, geometry.ow, C>;
  static constexpr bool keeps_channels = true;
  static constexpr auto buffers = no_buffers;
  static constexpr std::size_t parameter_count = 0;
  static constexpr std::size_t state_count = 0;
  static constexpr std::size_t cache_per_sample = 0;
  static std::string name() { return Spec::name(); }

  static void init(layer_slot<T>, rng&) {}
  // x, y: the model's activation blocks, holding int8 values (input_element, output_element)
  static void forward(layer_slot<T>, const T* x, T* y, run_info r) {
    const auto* xi = reinterpret_cast<const std::int8_t*>(x);
    auto* yi = reinterpret_cast<std::int8_t*>(y);
    if constexpr (quantization::detail::is_max_pool_spec_v<typename Spec::float_spec>)
      kernels::cpu::int8::max_pool_s8<geometry, typename Backend::arch>(xi, yi, r.batch);
    else
      kernels::cpu::int8::average_pool_s8<geometry, typename Backend::arch>(xi, yi, r.batch);
  }
  static void backward(layer_slot<T>, const T*, const T*, T*, T*, run_info) {
    throw std::logic_error(Spec::name() + " on int8 values runs inference only (train the qat_t network of "
                                          "quantization/qat.hpp, then convert_qat)");
  }
};

// The bound int8 global average pooling: int8 [P, C] in, int8 [C] out.
template <class Spec, Shape In, class P, class Backend>
struct int8_global_average_pool_layer {
  using kind = layer_kind::global_average_pool;  // the tools see the float layer
  using spec = Spec;
  using T = float;
  using variable_type = float;
  using compute_type = float;
  using input_element = std::int8_t;
  using output_element = std::int8_t;
  static constexpr std::size_t C = last_dim_v<In>;
  static constexpr std::size_t Positions = In::size / C;
  using in_shape = In;
  using out_shape = shape<C>;
  static constexpr bool keeps_channels = true;
  static constexpr auto buffers = no_buffers;
  static constexpr std::size_t parameter_count = 0;
  static constexpr std::size_t state_count = 0;
  static constexpr std::size_t cache_per_sample = 0;
  static std::string name() { return Spec::name(); }

  static void init(layer_slot<T>, rng&) {}
  static void forward(layer_slot<T>, const T* x, T* y, run_info r) {
    kernels::cpu::int8::global_average_pool_s8<Positions, C, typename Backend::arch>(
        reinterpret_cast<const std::int8_t*>(x), reinterpret_cast<std::int8_t*>(y), r.batch);
  }
  static void backward(layer_slot<T>, const T*, const T*, T*, T*, run_info) {
    throw std::logic_error(Spec::name() + " on int8 values runs inference only (train the qat_t network of "
                                          "quantization/qat.hpp, then convert_qat)");
  }
};

namespace quantization::detail {
template <class Spec, Shape In>
struct reshaped {
  using type = typename Spec::template output<In>;
};
}  // namespace quantization::detail

// The bound int8 flatten / reshape / dropout (the identity at inference): the input's memory, int8 values.
template <class Spec, Shape In, class P, class Backend>
struct int8_reshape_layer {
  static constexpr bool is_dropout = quantization::detail::is_dropout_spec_v<typename Spec::float_spec>;
  using kind = std::conditional_t<is_dropout, layer_kind::dropout, layer_kind::reshape>;
  using spec = Spec;
  using T = float;
  using variable_type = float;
  using compute_type = float;
  using input_element = std::int8_t;
  using output_element = std::int8_t;
  using in_shape = In;
  using out_shape =
      typename std::conditional_t<is_dropout, std::type_identity<In>, quantization::detail::reshaped<Spec, In>>::type;
  static constexpr bool keeps_channels = [] {
    if constexpr (is_dropout)
      return true;
    else
      return Spec::keeps_channels;
  }();
  static constexpr auto buffers = no_buffers;
  static constexpr bool aliases_input = true;  // a model passes the input's memory on as the output
  static constexpr std::size_t parameter_count = 0;
  static constexpr std::size_t state_count = 0;
  static constexpr std::size_t cache_per_sample = 0;
  static std::string name() { return Spec::name(); }

  static void init(layer_slot<T>, rng&) {}
  static void forward(layer_slot<T>, const T* x, T* y, run_info r) { std::memcpy(y, x, r.batch * In::size); }
  static void backward(layer_slot<T>, const T*, const T*, T*, T*, run_info) {
    throw std::logic_error(Spec::name() + " on int8 values runs inference only");
  }
};

}  // namespace ctnn
