// ctnn/onnx/common.hpp — what ONNX export and import share (namespace
// ctnn::onnx_detail, not a public API): a bound layer's kind (its member `kind`,
// a tag declared beside each layer), an activation's ONNX operator (its member
// onnx_op) and alpha, the pads of a window, and the recurrent layers' weights in ONNX's
// RNN / LSTM / GRU layout and back. Includes ONNX's generated
// classes (<onnx/onnx_pb.h>: link ctnn::onnx) and the layers that map to ONNX.
// Docs: docs/interop.md ("ONNX").
#pragma once
#include <onnx/onnx_pb.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <limits>
#include <map>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <vector>

#include "../core/errors.hpp"
#include "../core/plan.hpp"
#include "../core/shape.hpp"
#include "../io/atomic_file.hpp"
#include "../io/read_file.hpp"
#include "../layers/activation.hpp"
#include "../layers/average_pool2d.hpp"
#include "../layers/batch_norm.hpp"
#include "../layers/bidirectional.hpp"
#include "../layers/conv2d.hpp"
#include "../layers/dense.hpp"
#include "../layers/dropout.hpp"
#include "../layers/embedding.hpp"
#include "../layers/global_average_pool.hpp"
#include "../layers/gru.hpp"
#include "../layers/lstm.hpp"
#include "../layers/masking.hpp"
#include "../layers/graph_nodes.hpp"
#include "../layers/max_pool2d.hpp"
#include "../layers/padding.hpp"
#include "../layers/quantized_conv2d.hpp"
#include "../layers/quantized_dense.hpp"
#include "../layers/quantized_dense_block.hpp"
#include "../layers/reshape.hpp"
#include "../layers/simple_rnn.hpp"
#include "../layers/depthwise_conv2d.hpp"
#include "../layers/zero_padding2d.hpp"
#include "../layers/up_sampling2d.hpp"
#include "../layers/layer_normalization.hpp"
#include "../layers/conv1d.hpp"
#include "../layers/time_distributed.hpp"
#include "../quantization/arithmetic.hpp"
#include "../train/model.hpp"

namespace ctnn::onnx_detail {

// What a bound layer is: its member `kind`, a tag declared beside the layer
// (layers/dense.hpp: layer_kind::dense); void for a layer that declares none.
template <class L>
struct kind_of {
  using type = void;
};
template <class L>
  requires requires { typename L::kind; }
struct kind_of<L> {
  using type = typename L::kind;
};
template <class L, class Kind>
inline constexpr bool is_a = std::is_same_v<typename kind_of<L>::type, Kind>;

// A graph layer whose children are branches over one input (add, concatenate, residual).
template <class L>
inline constexpr bool is_parallel = false;
template <class L>
  requires(is_a<L, layer_kind::graph>)
inline constexpr bool is_parallel<L> = L::parallel;

// Layers whose ONNX operators see channels-first data (Transposes around them), graph layers holding one.
template <class L>
consteval bool spatial_layer();
template <class... C>
consteval bool any_spatial(std::tuple<C...>*) {
  return (false || ... || spatial_layer<C>());
}
template <class L>
consteval bool spatial_layer() {
  if constexpr (is_a<L, layer_kind::graph>) return any_spatial(static_cast<typename L::children*>(nullptr));
  else
    return is_a<L, layer_kind::conv2d> || is_a<L, layer_kind::quantized_conv2d> || is_a<L, layer_kind::pool2d> ||
           is_a<L, layer_kind::depthwise_conv2d> || is_a<L, layer_kind::separable_conv2d> ||
           is_a<L, layer_kind::conv1d> || is_a<L, layer_kind::zero_padding2d> || is_a<L, layer_kind::up_sampling2d> ||
           is_a<L, layer_kind::global_average_pool>;
}
template <class L>
inline constexpr bool is_spatial = spatial_layer<L>();

// The ONNX operator of an activation, its member onnx_op ("" for identity, nullptr
// for an activation that declares none), and its alpha (leaky_relu).
template <class A>
consteval const char* act_op() {
  if constexpr (requires { A::onnx_op; }) return A::onnx_op;
  else return nullptr;
}
// Whether an activation acts on each value alone (it has a rule<T>(): identity, relu, leaky_relu, sigmoid,
// tanh), so that it commutes with a Transpose; softmax does not.
template <class A>
inline constexpr bool elementwise_activation = requires { A::template rule<float>(); };
template <class A>
inline constexpr double act_alpha = 0.0;
template <class A>
  requires requires { A::alpha; }
inline constexpr double act_alpha<A> = double(A::alpha);

inline std::vector<std::int64_t> spatial_pads(const kernels::conv_geometry& g) {
  auto after = [](std::size_t in, std::size_t out, std::size_t k, std::size_t s, std::size_t before) {
    const std::int64_t need = std::int64_t((out - 1) * s + k) - std::int64_t(in) - std::int64_t(before);
    return std::max<std::int64_t>(need, 0);
  };
  return {std::int64_t(g.pt), std::int64_t(g.pl), after(g.h, g.oh, g.kh, g.stride, g.pt),
          after(g.w, g.ow, g.kw, g.stride, g.pl)};
}

// Recurrent layers (a bound simple_rnn, lstm or gru): ONNX's operator, and its gates against Keras'.
template <class L>
inline constexpr bool is_recurrent =
    is_a<L, layer_kind::simple_rnn> || is_a<L, layer_kind::lstm> || is_a<L, layer_kind::gru>;
template <class L>
consteval const char* rnn_op() {
  if constexpr (is_a<L, layer_kind::lstm>) return "LSTM";
  else if constexpr (is_a<L, layer_kind::gru>) return "GRU";
  else return "RNN";
}
// Keras' gate of each ONNX gate: LSTM i o f c against Keras' i f c o; GRU z r h and RNN's one gate in the same order.
template <class L>
consteval std::array<std::size_t, L::cell::gates> keras_gate_of() {
  if constexpr (is_a<L, layer_kind::lstm>) return {0, 3, 1, 2};
  else if constexpr (is_a<L, layer_kind::gru>) return {0, 1, 2};
  else return {0};
}
// ONNX's activations of one direction: RNN's f (simple_rnn's activation; nullptr when it has no ONNX
// operator or, the identity, none ONNX's RNN takes), LSTM's f g h, GRU's f g (the defaults).
template <class L>
consteval std::array<const char*, is_a<L, layer_kind::lstm> ? 3 : is_a<L, layer_kind::gru> ? 2 : 1> rnn_activations() {
  if constexpr (is_a<L, layer_kind::lstm>) return {"Sigmoid", "Tanh", "Tanh"};
  else if constexpr (is_a<L, layer_kind::gru>) return {"Sigmoid", "Tanh"};
  else {
    constexpr const char* op = act_op<typename L::spec::activation>();
    if constexpr (op == nullptr) return {nullptr};
    else if constexpr (std::string_view(op).empty()) return {nullptr};
    else return {op};
  }
}

// One direction's W [G, F], R [G, U] and B [2G] (Wb then Rb), ONNX's gate order, from the layer's
// kernel [F, G], recurrent_kernel [U, G] and bias ([G]: Wb, Rb = 0, as gru's reset_after = false; gru's
// [2, G]: Wb and Rb), Keras' order.
struct rnn_weights {
  std::vector<float> w, r, b;
};
template <class L>
rnn_weights to_onnx_gates(const std::vector<float>& kernel, const std::vector<float>& recurrent,
                          const std::vector<float>& bias) {
  constexpr std::size_t F = L::F, U = L::U, G = L::G;
  constexpr auto kg = keras_gate_of<L>();
  rnn_weights o{std::vector<float>(G * F), std::vector<float>(G * U), std::vector<float>(2 * G, 0.f)};
  for (std::size_t g = 0; g < kg.size(); ++g)
    for (std::size_t j = 0; j < U; ++j) {
      const std::size_t row = g * U + j, col = kg[g] * U + j;  // ONNX's row, Keras' column
      for (std::size_t f = 0; f < F; ++f) o.w[row * F + f] = kernel[f * G + col];
      for (std::size_t k = 0; k < U; ++k) o.r[row * U + k] = recurrent[k * G + col];
      o.b[row] = bias[col];
      if constexpr (L::sep_bias) o.b[G + row] = bias[G + col];
    }
  return o;
}
// The inverse: the layer's kernel, recurrent_kernel and bias from one direction's W, R, B (B null: zeros;
// simple_rnn, lstm and gru with reset_after = false add Rb to Wb (ONNX's linear_before_reset = 0 adds Rbh
// outside the product too), gru keeps them as its two bias rows).
template <class L>
void from_onnx_gates(const float* w, const float* r, const float* b, std::vector<float>& kernel,
                     std::vector<float>& recurrent, std::vector<float>& bias) {
  constexpr std::size_t F = L::F, U = L::U, G = L::G;
  constexpr auto kg = keras_gate_of<L>();
  kernel.assign(F * G, 0.f);
  recurrent.assign(U * G, 0.f);
  bias.assign(L::bias_count, 0.f);
  for (std::size_t g = 0; g < kg.size(); ++g)
    for (std::size_t j = 0; j < U; ++j) {
      const std::size_t row = g * U + j, col = kg[g] * U + j;
      for (std::size_t f = 0; f < F; ++f) kernel[f * G + col] = w[row * F + f];
      for (std::size_t k = 0; k < U; ++k) recurrent[k * G + col] = r[row * U + k];
      if (!b) continue;
      if constexpr (L::sep_bias) {
        bias[col] = b[row];
        bias[G + col] = b[G + row];
      } else {
        bias[col] = b[G + row] == 0.f ? b[row] : b[row] + b[G + row];  // (Wb's bits kept when Rb is 0)
      }
    }
}

}  // namespace ctnn::onnx_detail
