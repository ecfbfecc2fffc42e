// libFuzzer target: import_onnx (ctnn/onnx.hpp) on an arbitrary file, into a dense network (the shape of
// tests/onnx/data/torch_mlp.onnx), a convolutional one (conv2d, batch_norm, both pools, dense with
// leaky_relu and softmax), a recurrent one (ONNX's LSTM, RNN, a bidirectional GRU averaged), one of
// graph layers (residual with and without projection, concatenate, add, a dag: Add and Concat joins) and
// one of issue 29's layers (zero_padding2d, depthwise_conv2d, separable_conv2d, up_sampling2d,
// layer_normalization, conv1d: Pad, grouped Conv, Resize, LayerNormalization, 1-D Conv), and int8
// networks read from QDQ graphs (quantized_dense full integer and dynamic range, quantized_conv2d
// with int8 max_pool2d between, and with an int8 global_average_pool between (ReduceMean); seeds written
// by export_onnx and by onnxruntime's quantize_static). A
// malformed model must throw io_error; anything else (a protobuf FatalException, a read out of bounds,
// another exception type) is a bug, as is any sanitizer report or a run past -rss_limit_mb /
// -malloc_limit_mb. Built only where ctnn::onnx exists. CTNN_FUZZ_VERBOSE=1 prints each io_error.
#include <ctnn/layers/concatenate.hpp>
#include <ctnn/layers/dag.hpp>
#include <ctnn/layers/residual.hpp>
#include <ctnn/onnx.hpp>
#include <ctnn/quantization/convert.hpp>

#include <unistd.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

namespace {
namespace fs = std::filesystem;
using mlp = ctnn::sequential<ctnn::input<8>, ctnn::dense<16, ctnn::relu>, ctnn::dense<16, ctnn::tanh>, ctnn::dense<3>>;
using cnn = ctnn::sequential<ctnn::input<6, 6, 1>, ctnn::conv2d<2, 3, 3, 1, ctnn::padding::same, ctnn::relu>,
                             ctnn::batch_norm, ctnn::average_pool2d<2, 1, ctnn::padding::same>, ctnn::max_pool2d<2>,
                             ctnn::flatten, ctnn::dense<3, ctnn::leaky_relu<0.1>>, ctnn::dense<2, ctnn::softmax>>;
using rnn = ctnn::sequential<ctnn::input<5, 3>, ctnn::lstm<4, ctnn::return_sequences>,
                             ctnn::simple_rnn<3, ctnn::relu, ctnn::return_sequences>,
                             ctnn::bidirectional<ctnn::gru<2>, ctnn::merge::ave>>;
using namespace ctnn;  // (the graph's node<"name", ...> read better without the prefix)
using graph =
    sequential<input<4, 4, 2>, residual<conv2d<2, 3, 3, 1, padding::same>, relu>,
               concatenate<-1, conv2d<2, 1, 1, 1, padding::valid, relu>, branch<>>, flatten, dense<6, relu>,
               add<branch<>, dense<6>, dense<6, relu>>, residual<dense<3>>,
               dag<node<"a", dense<4, relu>>, node<"b", dense<4>, "in">, node<"c", concatenate_join<-1>, "a", "b">,
                   node<"d", add_join, "a", "b">, node<"e", concatenate_join<-1>, "c", "d">>,
               dense<2>>;
using layers = sequential<input<4, 4, 2>, zero_padding2d<1>, depthwise_conv2d<3, 3, 1, padding::same, 2, relu>,
                          separable_conv2d<3, 3, 3, 2, padding::same>, up_sampling2d<2>, layer_normalization<>,
                          reshape<36, 3>, conv1d<2, 3, 1, padding::valid, relu>, flatten, dense<2>>;
// int8 networks (quantized_t of these): the MLP and CNN of tests/onnx/test_onnx_ort_qdq.cpp, whose
// quantize_static graphs are the seeds ort_qdq_mlp and ort_qdq_cnn, and a CNN with a relu conv2d
// (export_onnx writes its Relu before the layout Transpose; quantize_static's graph of it, with the
// Relu folded into the Conv's QuantizeLinear, is the seed ort_qdq_cnn_relu)
using qmlp = sequential<input<4, 4>, flatten, dense<12, relu>, dropout<0.1>, dense<5>>;
using qcnn = sequential<input<6, 6, 2>, conv2d<4, 3, 3, 1, padding::same>, max_pool2d<2>,
                        conv2d<3, 3, 3, 1, padding::valid>, flatten, dense<8, relu>, dense<5>>;
using qcnn_relu = sequential<input<6, 6, 2>, conv2d<4, 3, 3, 1, padding::same, relu>, max_pool2d<2>, flatten, dense<5>>;
// a global average pooling on the int8 tensor between two full-integer layers (ReduceMean; seed qdq_gap)
using qgap = sequential<input<6, 6, 2>, conv2d<4, 3, 3, 1, padding::same, relu>, global_average_pool, dense<5>>;

// full-integer (and dynamic-range) conversions of fresh models, calibrated on fixed inputs
template <class Net>
auto full_integer(std::uint64_t seed) {
  std::vector<float> x(16 * Net::input_type::size);
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = float(int(i * 37 % 19) - 9) / 9.0f;
  return ctnn::quantize_full_integer(ctnn::make_model<Net>(seed), x.data(), 16);
}

// A file of this process's own, removed when it exits.
const fs::path& file() {
  static const struct temp_file {
    fs::path path = fs::temp_directory_path() / ("ctnn_fuzz_onnx_" + std::to_string(::getpid()) + ".onnx");
    ~temp_file() {
      std::error_code ec;
      fs::remove(path, ec);
    }
  } f;
  return f.path;
}

void write(const onnx::ModelProto& m, const fs::path& p) {
  std::string bytes;
  m.SerializeToString(&bytes);
  std::ofstream(p, std::ios::binary) << bytes;
}

onnx::ModelProto read(const fs::path& p) {
  onnx::ModelProto m;
  std::ifstream in(p, std::ios::binary);
  m.ParseFromIstream(&in);
  return m;
}

// CTNN_FUZZ_WRITE_SEED=dir writes into dir: the five networks exported (rnn: LSTM, RNN, GRU nodes; graph:
// Add and Concat joins; layers: Pad, grouped Conv, Resize, LayerNormalization), graph's nodes in another topological order with each Add's operands swapped
// (graph_reordered), mlp's graph with its first Gemm split into MatMul + Add (TensorFlow's form), and
// regress_add_one_input: that graph with an Add of one input, which import_onnx read past (a protobuf
// FatalException under the asan build).
void write_seeds(const fs::path& out) {
  fs::create_directories(out);
  ctnn::export_onnx(ctnn::make_model<mlp>(1), out / "mlp_gemm");
  ctnn::export_onnx(ctnn::make_model<cnn>(2), out / "cnn");
  ctnn::export_onnx(ctnn::make_model<rnn>(3), out / "rnn");
  ctnn::export_onnx(ctnn::make_model<graph>(4), out / "graph");
  ctnn::export_onnx(ctnn::make_model<layers>(5), out / "layers");
  ctnn::export_onnx(full_integer<qmlp>(6), out / "qdq_mlp");
  ctnn::export_onnx(ctnn::quantize_dynamic(ctnn::make_model<qmlp>(7)), out / "qdq_mlp_dynamic");
  ctnn::export_onnx(full_integer<qcnn>(8), out / "qdq_cnn");
  ctnn::export_onnx(full_integer<qcnn_relu>(9), out / "qdq_cnn_relu");
  ctnn::export_onnx(full_integer<qgap>(10), out / "qdq_gap");
  {  // the latest ready node first (Kahn's algorithm): another valid order; Add's operands the other way round
    auto r = read(out / "graph");
    auto* g = r.mutable_graph();
    std::vector<onnx::NodeProto> nodes(g->node().begin(), g->node().end()), order;
    std::vector<std::string> made;
    for (const auto& i : g->input()) made.push_back(i.name());
    for (const auto& t : g->initializer()) made.push_back(t.name());
    std::vector<bool> done(nodes.size(), false);
    auto is_made = [&](const std::string& t) { return t.empty() || std::find(made.begin(), made.end(), t) != made.end(); };
    while (order.size() < nodes.size()) {
      std::size_t pick = nodes.size();
      for (std::size_t i = 0; i < nodes.size(); ++i)
        if (!done[i] && std::all_of(nodes[i].input().begin(), nodes[i].input().end(), is_made)) pick = i;
      if (pick == nodes.size()) return;  // (cannot happen: export_onnx writes a topological order)
      done[pick] = true;
      if (nodes[pick].op_type() == "Add") {
        const std::string first = nodes[pick].input(0);
        nodes[pick].set_input(0, nodes[pick].input(1));
        nodes[pick].set_input(1, first);
      }
      order.push_back(nodes[pick]);
      for (const auto& o : nodes[pick].output()) made.push_back(o);
    }
    g->clear_node();
    for (const auto& n : order) *g->add_node() = n;
    write(r, out / "graph_reordered");
  }
  onnx::ModelProto m = read(out / "mlp_gemm");
  auto* g = m.mutable_graph();
  std::vector<onnx::NodeProto> nodes(g->node().begin(), g->node().end());
  onnx::NodeProto mm = nodes[0], add;
  mm.set_op_type("MatMul");
  mm.mutable_input()->RemoveLast();
  mm.set_output(0, "matmul_out");
  add.set_op_type("Add");
  add.set_name("bias_add");
  add.add_input("matmul_out");
  add.add_input(nodes[0].input(2));
  add.add_output(nodes[0].output(0));
  g->clear_node();
  *g->add_node() = mm;
  *g->add_node() = add;
  for (std::size_t i = 1; i < nodes.size(); ++i) *g->add_node() = nodes[i];
  write(m, out / "mlp_matmul_add");
  g->mutable_node(1)->mutable_input()->RemoveLast();
  write(m, out / "regress_add_one_input");
}

template <class M>
void import_into(M& m) {
  try {
    ctnn::import_onnx(m, file());
  } catch (const ctnn::io_error& e) {
    if (std::getenv("CTNN_FUZZ_VERBOSE")) std::fprintf(stderr, "%s\n", e.what());
  }
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const bool seeded = [] {
    if (const char* seed = std::getenv("CTNN_FUZZ_WRITE_SEED")) write_seeds(seed);
    return true;
  }();
  (void)seeded;
  std::ofstream(file(), std::ios::binary).write(reinterpret_cast<const char*>(data), std::streamsize(size));
  static auto a = ctnn::make_model<mlp>(1);
  static auto b = ctnn::make_model<cnn>(1);
  static auto c = ctnn::make_model<rnn>(1);
  static auto d = ctnn::make_model<graph>(1);
  static auto e = ctnn::make_model<layers>(1);
  import_into(a);
  import_into(b);
  import_into(c);
  import_into(d);
  import_into(e);
  static auto qa = full_integer<qmlp>(1);
  static auto qb = ctnn::quantize_dynamic(ctnn::make_model<qmlp>(1));
  static auto qc = full_integer<qcnn>(1);
  static auto qd = full_integer<qcnn_relu>(1);
  static auto qe = full_integer<qgap>(1);
  import_into(qa);
  import_into(qb);
  import_into(qc);
  import_into(qd);
  import_into(qe);
  return 0;
}
