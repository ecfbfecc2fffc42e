// ctnn/onnx/export.hpp — export_onnx(m, path, opset = 17): a model as an ONNX file.
//
// Writes the network and its current variables as an ONNX model (IR 8): graph
// input "input" of shape (batch, input shape...), output "output" of shape
// (batch, output shape...), in ctnn's channels-last layout (spatial layers wrapped
// in Transposes). Each layer maps by its kind: dense -> Gemm, conv2d -> Conv,
// pools -> MaxPool / AveragePool (count_include_pad = 0), batch_normalization ->
// BatchNormalization (moving statistics), dropout -> nothing, flatten/reshape ->
// Reshape, global_average_pool -> ReduceMean, an activation -> its onnx_op, a graph
// layer -> its branches' nodes then Add (add, residual) or Concat. A
// layer or activation without a mapping is a compile error naming its position
// ("export_onnx: this layer or activation has no ONNX mapping"). Variables must
// be float. The file is written to a temporary and renamed (io/atomic_file.hpp).
// Docs: docs/interop.md ("ONNX").
#pragma once
#include <cstddef>
#include <initializer_list>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <map>
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
consteval bool all_exportable(std::tuple<C...>*) {
  return (true && ... && exportable<C>());
}
template <class L>
consteval bool exportable() {
  if constexpr (is_a<L, layer_kind::graph>) return all_exportable(static_cast<typename L::children*>(nullptr));
  else if constexpr (is_a<L, layer_kind::dense> || is_a<L, layer_kind::conv2d>) return act_op<typename L::Act>() != nullptr;
  else if constexpr (is_a<L, layer_kind::activation>) return act_op<typename L::spec>() != nullptr;
  else
    return is_a<L, layer_kind::pool2d> || is_a<L, layer_kind::batch_norm> || is_a<L, layer_kind::dropout> ||
           is_a<L, layer_kind::reshape> || is_a<L, layer_kind::global_average_pool>;
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

template <class V>
std::vector<float> values_of(const variable_ref& v) {
  std::vector<float> out(v.extent);
  std::memcpy(out.data(), v.data, v.extent * sizeof(float));
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
      b.transpose({0, 2, 3, 1});
      b.activation<typename L::Act>(base + "_act");
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
  std::vector<std::map<std::string, std::vector<float>, std::less<>>> vars(MM::layer_count);
  m.for_each_variable([&](const variable_ref& v) { vars[v.layer][std::string(v.name)] = values_of<float>(v); });

  builder b{g};
  [&]<std::size_t... I>(std::index_sequence<I...>) {
    (void)std::initializer_list<int>{(
        [&] {
          using L = ctnn::detail::type_at_t<I, typename MM::layers>;
          static_assert(diag::no_onnx_mapping<diag::layer<I + 1>, exportable<L>()>::value);
          emit_layer<L>(b, "layer" + std::to_string(I + 1), vars[I], "");
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
