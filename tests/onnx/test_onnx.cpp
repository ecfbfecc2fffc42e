// onnx.hpp: export of trained models run by onnxruntime, export -> import round trips,
// a PyTorch-exported MLP imported, and graphs that differ refused naming the first mismatch.
#include <doctest/doctest.h>

#include <ctnn/data/in_memory.hpp>
#include <ctnn/losses/sparse_categorical_crossentropy.hpp>
#include <ctnn/npy.hpp>
#include <ctnn/onnx.hpp>
#include <ctnn/optimizers/sgd.hpp>
#include <ctnn/train/fit.hpp>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <unistd.h>

using namespace ctnn;
namespace fs = std::filesystem;

namespace {
// every exported kind of layer: conv2d (same padding, relu), batch_norm, max_pool2d, average_pool2d with
// same padding, dropout, flatten, dense with leaky_relu, dense with softmax
using cnn = sequential<input<6, 6, 2>, conv2d<4, 3, 3, 1, padding::same, relu>, batch_norm, max_pool2d<2>,
                       average_pool2d<2, 1, padding::same>, dropout<0.25>, flatten, dense<8, leaky_relu<0.1>>,
                       dense<3, softmax>>;
// a rank-2 input, a strided valid convolution, global_average_pool, activations as layers
using small = sequential<input<7, 7>, conv2d<3, 3, 3, 2, padding::valid, sigmoid>, global_average_pool, dense<4>,
                         ctnn::tanh, dense<2>, softmax>;

struct temp_dir {
  fs::path path = fs::temp_directory_path() / ("ctnn_onnx_" + std::to_string(::getpid()));
  temp_dir() { fs::create_directories(path); }
  ~temp_dir() { fs::remove_all(path); }
};

std::string message_of(auto&& f) {
  try {
    f();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "(no exception)";
}

template <Shape S>
xt::xtensor<float, S::rank + 1> random_inputs(std::size_t n, std::uint64_t seed) {
  rng g(seed);
  auto x = xtd::batch_tensor<float, S>(n);
  for (auto& v : x) v = float(g.uniform(-1, 1));
  return x;
}

// A few epochs of training, so batch_norm's moving statistics and every weight have moved.
model<cnn> trained_cnn() {
  auto m = make_model<cnn>(7);
  const auto x = random_inputs<shape<6, 6, 2>>(64, 1);
  std::vector<std::int32_t> y(64);
  for (std::size_t i = 0; i < 64; ++i) y[i] = std::int32_t(i % 3);
  data::in_memory<shape<6, 6, 2>, sparse_labels> d(std::vector<float>(x.begin(), x.end()), y);
  sgd<> opt{0.05};
  fit(m, sparse_categorical_crossentropy{}, opt, d.batch(16), epochs{3});
  return m;
}

// Runs the model file with onnxruntime on x; false (after CTNN_SKIP) when python3,
// numpy or onnxruntime are missing.
bool onnxruntime_predict(const fs::path& model_file, const auto& x, xt::xtensor<float, 2>& y, const fs::path& dir) {
  save_npy(dir / "x.npy", x);
  const std::string cmd = "python3 " CTNN_ONNX_TEST_DIR "/run_onnxruntime.py " + model_file.string() + " " +
                          (dir / "x.npy").string() + " " + (dir / "y.npy").string();
  const int rc = std::system(cmd.c_str());
  if (rc != 0 && WIFEXITED(rc) && (WEXITSTATUS(rc) == 3 || WEXITSTATUS(rc) == 127)) {
    MESSAGE("CTNN_SKIP: python3 with numpy and onnxruntime is not available (pip install onnxruntime)");
    return false;
  }
  REQUIRE(rc == 0);
  y = load_npy<float, 2>(dir / "y.npy");
  return true;
}

double max_abs_diff(const auto& a, const auto& b) {
  REQUIRE(a.size() == b.size());
  double d = 0;
  auto i = a.begin();
  for (auto j = b.begin(); j != b.end(); ++i, ++j) d = std::max(d, std::abs(double(*i) - double(*j)));
  return d;
}

template <class M>
std::vector<float> params(const M& m) {
  return {m.parameters().begin(), m.parameters().end()};
}
}  // namespace

TEST_CASE("export_onnx: onnxruntime computes ctnn's predictions within 1e-5") {
  temp_dir d;
  auto a = trained_cnn();
  export_onnx(a, d.path / "cnn.onnx");
  const auto x = random_inputs<shape<6, 6, 2>>(10, 2);
  const auto ours = ctnn::predict(a, x);
  xt::xtensor<float, 2> theirs;
  if (!onnxruntime_predict(d.path / "cnn.onnx", x, theirs, d.path)) return;
  REQUIRE(theirs.dimension() == 2);
  CHECK(theirs.shape()[0] == 10);
  CHECK(theirs.shape()[1] == 3);
  CHECK(max_abs_diff(theirs, ours) < 1e-5);

  auto b = make_model<small>(3);
  export_onnx(b, d.path / "small.onnx");
  const auto xs = random_inputs<shape<7, 7>>(6, 3);
  if (!onnxruntime_predict(d.path / "small.onnx", xs, theirs, d.path)) return;
  CHECK(max_abs_diff(theirs, ctnn::predict(b, xs)) < 1e-5);
}

TEST_CASE("export_onnx then import_onnx restores every variable bit for bit") {
  temp_dir d;
  auto a = trained_cnn();
  export_onnx(a, d.path / "cnn.onnx");
  auto b = make_model<cnn>(99);
  REQUIRE(params(b) != params(a));
  import_onnx(b, d.path / "cnn.onnx");
  CHECK(params(b) == params(a));
  CHECK(std::vector<float>(b.state().begin(), b.state().end()) == std::vector<float>(a.state().begin(), a.state().end()));
  const auto x = random_inputs<shape<6, 6, 2>>(4, 5);
  CHECK(ctnn::predict(b, x) == ctnn::predict(a, x));
  // no temporary left beside the file
  CHECK(std::distance(fs::directory_iterator(d.path), fs::directory_iterator{}) == 1);
}

TEST_CASE("import_onnx refuses a graph that differs, naming the first mismatch, and changes nothing") {
  temp_dir d;
  auto a = trained_cnn();
  const fs::path f = d.path / "cnn.onnx";
  export_onnx(a, f);
  const std::string p = "import_onnx: " + f.string() + ": ";

  using more_filters = sequential<input<6, 6, 2>, conv2d<5, 3, 3, 1, padding::same, relu>, batch_norm, max_pool2d<2>,
                                  average_pool2d<2, 1, padding::same>, dropout<0.25>, flatten, dense<8, leaky_relu<0.1>>,
                                  dense<3, softmax>>;
  auto m1 = make_model<more_filters>(1);
  const auto before = params(m1);
  CHECK(message_of([&] { import_onnx(m1, f); }) ==
        p + "layer 1 (conv2d<5, 3, 3, 1, same, relu>): Conv 'layer1_conv_1' has a weight of 4 x 2 x 3 x 3; this "
            "layer's kernel (as f x c x kh x kw) is 5 x 2 x 3 x 3");
  CHECK(params(m1) == before);

  using no_relu = sequential<input<6, 6, 2>, conv2d<4, 3, 3, 1, padding::same>, batch_norm, max_pool2d<2>,
                             average_pool2d<2, 1, padding::same>, dropout<0.25>, flatten, dense<8, leaky_relu<0.1>>,
                             dense<3, softmax>>;
  auto m2 = make_model<no_relu>(1);
  CHECK(message_of([&] { import_onnx(m2, f); }) ==
        p + "layer 2 (batch_norm): the graph's next node is Relu 'layer1_act_3'; this layer "
            "needs BatchNormalization");

  using other_slope = sequential<input<6, 6, 2>, conv2d<4, 3, 3, 1, padding::same, relu>, batch_norm, max_pool2d<2>,
                                 average_pool2d<2, 1, padding::same>, dropout<0.25>, flatten,
                                 dense<8, leaky_relu<0.2>>, dense<3, softmax>>;
  auto m3 = make_model<other_slope>(1);
  CHECK(message_of([&] { import_onnx(m3, f); }).starts_with(
      p + "layer 7 (dense<8, leaky_relu<0.2>>): LeakyRelu 'layer7_act_"));

  using shorter = sequential<input<6, 6, 2>, conv2d<4, 3, 3, 1, padding::same, relu>, batch_norm, max_pool2d<2>,
                             average_pool2d<2, 1, padding::same>, flatten, dense<8, leaky_relu<0.1>>>;
  auto m4 = make_model<shorter>(1);
  CHECK(message_of([&] { import_onnx(m4, f); }).starts_with(p + "after the last layer: the graph goes on with Gemm '"));

  using other_input = sequential<input<6, 6, 3>, conv2d<4, 3, 3, 1, padding::same, relu>, batch_norm, max_pool2d<2>,
                                 average_pool2d<2, 1, padding::same>, dropout<0.25>, flatten,
                                 dense<8, leaky_relu<0.1>>, dense<3, softmax>>;
  auto m5 = make_model<other_input>(1);
  CHECK(message_of([&] { import_onnx(m5, f); }) ==
        p + "the graph's input is (batch, 6 x 6 x 2); this network's is (batch, 6 x 6 x 3)");

  std::ofstream(d.path / "junk.onnx") << "not a protobuf at all, just words";
  CHECK(message_of([&] { import_onnx(m1, d.path / "junk.onnx"); }) ==
        "import_onnx: " + (d.path / "junk.onnx").string() + ": not an ONNX model (protobuf parse failed)");
  CHECK(message_of([&] { import_onnx(m1, d.path / "missing.onnx"); }) ==
        "import_onnx: " + (d.path / "missing.onnx").string() + ": no such file");
}

TEST_CASE("a PyTorch-exported MLP imported into ctnn predicts as PyTorch did") {
  // tests/onnx/data/make_torch_mlp.py made the graph and PyTorch's outputs
  using mlp = sequential<input<8>, dense<16, relu>, dense<16, ctnn::tanh>, dense<3>>;
  const fs::path dir = CTNN_ONNX_TEST_DIR "/data";
  auto m = make_model<mlp>(0);
  import_onnx(m, dir / "torch_mlp.onnx");
  const auto x = load_inputs_npy<model<mlp>>(dir / "torch_mlp_x.npy");
  const auto want = load_npy<float, 2>(dir / "torch_mlp_y.npy");
  const auto got = ctnn::predict(m, x);
  CHECK(max_abs_diff(got, want) < 1e-5);
  // the same graph is refused by a network with other widths, naming the layer and both shapes
  using wider = sequential<input<8>, dense<17, relu>, dense<16, ctnn::tanh>, dense<3>>;
  auto w = make_model<wider>(0);
  const std::string msg = message_of([&] { import_onnx(w, dir / "torch_mlp.onnx"); });
  CHECK(msg.find("layer 1 (dense<17, relu>): Gemm '") != std::string::npos);
  CHECK(msg.find("has a weight of 16 x 8; this layer's kernel (transposed) is 17 x 8") != std::string::npos);
}
