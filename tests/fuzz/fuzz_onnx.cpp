// libFuzzer target: import_onnx (ctnn/onnx.hpp) on an arbitrary file, into a dense network (the shape of
// tests/onnx/data/torch_mlp.onnx), a convolutional one (conv2d, batch_norm, both pools, dense with
// leaky_relu and softmax) and a recurrent one (ONNX's LSTM, RNN, a bidirectional GRU averaged). A
// malformed model must throw io_error; anything else (a protobuf FatalException, a read out of bounds,
// another exception type) is a bug, as is any sanitizer report or a run past -rss_limit_mb /
// -malloc_limit_mb. Built only where ctnn::onnx exists.
#include <ctnn/onnx.hpp>

#include <unistd.h>

#include <cstddef>
#include <cstdint>
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

// CTNN_FUZZ_WRITE_SEED=dir writes into dir: the three networks exported (rnn: LSTM, RNN, GRU nodes),
// mlp's graph with its first Gemm split into MatMul + Add (TensorFlow's form), and regress_add_one_input: that graph with an Add of
// one input, which import_onnx read past (a protobuf FatalException under the asan build).
void write_seeds(const fs::path& out) {
  fs::create_directories(out);
  ctnn::export_onnx(ctnn::make_model<mlp>(1), out / "mlp_gemm");
  ctnn::export_onnx(ctnn::make_model<cnn>(2), out / "cnn");
  ctnn::export_onnx(ctnn::make_model<rnn>(3), out / "rnn");
  onnx::ModelProto m;
  std::ifstream in(out / "mlp_gemm", std::ios::binary);
  m.ParseFromIstream(&in);
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
  } catch (const ctnn::io_error&) {
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
  import_into(a);
  import_into(b);
  import_into(c);
  return 0;
}
