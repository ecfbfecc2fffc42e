// ctnn/layers/quantized_dense_block.hpp — quantized_dense_block<K, N, NNZ, R, C, Activation, Scheme>: an int8
// dense layer keeping R x C blocks (inference).
//
// The int8 form of sparse_dense_block<K, N, NNZ, R, C, Act> (a stripped block-pruned layer):
// quantized_dense's arithmetic and buffers (same names, same schemes: quantization::full_integer,
// quantization::dynamic_range), with the kernel stored block-sparse (backends/cpu/int8_block.hpp):
// the kept blocks' int8 weights in groups of 4 rows, "kernel" {G, 4 C} with G =
// int8::block::groups_for(K, N, NB, R, C), NB = NNZ / (R C), and the state buffer "index" (uint8:
// group starts [N / C + 1] (uint32), then the groups' inputs [G] (R % 4 == 0) or [4 G] (uint16)),
// just before the kernel. kernel_sum[j] is the sum of unit j's stored weights. Bytes: 4 C G + the
// index + 20 N + 32 (full integer), 4 C G + the index + 12 N (dynamic range): about NNZ + 20 N
// against 4 K N + 4 N for dense, compile-time constants (parameter_bytes, state_bytes). Made by
// quantize_dynamic / quantize_full_integer (quantization/convert.hpp) from a model holding
// sparse_dense_block layers (strip_pruning<layout::block<R, C>> of a model pruned with
// block<R, C>); load_weights checks a file's index (int8::block::validate) and kernel (weights in
// [-127, 127], kernel_sum); backward throws. Docs: docs/quantization.md ("Block-sparse int8").
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
#include <vector>

#include "../backends/cpu/int8.hpp"
#include "../backends/cpu/int8_block.hpp"
#include "../core/backend.hpp"
#include "../core/concepts.hpp"
#include "../core/plan.hpp"
#include "../core/shape.hpp"
#include "../kernels/sparse_index.hpp"
#include "../quantization/arithmetic.hpp"
#include "activation.hpp"
#include "quantized_dense.hpp"

namespace ctnn {

template <class Spec, Shape In, class P, class Backend>
struct quantized_dense_block_layer;

template <std::size_t K, std::size_t N, std::size_t NNZ, std::size_t R, std::size_t C, Activation Act = identity,
          class Scheme = quantization::full_integer, class IO = quantization::float_io>
struct quantized_dense_block {
  static_assert(R > 0 && C > 0 && K % R == 0 && N % C == 0,
                "quantized_dense_block: the R x C blocks must tile the K x N kernel");
  static_assert(NNZ % (R * C) == 0 && NNZ <= K * N,
                "quantized_dense_block: NNZ must be a whole number of R x C blocks, at most K N");
  static_assert(K <= 65536, "quantized_dense_block: K must be <= 65536 (16-bit inputs)");
  static_assert(quantization::is_scheme_v<Scheme>,
                "quantized_dense_block: the scheme is quantization::full_integer or quantization::dynamic_range (or "
                "either in quantization::reduce_range<...>)");
  static_assert(!quantization::is_full_integer_v<Scheme> || std::is_same_v<Act, identity> ||
                    std::is_same_v<Act, relu>,
                "quantized_dense_block: a full-integer layer fuses identity or relu only (use "
                "quantization::dynamic_range)");
  static_assert(quantization::is_int8_io_v<IO> &&
                    (quantization::is_full_integer_v<Scheme> || std::is_same_v<IO, quantization::float_io>),
                "quantized_dense_block: IO is quantization::int8_io<In8, Out8>, int8 only for a full-integer layer");
  using is_layer_spec = void;
  using activation = Act;
  using scheme = Scheme;
  using io = IO;
  static constexpr std::size_t inputs = K, units = N, nnz = NNZ, block_rows = R, block_cols = C;
  static std::string name() {
    std::string s = "quantized_dense_block<" + std::to_string(K) + ", " + std::to_string(N) + ", " +
                    std::to_string(NNZ) + ", " + std::to_string(R) + ", " + std::to_string(C);
    if (!std::is_same_v<Act, identity>) s += ", " + Act::name();
    return s + ", " + Scheme::name() + ">";
  }
  template <Shape In, std::size_t Pos>
  static constexpr bool check() {
    static_assert(In::rank == 1 && In::size == K,
                  "quantized_dense_block: the input must be flat with K features (the float layer's inputs)");
    return true;
  }
  template <Shape In, class P, class Backend>
  using bind = quantized_dense_block_layer<quantized_dense_block, In, precision::float32, Backend>;
};

namespace layer_kind {
struct quantized_dense_block {};
}  // namespace layer_kind

template <class Spec, Shape In, class P, class Backend>
struct quantized_dense_block_layer {
  using kind = layer_kind::quantized_dense_block;
  using spec = Spec;
  static constexpr std::size_t K = Spec::inputs, N = Spec::units, NNZ = Spec::nnz, R = Spec::block_rows,
                               C = Spec::block_cols, NB = NNZ / (R * C);
  static constexpr std::size_t G = kernels::cpu::int8::block::groups_for(K, N, NB, R, C);
  static constexpr std::size_t IPG = kernels::cpu::int8::block::inputs_per_group(R);
  using Act = typename Spec::activation;
  static constexpr bool full = quantization::is_full_integer_v<typename Spec::scheme>;
  using T = float;
  using variable_type = float;
  using compute_type = float;
  using in_shape = In;
  using out_shape = shape<N>;
  static std::string name() { return Spec::name(); }
  // The index: group starts, then the groups' inputs.
  using index = kernels::packed_index<kernels::field<std::uint32_t, N / C + 1>,
                                      kernels::field<std::uint16_t, std::max<std::size_t>(G * IPG, 1)>>;
  // quantized_dense's buffers, then the index, then the kernel {G, 4 C} (last: 1-byte elements)
  enum : std::size_t { b_bias, b_scale, b_sum, b_in_scale, b_in_zp, b_out_scale, b_out_zp, b_mult, b_shift, b_saturated };
  static constexpr std::size_t b_index = full ? 10 : 3, b_kernel = b_index + 1;
  static constexpr auto buffers = [] {
    const auto kernel = buffer::make(role::state, elem::i8, "kernel", {std::max<std::size_t>(G, 1), 4 * C}).aligned(64);
    const auto ix = buffer::make(role::state, elem::u8, "index", {index::bytes});
    if constexpr (full)
      return std::array<buffer, 12>{buffer::make(role::state, elem::i32, "bias", {N}),
                                    buffer::make(role::state, elem::f32, "kernel_scale", {N}),
                                    buffer::make(role::state, elem::i32, "kernel_sum", {N}),
                                    buffer::make(role::state, elem::f32, "input_scale", {1}),
                                    buffer::make(role::state, elem::i32, "input_zero_point", {1}),
                                    buffer::make(role::state, elem::f32, "output_scale", {1}),
                                    buffer::make(role::state, elem::i32, "output_zero_point", {1}),
                                    buffer::make(role::state, elem::i32, "output_multiplier", {N}),
                                    buffer::make(role::state, elem::i32, "output_shift", {N}),
                                    buffer::make(role::state, elem::u32, "saturated", {2, 2}),
                                    ix,
                                    kernel};
    else
      return std::array<buffer, 5>{buffer::make(role::state, elem::f32, "bias", {N}),
                                   buffer::make(role::state, elem::f32, "kernel_scale", {N}),
                                   buffer::make(role::state, elem::i32, "kernel_sum", {N}), ix, kernel};
  }();
  static constexpr std::size_t parameter_count = 0;
  static constexpr std::size_t state_count = count_of(buffers, role::state);
  static constexpr std::size_t cache_per_sample = 0;
  // the state block's bytes (the kernel's padding included) and where the kernel starts in it
  static constexpr std::size_t state_bytes = layer_role_bytes<precision::float32>(buffers, role::state);
  static constexpr std::size_t kernel_offset = buffer_offset<precision::float32>(buffers, b_kernel);
  static_assert(kernel_offset % 64 == 0);

  template <class V, std::size_t I>
  static V* at(std::byte* base) {
    return reinterpret_cast<V*>(base + buffer_offset<precision::float32>(buffers, I));
  }
  using dense_layer =
      quantized_dense_layer<quantized_dense<K, N, Act, typename Spec::scheme, typename Spec::io>, In, P, Backend>;
  using input_element = typename dense_layer::input_element;  // int8 next to another full-integer layer
  using output_element = typename dense_layer::output_element;
  using dense_views = typename dense_layer::views;
  struct views : dense_views {
    std::uint32_t* starts;
    std::uint16_t* inputs;
  };
  static views view(std::byte* base) {
    views v{{at<std::int8_t, b_kernel>(base), at<std::int32_t, b_sum>(base), at<float, b_scale>(base),
             base + buffer_offset<precision::float32>(buffers, b_bias)},
            index::template at<0>(at<std::byte, b_index>(base)),
            index::template at<1>(at<std::byte, b_index>(base))};
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

  // load_weights' checks (variable_ref::check_state, in buffer order): the index (the kernels can
  // run on it: int8::block::validate), then the kernel: every weight in [-127, 127], the groups past
  // the last block column's end 0, and each unit's kernel_sum the sum of its stored weights.
  static std::string check_state(std::string_view name, const std::byte* bytes, const std::byte* const* state,
                                 std::size_t n) {
    namespace bs = kernels::cpu::int8::block;
    if (name == "index" && n == b_index + 1)
      return bs::validate(index::template read<0>(bytes).data(), index::template read<1>(bytes).data(), K, N, R, C, G);
    if (name != "kernel" || n != buffers.size()) return "";
    const auto starts = index::template read<0>(state[b_index]);
    std::vector<std::int8_t> w(std::max<std::size_t>(G, 1) * 4 * C);
    std::memcpy(w.data(), bytes, w.size());
    std::vector<std::int32_t> sums(N);
    std::memcpy(sums.data(), state[b_sum], N * sizeof(std::int32_t));
    for (std::size_t i = 0; i < w.size(); ++i) {
      const std::size_t g = i / (4 * C), u = i / 4 % C;
      if (w[i] == -128)
        return "the weight of group " + std::to_string(g) + ", unit " + std::to_string(u) + " of its block column (index " +
               std::to_string(i) + ") is -128; symmetric per-channel int8 weights are in [-127, 127]";
      if (g >= starts[N / C] && w[i] != 0)
        return "group " + std::to_string(g) + " is past the " + std::to_string(starts[N / C]) +
               " groups used but holds a weight " + std::to_string(w[i]) + " (index " + std::to_string(i) + "), not 0";
    }
    std::vector<std::int32_t> want(N);
    bs::column_sums(N, C, w.data(), starts.data(), want.data());
    for (std::size_t j = 0; j < N; ++j)
      if (want[j] != sums[j])
        return "kernel_sum[" + std::to_string(j) + "] is " + std::to_string(sums[j]) + " but unit " +
               std::to_string(j) + "'s weights sum to " + std::to_string(want[j]);
    return "";
  }

  // A fresh layer: no blocks kept (every block column empty), unit scales, zero points 0 (the
  // converter fills it).
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

  // quantized_dense's int8 forward around the block-sparse product.
  static void forward(layer_slot<T> s, const T* x, T* y, run_info r) {
    const auto v = view(reinterpret_cast<std::byte*>(s.state));
    namespace i8 = kernels::cpu::int8;
    using Arch = typename Backend::arch;
    dense_layer::template forward_int8<Spec, K>(v, x, y, r.batch, [&](const std::int8_t* xq, auto e) -> std::size_t {
      if constexpr (std::is_same_v<decltype(e), i8::store_i32>) {
        i8::block::gemm<R, C, Arch>(r.batch, N, xq, K, v.kernel, v.inputs, v.starts, v.kernel_sum, e.c, e.ldc);
        return 0;
      } else {
        return i8::block::gemm_requantize<R, C, output_element, Arch>(r.batch, N, xq, K, v.kernel, v.inputs, v.starts,
                                                                      v.kernel_sum, e);
      }
    });
  }

  static void backward(layer_slot<T>, const T*, const T*, T*, T*, run_info) {
    throw std::logic_error(Spec::name() + ": an int8 layer runs inference only");
  }
};

}  // namespace ctnn
