// ctnn/onnx/export.hpp — export_onnx(m, path, opset = 17): a model as an ONNX file.
//
// Writes the network and its current variables as an ONNX model (IR 8): graph
// input "input" of shape (batch, input shape...), output "output" of shape
// (batch, output shape...), in ctnn's channels-last layout (spatial layers wrapped
// in Transposes). Each layer maps by its kind: dense -> Gemm, conv2d -> Conv,
// depthwise_conv2d -> Conv (group = C), separable_conv2d -> Conv (group = C) then a 1x1 Conv,
// conv1d -> Conv (1-D), layer_normalization -> LayerNormalization (opset 17, axis -1),
// zero_padding2d -> Pad, up_sampling2d -> Resize (nearest, asymmetric, floor),
// pools -> MaxPool / AveragePool (count_include_pad = 0), batch_normalization ->
// BatchNormalization (moving statistics), dropout -> nothing, flatten/reshape ->
// Reshape, global_average_pool -> ReduceMean, an activation -> its onnx_op, a graph
// layer -> its branches' nodes then Add (add, residual) or Concat (a dag: its nodes in order, each
// from the tensors of the nodes it reads, joins as Add or Concat), simple_rnn, lstm,
// gru -> RNN, LSTM, GRU (ONNX's gate order and time-major layout, Transposes around;
// go_backwards -> direction "reverse", bidirectional -> "bidirectional" and its merge),
// quantized_dense, quantized_dense_block, quantized_conv2d -> QDQ form (int8 kernel and int32 bias initializers,
// DequantizeLinear per channel, QuantizeLinear/DequantizeLinear pairs, Gemm or Conv); a max,
// average or global average pooling on int8 values (quantization::int8_pass) -> MaxPool,
// AveragePool or ReduceMean then a Q/DQ pair with the producer's scale and zero point. A
// layer or activation without a mapping (masking, embedding, time_distributed among them)
// is a compile error naming its position ("export_onnx: this layer or activation has no
// ONNX mapping"). Variables must
// be float; a quantized scale that is not positive and finite, or a zero point
// outside int8, throws std::invalid_argument naming the layer. The file is
// written to a temporary and renamed (io/atomic_file.hpp).
// Docs: docs/interop.md ("ONNX").
#pragma once
#include <cstddef>
#include <initializer_list>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "common.hpp"

namespace ctnn {

namespace diag {
template <class Layer, bool Ok>
struct no_onnx_mapping {
  static_assert(Ok, "export_onnx: this layer or activation has no ONNX mapping (see ctnn/onnx/export.hpp)");
  static constexpr bool value = true;
};
}  // namespace diag

namespace onnx_detail {

template <class L>
consteval bool exportable();
template <class... C>
consteval bool all_exportable(std::tuple<C...>*) {  // a graph layer's children: no quantized layer inside one yet
  return (true && ... &&
          (exportable<C>() && !is_a<C, layer_kind::quantized_dense> && !is_a<C, layer_kind::quantized_conv2d> &&
           !is_a<C, layer_kind::quantized_dense_block>));
}
template <class L>
consteval bool exportable() {
  if constexpr (is_a<L, layer_kind::dag_join>) return true;  // a dag's join: Add or Concat
  else if constexpr (is_a<L, layer_kind::graph>) return all_exportable(static_cast<typename L::children*>(nullptr));
  else if constexpr (is_a<L, layer_kind::dense> || is_a<L, layer_kind::conv2d> || is_a<L, layer_kind::quantized_dense> ||
                     is_a<L, layer_kind::quantized_dense_block> || is_a<L, layer_kind::quantized_conv2d> || is_a<L, layer_kind::depthwise_conv2d> ||
                     is_a<L, layer_kind::separable_conv2d> || is_a<L, layer_kind::conv1d>)
    return act_op<typename L::Act>() != nullptr;
  else if constexpr (is_a<L, layer_kind::activation>) return act_op<typename L::spec>() != nullptr;
  else if constexpr (is_recurrent<L>) return rnn_activations<L>()[0] != nullptr;
  else if constexpr (is_a<L, layer_kind::bidirectional>) return rnn_activations<typename L::Fwd>()[0] != nullptr;
  else
    return is_a<L, layer_kind::pool2d> || is_a<L, layer_kind::batch_norm> || is_a<L, layer_kind::dropout> ||
           is_a<L, layer_kind::reshape> || is_a<L, layer_kind::global_average_pool> ||
           is_a<L, layer_kind::layer_normalization> || is_a<L, layer_kind::zero_padding2d> ||
           is_a<L, layer_kind::up_sampling2d>;
}

// Graph input/output and intermediate names, initializers and nodes.
struct builder {
  onnx::GraphProto* g;
  std::size_t counter = 0;
  std::string cur = "input";

  std::string fresh(const std::string& base) { return base + "_" + std::to_string(counter++); }

  std::string init_floats(const std::string& name, const std::vector<std::int64_t>& dims, const std::vector<float>& v) {
    auto* t = g->add_initializer();
    t->set_name(name);
    t->set_data_type(onnx::TensorProto::FLOAT);
    for (auto d : dims) t->add_dims(d);
    t->set_raw_data(std::string(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(float)));
    return name;
  }
  // An initializer of another element type (INT8, INT32) from its bytes; dims {} is a scalar.
  std::string init_raw(const std::string& name, const std::vector<std::int64_t>& dims, int type, const void* p,
                       std::size_t bytes) {
    auto* t = g->add_initializer();
    t->set_name(name);
    t->set_data_type(type);
    for (auto d : dims) t->add_dims(d);
    t->set_raw_data(std::string(static_cast<const char*>(p), bytes));
    return name;
  }
  std::string init_ints(const std::string& name, const std::vector<std::int64_t>& v) {
    auto* t = g->add_initializer();
    t->set_name(name);
    t->set_data_type(onnx::TensorProto::INT64);
    t->add_dims(std::int64_t(v.size()));
    for (auto x : v) t->add_int64_data(x);
    return name;
  }
  onnx::NodeProto* node(const std::string& op, std::vector<std::string> inputs, const std::string& base) {
    auto* n = g->add_node();
    n->set_op_type(op);
    n->set_name(fresh(base));
    for (auto& i : inputs) n->add_input(i);
    cur = n->name() + "_out";
    n->add_output(cur);
    return n;
  }
  static void attr_int(onnx::NodeProto* n, const char* name, std::int64_t v) {
    auto* a = n->add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::INT);
    a->set_i(v);
  }
  static void attr_float(onnx::NodeProto* n, const char* name, float v) {
    auto* a = n->add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::FLOAT);
    a->set_f(v);
  }
  static void attr_string(onnx::NodeProto* n, const char* name, const std::string& v) {
    auto* a = n->add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::STRING);
    a->set_s(v);
  }
  static void attr_strings(onnx::NodeProto* n, const char* name, const std::vector<std::string>& v) {
    auto* a = n->add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::STRINGS);
    for (const auto& x : v) a->add_strings(x);
  }
  static void attr_floats(onnx::NodeProto* n, const char* name, const std::vector<float>& v) {
    auto* a = n->add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::FLOATS);
    for (auto x : v) a->add_floats(x);
  }
  static void attr_ints(onnx::NodeProto* n, const char* name, const std::vector<std::int64_t>& v) {
    auto* a = n->add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::INTS);
    for (auto x : v) a->add_ints(x);
  }
  void reshape(const std::vector<std::int64_t>& dims_with_batch) {
    const std::string s = init_ints(fresh("shape"), dims_with_batch);
    node("Reshape", {cur, s}, "reshape");
  }
  void transpose(const std::vector<std::int64_t>& perm) { attr_ints(node("Transpose", {cur}, "transpose"), "perm", perm); }
  template <class A>
  void activation(const std::string& base) {
    constexpr const char* op = act_op<A>();
    if constexpr (std::string_view(op).empty()) return;
    else {
      auto* n = node(op, {cur}, base);
      if constexpr (std::string_view(op) == "Softmax") attr_int(n, "axis", -1);
      if constexpr (std::string_view(op) == "LeakyRelu") attr_float(n, "alpha", float(act_alpha<A>));
    }
  }
};

// A variable's bytes (any element type), read as floats by floats_of.
inline std::vector<std::byte> bytes_of(const variable_ref& v) {
  return {v.data, v.data + v.extent * v.element_bytes};
}
template <class V = float>
std::vector<V> values_as(const std::vector<std::byte>& b) {
  std::vector<V> out(b.size() / sizeof(V));
  std::memcpy(out.data(), b.data(), out.size() * sizeof(V));
  return out;
}

template <Shape S>
std::vector<std::int64_t> with_batch(std::int64_t n = -1) {
  std::vector<std::int64_t> d{n};
  for (auto x : S::dims) d.push_back(std::int64_t(x));
  return d;
}


using var_map = std::map<std::string, std::vector<float>, std::less<>>;

template <class L>
void emit_graph(builder& b, const std::string& base, var_map& v, const std::string& p);

// A recurrent layer L (bound simple_rnn, lstm, gru), or with Bidi a bidirectional layer whose forward
// layer is L: Transpose to time-major, RNN / LSTM / GRU (W, R, B in ONNX's gate order; gru with
// linear_before_reset = 1, Keras' reset_after, or 0 for reset_after = false), then to (batch, units)
// from Y_h, or to (batch, steps, units) from Y (go_backwards: its steps reversed by a Gather, Keras
// returns them in reading order).
// bidirectional: both directions in one node; concat is the Reshape of [forward, backward], sum / mul /
// ave Gather each direction, then Add, Mul, or Add and Mul by 0.5.
template <class L, class Bidi = void>
void emit_recurrent(builder& b, const std::string& base, var_map& v, const std::string& p) {
  constexpr bool bidi = !std::is_void_v<Bidi>;
  constexpr std::int64_t S = L::S, U = L::U, G = L::G, F = L::F, nd = bidi ? 2 : 1;
  constexpr bool seq = L::opt.return_sequences, reverse = !bidi && L::opt.go_backwards;
  rnn_weights all;
  auto direction = [&](const std::string& prefix) {
    const auto o =
        to_onnx_gates<L>(v[p + prefix + "kernel"], v[p + prefix + "recurrent_kernel"], v[p + prefix + "bias"]);
    all.w.insert(all.w.end(), o.w.begin(), o.w.end());
    all.r.insert(all.r.end(), o.r.begin(), o.r.end());
    all.b.insert(all.b.end(), o.b.begin(), o.b.end());
  };
  if constexpr (bidi) {
    direction("forward_");
    direction("backward_");
  } else {
    direction("");
  }
  b.transpose({1, 0, 2});  // (batch, steps, features) -> (steps, batch, features)
  const std::string x = b.cur;
  const auto w = b.init_floats(base + "_W", {nd, G, F}, all.w);
  const auto r = b.init_floats(base + "_R", {nd, G, U}, all.r);
  const auto bias = b.init_floats(base + "_B", {nd, 2 * G}, all.b);
  constexpr const char* op = rnn_op<L>();
  std::string lower(op);
  for (auto& c : lower) c = char(c - 'A' + 'a');
  auto* n = b.node(op, {x, w, r, bias}, base + "_" + lower);
  builder::attr_int(n, "hidden_size", U);
  builder::attr_string(n, "direction", bidi ? "bidirectional" : reverse ? "reverse" : "forward");
  if constexpr (is_a<L, layer_kind::simple_rnn>) {
    using A = typename L::spec::activation;
    constexpr const char* f = rnn_activations<L>()[0];
    builder::attr_strings(n, "activations", std::vector<std::string>(std::size_t(nd), f));
    if constexpr (std::string_view(f) == "LeakyRelu")
      builder::attr_floats(n, "activation_alpha", std::vector<float>(std::size_t(nd), float(act_alpha<A>)));
  }
  if constexpr (is_a<L, layer_kind::gru>) builder::attr_int(n, "linear_before_reset", L::reset_before ? 0 : 1);
  if constexpr (!seq) {  // Y_h (directions, batch, units)
    n->set_output(0, "");
    n->add_output(b.cur);
    if constexpr (bidi) b.transpose({1, 0, 2});
  } else {  // Y (steps, directions, batch, units)
    if constexpr (reverse) {
      std::vector<std::int64_t> back;
      for (std::int64_t t = S; t-- > 0;) back.push_back(t);
      builder::attr_int(b.node("Gather", {b.cur, b.init_ints(base + "_reversed_steps", back)}, base + "_reverse"),
                        "axis", 0);
    }
    b.transpose({2, 0, 1, 3});
  }
  constexpr bool merged = [] {  // a bidirectional merge other than concat
    if constexpr (bidi) return !std::is_same_v<typename Bidi::M, merge::concat>;
    else return false;
  }();
  if constexpr (merged) {
    // (batch, [steps,] 2, units): each direction by a Gather of a scalar index on the directions' axis
    const std::string y = b.cur;
    std::string d[2];
    for (std::int64_t k = 0; k < 2; ++k) {
      const auto i = b.init_raw(base + "_direction_" + std::to_string(k), {}, onnx::TensorProto::INT64, &k, sizeof k);
      builder::attr_int(b.node("Gather", {y, i}, base + "_direction"), "axis", seq ? 2 : 1);
      d[k] = b.cur;
    }
    using M = typename Bidi::M;
    b.node(std::is_same_v<M, merge::mul> ? "Mul" : "Add", {d[0], d[1]}, base + "_merge");
    if constexpr (std::is_same_v<M, merge::ave>)
      b.node("Mul", {b.cur, b.init_floats(base + "_half", {}, {0.5f})}, base + "_half");
  } else if constexpr (seq) {
    b.reshape({-1, S, nd * U});
  } else {
    b.reshape({-1, nd * U});
  }
}

// depthwise_conv2d: one Conv with group = C over channels-first data (ONNX's kernel [C M, 1, KH, KW],
// output channel c M + m as ctnn's); separable_conv2d: that Conv without a bias, then a 1x1 Conv
// (kernel [F, C M, 1, 1]) with the bias. Transposes around them, then the activation.
template <class L>
void emit_depthwise(builder& b, const std::string& base, var_map& v, const std::string& p) {
  using LIn = typename L::in_shape;
  constexpr std::size_t H = dim_or<LIn, 0>(), W = dim_or<LIn, 1>(), C = dim_or<LIn, 2>();
  constexpr auto G = L::geometry;
  constexpr std::size_t CM = G.f;
  constexpr bool separable = is_a<L, layer_kind::separable_conv2d>;
  if constexpr (LIn::rank == 2) b.reshape({-1, std::int64_t(H), std::int64_t(W), 1});
  b.transpose({0, 3, 1, 2});
  const auto& kv = v[p + (separable ? "depthwise_kernel" : "kernel")];
  std::vector<float> t(kv.size());
  for (std::size_t y = 0; y < G.kh; ++y)
    for (std::size_t x = 0; x < G.kw; ++x)
      for (std::size_t j = 0; j < CM; ++j) t[(j * G.kh + y) * G.kw + x] = kv[(y * G.kw + x) * CM + j];
  const auto w = b.init_floats(base + (separable ? "_depthwise_kernel" : "_kernel"),
                               {std::int64_t(CM), 1, std::int64_t(G.kh), std::int64_t(G.kw)}, t);
  std::vector<std::string> inputs{b.cur, w};
  if constexpr (!separable) inputs.push_back(b.init_floats(base + "_bias", {std::int64_t(CM)}, v[p + "bias"]));
  auto* n = b.node("Conv", inputs, base + "_depthwise");
  builder::attr_int(n, "group", std::int64_t(C));
  builder::attr_ints(n, "kernel_shape", {std::int64_t(G.kh), std::int64_t(G.kw)});
  builder::attr_ints(n, "strides", {std::int64_t(G.stride), std::int64_t(G.stride)});
  builder::attr_ints(n, "pads", spatial_pads(G));
  if constexpr (separable) {
    constexpr std::size_t F = L::F;
    const auto& pv = v[p + "pointwise_kernel"];  // [1, 1, C M, F]
    std::vector<float> q(pv.size());
    for (std::size_t j = 0; j < CM; ++j)
      for (std::size_t f = 0; f < F; ++f) q[f * CM + j] = pv[j * F + f];
    const auto pw = b.init_floats(base + "_pointwise_kernel", {std::int64_t(F), std::int64_t(CM), 1, 1}, q);
    const auto bias = b.init_floats(base + "_bias", {std::int64_t(F)}, v[p + "bias"]);
    auto* m = b.node("Conv", {b.cur, pw, bias}, base + "_pointwise");
    builder::attr_ints(m, "kernel_shape", {1, 1});
  }
  b.transpose({0, 2, 3, 1});
  b.activation<typename L::Act>(base + "_act");
}

// Layer L's nodes after b.cur; its variables are v[p + name] (p: "" or a graph layer's child prefix "0.1.").
template <class L>
void emit_layer(builder& b, const std::string& base, var_map& v, const std::string& p) {
  using LIn = typename L::in_shape;
  using LOut = typename L::out_shape;
    if constexpr (is_a<L, layer_kind::dense>) {
    const auto w = b.init_floats(base + "_kernel", {std::int64_t(LIn::size), std::int64_t(LOut::size)}, v[p + "kernel"]);
    const auto bias = b.init_floats(base + "_bias", {std::int64_t(LOut::size)}, v[p + "bias"]);
    b.node("Gemm", {b.cur, w, bias}, base + "_gemm");
    b.activation<typename L::Act>(base + "_act");
  } else if constexpr (is_a<L, layer_kind::conv2d> || is_a<L, layer_kind::pool2d>) {
    constexpr std::size_t H = dim_or<LIn, 0>(), W = dim_or<LIn, 1>(), C = dim_or<LIn, 2>();
    using S = typename L::spec;
    if constexpr (LIn::rank == 2) b.reshape({-1, std::int64_t(H), std::int64_t(W), 1});
    b.transpose({0, 3, 1, 2});
    if constexpr (is_a<L, layer_kind::conv2d>) {
      constexpr auto G = window_geometry(H, W, C, S::filters, S::kernel_height, S::kernel_width, S::stride, S::pad);
      // ctnn's kernel is (kh, kw, c, f); ONNX's (f, c, kh, kw)
      const auto& kv = v[p + "kernel"];
      std::vector<float> t(kv.size());
      for (std::size_t y = 0; y < G.kh; ++y)
        for (std::size_t x = 0; x < G.kw; ++x)
          for (std::size_t c = 0; c < C; ++c)
            for (std::size_t f = 0; f < G.f; ++f)
              t[((f * C + c) * G.kh + y) * G.kw + x] = kv[((y * G.kw + x) * C + c) * G.f + f];
      const auto w = b.init_floats(base + "_kernel",
                                   {std::int64_t(G.f), std::int64_t(C), std::int64_t(G.kh), std::int64_t(G.kw)}, t);
      const auto bias = b.init_floats(base + "_bias", {std::int64_t(G.f)}, v[p + "bias"]);
      auto* n = b.node("Conv", {b.cur, w, bias}, base + "_conv");
      builder::attr_ints(n, "kernel_shape", {std::int64_t(G.kh), std::int64_t(G.kw)});
      builder::attr_ints(n, "strides", {std::int64_t(G.stride), std::int64_t(G.stride)});
      builder::attr_ints(n, "pads", spatial_pads(G));
      // an element-wise activation before the Transpose back (the same values): onnxruntime's quantizer
      // then sees Conv -> Relu and quantizes their output once (docs/interop.md)
      if constexpr (elementwise_activation<typename L::Act>) {
        b.activation<typename L::Act>(base + "_act");
        b.transpose({0, 2, 3, 1});
      } else {
        b.transpose({0, 2, 3, 1});
        b.activation<typename L::Act>(base + "_act");
      }
    } else {
      constexpr auto G = window_geometry(H, W, C, C, S::pool_size, S::pool_size, S::stride, S::pad);
      constexpr bool is_max = std::is_same_v<typename S::kind, detail::max_pool_kind>;
      auto* n = b.node(is_max ? "MaxPool" : "AveragePool", {b.cur}, base + (is_max ? "_maxpool" : "_avgpool"));
      builder::attr_ints(n, "kernel_shape", {std::int64_t(G.kh), std::int64_t(G.kw)});
      builder::attr_ints(n, "strides", {std::int64_t(G.stride), std::int64_t(G.stride)});
      builder::attr_ints(n, "pads", spatial_pads(G));
      if constexpr (!is_max) builder::attr_int(n, "count_include_pad", 0);
      b.transpose({0, 2, 3, 1});
    }
  } else if constexpr (is_a<L, layer_kind::depthwise_conv2d> || is_a<L, layer_kind::separable_conv2d>) {
    emit_depthwise<L>(b, base, v, p);
  } else if constexpr (is_a<L, layer_kind::conv1d>) {
    // channels-first (batch, C, L) around a 1-D Conv; ctnn's kernel [K, C, F] is ONNX's [F, C, K]
    constexpr auto G = L::geometry;  // conv2d's, on (1, L, C)
    constexpr std::size_t C = G.c, F = G.f, K = G.kw;
    b.transpose({0, 2, 1});
    const auto& kv = v[p + "kernel"];
    std::vector<float> t(kv.size());
    for (std::size_t k = 0; k < K; ++k)
      for (std::size_t c = 0; c < C; ++c)
        for (std::size_t f = 0; f < F; ++f) t[(f * C + c) * K + k] = kv[(k * C + c) * F + f];
    const auto w = b.init_floats(base + "_kernel", {std::int64_t(F), std::int64_t(C), std::int64_t(K)}, t);
    const auto bias = b.init_floats(base + "_bias", {std::int64_t(F)}, v[p + "bias"]);
    auto* n = b.node("Conv", {b.cur, w, bias}, base + "_conv");
    const auto pads = spatial_pads(G);  // {top, left, bottom, right}: the width's
    builder::attr_ints(n, "kernel_shape", {std::int64_t(K)});
    builder::attr_ints(n, "strides", {std::int64_t(G.stride)});
    builder::attr_ints(n, "pads", {pads[1], pads[3]});
    b.transpose({0, 2, 1});
    b.activation<typename L::Act>(base + "_act");
  } else if constexpr (is_a<L, layer_kind::layer_normalization>) {
    constexpr std::int64_t C = std::int64_t(L::C);
    const auto s = b.init_floats(base + "_gamma", {C}, v[p + "gamma"]);
    const auto be = b.init_floats(base + "_beta", {C}, v[p + "beta"]);
    auto* n = b.node("LayerNormalization", {b.cur, s, be}, base + "_layernorm");  // opset 17
    builder::attr_int(n, "axis", -1);
    builder::attr_float(n, "epsilon", float(L::spec::epsilon));
  } else if constexpr (is_a<L, layer_kind::zero_padding2d>) {
    // channels-last: (0, top, left, 0) before, (0, bottom, right, 0) after
    using S = typename L::spec;
    const auto pads = b.init_ints(base + "_pads", {0, std::int64_t(S::top), std::int64_t(S::left), 0, 0,
                                                   std::int64_t(S::bottom), std::int64_t(S::right), 0});
    b.node("Pad", {b.cur, pads}, base + "_pad");
  } else if constexpr (is_a<L, layer_kind::up_sampling2d>) {
    // nearest, output index i reads floor(i / scale): Keras' UpSampling2D
    using S = typename L::spec;
    const auto scales = b.init_floats(base + "_scales", {4}, {1.0f, float(S::rows), float(S::cols), 1.0f});
    auto* n = b.node("Resize", {b.cur, "", scales}, base + "_resize");
    builder::attr_string(n, "mode", "nearest");
    builder::attr_string(n, "coordinate_transformation_mode", "asymmetric");
    builder::attr_string(n, "nearest_mode", "floor");
  } else if constexpr (is_a<L, layer_kind::batch_norm>) {
    constexpr std::size_t r = LIn::rank;
    constexpr std::int64_t C = std::int64_t(last_dim_v<LIn>);
    if constexpr (r >= 2) {  // the channels (last axis) to axis 1
      std::vector<std::int64_t> p{0, std::int64_t(r)};
      for (std::size_t a = 1; a < r; ++a) p.push_back(std::int64_t(a));
      b.transpose(p);
    }
    const auto s = b.init_floats(base + "_gamma", {C}, v[p + "gamma"]);
    const auto be = b.init_floats(base + "_beta", {C}, v[p + "beta"]);
    const auto mu = b.init_floats(base + "_moving_mean", {C}, v[p + "moving_mean"]);
    const auto var = b.init_floats(base + "_moving_variance", {C}, v[p + "moving_variance"]);
    auto* n = b.node("BatchNormalization", {b.cur, s, be, mu, var}, base + "_batchnorm");
    builder::attr_float(n, "epsilon", float(L::spec::epsilon));
    if constexpr (r >= 2) {
      std::vector<std::int64_t> p{0};
      for (std::size_t a = 2; a <= r; ++a) p.push_back(std::int64_t(a));
      p.push_back(1);
      b.transpose(p);
    }
  } else if constexpr (is_a<L, layer_kind::reshape>) {
    b.reshape(with_batch<LOut>());
  } else if constexpr (is_a<L, layer_kind::activation>) {
    b.activation<typename L::spec>(base + "_act");
  } else if constexpr (is_a<L, layer_kind::global_average_pool>) {
    std::vector<std::int64_t> axes;
    for (std::size_t a = 1; a < LIn::rank; ++a) axes.push_back(std::int64_t(a));
    auto* n = b.node("ReduceMean", {b.cur}, base + "_mean");
    builder::attr_ints(n, "axes", axes);
    builder::attr_int(n, "keepdims", 0);
  } else if constexpr (is_recurrent<L>) {
    emit_recurrent<L>(b, base, v, p);
  } else if constexpr (is_a<L, layer_kind::bidirectional>) {
    emit_recurrent<typename L::Fwd, L>(b, base, v, p);
  } else if constexpr (is_a<L, layer_kind::graph>) {
    emit_graph<L>(b, base, v, p);
  }  // dropout: the identity at inference
}

// A graph layer: a branch's children one after another; add / concatenate (residual: add) each
// branch from the same input, then Add nodes (one per branch after the first) or one Concat.
template <class L>
void emit_graph(builder& b, const std::string& base, var_map& v, const std::string& p) {
  const std::string x = b.cur;
  std::vector<std::string> outs;
  if constexpr (requires { L::is_dag; }) {
    // a dag: its nodes in order, each from the tensors of the nodes it reads (x for "in"); a join is
    // Add nodes (one per input after the first) or one Concat
    using table = typename L::table;
    outs.resize(L::n);
    auto src = [&](std::size_t r) { return table::src[r] == table::input ? x : outs[table::src[r]]; };
    L::forwarded::each([&]<std::size_t K, class C>() {
      constexpr std::size_t r0 = table::first[K], m = table::first[K + 1] - r0;
      const std::string id(table::names[K]);
      b.cur = src(r0);
      if constexpr (is_a<C, layer_kind::dag_join>) {
        if constexpr (C::concat) {
          std::vector<std::string> in;
          for (std::size_t q = 0; q < m; ++q) in.push_back(src(r0 + q));
          builder::attr_int(b.node("Concat", in, base + "_" + id + "_concat"), "axis", std::int64_t(C::axis) + 1);
        } else {
          for (std::size_t q = 1; q < m; ++q) b.node("Add", {b.cur, src(r0 + q)}, base + "_" + id + "_add");
        }
      } else {
        emit_layer<C>(b, base + "_" + id, v, p + id + ".");
      }
      outs[K] = b.cur;
    });
    b.cur = outs[L::n - 1];
    return;
  }
  L::forwarded::each([&]<std::size_t K, class C>() {
    if constexpr (is_parallel<L>) b.cur = x;
    emit_layer<C>(b, base + "_" + std::to_string(K), v, p + std::to_string(K) + ".");
    outs.push_back(b.cur);
  });
  if constexpr (is_parallel<L>) {
    if constexpr (requires { L::axis; }) {
      builder::attr_int(b.node("Concat", outs, base + "_concat"), "axis", std::int64_t(L::axis) + 1);
    } else {
      b.cur = outs[0];
      for (std::size_t k = 1; k < outs.size(); ++k) b.node("Add", {b.cur, outs[k]}, base + "_add");
    }
  }
}

// Whether bound layer L hands int8 values on (an int8 layer feeding another: output_element).
template <class L>
constexpr bool int8_output() {
  if constexpr (requires { typename L::output_element; })
    return std::is_same_v<typename L::output_element, std::int8_t>;
  else
    return false;
}

// A per-tensor QuantizeLinear/DequantizeLinear pair with parameters p on the current tensor (nodes
// what_quantize, what_dequantize).
inline void emit_qdq_pair(builder& b, const std::string& what, quantization::params p) {
  const auto s = b.init_floats(b.fresh(what + "_scale"), {}, {p.scale});
  const std::int8_t z8 = std::int8_t(p.zero_point);
  const auto z = b.init_raw(b.fresh(what + "_zero_point"), {}, onnx::TensorProto::INT8, &z8, 1);
  b.node("QuantizeLinear", {b.cur, s, z}, what + "_quantize");
  b.node("DequantizeLinear", {b.cur, s, z}, what + "_dequantize");
}

// A quantized_dense layer in QDQ form (docs/interop.md, "Quantized models"). Full integer:
// [QuantizeLinear, DequantizeLinear] on the input (omitted when `prev`, the pair the tensor already went
// through, has the same parameters), DequantizeLinear of the int8 kernel [K, N] (per output channel:
// axis 1, zero points 0) and of the int32 bias (scale input_scale * kernel_scale[j]), Gemm, the
// activation, then [QuantizeLinear, DequantizeLinear] with the output parameters, which it returns.
// Dynamic range: the input quantized per row as the layer does (scale max|x| / 127, 1 for a zero row;
// QuantizeLinear per axis 0), the kernel dequantized as above, float bias, Gemm, the activation.
// A quantized_dense_block layer as a quantized_dense: its kept blocks expanded into the int8 [K, N]
// initializer, 0 in the pruned blocks (ONNX has no block-sparse tensor the QDQ pattern reads).
// A quantized_conv2d layer the same way around a Conv (as conv2d's: Transposes to NCHW and back,
// a rank-2 input reshaped to one channel first): its kernel [F, C, KH, KW] dequantized per axis 0,
// the input's Q/DQ pair (dynamic range: per sample, each sample's max over H W C) before the Transpose.
template <class L>
std::optional<quantization::params> export_quantized_dense(builder& b, const std::string& base,
                                                           const std::map<std::string, std::vector<std::byte>, std::less<>>& v,
                                                           std::optional<quantization::params> prev, std::size_t position) {
  constexpr bool conv = is_a<L, layer_kind::quantized_conv2d>;
  constexpr std::size_t K = L::K, N = L::N;
  const std::string here = "export_onnx: layer " + std::to_string(position) + " (" + L::name() + "): ";
  auto get = [&](const char* name) -> const std::vector<std::byte>& {
    const auto it = v.find(name);
    if (it == v.end()) throw std::logic_error(here + "no variable " + name);
    return it->second;
  };
  auto positive = [&](float s, const std::string& what) {
    if (!(std::isfinite(s) && s > 0))
      throw std::invalid_argument(here + what + " " + std::to_string(s) + " is not a positive finite number");
  };
  auto zero_point = [&](std::int32_t z, const std::string& what) {
    if (z < quantization::qmin || z > quantization::qmax)
      throw std::invalid_argument(here + what + " " + std::to_string(z) + " is outside int8 [-128, 127]");
    return std::int8_t(z);
  };
  const auto scale = values_as<float>(get("kernel_scale"));
  for (std::size_t j = 0; j < N; ++j) positive(scale[j], "kernel_scale[" + std::to_string(j) + "]");
  // the packed kernel (backends/cpu/int8.hpp) to ONNX's B [K, N], row-major (a Conv's W: [F, C, KH, KW],
  // which is [N, K] with K in (c, kh, kw) order instead of ctnn's (kh, kw, c))
  const auto& packed = get("kernel");
  std::vector<std::int8_t> wt(N * K), w(K * N);
  if constexpr (is_a<L, layer_kind::quantized_dense_block>) {
    // the kept R x C blocks (int8::block's groups) expanded: 0 in the pruned blocks
    std::vector<std::byte> ix = get("index");
    const std::uint32_t* starts = L::index::template at<0>(ix.data());
    const std::uint16_t* inputs = L::index::template at<1>(ix.data());
    if (const std::string bad = kernels::cpu::int8::block::validate(starts, inputs, K, N, L::R, L::C, L::G); !bad.empty())
      throw std::invalid_argument(here + "its block index: " + bad);
    kernels::cpu::int8::block::unpack(K, N, L::R, L::C, reinterpret_cast<const std::int8_t*>(packed.data()), inputs,
                                      starts, wt.data());
  } else {
    kernels::cpu::int8::unpack(K, N, reinterpret_cast<const std::int8_t*>(packed.data()), wt.data());
  }
  constexpr auto G = [] {
    if constexpr (conv) return L::geometry;
    else return kernels::conv_geometry{};
  }();
  for (std::size_t j = 0; j < N; ++j)
    for (std::size_t k = 0; k < K; ++k)
      if constexpr (conv) {
        const std::size_t c = k % G.c, yx = k / G.c;  // ctnn's k = (y kw + x) C + c
        w[(j * G.c + c) * G.kh * G.kw + yx] = wt[j * K + k];
      } else {
        w[k * N + j] = wt[j * K + k];
      }
  const std::int64_t k64 = std::int64_t(K), n64 = std::int64_t(N);
  const std::vector<std::int8_t> zeros(N, 0);
  const auto wq =
      conv ? b.init_raw(base + "_kernel_quantized",
                        {n64, std::int64_t(G.c), std::int64_t(G.kh), std::int64_t(G.kw)}, onnx::TensorProto::INT8,
                        w.data(), w.size())
           : b.init_raw(base + "_kernel_quantized", {k64, n64}, onnx::TensorProto::INT8, w.data(), w.size());
  const auto ws = b.init_floats(base + "_kernel_scale", {n64}, scale);
  const auto wz = b.init_raw(base + "_kernel_zero_point", {n64}, onnx::TensorProto::INT8, zeros.data(), N);
  const std::string x = b.cur;
  builder::attr_int(b.node("DequantizeLinear", {wq, ws, wz}, base + "_kernel_dequantize"), "axis", conv ? 0 : 1);
  const std::string wd = b.cur;
  // Gemm, or Conv between Transposes, of the current (dequantized) input, then the activation
  auto main_op = [&](const std::string& bias) {
    if constexpr (conv) {
      using LIn = typename L::in_shape;
      if constexpr (LIn::rank == 2) b.reshape({-1, std::int64_t(G.h), std::int64_t(G.w), 1});
      b.transpose({0, 3, 1, 2});
      auto* n = b.node("Conv", {b.cur, wd, bias}, base + "_conv");
      builder::attr_ints(n, "kernel_shape", {std::int64_t(G.kh), std::int64_t(G.kw)});
      builder::attr_ints(n, "strides", {std::int64_t(G.stride), std::int64_t(G.stride)});
      builder::attr_ints(n, "pads", spatial_pads(G));
      if constexpr (elementwise_activation<typename L::Act>) {  // (as conv2d's: Conv, activation, Transpose)
        b.template activation<typename L::Act>(base + "_act");
        b.transpose({0, 2, 3, 1});
      } else {
        b.transpose({0, 2, 3, 1});
        b.template activation<typename L::Act>(base + "_act");
      }
    } else {
      b.node("Gemm", {b.cur, wd, bias}, base + "_gemm");
      b.template activation<typename L::Act>(base + "_act");
    }
  };
  // a per-tensor Q/DQ pair with parameters p on the current tensor
  auto qdq_pair = [&](quantization::params p, const std::string& what) {
    const auto s = b.init_floats(b.fresh(base + "_" + what + "_scale"), {}, {p.scale});
    const std::int8_t z8 = std::int8_t(p.zero_point);
    const auto z = b.init_raw(b.fresh(base + "_" + what + "_zero_point"), {}, onnx::TensorProto::INT8, &z8, 1);
    b.node("QuantizeLinear", {b.cur, s, z}, base + "_" + what + "_quantize");
    b.node("DequantizeLinear", {b.cur, s, z}, base + "_" + what + "_dequantize");
  };
  if constexpr (L::full) {
    const auto in_scale = values_as<float>(get("input_scale")).at(0), out_scale = values_as<float>(get("output_scale")).at(0);
    const auto in_zp = values_as<std::int32_t>(get("input_zero_point")).at(0);
    const auto out_zp = values_as<std::int32_t>(get("output_zero_point")).at(0);
    positive(in_scale, "input_scale");
    positive(out_scale, "output_scale");
    const quantization::params in{in_scale, zero_point(in_zp, "input_zero_point")};
    const quantization::params out{out_scale, zero_point(out_zp, "output_zero_point")};
    b.cur = x;
    if (!prev || prev->scale != in.scale || prev->zero_point != in.zero_point) qdq_pair(in, "input");
    const std::string xd = b.cur;
    const auto bias = values_as<std::int32_t>(get("bias"));
    std::vector<float> bias_scale(N);
    for (std::size_t j = 0; j < N; ++j) bias_scale[j] = in.scale * scale[j];  // in float, as onnxruntime's quantizer
    const auto bq = b.init_raw(base + "_bias_quantized", {n64}, onnx::TensorProto::INT32, bias.data(), N * 4);
    const auto bs = b.init_floats(base + "_bias_scale", {n64}, bias_scale);
    builder::attr_int(b.node("DequantizeLinear", {bq, bs}, base + "_bias_dequantize"), "axis", 0);
    const std::string bd = b.cur;
    b.cur = xd;
    main_op(bd);
    qdq_pair(out, "output");
    return out;
  } else {
    b.cur = x;
    auto* amax = b.node("ReduceMax", {b.node("Abs", {x}, base + "_abs")->output(0)}, base + "_absmax");
    if constexpr (conv) {
      std::vector<std::int64_t> axes;
      for (std::size_t a = 1; a <= L::in_shape::rank; ++a) axes.push_back(std::int64_t(a));
      builder::attr_ints(amax, "axes", axes);
    } else {
      builder::attr_ints(amax, "axes", {1});
    }
    builder::attr_int(amax, "keepdims", 0);
    const std::string a = b.cur;
    const auto c127 = b.init_floats(base + "_127", {}, {127.0f});
    const auto c0 = b.init_floats(base + "_0", {}, {0.0f});
    const auto c1 = b.init_floats(base + "_1", {}, {1.0f});
    const std::string s = b.node("Div", {a, c127}, base + "_row_scale")->output(0);
    const std::string zero = b.node("Equal", {a, c0}, base + "_zero_row")->output(0);
    const std::string rs = b.node("Where", {zero, c1, s}, base + "_row_scale_or_1")->output(0);
    auto* zp = b.node("ConstantOfShape", {b.node("Shape", {a}, base + "_rows")->output(0)}, base + "_row_zero_point");
    {
      auto* at = zp->add_attribute();
      at->set_name("value");
      at->set_type(onnx::AttributeProto::TENSOR);
      auto* t = at->mutable_t();
      t->set_data_type(onnx::TensorProto::INT8);
      t->add_dims(1);
      t->set_raw_data(std::string(1, '\0'));
    }
    const std::string z = b.cur;
    builder::attr_int(b.node("QuantizeLinear", {x, rs, z}, base + "_input_quantize"), "axis", 0);
    builder::attr_int(b.node("DequantizeLinear", {b.cur, rs, z}, base + "_input_dequantize"), "axis", 0);
    const std::string xd = b.cur;
    const auto bias = b.init_floats(base + "_bias", {n64}, values_as<float>(get("bias")));
    b.cur = xd;
    main_op(bias);
    return std::nullopt;
  }
}
}  // namespace onnx_detail

// Writes m as an ONNX model (see the top of this file).
template <Model M>
void export_onnx(const M& m, const std::filesystem::path& path, int opset = 17) {
  using MM = std::remove_cvref_t<M>;
  using Net = typename MM::network;
  static_assert(std::is_same_v<typename MM::variable_type, float> && std::is_same_v<typename MM::compute_type, float>,
                "export_onnx: only float models are exported");
  using namespace onnx_detail;
  onnx::ModelProto model;
  model.set_ir_version(8);
  model.set_producer_name("ctnn");
  model.set_producer_version("0.1.0");
  model.add_opset_import()->set_version(opset);
  onnx::GraphProto* g = model.mutable_graph();
  g->set_name(Net::spec_string());
  auto value_info = [](onnx::ValueInfoProto* vi, const std::string& name, const std::vector<std::size_t>& dims) {
    vi->set_name(name);
    auto* tt = vi->mutable_type()->mutable_tensor_type();
    tt->set_elem_type(onnx::TensorProto::FLOAT);
    auto* sh = tt->mutable_shape();
    sh->add_dim()->set_dim_param("batch");
    for (auto d : dims) sh->add_dim()->set_dim_value(std::int64_t(d));
  };
  using In = typename Net::input_type;
  using Out = typename Net::output_type;
  value_info(g->add_input(), "input", {In::dims.begin(), In::dims.end()});

  // the variables of each layer, by name
  std::vector<std::map<std::string, std::vector<std::byte>, std::less<>>> raw(MM::layer_count);
  m.for_each_variable([&](const variable_ref& v) { raw[v.layer][std::string(v.name)] = bytes_of(v); });
  std::vector<std::map<std::string, std::vector<float>, std::less<>>> vars(MM::layer_count);
  for (std::size_t l = 0; l < raw.size(); ++l)
    for (const auto& [name, b] : raw[l]) vars[l][name] = values_as<float>(b);
  std::optional<quantization::params> qdq;  // the Q/DQ pair the current tensor went through, if any

  builder b{g};
  [&]<std::size_t... I>(std::index_sequence<I...>) {
    (void)std::initializer_list<int>{(
        [&] {
          using L = ctnn::detail::type_at_t<I, typename MM::layers>;
          static_assert(diag::no_onnx_mapping<diag::layer<I + 1>, exportable<L>()>::value);
          const std::string base = "layer" + std::to_string(I + 1);
          constexpr bool quantized = is_a<L, layer_kind::quantized_dense> || is_a<L, layer_kind::quantized_conv2d> ||
                                     is_a<L, layer_kind::quantized_dense_block>;
          // a pooling on the int8 tensor (quantization::int8_pass): MaxPool or AveragePool, then a Q/DQ
          // pair with its input's parameters (the pool keeps them), as onnxruntime's quantizer writes it
          // (a global average pooling on it: ReduceMean, then the pair)
          constexpr bool int8_pool =
              (is_a<L, layer_kind::pool2d> || is_a<L, layer_kind::global_average_pool>) && int8_output<L>();
          if constexpr (!quantized && !is_a<L, layer_kind::reshape> && !is_a<L, layer_kind::dropout> && !int8_pool)
            qdq.reset();
          if constexpr (quantized) qdq = export_quantized_dense<L>(b, base, raw[I], qdq, I + 1);
          else emit_layer<L>(b, base, vars[I], "");
          if constexpr (int8_pool) {
            if (!qdq) throw std::logic_error("export_onnx: layer " + std::to_string(I + 1) + " (" + L::name() +
                                             ") reads int8 values no quantized layer wrote");
            emit_qdq_pair(b, base + "_output", *qdq);
          }
        }(),
        0)...};  // a list, not a fold: clang nests a fold of N terms N deep (limit 256)
  }(std::make_index_sequence<MM::layer_count>{});
  b.node("Identity", {b.cur}, "output_identity");
  g->mutable_node(g->node_size() - 1)->set_output(0, "output");
  value_info(g->add_output(), "output", {Out::dims.begin(), Out::dims.end()});

  std::string bytes;
  if (!model.SerializeToString(&bytes)) throw io_error("export_onnx", path, "the model could not be serialized");
  io::write_file_atomically(path, bytes);
}

}  // namespace ctnn
