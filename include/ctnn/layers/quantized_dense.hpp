// ctnn/layers/quantized_dense.hpp — quantized_dense<K, N, Activation, Scheme, IO>: an int8 dense layer (inference).
//
// Computes y ~ activation(x W + b) for a flat float input of K features with W stored as int8
// per output channel (symmetric, zero point 0, [-127, 127], scale kernel_scale[j]; Scheme
// quantization::reduce_range<S>: [-64, 64], S's rules otherwise, the avx2_u8 product); kernel:
// W [N, K] packed by kernels::cpu::int8::pack (16-column panels of 4-k groups, K padded to Kp,
// a multiple of 4; N Kp bytes, declared {N, Kp}). Scheme (quantization/arithmetic.hpp, docs/quantization.md):
//   quantization::full_integer  input quantized with the calibrated (input_scale, input_zero_point),
//     int32 bias (scale input_scale * kernel_scale[j]), the int32 sum requantized to int8 with
//     TFLite's fixed-point multiplier (input_scale kernel_scale[j] / output_scale) and rounding,
//     the activation (identity or relu) as the int8 clamp, then dequantized (exact between two
//     such layers: the next one's input parameters are this one's output ones). IO
//     (quantization::int8_io<In8, Out8>, default float_io) keeps the tensor int8 between two
//     adjacent full-integer layers, as quantized_t makes them: In8 reads the previous layer's
//     int8 values (no quantize step), Out8 writes the clamped int8 values (no dequantize step);
//     the outputs are the same bit for bit (quantize(dequantize(q)) == q), the activation blocks
//     of the memory plan 1 byte a value (input_element, output_element).
//   quantization::dynamic_range  each input row quantized symmetrically on the fly (scale
//     max|x| / 127, as TFLite's hybrid kernels' default), float bias, float output, any
//     element-wise activation after it.
// The buffers are state (saved, never trained): bias, scales, zero points, kernel_sum (the
// kernel's row sums, for the VNNI offset trick), (full integer) the input and output
// parameters and the precomputed requantization multipliers and shifts, (full integer) the
// saturation counts, then the int8 kernel: Kp N + 20 N + 32 bytes of values (full integer), Kp N +
// 12 N (dynamic range), against 4 K N + 4 N for dense. In the state block (64-byte aligned) the
// kernel starts on a 64-byte boundary (buffer::aligned: kernel_offset, up to 60 bytes of padding
// before it, never in a file): the int8 products' panel loads do not split cache lines. `saturated` ({2, 2} uint32: inputs, outputs)
// counts, over every forward pass since it was zeroed, the input values the quantization clamped
// to [-128, 127] (beyond the calibrated range) and the outputs the requantization clamped (above
// 127; below -128 without a relu): quantization::saturation(m) reads them. Made by
// quantize_dynamic / quantize_full_integer (quantization/convert.hpp) or convert_qat
// (quantization/qat.hpp: training happens there); backward throws. Products: backends/cpu/int8.hpp.
#pragma once
#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "../backends/cpu/int8.hpp"
#include "../core/backend.hpp"
#include "../core/concepts.hpp"
#include "../core/plan.hpp"
#include "../core/shape.hpp"
#include "../quantization/arithmetic.hpp"
#include "activation.hpp"

namespace ctnn {

namespace quantization {
struct full_integer {
  static constexpr std::int32_t weight_max = 127;  // the weights: symmetric [-127, 127] (TFLite's)
  static std::string name() { return "full_integer"; }
};
struct dynamic_range {
  static constexpr std::int32_t weight_max = 127;
  static std::string name() { return "dynamic_range"; }
};
// Scheme (full_integer or dynamic_range) with 7-bit weights: symmetric per channel in [-64, 64],
// scale max|W[:, j]| / 64, as ONNX Runtime's quantize_static / quantize_dynamic with
// reduce_range=True quantize weights ("for U8S8 on AVX2 and AVX-512 non-VNNI machines"; its
// reduced INT8 range is (-64, 64)); the activations keep their 8-bit rules, as there. On the avx2
// int8 path the product then takes vpmaddubsw on the unsigned activations directly (int8.hpp's
// avx2_u8: 2 x 255 x 64 fits int16), at the cost of half the weight levels. Docs: docs/quantization.md.
template <class Scheme>
struct reduce_range {
  static_assert(std::is_same_v<Scheme, full_integer> || std::is_same_v<Scheme, dynamic_range>,
                "reduce_range: the scheme is quantization::full_integer or quantization::dynamic_range");
  using base = Scheme;
  static constexpr std::int32_t weight_max = kernels::cpu::int8::reduced_weight_max;
  static std::string name() { return "reduce_range<" + Scheme::name() + ">"; }
};
// The full-range scheme itself: quantize_dynamic<full_range> is quantize_dynamic (the default).
template <class Scheme>
using full_range = Scheme;
namespace detail {
template <class S>
struct base_scheme {
  using type = S;
};
template <class S>
struct base_scheme<reduce_range<S>> {
  using type = S;
};
}  // namespace detail
// full_integer or dynamic_range, with or without reduce_range
template <class S>
using base_scheme_t = typename detail::base_scheme<S>::type;
template <class S>
inline constexpr bool is_scheme_v =
    std::is_same_v<base_scheme_t<S>, full_integer> || std::is_same_v<base_scheme_t<S>, dynamic_range>;
template <class S>
inline constexpr bool is_full_integer_v = std::is_same_v<base_scheme_t<S>, full_integer>;
// The int8 kernels' weight range for scheme S.
template <class S>
inline constexpr kernels::cpu::int8::weight_range weight_range_v =
    S::weight_max <= kernels::cpu::int8::reduced_weight_max ? kernels::cpu::int8::weight_range::reduced
                                                            : kernels::cpu::int8::weight_range::full;
// The element types around a full-integer layer: int8_io<In8, Out8> takes int8 input values
// (In8: the previous layer's int8 output, quantized with this layer's input parameters; no
// quantize step) and writes int8 output values (Out8: for the next full-integer layer, whose
// input parameters are this layer's output ones; no dequantize step). float_io (the default):
// float in, float out. quantized_t sets it between adjacent full-integer layers; the name, and
// so the weights file, do not change. Docs: docs/quantization.md ("Int8 between layers").
template <bool In8, bool Out8>
struct int8_io {
  static constexpr bool input = In8, output = Out8;
};
using float_io = int8_io<false, false>;
template <class IO>
inline constexpr bool is_int8_io_v = false;
template <bool In8, bool Out8>
inline constexpr bool is_int8_io_v<int8_io<In8, Out8>> = true;
}  // namespace quantization

template <class Spec, Shape In, class P, class Backend>
struct quantized_dense_layer;

template <std::size_t K, std::size_t N, Activation Act = identity, class Scheme = quantization::full_integer,
          class IO = quantization::float_io>
struct quantized_dense {
  static_assert(K > 0 && N > 0, "quantized_dense: K and N must be > 0");
  static_assert(quantization::is_scheme_v<Scheme>,
                "quantized_dense: the scheme is quantization::full_integer or quantization::dynamic_range (or "
                "either in quantization::reduce_range<...>)");
  static_assert(!quantization::is_full_integer_v<Scheme> || std::is_same_v<Act, identity> ||
                    std::is_same_v<Act, relu>,
                "quantized_dense: a full-integer layer fuses identity or relu only (other activations have no int8 "
                "kernel yet: use quantization::dynamic_range)");
  static_assert(quantization::is_int8_io_v<IO> &&
                    (quantization::is_full_integer_v<Scheme> || std::is_same_v<IO, quantization::float_io>),
                "quantized_dense: IO is quantization::int8_io<In8, Out8>, int8 only for a full-integer layer");
  using is_layer_spec = void;
  using activation = Act;
  using scheme = Scheme;
  using io = IO;
  static constexpr std::size_t inputs = K, units = N;
  static std::string name() {
    std::string s = "quantized_dense<" + std::to_string(K) + ", " + std::to_string(N);
    if (!std::is_same_v<Act, identity>) s += ", " + Act::name();
    return s + ", " + Scheme::name() + ">";
  }
  template <Shape In, std::size_t Pos>
  static constexpr bool check() {
    static_assert(In::rank == 1 && In::size == K,
                  "quantized_dense: the input must be flat with K features (the float layer's inputs)");
    return true;
  }
  template <Shape In, class P, class Backend>
  using bind = quantized_dense_layer<quantized_dense, In, precision::float32, Backend>;
};

namespace layer_kind {
struct quantized_dense {};
}  // namespace layer_kind

template <class Spec, Shape In, class P, class Backend>
struct quantized_dense_layer {
  using kind = layer_kind::quantized_dense;
  using spec = Spec;
  static constexpr std::size_t K = Spec::inputs, N = Spec::units;
  static constexpr std::size_t Kp = kernels::cpu::int8::padded_k(K);  // packed: int8.hpp's panels
  using Act = typename Spec::activation;
  static constexpr bool full = quantization::is_full_integer_v<typename Spec::scheme>;
  // the weights' range (reduce_range: [-64, 64]) and so the int8 product's path
  static constexpr std::int32_t weight_max = Spec::scheme::weight_max;
  static constexpr auto weights = quantization::weight_range_v<typename Spec::scheme>;
  using T = float;
  using variable_type = float;
  using compute_type = float;
  // the activations' element types (the memory plan's, core/sequential.hpp): int8 next to another
  // full-integer layer (Spec::io), else float
  using input_element = std::conditional_t<Spec::io::input, std::int8_t, float>;
  using output_element = std::conditional_t<Spec::io::output, std::int8_t, float>;
  using in_shape = In;
  using out_shape = shape<N>;
  static std::string name() { return Spec::name(); }
  // indices into buffers
  // the int8 kernel last (the files' order), on a 64-byte boundary of the state block (the plan pads
  // before it); the 4-byte buffers before it stay 4-byte aligned whatever K N is
  enum : std::size_t { b_bias, b_scale, b_sum, b_in_scale, b_in_zp, b_out_scale, b_out_zp, b_mult, b_shift, b_saturated };
  static constexpr std::size_t b_kernel = full ? 10 : 3;
  static constexpr auto buffers = [] {
    if constexpr (full)
      return std::array<buffer, 11>{buffer::make(role::state, elem::i32, "bias", {N}),
                                   buffer::make(role::state, elem::f32, "kernel_scale", {N}),
                                   buffer::make(role::state, elem::i32, "kernel_sum", {N}),
                                   buffer::make(role::state, elem::f32, "input_scale", {1}),
                                   buffer::make(role::state, elem::i32, "input_zero_point", {1}),
                                   buffer::make(role::state, elem::f32, "output_scale", {1}),
                                   buffer::make(role::state, elem::i32, "output_zero_point", {1}),
                                   buffer::make(role::state, elem::i32, "output_multiplier", {N}),
                                   buffer::make(role::state, elem::i32, "output_shift", {N}),
                                   buffer::make(role::state, elem::u32, "saturated", {2, 2}),
                                   buffer::make(role::state, elem::i8, "kernel", {N, Kp}).aligned(64)};
    else
      return std::array<buffer, 4>{buffer::make(role::state, elem::f32, "bias", {N}),
                                   buffer::make(role::state, elem::f32, "kernel_scale", {N}),
                                   buffer::make(role::state, elem::i32, "kernel_sum", {N}),
                                   buffer::make(role::state, elem::i8, "kernel", {N, Kp}).aligned(64)};
  }();
  static constexpr std::size_t parameter_count = 0;
  static constexpr std::size_t state_count = count_of(buffers, role::state);
  static constexpr std::size_t cache_per_sample = 0;
  // the state block's bytes (the kernel's padding included) and where the kernel starts in it
  static constexpr std::size_t state_bytes = layer_role_bytes<precision::float32>(buffers, role::state);
  static constexpr std::size_t kernel_offset = buffer_offset<precision::float32>(buffers, b_kernel);
  static_assert(kernel_offset % 64 == 0 && state_bytes == kernel_offset + N * Kp);

  // Typed views of the state block (s.state: the layer's state region, 64-byte aligned).
  template <class V, std::size_t I>
  static V* at(std::byte* base) {
    return reinterpret_cast<V*>(base + buffer_offset<precision::float32>(buffers, I));
  }
  struct views {
    std::int8_t* kernel;
    std::int32_t* kernel_sum;
    float* kernel_scale;
    void* bias;  // int32 (full integer) or float (dynamic range)
    float* in_scale = nullptr;
    std::int32_t* in_zp = nullptr;
    float* out_scale = nullptr;
    std::int32_t* out_zp = nullptr;
    std::int32_t* mult = nullptr;   // quantize_multiplier(in_scale kernel_scale[j] / out_scale): q, then shift
    std::int32_t* shift = nullptr;
    std::uint32_t* saturated = nullptr;  // full integer: {inputs, outputs} clamped, each a 64-bit count as (low, high) words
  };
  static views view(std::byte* base) {
    views v{at<std::int8_t, b_kernel>(base), at<std::int32_t, b_sum>(base), at<float, b_scale>(base),
            base + buffer_offset<precision::float32>(buffers, b_bias)};
    if constexpr (full) {
      v.in_scale = at<float, b_in_scale>(base);
      v.in_zp = at<std::int32_t, b_in_zp>(base);
      v.out_scale = at<float, b_out_scale>(base);
      v.out_zp = at<std::int32_t, b_out_zp>(base);
      v.mult = at<std::int32_t, b_mult>(base);
      v.shift = at<std::int32_t, b_shift>(base);
      v.saturated = at<std::uint32_t, b_saturated>(base);
    }
    return v;
  }
  // Adds n to the 64-bit count held as (low, high) 32-bit words at c (a file's words, any values).
  static void count(std::uint32_t* c, std::size_t n) {
    const std::uint64_t t = (std::uint64_t(c[1]) << 32 | c[0]) + std::uint64_t(n);
    c[0] = std::uint32_t(t);
    c[1] = std::uint32_t(t >> 32);
  }

  // load_weights' check of a file's kernel (variable_ref::check_state; the kernel comes last, after
  // kernel_sum): every weight in [-127, 127] (symmetric per channel: -128 would break the AVX2
  // kernel's sign trick; reduce_range: [-64, 64], beyond which avx2_u8's int16 pairs saturate), the
  // packing's padding 0, and each unit's kernel_sum equal to the sum of its weights (the offset
  // trick and the zero-point term use it). `column`: "unit" or "filter".
  static std::string check_kernel(const char* column, std::string_view name, const std::byte* bytes,
                                  const std::byte* const* state, std::size_t n) {
    if (name != "kernel" || n != buffers.size()) return "";
    namespace i8 = kernels::cpu::int8;
    std::vector<std::int8_t> w(i8::packed_bytes(K, N));
    std::memcpy(w.data(), bytes, w.size());
    std::vector<std::int32_t> sums(N);
    std::memcpy(sums.data(), state[b_sum], N * sizeof(std::int32_t));
    for (std::size_t j = 0; j < N; ++j) {
      std::int64_t sum = 0;
      for (std::size_t k = 0; k < Kp; ++k) {
        const std::size_t at = i8::packed_index(K, N, j, k);
        const std::int32_t q = w[at];
        auto place = [&] {
          return std::string(column) + " " + std::to_string(j) + ", input " + std::to_string(k) + " (packed index " +
                 std::to_string(at) + ")";
        };
        if (k >= K && q != 0) return "the padding byte of " + place() + " is " + std::to_string(q) + ", not 0";
        if (q < -weight_max || q > weight_max)
          return "the weight of " + place() + " is " + std::to_string(q) +
                 (weight_max == quantization::wmax ? "; symmetric per-channel int8 weights are in [-127, 127]"
                                                   : "; reduce_range weights are in [-64, 64]");
        sum += q;
      }
      if (sum != sums[j])
        return "kernel_sum[" + std::to_string(j) + "] is " + std::to_string(sums[j]) + " but " + column + " " +
               std::to_string(j) + "'s weights sum to " + std::to_string(sum);
    }
    return "";
  }
  static std::string check_state(std::string_view name, const std::byte* bytes, const std::byte* const* state,
                                 std::size_t n) {
    return check_kernel("unit", name, bytes, state, n);
  }

  // A fresh layer: zero weights and bias, unit scales, zero points 0 (the converter fills it).
  static void init(layer_slot<T> s, rng&) {
    auto* base = reinterpret_cast<std::byte*>(s.state);
    std::memset(base, 0, state_bytes);
    auto v = view(base);
    std::fill(v.kernel_scale, v.kernel_scale + N, 1.0f);
    if constexpr (full) {
      *v.in_scale = 1.0f;
      *v.out_scale = 1.0f;
    }
  }

  static void forward(layer_slot<T> s, const T* x, T* y, run_info r) {
    const auto v = view(reinterpret_cast<std::byte*>(s.state));
    namespace i8 = kernels::cpu::int8;
    using Arch = typename Backend::arch;
    // (xq: the int8 rows, or, where the product is u8 x s8, the bytes + 128: forward_int8)
    forward_int8<Spec, Kp>(v, x, y, r.batch, [&](const auto* xq, auto e) -> std::size_t {
      if constexpr (std::is_same_v<decltype(xq), const std::uint8_t*>) {
        return i8::gemm_u8_requantize<output_element, Arch, weights>(r.batch, N, K, xq, Kp, v.kernel, v.kernel_sum, e);
      } else if constexpr (std::is_same_v<decltype(e), i8::store_i32>) {
        i8::gemm_s8<Arch, weights>(r.batch, N, K, xq, Kp, v.kernel, v.kernel_sum, e.c, e.ldc);
        return 0;
      } else {
        return i8::gemm_s8_requantize<output_element, Arch, weights>(r.batch, N, K, xq, Kp, v.kernel, v.kernel_sum, e);
      }
    });
  }

  // The int8 forward of m rows around product(xq, e), the product xq W ([m, N] int32 sums) stored
  // by the epilogue e: x quantized into rows of Ks (>= K; the padding zeroed), then (full integer)
  // the sums requantized in the product's stores (e: int8::requant_for's; product returns the
  // saturated count) or (dynamic range: e an int8::store_i32 into a buffer) rescaled per row and
  // unit, with Act. Where product also takes the bytes + 128 (a const std::uint8_t*: the
  // full-integer product's u8 operand) and the path's product is u8 x s8 (int8::takes_u8), a float
  // input is quantized straight to them (int8::quantize_u8: no second pass to flip the bytes).
  // Between full-integer layers (Spec::io) x holds int8 values already (used in place when Ks ==
  // K, else copied into the padded rows) and y receives int8 values (the requantized, clamped
  // ones, not dequantized): x and y are the model's activation blocks, sized by input_element
  // and output_element. quantized_dense_block runs it with its block-sparse product; S names the
  // layer in errors.
  template <class S, std::size_t Ks, class Views, class Product>
  static void forward_int8(const Views& v, const T* x, T* y, std::size_t m, Product&& product) {
    using Arch = typename Backend::arch;
    namespace i8 = kernels::cpu::int8;
    constexpr bool in8 = Spec::io::input;
    thread_local std::vector<std::int8_t> xq;
    thread_local std::vector<std::int32_t> acc;
    const bool own = !in8 || Ks != K;  // the rows are built here (not the int8 input in place)
    if (own) xq.resize(m * Ks);
    if constexpr (Ks != K)
      for (std::size_t i = 0; i < m; ++i) std::fill(xq.begin() + std::ptrdiff_t(i * Ks + K), xq.begin() + std::ptrdiff_t((i + 1) * Ks), 0);
    if constexpr (full) {
      const float in_scale = *v.in_scale, out_scale = *v.out_scale;
      const std::int32_t in_zp = *v.in_zp, out_zp = *v.out_zp;
      std::size_t clamped = 0;
      const std::int8_t* a = xq.data();
      // x's m rows quantized into rows of Ks bytes from out: the int8 values (quantize) or, B
      // std::uint8_t, the values + 128 (quantize_u8); the count the clamp changed
      [[maybe_unused]] const auto quantize_rows = [&]<class B>(B* out) {
        const auto run = [&](const T* from, std::size_t n, B* to) {
          if constexpr (std::is_same_v<B, std::uint8_t>)
            return i8::quantize_u8<Arch>(from, n, in_scale, in_zp, quantization::qmin, quantization::qmax, to);
          else
            return i8::quantize<Arch>(from, n, in_scale, in_zp, quantization::qmin, quantization::qmax, to);
        };
        if constexpr (Ks == K) return run(x, m * K, out);
        std::size_t n = 0;
        for (std::size_t i = 0; i < m; ++i) n += run(x + i * K, K, out + i * Ks);
        return n;
      };
      const auto requant = [&] {
        return i8::requant_for(N, static_cast<const std::int32_t*>(v.bias), in_zp, v.kernel_sum, v.mult, v.shift, out_zp,
                               std::is_same_v<Act, relu>, out_scale, reinterpret_cast<output_element*>(y), &S::name,
                               "unit");
      };
      if constexpr (!in8 && std::is_invocable_v<Product&, const std::uint8_t*, decltype(requant())>) {
        if (i8::takes_u8<Arch, weights>()) {
          auto* u = reinterpret_cast<std::uint8_t*>(xq.data());
          clamped = quantize_rows(u);
          const std::size_t out_clamped = product(static_cast<const std::uint8_t*>(u), requant());
          count(v.saturated, clamped);
          count(v.saturated + 2, out_clamped);
          return;
        }
      }
      if constexpr (in8) {
        // already quantized (by the previous layer's requantization: nothing to clamp here)
        const auto* x8 = reinterpret_cast<const std::int8_t*>(x);
        if constexpr (Ks == K)
          a = x8;
        else
          for (std::size_t i = 0; i < m; ++i) std::memcpy(xq.data() + i * Ks, x8 + i * K, K);
      } else {
        clamped = quantize_rows(xq.data());
      }
      const std::size_t out_clamped = product(a, requant());
      count(v.saturated, clamped);
      count(v.saturated + 2, out_clamped);
    } else {
      thread_local std::vector<float> row_scale;
      row_scale.resize(m);
      for (std::size_t i = 0; i < m; ++i) {
        const float amax = i8::abs_max<Arch>(x + i * K, K);
        row_scale[i] = amax / 127.0f;
        i8::quantize<Arch>(x + i * K, K, amax > 0 ? row_scale[i] : 1.0f, 0, -127, 127, xq.data() + i * Ks);
      }
      acc.resize(m * N);
      product(xq.data(), i8::store_i32{acc.data(), N});
      const auto* bias = static_cast<const float*>(v.bias);
      for (std::size_t i = 0; i < m; ++i)
        for (std::size_t j = 0; j < N; ++j)
          y[i * N + j] = float(acc[i * N + j]) * (row_scale[i] * v.kernel_scale[j]) + bias[j];
      Act::template forward<Backend>(y, m, N);
    }
  }

  static void backward(layer_slot<T>, const T*, const T*, T*, T*, run_info) {
    throw std::logic_error(Spec::name() + ": an int8 layer runs inference only (train the qat_t network of "
                                          "quantization/qat.hpp, then convert_qat)");
  }
};

}  // namespace ctnn
