// ctnn/onnx/import.hpp — import_onnx(m, path): an ONNX graph's weights into a
// model whose network computes what the graph computes.
//
// The graph is read as data flow from its input, whatever the order of its nodes: each layer takes
// the nodes computing from the tensor the previous layer made (through shape plumbing: Reshape,
// Flatten, Transpose, Dropout, Identity, Squeeze, Unsqueeze, Cast, Gather, and Shape / Concat /
// Constant computing shapes). The computing nodes (Gemm or MatMul [+ Add], Conv, MaxPool,
// AveragePool, BatchNormalization, GlobalAveragePool or ReduceMean, Relu, LeakyRelu, Sigmoid,
// Tanh, Softmax, RNN, LSTM, GRU and a bidirectional merge's Add / Mul, LayerNormalization, Pad,
// Resize) must match the layers one for one (by each layer's kind) with the same sizes, strides,
// paddings, groups, slopes, epsilons, axes, hidden sizes, directions and activations:
// depthwise_conv2d a Conv with group = C (kernel [C M, 1, KH, KW]), separable_conv2d that Conv
// (no bias, or zeros) then a 1x1 Conv with the bias, conv1d a 1-D Conv, layer_normalization a
// LayerNormalization over the last axis (stash_type 1), zero_padding2d a constant Pad by zeros of
// (0, top, left, 0, 0, bottom, right, 0) (input, attribute or opset 18's axes), up_sampling2d a
// Resize with mode nearest, coordinate_transformation_mode asymmetric, nearest_mode floor and
// scales [1, rows, cols, 1] (no sizes, no antialias), as export_onnx writes them (or Resize-10's
// nearest: (X, scales), asymmetric and floor by definition). A graph layer's branches each start from the block's input;
// its join is one Add per branch after the first (the sum so far and the next branch's output, in
// either order) or one Concat of the branches' outputs in order along the layer's axis (ONNX's
// negative axes normalised); a dag's nodes read the tensors of the nodes they name. Branches that
// start alike are paired with the layers by a search (node names' natural order first) that the
// joins decide. Every node computing from the input must be matched, and the graph's output must
// be the last layer's. As ONNX requires, each tensor is made once and each node reads only tensors
// made before it (no cycle, no dangling input). A Gemm with
// transB = 1 (PyTorch's Linear) is transposed into ctnn's in x out kernel. A
// channels-first graph input imports only into a network without spatial layers.
// masking, embedding and time_distributed are a compile error (no ONNX mapping).
// Everything is checked before any variable is written; a mismatch or a malformed
// graph is a ctnn::io_error naming the layer (1-based, with its spec; inside a graph layer the
// child's path), the node (op, name, index) and both sides, never a protobuf check or a read out
// of bounds. Variables must be float. A network of quantized_dense, quantized_dense_block and
// quantized_conv2d layers (and
// max_pool2d, average_pool2d, global_average_pool, flatten, reshape, dropout) reads a QDQ graph
// instead: each int8 layer
// the next Gemm's or Conv's int8 kernel (per channel, zero points 0), bias and Q/DQ parameters (a
// quantized_dense_block keeps the R x C blocks with a nonzero weight, at most its NNZ / (R C)), each
// max_pool2d the next MaxPool, each average_pool2d the next AveragePool and each global_average_pool
// the next GlobalAveragePool or ReduceMean (export_onnx's form: axes 1 .. rank - 1, keepdims 0),
// each reading the previous one's output.
// Docs: docs/interop.md ("ONNX").
#pragma once
#include <algorithm>
#include <array>
#include <cctype>
#include <cmath>
#include <cstddef>
#include <initializer_list>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "common.hpp"

namespace ctnn {

namespace onnx_detail {

// The graph as data flow. A tensor's root is where its values come from through the plumbing
// (Reshape, Flatten, Transpose, Dropout, Identity, Squeeze, Unsqueeze, Cast, Gather pass their input 0
// on): the graph input (root_input), a node that computes from it (its index in graph.node: each
// non-plumbing node reading data, and each Concat of data, a concatenate's join), a constant
// (root_constant: initializers, Constant nodes, what is computed from them alone) or a shape
// (root_shape: Shape's output and what is computed from it). Every node that computes from the
// input must be matched by a layer; the others are plumbing.
inline constexpr int root_input = -1, root_constant = -2, root_shape = -3;

struct graph_view {
  std::map<std::string, const onnx::TensorProto*, std::less<>> init;
  std::vector<const onnx::NodeProto*> nodes;     // graph.node, in file order
  std::vector<char> computes;                    // nodes[i] computes from the input (a layer must match it)
  std::map<std::string, int, std::less<>> root;  // each tensor's root (above)
  std::map<int, std::vector<int>> readers;       // a root -> the computing nodes reading it, in file order
  std::string input_name;                        // the graph input
  std::vector<std::int64_t> input_dims;          // the graph input's dims (-1: symbolic)

  int index_of(const onnx::NodeProto& n) const {
    for (std::size_t i = 0; i < nodes.size(); ++i)
      if (nodes[i] == &n) return int(i);
    return -1;
  }
  // "Gemm '/fc1/Gemm' (node 3)": the op, the name and the index in graph.node
  std::string name_of(const onnx::NodeProto& n) const {
    std::string s = printable(n.op_type(), 80) + " '" + printable(n.name(), 80) + "'";
    const int i = index_of(n);
    return i < 0 ? s : s + " (node " + std::to_string(i) + ")";
  }
  int root_of(const std::string& tensor) const {
    if (tensor.empty()) return root_shape;
    const auto it = root.find(tensor);
    return it == root.end() ? root_shape : it->second;
  }
  // "the graph input 'input'", "the output of Gemm 'g' (node 3)", "a constant", "a shape"
  std::string describe(int r) const {
    if (r == root_input) return "the graph input '" + printable(input_name, 80) + "'";
    if (r == root_constant) return "a constant";
    if (r < 0) return "a tensor's shape";
    return "the output of " + name_of(*nodes[std::size_t(r)]);
  }
};

inline bool is_plumbing(const std::string& op) {
  static const char* const ops[] = {"Reshape", "Flatten", "Transpose", "Dropout", "Identity", "Constant",
                                    "Shape",   "Gather",  "Unsqueeze", "Squeeze", "Concat",   "Cast"};
  return std::find(std::begin(ops), std::end(ops), op) != std::end(ops);
}

inline const onnx::AttributeProto* attr(const onnx::NodeProto& n, std::string_view name) {
  for (const auto& a : n.attribute())
    if (a.name() == name) return &a;
  return nullptr;
}
inline const char* attr_type_name(int t) {
  switch (t) {
    case onnx::AttributeProto::FLOAT: return "FLOAT";
    case onnx::AttributeProto::INT: return "INT";
    case onnx::AttributeProto::STRING: return "STRING";
    case onnx::AttributeProto::TENSOR: return "TENSOR";
    case onnx::AttributeProto::GRAPH: return "GRAPH";
    case onnx::AttributeProto::FLOATS: return "FLOATS";
    case onnx::AttributeProto::INTS: return "INTS";
    case onnx::AttributeProto::STRINGS: return "STRINGS";
    case onnx::AttributeProto::UNDEFINED: return "UNDEFINED";
    default: return "of another type";
  }
}

inline std::string dims_str(const std::vector<std::int64_t>& d) {
  std::string s;
  for (std::size_t i = 0; i < d.size(); ++i) s += (i ? " x " : "") + std::to_string(d[i]);
  return s.empty() ? "a scalar" : s;
}
inline std::string list_str(const std::vector<std::int64_t>& d) {
  std::string s = "[";
  for (std::size_t i = 0; i < d.size(); ++i) s += (i ? ", " : "") + std::to_string(d[i]);
  return s + "]";
}

// Reads the graph: initializers (and Constant nodes' tensors), the graph input, each tensor's root and
// each root's readers. As ONNX requires, each tensor is made once (by one node, initializer or graph
// input) and the nodes are in topological order: each reads only tensors made before it (so there is
// no cycle); a node that does not is an io_error naming it and the tensor.
inline graph_view view_of(const onnx::GraphProto& g, const std::filesystem::path& path) {
  graph_view v;
  for (const auto& t : g.initializer()) v.init[t.name()] = &t;
  for (const auto& in : g.input()) {
    if (v.init.count(in.name())) continue;  // old exporters list initializers as inputs
    v.input_name = in.name();
    for (const auto& d : in.type().tensor_type().shape().dim())
      v.input_dims.push_back(d.has_dim_value() ? d.dim_value() : -1);
    break;
  }
  if (v.input_dims.empty()) throw io_error("import_onnx", path, "the graph has no input");
  for (const auto& n : g.node()) v.nodes.push_back(&n);
  v.computes.assign(v.nodes.size(), 0);
  auto fail = [&](const std::string& what) { throw io_error("import_onnx", path, what); };
  // who makes each tensor: a graph input or initializer (-1), else the first node listing it as an output
  std::map<std::string, int, std::less<>> maker;
  for (const auto& in : g.input()) maker.emplace(in.name(), -1);
  for (const auto& t : g.initializer()) maker.emplace(t.name(), -1);
  for (std::size_t i = 0; i < v.nodes.size(); ++i)
    for (const auto& o : v.nodes[i]->output()) {
      if (o.empty()) continue;
      const auto [it, fresh] = maker.emplace(o, int(i));
      if (!fresh)
        fail(v.name_of(*v.nodes[i]) + " makes '" + printable(o, 80) + "', which " +
             (it->second < 0 ? std::string("is a graph input or initializer")
                             : v.name_of(*v.nodes[std::size_t(it->second)]) + " makes too") +
             " (each tensor is made once)");
    }
  for (const auto& t : g.initializer()) v.root[t.name()] = root_constant;
  for (const auto& in : g.input())
    if (!v.init.count(in.name())) v.root[in.name()] = in.name() == v.input_name ? root_input : root_shape;
  for (std::size_t i = 0; i < v.nodes.size(); ++i) {
    const onnx::NodeProto& n = *v.nodes[i];
    bool data = false, shape = false;
    for (const auto& in : n.input()) {
      if (in.empty()) continue;
      const auto it = v.root.find(in);
      if (it == v.root.end()) {
        const auto m = maker.find(in);
        if (m == maker.end())
          fail(v.name_of(n) + " reads '" + printable(in, 80) + "', which no node, initializer or graph input makes");
        fail(v.name_of(n) + " reads '" + printable(in, 80) + "', which " + v.name_of(*v.nodes[std::size_t(m->second)]) +
             " makes after it: the nodes are not in topological order (or form a cycle)");
      }
      data = data || it->second >= root_input;
      shape = shape || it->second == root_shape;
    }
    const std::string& op = n.op_type();
    const bool passes = is_plumbing(op) && op != "Constant" && op != "Shape" && op != "Concat";
    if (op == "Constant") {
      if (const auto* a = attr(n, "value"); a && a->type() == onnx::AttributeProto::TENSOR && n.output_size() == 1)
        v.init[n.output(0)] = &a->t();
    }
    if (data && !passes && op != "Shape") v.computes[i] = 1;
    for (int o = 0; o < n.output_size(); ++o) {
      if (n.output(o).empty()) continue;
      int r = shape || op == "Shape" ? root_shape : root_constant;
      if (passes && o == 0) r = n.input_size() > 0 ? v.root_of(n.input(0)) : root_constant;
      else if (v.computes[i]) r = int(i);
      v.root[n.output(o)] = r;
    }
    if (v.computes[i])
      for (const auto& in : n.input()) {
        auto& rd = v.readers[v.root_of(in)];
        if (rd.empty() || rd.back() != int(i)) rd.push_back(int(i));
      }
  }
  return v;
}

// A float tensor's values (raw_data or float_data).
inline std::vector<float> floats_of(const onnx::TensorProto& t, const std::string& where,
                                    const std::filesystem::path& path) {
  if (t.data_type() != onnx::TensorProto::FLOAT)
    throw io_error("import_onnx", path, where + ": tensor '" + printable(t.name(), 80) + "' is not float32 (ONNX type " +
                                            std::to_string(t.data_type()) + ")");
  if (t.data_location() == onnx::TensorProto::EXTERNAL)
    throw io_error("import_onnx", path, where + ": tensor '" + printable(t.name(), 80) + "' is stored in an external file");
  if (t.has_segment()) throw io_error("import_onnx", path, where + ": tensor '" + printable(t.name(), 80) + "' is split into segments");
  // the values must be there before anything is allocated for them
  std::size_t n = 1;
  for (auto d : t.dims()) {
    if (d < 0) throw io_error("import_onnx", path, where + ": tensor '" + printable(t.name(), 80) + "' has a negative dimension");
    if (d != 0 && n > std::numeric_limits<std::size_t>::max() / sizeof(float) / std::size_t(d))
      throw io_error("import_onnx", path, where + ": tensor '" + printable(t.name(), 80) + "' has more values than fit in memory");
    n *= std::size_t(d);
  }
  const std::size_t held = t.has_raw_data() ? t.raw_data().size() : std::size_t(t.float_data_size()) * sizeof(float);
  if (held != n * sizeof(float))
    throw io_error("import_onnx", path, where + ": tensor '" + printable(t.name(), 80) + "' holds " +
                                            (t.has_raw_data() ? std::to_string(held) + " bytes"
                                                              : std::to_string(t.float_data_size()) + " values") +
                                            " for " + std::to_string(n) + " floats");
  std::vector<float> v(n);
  if (t.has_raw_data()) std::memcpy(v.data(), t.raw_data().data(), held);
  else std::copy(t.float_data().begin(), t.float_data().end(), v.begin());
  return v;
}


// An INT8 or INT32 tensor's values (raw_data little-endian, or int32_data), count checked.
inline std::vector<std::int32_t> ints_of(const onnx::TensorProto& t, int type, std::size_t count, const std::string& where,
                                         const std::filesystem::path& path) {
  const std::string name = "tensor '" + printable(t.name(), 80) + "'";
  if (t.data_type() != type)
    throw io_error("import_onnx", path, where + ": " + name + " is not " + (type == onnx::TensorProto::INT8 ? "int8" : "int32") +
                                            " (ONNX type " + std::to_string(t.data_type()) + ")");
  if (t.data_location() == onnx::TensorProto::EXTERNAL || t.has_segment())
    throw io_error("import_onnx", path, where + ": " + name + " is stored externally or in segments");
  const std::size_t width = type == onnx::TensorProto::INT8 ? 1 : 4;
  // the values must be there before anything is allocated for them
  const std::size_t held = t.has_raw_data() ? t.raw_data().size() / width : std::size_t(t.int32_data_size());
  if (held != count || (t.has_raw_data() && t.raw_data().size() % width != 0))
    throw io_error("import_onnx", path, where + ": " + name + " holds " +
                                            (t.has_raw_data() ? std::to_string(t.raw_data().size()) + " bytes"
                                                              : std::to_string(t.int32_data_size()) + " values") +
                                            " for " + std::to_string(count) + " values");
  std::vector<std::int32_t> v(count);
  if (t.has_raw_data()) {
    for (std::size_t i = 0; i < count; ++i) {
      if (width == 1) v[i] = std::int8_t(t.raw_data()[i]);
      else std::memcpy(&v[i], t.raw_data().data() + 4 * i, 4);
    }
  } else {
    for (std::size_t i = 0; i < count; ++i) {
      v[i] = t.int32_data(int(i));
      if (width == 1 && (v[i] < -128 || v[i] > 127))
        throw io_error("import_onnx", path, where + ": " + name + " holds " + std::to_string(v[i]) + ", not an int8");
    }
  }
  return v;
}

inline std::string exact(double v) {
  char b[32];
  std::snprintf(b, sizeof b, "%.9g", v);
  return b;
}

// QDQ graphs (export_onnx of quantized models; onnxruntime's quantize_static with per-channel
// weights): each quantized_dense (quantized_conv2d) layer takes the next Gemm (Conv), reads its
// kernel, scales, bias and (full integer) the Q/DQ parameters around it, and recomputes kernel_sum
// and the requantization multipliers; a max_pool2d (average_pool2d) takes the next MaxPool (AveragePool). Transposes and
// Reshapes between them (a Conv's layout changes, flatten) are passed through.
struct qdq_importer {
  const onnx::GraphProto& g;
  const graph_view& gv;
  const std::filesystem::path& path;
  std::string where;
  std::map<std::string, const onnx::NodeProto*, std::less<>> producer;
  std::map<std::string, std::vector<const onnx::NodeProto*>, std::less<>> consumers;
  // the Gemm, Conv, MaxPool, AveragePool, GlobalAveragePool and ReduceMean nodes, in graph order
  std::vector<const onnx::NodeProto*> ops;
  std::size_t next = 0;

  qdq_importer(const onnx::GraphProto& graph, const graph_view& v, const std::filesystem::path& p) : g(graph), gv(v), path(p) {
    for (const auto& n : g.node()) {
      for (const auto& o : n.output()) producer[o] = &n;
      for (const auto& i : n.input()) consumers[i].push_back(&n);
      if (n.op_type() == "Gemm" || n.op_type() == "Conv" || n.op_type() == "MaxPool" || n.op_type() == "AveragePool" ||
          n.op_type() == "GlobalAveragePool" || n.op_type() == "ReduceMean")
        ops.push_back(&n);
    }
  }
  // the next Gemm, Conv, MaxPool or AveragePool, which must be `op` and compute from the previous one's output (or the
  // graph input): its input 0 traced back through other nodes' inputs 0 (Q/DQ pairs, Transposes,
  // Reshapes, the activation) must reach that node
  // (or `or_op`, where given)
  const onnx::NodeProto& take(const char* op, const char* or_op = nullptr) {
    const std::string needs = or_op ? std::string(op) + " or " + or_op : std::string(op);
    if (next >= ops.size()) fail("the graph has no more Gemm, Conv or pooling nodes; this layer needs " + needs);
    const onnx::NodeProto& n = *ops[next];
    if (n.op_type() != op && (!or_op || n.op_type() != or_op))
      fail("the graph's next node is " + name_of(n) + "; this layer needs " + needs);
    const onnx::NodeProto* want = next > 0 ? ops[next - 1] : nullptr;
    const onnx::NodeProto* from = nullptr;  // the Gemm, Conv or pool (or null: the graph input) n reads
    std::string t = n.input_size() > 0 ? n.input(0) : std::string();
    for (std::size_t hops = 0; hops <= gv.nodes.size(); ++hops) {
      const auto it = producer.find(t);
      if (it == producer.end()) break;
      if (std::find(ops.begin(), ops.end(), it->second) != ops.end()) {
        from = it->second;
        break;
      }
      if (it->second->input_size() < 1) break;
      t = it->second->input(0);
    }
    const bool input = !from && gv.root_of(t) == root_input;
    if (from != want || (!want && !input))
      fail(gv.name_of(n) + " reads " +
           (from ? "the output of " + gv.name_of(*from) : input ? "the graph input" : "'" + printable(t, 80) + "'") +
           "; this layer's input is " + (want ? "the output of " + gv.name_of(*want) : "the graph input"));
    ++next;
    return n;
  }
  static bool layout_only(const onnx::NodeProto& n) { return n.op_type() == "Transpose" || n.op_type() == "Reshape"; }
  [[noreturn]] void fail(const std::string& what) const { throw io_error("import_onnx", path, where + ": " + what); }
  std::string name_of(const onnx::NodeProto& n) const { return n.op_type() + " '" + printable(n.name(), 80) + "'"; }
  const onnx::TensorProto& init(const onnx::NodeProto& n, int i, const char* what) const {
    if (n.input_size() <= i || n.input(i).empty()) fail(name_of(n) + " has no " + what);
    const auto it = gv.init.find(n.input(i));
    if (it == gv.init.end()) fail(name_of(n) + "'s " + what + " is not a constant");
    return *it->second;
  }
  // the node that makes n's input i, through Transposes and Reshapes (at most 8 of them)
  const onnx::NodeProto& made_by(const onnx::NodeProto& n, int i, const char* op, const char* what) const {
    if (n.input_size() <= i) fail(name_of(n) + " has no " + what);
    auto it = producer.find(n.input(i));
    for (int hops = 0; hops < 8 && it != producer.end() && layout_only(*it->second) && it->second->input_size() > 0; ++hops)
      it = producer.find(it->second->input(0));
    if (it == producer.end() || it->second->op_type() != op)
      fail(name_of(n) + "'s " + what + " does not come from a " + op + " (not a QDQ graph?)");
    return *it->second;
  }
  // the one node that reads n's output, through Transposes and Reshapes (at most 8 of them)
  const onnx::NodeProto& only_consumer(const onnx::NodeProto& n) const {
    const onnx::NodeProto* at = &n;
    for (int hops = 0; hops < 9; ++hops) {
      if (at->output_size() < 1) fail(name_of(*at) + " has no output");
      const auto it = consumers.find(at->output(0));
      if (it == consumers.end() || it->second.size() != 1) fail(name_of(*at) + "'s output does not go to exactly one node");
      at = it->second.front();
      if (!layout_only(*at)) return *at;
    }
    fail(name_of(n) + "'s output goes through more than 8 Transposes and Reshapes");
  }
  std::size_t count(const onnx::TensorProto& t) const {
    std::size_t c = 1;
    for (auto d : t.dims()) {
      if (d < 0 || d > (std::int64_t(1) << 31)) fail("tensor '" + printable(t.name(), 80) + "' has a bad dimension");
      if (d != 0 && c > (std::size_t(1) << 31) / std::size_t(d))  // (no graph ctnn reads holds 2^31 values in one tensor)
        fail("tensor '" + printable(t.name(), 80) + "' has more than 2^31 values");
      c *= std::size_t(d);
    }
    return c;
  }
  // a per-tensor (scale, int8 zero point) of a QuantizeLinear or DequantizeLinear
  quantization::params per_tensor(const onnx::NodeProto& n) const {
    const auto s = floats_of(init(n, 1, "scale"), where, path);
    if (s.size() != 1 || !(std::isfinite(s[0]) && s[0] > 0)) fail(name_of(n) + " has no single positive scale");
    if (n.input_size() < 3 || n.input(2).empty()) fail(name_of(n) + " has no zero point (uint8; ctnn's int8 needs one)");
    const auto& zt = init(n, 2, "zero point");
    if (zt.data_type() == onnx::TensorProto::UINT8)
      fail(name_of(n) + "'s zero point is uint8: ctnn's activations are int8 (onnxruntime's quantize_static: "
                        "activation_type=QuantType.QInt8)");
    const auto z = ints_of(zt, onnx::TensorProto::INT8, count(zt), where, path);
    if (z.size() != 1) fail(name_of(n) + " has no single zero point");
    return {s[0], z[0]};
  }
  // Whether a full-integer relu layer's Gemm or Conv n, followed by `next` instead of a Relu, has its
  // Relu folded into its output's QuantizeLinear, as onnxruntime's quantize_static writes it: a zero
  // point of -128 clamps every negative value to the int8 of 0, as ctnn's relu then requantization do.
  // Refused, naming the nodes: another zero point (the Relu is missing), or the Gemm's or Conv's output
  // quantized once before the Relu's QuantizeLinear (quantize_static's form when a Transpose stands
  // between a Conv and its Relu, as in export_onnx's float conv2d: the graph rounds twice, ctnn once).
  bool relu_folded(const onnx::NodeProto& n, const onnx::NodeProto& next) const {
    if (next.op_type() != "QuantizeLinear") return false;
    const auto first = per_tensor(next);
    if (first.zero_point == -128) return true;
    const onnx::NodeProto& dq = only_consumer(next);
    if (dq.op_type() == "DequantizeLinear") {
      const onnx::NodeProto& again = only_consumer(dq);
      if (again.op_type() == "QuantizeLinear" && per_tensor(again).zero_point == -128)
        fail(name_of(n) + "'s output is quantized by " + name_of(next) + " (scale " + exact(first.scale) +
             ", zero point " + std::to_string(first.zero_point) + ") before its Relu, folded into " + name_of(again) +
             " (scale " + exact(per_tensor(again).scale) +
             ", zero point -128): the graph rounds twice, ctnn's layer once (onnxruntime's quantize_static writes this "
             "when a Transpose stands between the operator and its Relu)");
    }
    fail(name_of(n) + " is followed by " + name_of(next) + " with zero point " + std::to_string(first.zero_point) +
         " and no Relu; this layer's activation is Relu (folded into the QuantizeLinear only with zero point -128)");
  }
};

// <0, 0, >0 as a is before, the same as, after b, digit runs compared as numbers ("b2" < "b10").
inline int natural_compare(std::string_view a, std::string_view b) {
  std::size_t i = 0, j = 0;
  auto digit = [](char c) { return c >= '0' && c <= '9'; };
  while (i < a.size() && j < b.size()) {
    if (digit(a[i]) && digit(b[j])) {
      std::size_t i0 = i, j0 = j;
      while (i0 < a.size() && a[i0] == '0') ++i0;  // leading zeros
      while (j0 < b.size() && b[j0] == '0') ++j0;
      std::size_t i1 = i0, j1 = j0;
      while (i1 < a.size() && digit(a[i1])) ++i1;
      while (j1 < b.size() && digit(b[j1])) ++j1;
      if (i1 - i0 != j1 - j0) return i1 - i0 < j1 - j0 ? -1 : 1;
      if (const int c = a.substr(i0, i1 - i0).compare(b.substr(j0, j1 - j0)); c != 0) return c;
      i = i1;
      j = j1;
    } else {
      if (a[i] != b[j]) return (unsigned char)a[i] < (unsigned char)b[j] ? -1 : 1;
      ++i;
      ++j;
    }
  }
  return (i < a.size()) - (j < b.size());
}

// Walks the graph's data flow from its input against the layers: each layer takes the nodes that
// compute from the tensor the previous one made (cur), whatever their order in the file. Where
// several nodes could be a layer's (branches that start alike), each is a choice point: an attempt
// that fails is made again with the next choice (a depth-first search, replayed from the start).
struct matcher {
  const graph_view& gv;
  const std::filesystem::path& path;
  std::int64_t opset = 17;
  std::string where{};            // "layer 2 (dense<10>)"
  std::string child{};            // inside a graph layer, the child's path ("0.1", a dag's "b")
  int cur = root_input;           // the root of what the next layer reads
  std::vector<char> taken{};      // the computing nodes matched so far (by index in graph.node)
  std::size_t taken_count = 0;
  std::vector<std::size_t> pick{}, options{};  // each choice point of this attempt: the candidate taken, of how many
  std::size_t depth = 0;                 // the choice points passed in this attempt
  bool in_order = true;   // a join's Add must read the sum so far as its input 0 (export_onnx's order)
  bool swapped = false;   // an attempt failed only on that order

  void restart() {
    cur = root_input;
    taken.assign(gv.nodes.size(), 0);
    taken_count = 0;
    child.clear();
    depth = 0;
  }
  // After a failed attempt: the next untried choice, the last choice point's first; false when none is left.
  bool next_choice() {
    pick.resize(std::min(depth, pick.size()));
    options.resize(pick.size());
    while (!pick.empty() && pick.back() + 1 >= options.back()) {
      pick.pop_back();
      options.pop_back();
    }
    if (pick.empty()) return false;
    ++pick.back();
    return true;
  }

  [[noreturn]] void fail(const std::string& what) const {
    throw io_error("import_onnx", path, where + (child.empty() ? "" : ", child " + child) + ": " + what);
  }
  std::string node_name(const onnx::NodeProto& n) const { return gv.name_of(n); }

  // A node's attribute of the type ONNX defines for it, or dflt when absent.
  const onnx::AttributeProto* typed_attr(const onnx::NodeProto& n, std::string_view name, int type) const {
    const auto* a = attr(n, name);
    if (a && a->type() != type)
      fail(node_name(n) + "'s attribute '" + std::string(name) + "' is " + attr_type_name(a->type()) + ", not " +
           attr_type_name(type));
    return a;
  }
  std::int64_t attr_i(const onnx::NodeProto& n, std::string_view name, std::int64_t dflt) const {
    const auto* a = typed_attr(n, name, onnx::AttributeProto::INT);
    return a ? a->i() : dflt;
  }
  double attr_f(const onnx::NodeProto& n, std::string_view name, double dflt) const {
    const auto* a = typed_attr(n, name, onnx::AttributeProto::FLOAT);
    return a ? double(a->f()) : dflt;
  }
  std::vector<std::int64_t> attr_is(const onnx::NodeProto& n, std::string_view name,
                                    std::vector<std::int64_t> dflt) const {
    const auto* a = typed_attr(n, name, onnx::AttributeProto::INTS);
    if (!a) return dflt;
    return {a->ints().begin(), a->ints().end()};
  }
  std::string attr_s(const onnx::NodeProto& n, std::string_view name, std::string dflt) const {
    const auto* a = typed_attr(n, name, onnx::AttributeProto::STRING);
    return a ? a->s() : dflt;
  }
  std::vector<std::string> attr_ss(const onnx::NodeProto& n, std::string_view name) const {
    const auto* a = typed_attr(n, name, onnx::AttributeProto::STRINGS);
    if (!a) return {};
    return {a->strings().begin(), a->strings().end()};
  }
  std::vector<float> attr_fs(const onnx::NodeProto& n, std::string_view name) const {
    const auto* a = typed_attr(n, name, onnx::AttributeProto::FLOATS);
    if (!a) return {};
    return {a->floats().begin(), a->floats().end()};
  }

  // The untaken computing nodes reading root r (at their input 0, or with `any` at any input) whose op is op or alt.
  std::vector<int> readers_of(int r, std::string_view op, std::string_view alt = {}, bool any = false) const {
    std::vector<int> c;
    const auto it = gv.readers.find(r);
    if (it == gv.readers.end()) return c;
    for (int i : it->second) {
      const auto& n = *gv.nodes[std::size_t(i)];
      if (taken[std::size_t(i)] || (n.op_type() != op && (alt.empty() || n.op_type() != alt))) continue;
      if (!any && (n.input_size() < 1 || gv.root_of(n.input(0)) != r)) continue;
      c.push_back(i);
    }
    return c;
  }
  // One of the candidates c, marked taken (cur: its output); a choice point when there are several, tried
  // in the natural order of their names ("b2" before "b10"; export_onnx numbers its nodes in the order of
  // the layers), then by index: an order that does not depend on the nodes' order in the file.
  const onnx::NodeProto& choose(std::vector<int> c) {
    std::size_t k = 0;
    if (c.size() > 1) {
      std::sort(c.begin(), c.end(), [&](int a, int b) {
        const int o = natural_compare(gv.nodes[std::size_t(a)]->name(), gv.nodes[std::size_t(b)]->name());
        return o != 0 ? o < 0 : a < b;
      });
      if (depth == pick.size()) {
        pick.push_back(0);
        options.push_back(c.size());
      }
      k = std::min(pick[depth++], c.size() - 1);
    }
    taken[std::size_t(c[k])] = 1;
    ++taken_count;
    cur = c[k];
    return *gv.nodes[std::size_t(c[k])];
  }
  // The node computing from cur (its input 0; with `any`, any input) with op `op` (or `alt`); cur: its output.
  const onnx::NodeProto& take(std::string_view op, std::string_view alt = {}, bool any = false) {
    const std::string needs = std::string(op) + (alt.empty() ? "" : " or " + std::string(alt));
    const auto c = readers_of(cur, op, alt, any);
    if (c.empty()) {
      if (const auto it = gv.readers.find(cur); it != gv.readers.end())
        for (int i : it->second) {
          if (taken[std::size_t(i)]) continue;
          const auto& n = *gv.nodes[std::size_t(i)];
          if (n.op_type() == op || (!alt.empty() && n.op_type() == alt))
            fail(node_name(n) + " reads " + gv.describe(cur) + " as another input than its first; this layer's " +
                 needs + " reads it as its input 0");
          fail("the graph's next node is " + node_name(n) + "; this layer needs " + needs);
        }
      fail("the graph computes nothing more from " + gv.describe(cur) + "; this layer needs " + needs);
    }
    return choose(c);
  }
  // The Add adding a and b, in either order (Add is commutative); `what` says what they are. cur: its output.
  const onnx::NodeProto& take_add(int a, int b, const std::string& what) {
    auto c = readers_of(a, "Add", {}, true);
    for (int i : readers_of(b, "Add", {}, true))
      if (std::find(c.begin(), c.end(), i) == c.end()) c.push_back(i);
    std::sort(c.begin(), c.end());
    if (c.empty())
      fail("no Add reads " + gv.describe(a) + " or " + gv.describe(b) + "; this layer adds them (" + what + ")");
    const auto& n = choose(c);
    if (n.input_size() != 2)
      fail(node_name(n) + " has " + std::to_string(n.input_size()) + " inputs; this layer adds 2 (" + what + ")");
    const int x = gv.root_of(n.input(0)), y = gv.root_of(n.input(1));
    if (in_order && x == b && y == a && a != b) {
      swapped = true;
      fail(node_name(n) + " adds its operands in the other order (tried again without that order)");
    }
    if (!((x == a && y == b) || (x == b && y == a)))
      fail(node_name(n) + " adds " + gv.describe(x) + " and " + gv.describe(y) + "; this layer adds " + gv.describe(a) +
           " and " + gv.describe(b) + " (" + what + ")");
    return n;
  }
  // The Concat joining ins in this order along `axis` of rank-`rank` data (batch axis included; ONNX's
  // negative axes counted from the end); what[k] says what ins[k] is. cur: its output.
  const onnx::NodeProto& take_concat(const std::vector<int>& ins, const std::vector<std::string>& what,
                                     std::int64_t axis, std::int64_t rank) {
    std::vector<int> c;
    for (int r : ins)
      for (int i : readers_of(r, "Concat", {}, true))
        if (std::find(c.begin(), c.end(), i) == c.end()) c.push_back(i);
    std::sort(c.begin(), c.end());
    if (c.empty()) fail("no Concat reads " + gv.describe(ins[0]) + " (" + what[0] + "); this layer concatenates it");
    const auto& n = choose(c);
    if (std::size_t(n.input_size()) != ins.size())
      fail(node_name(n) + " joins " + std::to_string(n.input_size()) + " tensors; this layer joins " +
           std::to_string(ins.size()));
    for (std::size_t k = 0; k < ins.size(); ++k)
      if (const int r = gv.root_of(n.input(int(k))); r != ins[k])
        fail(node_name(n) + "'s input " + std::to_string(k) + " is " + gv.describe(r) + "; this layer's is " +
             gv.describe(ins[k]) + " (" + what[k] + ")");
    const auto* a = typed_attr(n, "axis", onnx::AttributeProto::INT);
    if (!a) fail(node_name(n) + " has no axis (ONNX requires one)");
    const std::int64_t given = a->i();
    if (given < -rank || given >= rank)
      fail(node_name(n) + " has axis " + std::to_string(given) + ", outside [" + std::to_string(-rank) + ", " +
           std::to_string(rank - 1) + "] for its rank-" + std::to_string(rank) + " inputs");
    if (const std::int64_t at = given < 0 ? given + rank : given; at != axis)
      fail(node_name(n) + " joins along axis " + std::to_string(given) +
           (given < 0 ? " (" + std::to_string(at) + ")" : std::string()) + " of rank-" + std::to_string(rank) +
           " data (batch first); this layer along axis " + std::to_string(axis));
    return n;
  }
  // After the last layer: every node computing from the input was matched, and the graph's outputs are cur.
  void finish(const onnx::GraphProto& g) {
    for (std::size_t i = 0; i < gv.nodes.size(); ++i) {
      if (!gv.computes[i] || taken[i]) continue;
      const auto& n = *gv.nodes[i];
      int from = root_constant;
      for (const auto& in : n.input())
        if (const int r = gv.root_of(in); r >= root_input && (from < root_input || r == cur)) from = r;
      if (from == cur) fail("the graph goes on with " + node_name(n) + "; this network ends here");
      fail("the graph computes " + node_name(n) + " from " + gv.describe(from) + "; this network does not");
    }
    if (g.output_size() == 0) fail("the graph has no output");
    for (const auto& o : g.output())
      if (const int r = gv.root_of(o.name()); r != cur)
        fail("the graph's output '" + printable(o.name(), 80) + "' is " + gv.describe(r) + "; this network's is " +
             gv.describe(cur));
  }
  const onnx::TensorProto& tensor(const onnx::NodeProto& n, int input, const char* what) {
    if (n.input_size() <= input || n.input(input).empty()) fail(node_name(n) + " has no " + what);
    auto it = gv.init.find(n.input(input));
    if (it == gv.init.end()) fail(node_name(n) + "'s " + what + " '" + printable(n.input(input), 80) + "' is not a constant");
    return *it->second;
  }
  std::vector<float> values(const onnx::NodeProto& n, int input, const char* what,
                            const std::vector<std::int64_t>& want, const std::string& ours) {
    const auto& t = tensor(n, input, what);
    std::vector<std::int64_t> d(t.dims().begin(), t.dims().end());
    for (auto x : d)
      if (x < 0) fail(node_name(n) + "'s " + what + " '" + printable(t.name(), 80) + "' has a negative dimension (" + dims_str(d) + ")");
    std::size_t count = 1;
    for (auto x : d) count *= std::size_t(x);
    std::size_t want_count = 1;
    for (auto x : want) want_count *= std::size_t(x);
    // (N) and (1, N) biases are the same values
    bool same = d == want;
    if (!same && count == want_count) {
      std::vector<std::int64_t> a, b;
      for (auto x : d) if (x != 1) a.push_back(x);
      for (auto x : want) if (x != 1) b.push_back(x);
      same = a == b;
    }
    if (!same) fail(node_name(n) + " has a " + what + " of " + dims_str(d) + "; this layer's " + ours + " is " +
                    dims_str(want));
    return floats_of(t, where + ": " + node_name(n), path);
  }
  // An INT64 (or INT32) constant's values (Pad's pads, Resize's axes as a tensor), at most `limit` of them.
  std::vector<std::int64_t> int64s(const onnx::NodeProto& n, int input, const char* what, std::size_t limit = 64) {
    const auto& t = tensor(n, input, what);
    const std::string nm = node_name(n) + "'s " + what + " '" + printable(t.name(), 80) + "'";
    if (t.data_type() != onnx::TensorProto::INT64 && t.data_type() != onnx::TensorProto::INT32)
      fail(nm + " is not int64 (ONNX type " + std::to_string(t.data_type()) + ")");
    if (t.data_location() == onnx::TensorProto::EXTERNAL || t.has_segment())
      fail(nm + " is stored externally or in segments");
    std::size_t count = 1;
    for (auto d : t.dims()) {
      if (d < 0 || std::size_t(d) > limit) fail(nm + " has a dimension of " + std::to_string(d));
      count *= std::size_t(d);
    }
    if (count > limit) fail(nm + " holds more than " + std::to_string(limit) + " values");
    const bool wide = t.data_type() == onnx::TensorProto::INT64;
    const std::size_t width = wide ? 8 : 4;
    std::vector<std::int64_t> v(count);
    if (t.has_raw_data()) {
      if (t.raw_data().size() != count * width)
        fail(nm + " holds " + std::to_string(t.raw_data().size()) + " bytes for " + std::to_string(count) + " values");
      for (std::size_t i = 0; i < count; ++i) {
        if (wide) std::memcpy(&v[i], t.raw_data().data() + 8 * i, 8);
        else {
          std::int32_t x;
          std::memcpy(&x, t.raw_data().data() + 4 * i, 4);
          v[i] = x;
        }
      }
    } else {
      const std::size_t held = wide ? std::size_t(t.int64_data_size()) : std::size_t(t.int32_data_size());
      if (held != count) fail(nm + " holds " + std::to_string(held) + " values for " + std::to_string(count));
      for (std::size_t i = 0; i < count; ++i) v[i] = wide ? t.int64_data(int(i)) : t.int32_data(int(i));
    }
    return v;
  }
  // rank: the data's rank at this point, batch axis included
  template <class A>
  void activation(std::int64_t rank) {
    constexpr const char* op = act_op<A>();
    if constexpr (!std::string_view(op).empty()) {
      const auto& n = take(op);
      if constexpr (std::string_view(op) == "Softmax") {
        const std::int64_t axis = attr_i(n, "axis", opset < 13 ? 1 : -1);
        if ((axis != -1 && axis != rank - 1) || (opset < 13 && rank > 2))
          fail(node_name(n) + " normalises over axis " + std::to_string(axis) + " (opset " + std::to_string(opset) +
               ") of rank-" + std::to_string(rank) + " data; ctnn's softmax over the last one");
      }
      if constexpr (std::string_view(op) == "LeakyRelu") {
        const double a = attr_f(n, "alpha", 0.01);
        if (!(std::abs(a - act_alpha<A>) <= 1e-6 * act_alpha<A>))  // (a NaN alpha differs too)
          fail(node_name(n) + " has alpha " + std::to_string(a) + "; this layer's slope is " +
               std::to_string(act_alpha<A>));
      }
    }
  }
  void window(const onnx::NodeProto& n, const kernels::conv_geometry& G) {
    const auto ks = attr_is(n, "kernel_shape", {});
    if (!ks.empty() && ks != std::vector<std::int64_t>{std::int64_t(G.kh), std::int64_t(G.kw)})
      fail(node_name(n) + " has a window of " + dims_str(ks) + "; this layer's is " + std::to_string(G.kh) + " x " +
           std::to_string(G.kw));
    const auto st = attr_is(n, "strides", {1, 1});
    if (st != std::vector<std::int64_t>{std::int64_t(G.stride), std::int64_t(G.stride)})
      fail(node_name(n) + " has strides " + list_str(st) + "; this layer's stride is " + std::to_string(G.stride));
    const std::string auto_pad = attr_s(n, "auto_pad", "NOTSET");
    const auto want = spatial_pads(G);
    if (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
      if (G.oh != (G.h + G.stride - 1) / G.stride || G.ow != (G.w + G.stride - 1) / G.stride)
        fail(node_name(n) + " pads to the same size; this layer does not");
    } else if (auto_pad == "VALID") {
      if (want != std::vector<std::int64_t>(4, 0)) fail(node_name(n) + " does not pad; this layer pads " + list_str(want));
    } else {
      const auto pads = attr_is(n, "pads", {0, 0, 0, 0});
      if (pads != want) fail(node_name(n) + " has pads " + list_str(pads) + "; this layer's are " + list_str(want));
    }
    for (auto d : attr_is(n, "dilations", {1, 1}))
      if (d != 1) fail(node_name(n) + " is dilated; ctnn's windows are not");
    if (attr_i(n, "ceil_mode", 0) != 0) fail(node_name(n) + " rounds its output size up (ceil_mode); ctnn rounds down");
  }
};


using var_map = std::map<std::string, std::vector<float>, std::less<>>;

// A recurrent layer L (bound simple_rnn, lstm, gru), or with Bidi a bidirectional layer whose forward
// layer is L, from the next RNN / LSTM / GRU: hidden_size, direction (go_backwards: "reverse"), the
// activations (simple_rnn's; lstm's and gru's the defaults), no clip, no input_forget, gru's
// linear_before_reset (1, or 0 for reset_after = false), no sequence_lens, initial state or peepholes;
// W, R (and B, zeros when absent) read back into Keras' gate order (simple_rnn, lstm and gru with
// reset_after = false: bias = Wb + Rb). Either layout is accepted
// (the weights are the same; the Transposes around are plumbing). A bidirectional merge other than
// concat also takes its Add / Mul nodes (ave: Add, then Mul).
template <class L, class Bidi = void>
void match_recurrent(matcher& mt, var_map& v, const std::string& p) {
  constexpr bool bidi = !std::is_void_v<Bidi>;
  constexpr std::int64_t U = L::U, G = L::G, F = L::F, nd = bidi ? 2 : 1;
  constexpr const char* op = rnn_op<L>();
  const auto& n = mt.take(op);
  const std::string nn = mt.node_name(n);
  if (const auto h = mt.attr_i(n, "hidden_size", U); h != U)
    mt.fail(nn + " has hidden_size " + std::to_string(h) + "; this layer has " + std::to_string(U) + " units");
  const std::string want_dir = bidi ? "bidirectional" : L::opt.go_backwards ? "reverse" : "forward";
  if (const auto d = mt.attr_s(n, "direction", "forward"); d != want_dir)
    mt.fail(nn + " has direction '" + printable(d, 40) + "'; this layer's is '" + want_dir + "'" +
            (bidi ? "" : L::opt.go_backwards ? " (go_backwards)" : " (no go_backwards)"));
  if (const auto l = mt.attr_i(n, "layout", 0); l != 0 && l != 1)
    mt.fail(nn + " has layout " + std::to_string(l) + "; ONNX defines 0 and 1");
  if (attr(n, "clip")) mt.fail(nn + " clips its gates' inputs (clip); ctnn's recurrent layers do not");
  if constexpr (is_a<L, layer_kind::lstm>)
    if (mt.attr_i(n, "input_forget", 0) != 0)
      mt.fail(nn + " couples the input and forget gates (input_forget); ctnn's lstm does not");
  if constexpr (is_a<L, layer_kind::gru>) {
    const bool after = mt.attr_i(n, "linear_before_reset", 0) != 0;
    if (after && L::reset_before)
      mt.fail(nn + " has linear_before_reset = 1 (Keras' reset_after = true); this layer is reset_after = false "
                   "(linear_before_reset = 0)");
    if (!after && !L::reset_before)
      mt.fail(nn + " has linear_before_reset = 0 (Keras' reset_after = false); this layer is reset_after = true "
                   "(linear_before_reset = 1)");
  }
  // the activations: absent (the defaults) or the layer's, once per direction (names compared ignoring case)
  constexpr auto acts = rnn_activations<L>();
  const auto given = mt.attr_ss(n, "activations");
  auto same = [](std::string a, std::string_view b) {
    if (a.size() != b.size()) return false;
    for (std::size_t i = 0; i < a.size(); ++i)
      if (std::tolower((unsigned char)a[i]) != std::tolower((unsigned char)b[i])) return false;
    return true;
  };
  std::string want_acts;
  for (std::int64_t d = 0; d < nd; ++d)
    for (const char* a : acts) want_acts += std::string(want_acts.empty() ? "" : ", ") + a;
  const bool default_acts = !is_a<L, layer_kind::simple_rnn> || std::string_view(acts[0]) == "Tanh";
  if (!given.empty() || !default_acts) {
    bool ok = given.size() == acts.size() * std::size_t(nd);
    for (std::size_t i = 0; ok && i < given.size(); ++i) ok = same(given[i], acts[i % acts.size()]);
    if (!ok) {
      std::string g;
      for (const auto& a : given) g += (g.empty() ? "" : ", ") + printable(a, 40);
      mt.fail(nn + " has activations [" + (given.empty() ? "(the defaults)" : g) + "]; this layer's are [" + want_acts +
              "]");
    }
  }
  if constexpr (is_a<L, layer_kind::simple_rnn>) {
    using A = typename L::spec::activation;
    if constexpr (std::string_view(acts[0]) == "LeakyRelu") {
      auto alpha = mt.attr_fs(n, "activation_alpha");
      if (alpha.empty()) alpha.assign(std::size_t(nd), 0.01f);  // ONNX's LeakyRelu default
      for (float a : alpha)
        if (alpha.size() != std::size_t(nd) || !(std::abs(a - act_alpha<A>) <= 1e-6 * act_alpha<A>))
          mt.fail(nn + " has activation_alpha " + std::to_string(a) + "; this layer's slope is " +
                  std::to_string(act_alpha<A>));
    }
  }
  // inputs 4 on: sequence_lens, initial_h, and for LSTM initial_c and P
  static const char* const unsupported[] = {"sequence_lens (ctnn's sequences have all their steps)",
                                            "initial_h (ctnn's state starts at zero)",
                                            "initial_c (ctnn's state starts at zero)", "P (peepholes; Keras has none)"};
  constexpr int inputs = is_a<L, layer_kind::lstm> ? 8 : 6;
  if (n.input_size() > inputs)
    mt.fail(nn + " has " + std::to_string(n.input_size()) + " inputs; " + op + " has at most " +
            std::to_string(inputs));
  for (int i = 4; i < n.input_size(); ++i)
    if (!n.input(i).empty()) mt.fail(nn + " has an input " + unsupported[i - 4]);
  const auto w = mt.values(n, 1, "W", {nd, G, F}, "kernel (as ONNX's W: directions x gates*units x features)");
  const auto r = mt.values(n, 2, "R", {nd, G, U}, "recurrent_kernel (as ONNX's R: directions x gates*units x units)");
  const bool has_b = n.input_size() > 3 && !n.input(3).empty();
  const auto b = has_b ? mt.values(n, 3, "B", {nd, 2 * G}, "bias (as ONNX's B: directions x 2*gates*units)")
                       : std::vector<float>();
  auto direction = [&](std::int64_t d, const std::string& prefix) {
    from_onnx_gates<L>(w.data() + d * G * F, r.data() + d * G * U, has_b ? b.data() + d * 2 * G : nullptr,
                       v[p + prefix + "kernel"], v[p + prefix + "recurrent_kernel"], v[p + prefix + "bias"]);
  };
  if constexpr (bidi) {
    direction(0, "forward_");
    direction(1, "backward_");
    using M = typename Bidi::M;
    // the merge reads both directions of the recurrent node's output
    auto merge = [&](const char* m) {
      const int y = mt.cur;
      const auto& a = mt.take(m);
      if (a.input_size() != 2 || mt.gv.root_of(a.input(1)) != y)
        mt.fail(mt.node_name(a) + " does not merge the two directions of " + mt.gv.describe(y) +
                " (bidirectional's merge)");
    };
    if constexpr (std::is_same_v<M, merge::sum>) merge("Add");
    if constexpr (std::is_same_v<M, merge::mul>) merge("Mul");
    if constexpr (std::is_same_v<M, merge::ave>) {
      merge("Add");
      const auto& h = mt.take("Mul", {}, true);
      const int which = h.input_size() > 1 && mt.gv.init.count(h.input(1)) ? 1 : 0;
      const auto half = mt.values(h, which, "factor", {}, "average's factor");
      if (half.size() != 1 || half[0] != 0.5f)
        mt.fail(mt.node_name(h) + " does not multiply by 0.5 (bidirectional's average)");
    }
  } else {
    direction(0, "");
  }
}

// depthwise_conv2d: one Conv with group = C (kernel [C M, 1, KH, KW], output channel c M + m as ctnn's; a
// missing bias is zeros); separable_conv2d: that Conv (no bias, or zeros: ctnn's depthwise step has none), then
// a 1x1 Conv (kernel [F, C M, 1, 1], stride 1, no padding, group 1) with the bias; then the activation.
template <class L>
void match_depthwise(matcher& mt, var_map& v, const std::string& p) {
  constexpr auto G = L::geometry;
  constexpr std::size_t C = G.c, CM = G.f;
  constexpr bool separable = is_a<L, layer_kind::separable_conv2d>;
  const auto& n = mt.take("Conv");
  mt.window(n, G);
  if (const auto g = mt.attr_i(n, "group", 1); g != std::int64_t(C))
    mt.fail(mt.node_name(n) + " has group " + std::to_string(g) + "; this layer's depthwise convolution has group " +
            std::to_string(C) + " (one per input channel)");
  const auto w = mt.values(n, 1, "weight", {std::int64_t(CM), 1, std::int64_t(G.kh), std::int64_t(G.kw)},
                           "depthwise kernel (as c*m x 1 x kh x kw)");
  std::vector<float> t(w.size());
  for (std::size_t y = 0; y < G.kh; ++y)
    for (std::size_t x = 0; x < G.kw; ++x)
      for (std::size_t j = 0; j < CM; ++j) t[(y * G.kw + x) * CM + j] = w[(j * G.kh + y) * G.kw + x];
  const bool has_bias = n.input_size() > 2 && !n.input(2).empty();
  if constexpr (separable) {
    if (has_bias)
      for (float b : mt.values(n, 2, "bias", {std::int64_t(CM)}, "depthwise bias (none)"))
        if (b != 0) mt.fail(mt.node_name(n) + " has a nonzero bias; separable_conv2d's depthwise step has none");
    v[p + "depthwise_kernel"] = std::move(t);
    constexpr std::size_t F = L::F;
    const auto& m = mt.take("Conv");
    mt.window(m, kernels::conv_geometry{G.oh, G.ow, CM, F, 1, 1, 1, G.oh, G.ow, 0, 0});
    if (const auto g = mt.attr_i(m, "group", 1); g != 1)
      mt.fail(mt.node_name(m) + " has group " + std::to_string(g) + "; this layer's pointwise convolution has group 1");
    const auto pw = mt.values(m, 1, "weight", {std::int64_t(F), std::int64_t(CM), 1, 1},
                              "pointwise kernel (as f x c*m x 1 x 1)");
    std::vector<float> q(pw.size());
    for (std::size_t j = 0; j < CM; ++j)
      for (std::size_t f = 0; f < F; ++f) q[j * F + f] = pw[f * CM + j];
    v[p + "pointwise_kernel"] = std::move(q);
    v[p + "bias"] = m.input_size() > 2 && !m.input(2).empty() ? mt.values(m, 2, "bias", {std::int64_t(F)}, "bias")
                                                           : std::vector<float>(F, 0.f);
  } else {
    v[p + "kernel"] = std::move(t);
    v[p + "bias"] = has_bias ? mt.values(n, 2, "bias", {std::int64_t(CM)}, "bias") : std::vector<float>(CM, 0.f);
  }
  mt.activation<typename L::Act>(4);
}

// Matches layer L against mt's next computing nodes; its variables go to v[p + name] (p: "" or
// a graph layer's child prefix "0.1.").
template <class L>
void match_layer(matcher& mt, var_map& v, const std::string& p) {
  using LIn = typename L::in_shape;
  using LOut = typename L::out_shape;
  if constexpr (is_a<L, layer_kind::dense>) {
    constexpr auto K = std::int64_t(LIn::size), N = std::int64_t(LOut::size);
    const auto& n = mt.take("Gemm", "MatMul");
    if (n.op_type() == "Gemm") {
      if (mt.attr_f(n, "alpha", 1) != 1 || mt.attr_f(n, "beta", 1) != 1 || mt.attr_i(n, "transA", 0) != 0)
        mt.fail(mt.node_name(n) + " scales or transposes its input (alpha, beta, transA)");
      if (mt.attr_i(n, "transB", 0)) {  // weight (N, K): PyTorch's Linear
        const auto w = mt.values(n, 1, "weight", {N, K}, "kernel (transposed)");
        std::vector<float> t(w.size());
        for (std::int64_t r = 0; r < N; ++r)
          for (std::int64_t c = 0; c < K; ++c) t[c * N + r] = w[r * K + c];
        v[p + "kernel"] = std::move(t);
      } else {
        v[p + "kernel"] = mt.values(n, 1, "weight", {K, N}, "kernel");
      }
      v[p + "bias"] = n.input_size() > 2 && !n.input(2).empty() ? mt.values(n, 2, "bias", {N}, "bias")
                                                             : std::vector<float>(std::size_t(N), 0.f);
    } else {
      v[p + "kernel"] = mt.values(n, 1, "weight", {K, N}, "kernel");
      v[p + "bias"] = std::vector<float>(std::size_t(N), 0.f);
      // an Add reading the MatMul's output and a constant (not a join's Add, of two computed tensors) adds the bias
      const int mm = mt.cur;
      auto c = mt.readers_of(mm, "Add", {}, true);
      std::erase_if(c, [&](int i) {
        const auto& a = *mt.gv.nodes[std::size_t(i)];
        return a.input_size() == 2 && !mt.gv.init.count(a.input(0)) && !mt.gv.init.count(a.input(1));
      });
      if (!c.empty()) {
        const auto& a = mt.choose(c);
        if (a.input_size() != 2)
          mt.fail(mt.node_name(a) + " has " + std::to_string(a.input_size()) +
                  " inputs; an Add after MatMul adds the bias to its output: 2");
        const int which = mt.gv.init.count(a.input(1)) ? 1 : 0;
        v[p + "bias"] = mt.values(a, which, "bias", {N}, "bias");
        if (const int r = mt.gv.root_of(a.input(1 - which)); r != mm)
          mt.fail(mt.node_name(a) + " adds its bias to " + mt.gv.describe(r) + ", not to " + mt.gv.describe(mm));
      }
    }
    mt.activation<typename L::Act>(2);
  } else if constexpr (is_a<L, layer_kind::conv2d> || is_a<L, layer_kind::pool2d>) {
    using S = typename L::spec;
    constexpr std::size_t H = dim_or<LIn, 0>(), W = dim_or<LIn, 1>(), C = dim_or<LIn, 2>();
    if constexpr (is_a<L, layer_kind::conv2d>) {
      constexpr auto G = window_geometry(H, W, C, S::filters, S::kernel_height, S::kernel_width, S::stride, S::pad);
      const auto& n = mt.take("Conv");
      mt.window(n, G);
      if (mt.attr_i(n, "group", 1) != 1) mt.fail(mt.node_name(n) + " is a grouped convolution");
      const auto w = mt.values(n, 1, "weight", {std::int64_t(G.f), std::int64_t(C), std::int64_t(G.kh), std::int64_t(G.kw)},
                               "kernel (as f x c x kh x kw)");
      std::vector<float> t(w.size());
      for (std::size_t y = 0; y < G.kh; ++y)
        for (std::size_t x = 0; x < G.kw; ++x)
          for (std::size_t c = 0; c < C; ++c)
            for (std::size_t f = 0; f < G.f; ++f)
              t[((y * G.kw + x) * C + c) * G.f + f] = w[((f * C + c) * G.kh + y) * G.kw + x];
      v[p + "kernel"] = std::move(t);
      v[p + "bias"] = n.input_size() > 2 && !n.input(2).empty()
                      ? mt.values(n, 2, "bias", {std::int64_t(G.f)}, "bias")
                      : std::vector<float>(G.f, 0.f);
      mt.activation<typename L::Act>(4);
    } else {
      constexpr auto G = window_geometry(H, W, C, C, S::pool_size, S::pool_size, S::stride, S::pad);
      constexpr bool is_max = std::is_same_v<typename S::kind, detail::max_pool_kind>;
      const auto& n = mt.take(is_max ? "MaxPool" : "AveragePool");
      mt.window(n, G);
      if (!is_max && mt.attr_i(n, "count_include_pad", 0) != 0 && spatial_pads(G) != std::vector<std::int64_t>(4, 0))
        mt.fail(mt.node_name(n) + " counts the padding in its averages; ctnn does not");
    }
  } else if constexpr (is_a<L, layer_kind::depthwise_conv2d> || is_a<L, layer_kind::separable_conv2d>) {
    match_depthwise<L>(mt, v, p);
  } else if constexpr (is_a<L, layer_kind::conv1d>) {
    // a 1-D Conv (kernel [F, C, K], pads [left, right]) between Transposes; ctnn's kernel is [K, C, F]
    constexpr auto G = L::geometry;  // conv2d's, on (1, L, C)
    constexpr std::size_t C = G.c, F = G.f, K = G.kw;
    const auto& n = mt.take("Conv");
    const std::string nn = mt.node_name(n);
    if (const auto ks = mt.attr_is(n, "kernel_shape", {}); !ks.empty() && ks != std::vector<std::int64_t>{std::int64_t(K)})
      mt.fail(nn + " has a window of " + list_str(ks) + "; this layer's is [" + std::to_string(K) + "] (1-D)");
    if (const auto st = mt.attr_is(n, "strides", {1}); st != std::vector<std::int64_t>{std::int64_t(G.stride)})
      mt.fail(nn + " has strides " + list_str(st) + "; this layer's stride is " + std::to_string(G.stride));
    const auto sp = spatial_pads(G);
    const std::vector<std::int64_t> want{sp[1], sp[3]};
    const std::string auto_pad = mt.attr_s(n, "auto_pad", "NOTSET");
    if (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
      if (G.ow != (G.w + G.stride - 1) / G.stride) mt.fail(nn + " pads to the same size; this layer does not");
    } else if (auto_pad == "VALID") {
      if (want != std::vector<std::int64_t>(2, 0)) mt.fail(nn + " does not pad; this layer pads " + list_str(want));
    } else if (const auto pads = mt.attr_is(n, "pads", {0, 0}); pads != want) {
      mt.fail(nn + " has pads " + list_str(pads) + "; this layer's are " + list_str(want) + " (1-D: begin, end)");
    }
    for (auto d : mt.attr_is(n, "dilations", {1}))
      if (d != 1) mt.fail(nn + " is dilated; ctnn's windows are not");
    if (const auto g = mt.attr_i(n, "group", 1); g != 1)
      mt.fail(nn + " has group " + std::to_string(g) + "; conv1d's is 1");
    const auto w = mt.values(n, 1, "weight", {std::int64_t(F), std::int64_t(C), std::int64_t(K)}, "kernel (as f x c x k)");
    std::vector<float> t(w.size());
    for (std::size_t k = 0; k < K; ++k)
      for (std::size_t c = 0; c < C; ++c)
        for (std::size_t f = 0; f < F; ++f) t[(k * C + c) * F + f] = w[(f * C + c) * K + k];
    v[p + "kernel"] = std::move(t);
    v[p + "bias"] = n.input_size() > 2 && !n.input(2).empty() ? mt.values(n, 2, "bias", {std::int64_t(F)}, "bias")
                                                           : std::vector<float>(F, 0.f);
    mt.activation<typename L::Act>(3);
  } else if constexpr (is_a<L, layer_kind::layer_normalization>) {
    // LayerNormalization over the last axis (axis -1, or rank - 1), the same epsilon, float statistics
    constexpr auto C = std::int64_t(L::C);
    constexpr auto rank = std::int64_t(LIn::rank) + 1;
    const auto& n = mt.take("LayerNormalization");
    const std::string nn = mt.node_name(n);
    if (const auto axis = mt.attr_i(n, "axis", -1); axis != -1 && axis != rank - 1)
      mt.fail(nn + " normalises from axis " + std::to_string(axis) + " of rank-" + std::to_string(rank) +
              " data (batch first); layer_normalization over the last one (axis -1)");
    const double eps = mt.attr_f(n, "epsilon", 1e-5), ours = L::spec::epsilon;
    if (!(std::abs(eps - ours) <= 1e-6 * ours))  // (a NaN epsilon differs too)
      mt.fail(nn + " has epsilon " + exact(eps) + "; this layer's is " + exact(ours));
    if (const auto st = mt.attr_i(n, "stash_type", 1); st != onnx::TensorProto::FLOAT)
      mt.fail(nn + " has stash_type " + std::to_string(st) + "; ctnn computes the statistics in float (1)");
    v[p + "gamma"] = mt.values(n, 1, "scale", {C}, "gamma");
    v[p + "beta"] = n.input_size() > 2 && !n.input(2).empty() ? mt.values(n, 2, "bias", {C}, "beta")
                                                           : std::vector<float>(std::size_t(C), 0.f);
  } else if constexpr (is_a<L, layer_kind::zero_padding2d>) {
    // Pad (mode constant, value 0) of the channels-last (batch, H, W, C) data by (0, top, left, 0) before and
    // (0, bottom, right, 0) after: pads an int64 input (opset 11 on, with opset 18's axes) or attribute
    using S = typename L::spec;
    const auto& n = mt.take("Pad");
    const std::string nn = mt.node_name(n);
    if (const auto mode = mt.attr_s(n, "mode", "constant"); mode != "constant")
      mt.fail(nn + " has mode '" + printable(mode, 40) + "'; zero_padding2d pads with zeros (mode 'constant')");
    const std::vector<std::int64_t> want{0, std::int64_t(S::top), std::int64_t(S::left), 0,
                                         0, std::int64_t(S::bottom), std::int64_t(S::right), 0};
    std::vector<std::int64_t> pads;
    float value = 0;
    if (n.input_size() > 1 && !n.input(1).empty()) {
      pads = mt.int64s(n, 1, "pads");
      if (n.input_size() > 2 && !n.input(2).empty()) {
        const auto cv = mt.values(n, 2, "constant_value", {}, "padding value (0)");
        if (cv.size() != 1) mt.fail(nn + "'s constant_value holds " + std::to_string(cv.size()) + " values, not one");
        value = cv[0];
      }
      if (n.input_size() > 3 && !n.input(3).empty()) {  // axes: pads for these axes only, the others 0
        const auto axes = mt.int64s(n, 3, "axes");
        if (pads.size() != 2 * axes.size())
          mt.fail(nn + " has " + std::to_string(pads.size()) + " pads for " + std::to_string(axes.size()) + " axes");
        std::vector<std::int64_t> full(8, 0);
        for (std::size_t k = 0; k < axes.size(); ++k) {
          const std::int64_t a = axes[k] < 0 ? axes[k] + 4 : axes[k];
          if (a < 0 || a > 3) mt.fail(nn + " pads axis " + std::to_string(axes[k]) + " of rank-4 data");
          full[std::size_t(a)] = pads[k];
          full[std::size_t(a) + 4] = pads[k + axes.size()];
        }
        pads = full;
      }
    } else {
      pads = mt.attr_is(n, "pads", {});  // opset < 11
      value = float(mt.attr_f(n, "value", 0));
    }
    if (pads != want)
      mt.fail(nn + " has pads " + list_str(pads) + "; this layer's are " + list_str(want) +
              " (batch, height, width, channels: begins, then ends)");
    if (value != 0) mt.fail(nn + " pads with " + exact(value) + "; zero_padding2d with 0");
  } else if constexpr (is_a<L, layer_kind::up_sampling2d>) {
    // Resize of the channels-last data: mode nearest, coordinate_transformation_mode asymmetric, nearest_mode
    // floor (output index i reads floor(i / scale): Keras' UpSampling2D), scales [1, rows, cols, 1]
    using S = typename L::spec;
    const auto& n = mt.take("Resize");
    const std::string nn = mt.node_name(n);
    auto need = [&](const char* a, const char* dflt, const char* want) {
      if (const auto s = mt.attr_s(n, a, dflt); s != want)
        mt.fail(nn + " has " + a + " '" + printable(s, 40) + "'" + (attr(n, a) ? "" : " (the default)") +
                "; up_sampling2d's is '" + want + "'");
    };
    need("mode", "nearest", "nearest");
    if (mt.opset >= 11) {  // Resize-10's nearest is asymmetric, floor (ONNX's version converter to 11 says so)
      need("coordinate_transformation_mode", "half_pixel", "asymmetric");
      need("nearest_mode", "round_prefer_floor", "floor");
    }
    if (mt.attr_i(n, "antialias", 0) != 0) mt.fail(nn + " antialiases; up_sampling2d does not");
    if (const auto k = mt.attr_s(n, "keep_aspect_ratio_policy", "stretch"); k != "stretch")
      mt.fail(nn + " has keep_aspect_ratio_policy '" + printable(k, 40) + "'; up_sampling2d's is 'stretch'");
    const std::vector<float> want{1.f, float(S::rows), float(S::cols), 1.f};
    std::vector<float> scales;
    if (mt.opset < 11) {  // Resize-10: (X, scales)
      scales = mt.values(n, 1, "scales", {4}, "scales [1, rows, cols, 1]");
    } else {
      if (n.input_size() > 3 && !n.input(3).empty())
        mt.fail(nn + " gives sizes; up_sampling2d's Resize gives scales [1, " + std::to_string(S::rows) + ", " +
                std::to_string(S::cols) + ", 1]");
      const auto axes = mt.attr_is(n, "axes", {0, 1, 2, 3});
      scales = mt.values(n, 2, "scales", {std::int64_t(axes.size())}, "scales (one per axis)");
      std::vector<float> full(4, 1.f);
      for (std::size_t k = 0; k < axes.size(); ++k) {
        const std::int64_t a = axes[k] < 0 ? axes[k] + 4 : axes[k];
        if (a < 0 || a > 3) mt.fail(nn + " resizes axis " + std::to_string(axes[k]) + " of rank-4 data");
        full[std::size_t(a)] = scales[k];
      }
      scales = full;
    }
    if (scales != want) {
      std::string g;
      for (float x : scales) g += (g.empty() ? "" : ", ") + exact(x);
      mt.fail(nn + " has scales [" + g + "]; this layer's are [1, " + std::to_string(S::rows) + ", " +
              std::to_string(S::cols) + ", 1] (batch, height, width, channels)");
    }
  } else if constexpr (is_a<L, layer_kind::batch_norm>) {
    constexpr auto C = std::int64_t(last_dim_v<LIn>);
    const auto& n = mt.take("BatchNormalization");
    const double eps = mt.attr_f(n, "epsilon", 1e-5), ours = L::spec::epsilon;
    if (!(std::abs(eps - ours) <= 1e-6 * ours))  // (a NaN epsilon differs too)
      mt.fail(mt.node_name(n) + " has epsilon " + std::to_string(eps) + "; this layer's is " +
              std::to_string(ours));
    v[p + "gamma"] = mt.values(n, 1, "scale", {C}, "gamma");
    v[p + "beta"] = mt.values(n, 2, "bias", {C}, "beta");
    v[p + "moving_mean"] = mt.values(n, 3, "mean", {C}, "moving_mean");
    v[p + "moving_variance"] = mt.values(n, 4, "variance", {C}, "moving_variance");
  } else if constexpr (is_a<L, layer_kind::activation>) {
    mt.activation<typename L::spec>(std::int64_t(LIn::rank) + 1);
  } else if constexpr (is_a<L, layer_kind::global_average_pool>) {
    mt.take("GlobalAveragePool", "ReduceMean");
  } else if constexpr (is_recurrent<L>) {
    match_recurrent<L>(mt, v, p);
  } else if constexpr (is_a<L, layer_kind::bidirectional>) {
    match_recurrent<typename L::Fwd, L>(mt, v, p);
  } else if constexpr (is_a<L, layer_kind::graph> && requires { L::is_dag; }) {
    // a dag: each node from the tensors it reads (x for "in"): a layer node's nodes from its input, an add
    // join's Adds (one per input after the first, each adding the next input to the sum so far), a concat
    // join's Concat of its inputs in order along its axis
    using table = typename L::table;
    const int x = mt.cur;
    std::array<int, L::n> outs{};
    auto src = [&](std::size_t r) { return table::src[r] == table::input ? x : outs[table::src[r]]; };
    auto label = [&](std::size_t r) {
      return table::src[r] == table::input ? std::string("the dag's input")
                                           : "node '" + std::string(table::names[table::src[r]]) + "''s output";
    };
    L::forwarded::each([&]<std::size_t K, class C>() {
      constexpr std::size_t r0 = table::first[K], m = table::first[K + 1] - r0;
      const std::string id(table::names[K]);
      mt.child = p + id;
      mt.cur = src(r0);
      if constexpr (is_a<C, layer_kind::dag_join>) {
        if constexpr (C::concat) {
          std::vector<int> in;
          std::vector<std::string> what;
          for (std::size_t q = 0; q < m; ++q) {
            in.push_back(src(r0 + q));
            what.push_back(label(r0 + q) + ", input " + std::to_string(q) + " of node '" + id + "'");
          }
          mt.take_concat(in, what, std::int64_t(C::axis) + 1, std::int64_t(C::out_shape::rank) + 1);
        } else {
          for (std::size_t q = 1; q < m; ++q)
            mt.take_add(mt.cur, src(r0 + q),
                        "node '" + id + "': the sum of its inputs before input " + std::to_string(q) + ", and " +
                            label(r0 + q));
        }
      } else {
        match_layer<C>(mt, v, p + id + ".");
      }
      outs[K] = mt.cur;
    });
    mt.child = p.empty() ? std::string() : p.substr(0, p.size() - 1);
    mt.cur = outs[L::n - 1];
  } else if constexpr (is_a<L, layer_kind::graph>) {
    // a graph layer: each child's nodes in turn (each branch from the block's input); then for add (and
    // residual) one Add per branch after the first, adding that branch's output to the sum so far, or
    // concatenate's Concat of the branches' outputs in order along its axis
    const int x = mt.cur;
    std::vector<int> outs;
    L::forwarded::each([&]<std::size_t K, class C>() {
      if constexpr (is_parallel<L>) mt.cur = x;
      mt.child = p + std::to_string(K);
      match_layer<C>(mt, v, p + std::to_string(K) + ".");
      outs.push_back(mt.cur);
    });
    mt.child = p.empty() ? std::string() : p.substr(0, p.size() - 1);
    if constexpr (is_parallel<L> && requires { L::axis; }) {
      std::vector<std::string> what;
      for (std::size_t k = 0; k < outs.size(); ++k) what.push_back("child " + p + std::to_string(k) + "'s output");
      mt.take_concat(outs, what, std::int64_t(L::axis) + 1, std::int64_t(L::out_shape::rank) + 1);
    } else if constexpr (is_parallel<L>) {
      mt.cur = outs[0];
      for (std::size_t k = 1; k < outs.size(); ++k)
        mt.take_add(mt.cur, outs[k],
                    (k == 1 ? "child " + p + "0's output"
                            : "the sum of children " + p + "0 to " + p + std::to_string(k - 1)) +
                        ", and child " + p + std::to_string(k) + "'s output");
    }
  } else if constexpr (is_a<L, layer_kind::masking> || is_a<L, layer_kind::embedding> ||
                       is_a<L, layer_kind::time_distributed>) {
    static_assert(!std::is_same_v<L, L>, "import_onnx: masking, embedding and time_distributed have no ONNX "
                                         "mapping (see ctnn/onnx/import.hpp)");
  }  // dropout, flatten, reshape: nothing to compute
}

// (an array, not a fold: clang nests a fold of N terms N deep, limit 256)
template <class MM>
inline constexpr bool has_quantized_layers = []<std::size_t... I>(std::index_sequence<I...>) {
  constexpr bool q[] = {false, (is_a<ctnn::detail::type_at_t<I, typename MM::layers>, layer_kind::quantized_dense> ||
                               is_a<ctnn::detail::type_at_t<I, typename MM::layers>, layer_kind::quantized_dense_block> ||
                               is_a<ctnn::detail::type_at_t<I, typename MM::layers>, layer_kind::quantized_conv2d>)...};
  for (bool b : q)
    if (b) return true;
  return false;
}(std::make_index_sequence<MM::layer_count>{});

template <class MM>
void import_qdq(MM& m, const onnx::GraphProto& graph, const graph_view& gv, const std::filesystem::path& path) {
  qdq_importer q{graph, gv, path};
  matcher mt{gv, path};
  std::vector<std::map<std::string, std::vector<std::byte>, std::less<>>> vars(MM::layer_count);
  quantization::params previous_out;  // the last full-integer layer's output parameters
  auto put = [](auto& v, const char* name, const auto& values) {
    using V = typename std::remove_cvref_t<decltype(values)>::value_type;
    std::vector<std::byte> b(values.size() * sizeof(V));
    std::memcpy(b.data(), values.data(), b.size());
    v[name] = std::move(b);
  };
  [&]<std::size_t... I>(std::index_sequence<I...>) {
    (void)std::initializer_list<int>{(
        [&] {
          using L = ctnn::detail::type_at_t<I, typename MM::layers>;
          if constexpr (is_a<L, layer_kind::quantized_dense> || is_a<L, layer_kind::quantized_conv2d> ||
                        is_a<L, layer_kind::quantized_dense_block>) {
            constexpr bool conv = is_a<L, layer_kind::quantized_conv2d>;
            constexpr std::size_t K = L::K, N = L::N;
            q.where = "layer " + std::to_string(I + 1) + " (" + L::name() + ")";
            mt.where = q.where;
            const auto& n = q.take(conv ? "Conv" : "Gemm");
            if constexpr (conv) {
              mt.window(n, L::geometry);
              if (mt.attr_i(n, "group", 1) != 1) q.fail(q.name_of(n) + " is a grouped convolution");
            } else if (mt.attr_f(n, "alpha", 1) != 1 || mt.attr_f(n, "beta", 1) != 1 || mt.attr_i(n, "transA", 0) != 0 ||
                       mt.attr_i(n, "transB", 0) != 0) {
              q.fail(q.name_of(n) + " scales or transposes (alpha, beta, transA, transB)");
            }
            // the kernel: DequantizeLinear of an int8 [K, N] (Gemm, per output channel: axis 1) or
            // [F, C, KH, KW] (Conv, per output channel: axis 0), or per tensor; zero points 0
            const auto& bd = q.made_by(n, 1, "DequantizeLinear", "weight");
            const auto& wt = q.init(bd, 0, "int8 kernel");
            std::vector<std::int64_t> want{std::int64_t(K), std::int64_t(N)};
            if constexpr (conv)
              want = {std::int64_t(N), std::int64_t(L::C), std::int64_t(L::KH), std::int64_t(L::KW)};
            if (std::vector<std::int64_t>(wt.dims().begin(), wt.dims().end()) != want)
              q.fail(q.name_of(bd) + "'s kernel is " + dims_str({wt.dims().begin(), wt.dims().end()}) + ", not " +
                     dims_str(want) + (conv ? " (filters x channels x height x width)" : ""));
            const auto w = ints_of(wt, onnx::TensorProto::INT8, K * N, q.where, path);
            auto scale = floats_of(q.init(bd, 1, "kernel scale"), q.where, path);
            if (scale.size() == 1) scale.assign(N, scale[0]);
            const std::int64_t axis = mt.attr_i(bd, "axis", 1), channel_axis = conv ? 0 : 1;
            if (scale.size() != N || (N > 1 && axis != channel_axis && axis != channel_axis - std::int64_t(want.size())))
              q.fail(q.name_of(bd) + " is not per output channel (axis " + std::to_string(channel_axis) + ", " +
                     std::to_string(N) + " scales) nor per tensor");
            for (float s : scale)
              if (!(std::isfinite(s) && s > 0)) q.fail(q.name_of(bd) + " has a scale that is not positive and finite");
            if (bd.input_size() > 2 && !bd.input(2).empty()) {
              const auto& zt = q.init(bd, 2, "kernel zero point");
              for (auto z : ints_of(zt, onnx::TensorProto::INT8, q.count(zt), q.where, path))
                if (z != 0) q.fail(q.name_of(bd) + " has a nonzero zero point (ctnn's weights are symmetric)");
            }
            std::vector<std::int8_t> wn(N * K);  // [N, K]; a Conv's K in ctnn's (kh, kw, c) order, ONNX's is (c, kh, kw)
            std::vector<std::int32_t> sum(N, 0);
            for (std::size_t j = 0; j < N; ++j)
              for (std::size_t k = 0; k < K; ++k) {
                std::size_t at = k * N + j;
                if constexpr (conv) at = (j * L::C + k % L::C) * L::KH * L::KW + k / L::C;
                if (w[at] == -128)
                  q.fail(q.name_of(bd) + " has a weight of -128 at index " + std::to_string(at) +
                         " (ctnn's range is [-127, 127])");
                // a reduce_range layer's weights lie in [-64, 64] (its avx2 product assumes it)
                constexpr std::int32_t wmax = L::spec::scheme::weight_max;
                if (w[at] < -wmax || w[at] > wmax)
                  q.fail(q.name_of(bd) + " has a weight of " + std::to_string(w[at]) + " at index " +
                         std::to_string(at) + " (this layer's " + L::spec::scheme::name() + " range is [-" +
                         std::to_string(wmax) + ", " + std::to_string(wmax) + "])");
                wn[j * K + k] = std::int8_t(w[at]);
                sum[j] += w[at];
              }
            auto& v = vars[I];
            if constexpr (is_a<L, layer_kind::quantized_dense_block>) {
              // the R x C blocks holding a nonzero weight are the kept ones (at most NB of them; a kept
              // block whose weights all quantized to 0 is dropped, which computes the same)
              constexpr std::size_t R = L::R, C = L::C;
              std::vector<std::uint8_t> keep(K / R * (N / C), 0);
              std::size_t kept = 0;
              for (std::size_t kb = 0; kb < K / R; ++kb)
                for (std::size_t jb = 0; jb < N / C; ++jb) {
                  bool any = false;
                  for (std::size_t r = 0; r < R && !any; ++r)
                    for (std::size_t c = 0; c < C && !any; ++c) any = wn[(jb * C + c) * K + kb * R + r] != 0;
                  keep[kb * (N / C) + jb] = any;
                  kept += any;
                }
              if (kept > L::NB)
                q.fail(q.name_of(bd) + "'s kernel has nonzero weights in " + std::to_string(kept) + " blocks of " +
                       std::to_string(R) + " x " + std::to_string(C) + "; this layer keeps " + std::to_string(L::NB));
              std::vector<std::int8_t> values(std::max<std::size_t>(L::G, 1) * 4 * C, 0);
              std::vector<std::byte> ix(L::index::bytes, std::byte{0});
              const std::size_t used =
                  kernels::cpu::int8::block::pack(wn.data(), keep.data(), K, N, R, C, L::G, values.data(),
                                                  L::index::template at<1>(ix.data()), L::index::template at<0>(ix.data()));
              if (used > L::G)
                q.fail(q.name_of(bd) + "'s kept blocks need " + std::to_string(used) + " groups of 4 rows; this layer stores " +
                       std::to_string(L::G));
              put(v, "kernel", values);
              put(v, "index", ix);
            } else {
              std::vector<std::int8_t> packed(kernels::cpu::int8::packed_bytes(K, N));
              kernels::cpu::int8::pack(K, N, wn.data(), K, packed.data());
              put(v, "kernel", packed);
            }
            put(v, "kernel_scale", scale);
            put(v, "kernel_sum", sum);
            if (n.input_size() < 3 || n.input(2).empty()) q.fail(q.name_of(n) + " has no bias");
            // after the Gemm: the activation, if any
            const onnx::NodeProto* after = &n;
            constexpr const char* act = act_op<typename L::Act>();
            if constexpr (!std::string_view(act).empty()) {
              after = &q.only_consumer(n);
              if (L::full && std::string_view(act) == "Relu" && after->op_type() != act && q.relu_folded(n, *after))
                after = &n;  // (onnxruntime's quantize_static: the QuantizeLinear's clamp is the Relu)
              else if (after->op_type() != act) q.fail(q.name_of(n) + " is followed by " + q.name_of(*after) + "; this layer's activation is " + act);
            }
            if constexpr (L::full) {
              const auto in = q.per_tensor(q.made_by(n, 0, "DequantizeLinear", "input"));
              const auto& cd = q.made_by(n, 2, "DequantizeLinear", "bias");
              const auto& bt = q.init(cd, 0, "int32 bias");
              const auto bias = ints_of(bt, onnx::TensorProto::INT32, N, q.where, path);
              const auto bs = floats_of(q.init(cd, 1, "bias scale"), q.where, path);
              if (cd.input_size() > 2 && !cd.input(2).empty()) {  // (onnxruntime's quantize_static writes int32 zeros)
                const auto& zt = q.init(cd, 2, "bias zero point");
                for (auto z : ints_of(zt, onnx::TensorProto::INT32, q.count(zt), q.where, path))
                  if (z != 0) q.fail(q.name_of(cd) + " has a nonzero zero point (" + std::to_string(z) + "; ctnn's int32 bias has none)");
              }
              for (std::size_t j = 0; j < N; ++j) {
                const double want = double(in.scale) * double(scale[j]), got = bs.size() == N ? bs[j] : bs.empty() ? 0 : bs[0];
                if (!(std::abs(got - want) <= 1e-5 * want))
                  q.fail(q.name_of(cd) + "'s scale " + std::to_string(j) + " is " + exact(got) +
                         ", not input scale x kernel scale (" + exact(want) + ")");
              }
              const auto& qo = q.only_consumer(*after);
              if (qo.op_type() != "QuantizeLinear") q.fail(q.name_of(*after) + " is not followed by a QuantizeLinear");
              const auto out = q.per_tensor(qo);
              // a layer reading the previous layer's int8 output (quantization::int8_io): one tensor, one
              // scale and zero point (a graph that requantizes between them imports into float_between_t)
              if constexpr (L::spec::io::input)
                if (in.scale != previous_out.scale || in.zero_point != previous_out.zero_point)
                  q.fail("its input's QuantizeLinear (scale " + exact(in.scale) + ", zero point " +
                         std::to_string(in.zero_point) + ") differs from the previous layer's output one (scale " +
                         exact(previous_out.scale) + ", zero point " + std::to_string(previous_out.zero_point) +
                         "), but this layer reads that layer's int8 output (quantization::float_between_t<Net> "
                         "requantizes in float)");
              previous_out = out;
              std::vector<std::int32_t> mult(N), shift(N);
              for (std::size_t j = 0; j < N; ++j) {
                const auto mq = quantization::quantize_multiplier(double(in.scale) * double(scale[j]) / double(out.scale));
                mult[j] = mq.q;
                shift[j] = mq.shift;
              }
              put(v, "bias", bias);
              put(v, "input_scale", std::vector<float>{in.scale});
              put(v, "input_zero_point", std::vector<std::int32_t>{in.zero_point});
              put(v, "output_scale", std::vector<float>{out.scale});
              put(v, "output_zero_point", std::vector<std::int32_t>{out.zero_point});
              put(v, "output_multiplier", mult);
              put(v, "output_shift", shift);
              put(v, "saturated", std::vector<std::uint32_t>(4, 0));  // no values seen yet
            } else {
              const auto& bt = q.init(n, 2, "float bias");
              if (q.count(bt) != N) q.fail(q.name_of(n) + "'s bias does not hold " + std::to_string(N) + " values");
              put(v, "bias", floats_of(bt, q.where, path));
            }
          } else if constexpr (is_a<L, layer_kind::pool2d>) {
            using S = typename L::spec;
            using LIn = typename L::in_shape;
            constexpr std::size_t H = dim_or<LIn, 0>(), W = dim_or<LIn, 1>(), C = dim_or<LIn, 2>();
            constexpr auto G = window_geometry(H, W, C, C, S::pool_size, S::pool_size, S::stride, S::pad);
            constexpr bool is_max = std::is_same_v<typename S::kind, detail::max_pool_kind>;
            q.where = "layer " + std::to_string(I + 1) + " (" + L::name() + ")";
            mt.where = q.where;
            const auto& n = q.take(is_max ? "MaxPool" : "AveragePool");
            mt.window(n, G);
            if (!is_max && mt.attr_i(n, "count_include_pad", 0) != 0 && spatial_pads(G) != std::vector<std::int64_t>(4, 0))
              q.fail(q.name_of(n) + " counts the padding in its averages; ctnn does not");
          } else if constexpr (is_a<L, layer_kind::global_average_pool>) {
            // GlobalAveragePool, or export_onnx's ReduceMean over every axis but the batch's and the last
            // (keepdims 0)
            using LIn = typename L::in_shape;
            q.where = "layer " + std::to_string(I + 1) + " (" + L::name() + ")";
            mt.where = q.where;
            const auto& n = q.take("GlobalAveragePool", "ReduceMean");
            if (n.op_type() == "ReduceMean") {
              std::vector<std::int64_t> axes;
              for (std::size_t a = 1; a < LIn::rank; ++a) axes.push_back(std::int64_t(a));
              std::vector<std::int64_t> theirs = mt.attr_is(n, "axes", {});
              for (auto& a : theirs)
                if (a < 0) a += std::int64_t(LIn::rank) + 1;  // ONNX's negative axes count from the end
              std::sort(theirs.begin(), theirs.end());
              if (theirs != axes || mt.attr_i(n, "keepdims", 1) != 0)
                q.fail(q.name_of(n) + " does not average over axes " + list_str(axes) +
                       " with keepdims 0 (export_onnx's form of global_average_pool)");
            }
          } else if constexpr (!is_a<L, layer_kind::reshape> && !is_a<L, layer_kind::dropout>) {
            static_assert(is_a<L, layer_kind::reshape>, "import_onnx: a network with quantized layers imports "
                                                        "from a QDQ graph: its other layers must be max_pool2d, "
                                                        "average_pool2d, global_average_pool, flatten, reshape "
                                                        "or dropout");
          }
        }(),
        0)...};  // a list, not a fold (as above)
  }(std::make_index_sequence<MM::layer_count>{});
  if (q.next < q.ops.size()) {
    q.where = "after the last layer";
    q.fail("the graph goes on with " + q.name_of(*q.ops[q.next]) + "; this network ends here");
  }
  m.for_each_variable([&](const variable_ref& r) {
    if (r.kind != role::state) return;
    const auto it = vars[r.layer].find(r.name);
    if (it == vars[r.layer].end() || it->second.size() != r.extent * r.element_bytes)
      throw io_error("import_onnx", path, "layer " + std::to_string(r.layer + 1) + ": the graph gives no '" +
                                              std::string(r.name) + "' of " + std::to_string(r.extent) + " values");
  });
  m.for_each_variable([&](const variable_ref& r) {
    if (r.kind != role::state) return;
    const auto& b = vars[r.layer].find(r.name)->second;
    std::memcpy(r.data, b.data(), b.size());
  });
}
}  // namespace onnx_detail

// Reads an ONNX model's weights into m (see the top of this file).
template <Model M>
void import_onnx(M& m, const std::filesystem::path& path) {
  using MM = std::remove_cvref_t<M>;
  using Net = typename MM::network;
  static_assert(std::is_same_v<typename MM::variable_type, float>, "import_onnx: only float models are imported");
  using namespace onnx_detail;
  // protobuf parses at most 2 GiB - 1 bytes (a larger ONNX model keeps its weights in external files)
  const std::string bytes = io::read_file(path, "import_onnx", std::size_t(std::numeric_limits<int>::max()));
  onnx::ModelProto model;
  if (!model.ParseFromString(bytes)) throw io_error("import_onnx", path, "not an ONNX model (protobuf parse failed)");
  const graph_view gv = view_of(model.graph(), path);

  // The input: the same dims (channels-last), or for a network without
  // spatial layers, the same number of values.
  using In = typename Net::input_type;
  {
    std::vector<std::int64_t> theirs(gv.input_dims.begin() + 1, gv.input_dims.end()), ours;
    for (auto d : In::dims) ours.push_back(std::int64_t(d));
    auto squeeze = [](std::vector<std::int64_t> d) {
      std::erase(d, std::int64_t(1));
      return d;
    };
    constexpr bool spatial = [&]<std::size_t... I>(std::index_sequence<I...>) {
      return ctnn::detail::any_of_v<is_spatial<ctnn::detail::type_at_t<I, typename MM::layers>>...>;
    }(std::make_index_sequence<MM::layer_count>{});
    std::int64_t n_theirs = 1;  // -1: unknown or more than this network's input
    for (auto d : theirs) {
      if (d <= 0 || n_theirs > std::int64_t(In::size) / d) {
        n_theirs = -1;
        break;
      }
      n_theirs *= d;
    }
    const bool same = squeeze(theirs) == squeeze(ours);
    if (!same && (spatial || n_theirs != std::int64_t(In::size)))
      throw io_error("import_onnx", path,
                     "the graph's input is (batch, " + dims_str(theirs) + "); this network's is (batch, " +
                         dims_str(ours) + ")" +
                         (spatial && n_theirs == std::int64_t(In::size)
                              ? " (a channels-first graph imports only into a network without spatial layers)"
                              : ""));
  }

  if constexpr (has_quantized_layers<MM>) return import_qdq(m, model.graph(), gv, path);
  matcher mt{gv, path};
  for (const auto& o : model.opset_import())
    if (o.domain().empty() || o.domain() == "ai.onnx") mt.opset = o.version();
  // Attempts: the first takes the first candidate at each choice point (branches that start alike);
  // a failed one is replayed with the next choice. The error reported is that of the attempt that
  // matched the most nodes (the first of those).
  // Attempts: the first takes the first candidate at each choice point (branches that start alike);
  // a failed one is replayed with the next choice. First pass: each join's Add in export_onnx's order
  // (the sum so far, then the next branch), so that branches alike pair with the same layers whatever the
  // nodes' order; if an attempt failed on that order only, a second pass takes the Adds either way round.
  // The error reported is that of the attempt (of the last pass) that matched the most nodes.
  constexpr std::size_t max_attempts = 4096;
  std::vector<std::map<std::string, std::vector<float>, std::less<>>> vars;
  std::optional<io_error> best;
  std::size_t best_taken = 0, attempts = 0;
  bool matched = false;
  for (int pass = 0; pass < 2 && !matched; ++pass) {
    mt.in_order = pass == 0;
    mt.pick.clear();
    mt.options.clear();
    best.reset();
    best_taken = 0;
    while (!matched) {
      mt.restart();
      vars.assign(MM::layer_count, {});
      try {
        [&]<std::size_t... I>(std::index_sequence<I...>) {
          (void)std::initializer_list<int>{(
              [&] {
                using L = ctnn::detail::type_at_t<I, typename MM::layers>;
                mt.where = "layer " + std::to_string(I + 1) + " (" + L::name() + ")";
                mt.child.clear();
                match_layer<L>(mt, vars[I], "");
              }(),
              0)...};  // a list, not a fold: clang nests a fold of N terms N deep (limit 256)
        }(std::make_index_sequence<MM::layer_count>{});
        mt.where = "after the last layer";
        mt.child.clear();
        mt.finish(model.graph());
        matched = true;
      } catch (const io_error& e) {
        if (!best || mt.taken_count > best_taken) {
          best.emplace(e);
          best_taken = mt.taken_count;
        }
        if (++attempts == max_attempts)
          throw io_error(std::string(best->what()) + " (after " + std::to_string(max_attempts) +
                             " ways of pairing the graph's nodes with the layers)",
                         path);
        if (!mt.next_choice()) break;
      }
    }
    if (!mt.swapped) break;
  }
  if (!matched) throw *best;
  // everything matched and every variable has its values: copy
  m.for_each_variable([&](const variable_ref& r) {
    if (r.kind != role::parameter && r.kind != role::state) return;
    const auto it = vars[r.layer].find(r.name);
    if (it == vars[r.layer].end() || it->second.size() != r.extent)
      throw io_error("import_onnx", path, "layer " + std::to_string(r.layer + 1) + ": the graph gives no '" +
                                              std::string(r.name) + "' of " + std::to_string(r.extent) + " values");
  });
  m.for_each_variable([&](const variable_ref& r) {
    if (r.kind != role::parameter && r.kind != role::state) return;
    std::memcpy(r.data, vars[r.layer].find(r.name)->second.data(), r.extent * sizeof(float));
  });
}

}  // namespace ctnn
