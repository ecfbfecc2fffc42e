// onnx.hpp: export of trained models run by onnxruntime, export -> import round trips (recurrent
// layers included: RNN, LSTM, GRU, bidirectional),
// a PyTorch-exported MLP imported, graphs that differ refused naming the first mismatch,
// quantized models exported in QDQ form (their graph, onnxruntime against ctnn's int8 outputs), and
// graph layers imported by the tensors their nodes read: any node order, joins and Concat axes checked.
#include <doctest/doctest.h>

#include <ctnn/data/in_memory.hpp>
#include <ctnn/layers/bidirectional.hpp>
#include <ctnn/layers/concatenate.hpp>
#include <ctnn/layers/gru.hpp>
#include <ctnn/layers/lstm.hpp>
#include <ctnn/layers/dag.hpp>
#include <ctnn/layers/residual.hpp>
#include <ctnn/layers/simple_rnn.hpp>
#include <ctnn/losses/sparse_categorical_crossentropy.hpp>
#include <ctnn/npy.hpp>
#include <ctnn/onnx.hpp>
#include <ctnn/optimizers/sgd.hpp>
#include <ctnn/quantization/qat.hpp>
#include <ctnn/train/fit.hpp>
#include <ctnn/xtensor.hpp>  // predict on xtensor inputs (npy.hpp no longer brings it)

#include "onnx/onnx_util.hpp"

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <set>
#include <string>
#include <unistd.h>
#include <utility>

using namespace ctnn;
using namespace ctnn::test::onnx_util;

namespace {
// every exported kind of layer: conv2d (same padding, relu), batch_norm, max_pool2d, average_pool2d with
// same padding, dropout, flatten, dense with leaky_relu, dense with softmax
using cnn = sequential<input<6, 6, 2>, conv2d<4, 3, 3, 1, padding::same, relu>, batch_norm, max_pool2d<2>,
                       average_pool2d<2, 1, padding::same>, dropout<0.25>, flatten, dense<8, leaky_relu<0.1>>,
                       dense<3, softmax>>;
// graph layers: a residual block with batch_norm (x itself added), one with the 1x1 conv2d projection,
// concatenate along the channels with x itself, add over three branches, a residual with the dense projection
using graphs = sequential<input<6, 6, 2>, conv2d<4, 3, 3, 1, padding::same, relu>,
                          residual<conv2d<4, 3, 3, 1, padding::same>, batch_norm, relu>,
                          residual<conv2d<6, 3, 3, 2, padding::same>>,                     // 3x3x6
                          concatenate<-1, conv2d<2, 1, 1, 1, padding::valid, relu>, branch<>>,  // 3x3x8
                          flatten, dense<8, relu>, add<branch<>, dense<8>, branch<dense<4, relu>, dense<8>>>,
                          residual<dense<5, relu>>, dense<3, softmax>>;
// a dag: x read by three nodes, b by two that are not siblings, a Concat along the channels, Adds
using wired = sequential<input<6, 6, 2>,
                         dag<node<"a", conv2d<4, 3, 3, 1, padding::same, relu>>, node<"b", conv2d<4, 3, 3, 1, padding::same>>,
                             node<"c", concatenate_join<-1>, "b", "in">, node<"d", conv2d<4, 1, 1>, "c">,
                             node<"e", add_join, "d", "b", "a">>,
                         global_average_pool, dense<3, softmax>>;
// a rank-2 input, a strided valid convolution, global_average_pool, activations as layers
using small = sequential<input<7, 7>, conv2d<3, 3, 3, 2, padding::valid, sigmoid>, global_average_pool, dense<4>,
                         ctnn::tanh, dense<2>, softmax>;

// A few epochs of training on n random 6x6x2 inputs, so batch_norm's moving statistics and every weight have moved.
template <class Net>
model<Net> trained(std::uint64_t seed, std::size_t n, std::size_t batch, std::size_t ep) {
  auto m = make_model<Net>(seed);
  const auto x = random_inputs<shape<6, 6, 2>>(n, 1);
  std::vector<std::int32_t> y(n);
  for (std::size_t i = 0; i < n; ++i) y[i] = std::int32_t(i % 3);
  data::in_memory<shape<6, 6, 2>, sparse_labels> d(std::vector<float>(x.begin(), x.end()), y);
  sgd<> opt{0.05};
  fit(m, sparse_categorical_crossentropy{}, opt, d.batch(batch), epochs{ep});
  return m;
}
model<cnn> trained_cnn() { return trained<cnn>(7, 64, 16, 3); }

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

namespace {
// The Add and Concat nodes of ONNX file f, counted; each Concat must join two inputs on the
// channels (axis 2 of the sample, 3 with the batch).
std::pair<int, int> add_and_concat_nodes(const fs::path& f) {
  onnx::ModelProto mp;
  std::ifstream in(f, std::ios::binary);
  REQUIRE(mp.ParseFromIstream(&in));
  int adds = 0, concats = 0;
  for (const auto& n : mp.graph().node()) {
    adds += n.op_type() == "Add";
    if (n.op_type() == "Concat") {
      ++concats;
      CHECK(n.input_size() == 2);
      CHECK(n.attribute(0).i() == 3);
    }
  }
  return {adds, concats};
}
}  // namespace

TEST_CASE("graph layers export as ONNX Add and Concat nodes: onnxruntime agrees, and they import back bit for bit") {
  temp_dir d;
  auto a = trained<graphs>(11, 8, 8, 1);  // one step: batch_norm's moving statistics are not the initial ones
  const fs::path f = d.path / "graphs.onnx";
  export_onnx(a, f);
  const auto [adds, concats] = add_and_concat_nodes(f);
  CHECK(adds == 2 + 2 + 1);  // two residuals, add's three branches, the last residual
  CHECK(concats == 1);

  auto b = make_model<graphs>(99);
  REQUIRE(params(b) != params(a));
  import_onnx(b, f);
  CHECK(params(b) == params(a));
  CHECK(std::vector<float>(b.state().begin(), b.state().end()) == std::vector<float>(a.state().begin(), a.state().end()));

  const auto x = random_inputs<shape<6, 6, 2>>(5, 6);
  const auto ours = ctnn::predict(a, x);
  CHECK(ctnn::predict(b, x) == ours);
  xt::xtensor<float, 2> theirs;
  if (!onnxruntime_predict(f, x, theirs, d.path)) return;
  CHECK(max_abs_diff(theirs, ours) < 1e-5);
}

TEST_CASE("a dag exports as its nodes wired by name: onnxruntime agrees, and it imports back bit for bit") {
  temp_dir d;
  auto a = trained<wired>(12, 8, 8, 1);
  const fs::path f = d.path / "dag.onnx";
  export_onnx(a, f);
  const auto [adds, concats] = add_and_concat_nodes(f);
  CHECK(adds == 2);
  CHECK(concats == 1);

  auto b = make_model<wired>(99);
  REQUIRE(params(b) != params(a));
  import_onnx(b, f);
  CHECK(params(b) == params(a));
  const auto x = random_inputs<shape<6, 6, 2>>(5, 7);
  const auto ours = ctnn::predict(a, x);
  CHECK(ctnn::predict(b, x) == ours);
  xt::xtensor<float, 2> theirs;
  if (!onnxruntime_predict(f, x, theirs, d.path)) return;
  CHECK(max_abs_diff(theirs, ours) < 1e-5);
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
        p + "layer 1 (conv2d<5, 3, 3, 1, same, relu>): Conv 'layer1_conv_1' (node 1) has a weight of 4 x 2 x 3 x 3; this "
            "layer's kernel (as f x c x kh x kw) is 5 x 2 x 3 x 3");
  CHECK(params(m1) == before);

  using no_relu = sequential<input<6, 6, 2>, conv2d<4, 3, 3, 1, padding::same>, batch_norm, max_pool2d<2>,
                             average_pool2d<2, 1, padding::same>, dropout<0.25>, flatten, dense<8, leaky_relu<0.1>>,
                             dense<3, softmax>>;
  auto m2 = make_model<no_relu>(1);
  CHECK(message_of([&] { import_onnx(m2, f); }) ==
        p + "layer 2 (batch_norm): the graph's next node is Relu 'layer1_act_2' (node 2); this layer "
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

namespace {
using mlp4 = sequential<input<4>, dense<3, leaky_relu<0.1>>, dense<2>>;

onnx::ModelProto read_model(const fs::path& f) {
  onnx::ModelProto m;
  REQUIRE(m.ParseFromString(io::read_file(f, "test")));
  return m;
}
void write_model(const onnx::ModelProto& m, const fs::path& f) {
  std::string bytes;
  REQUIRE(m.SerializeToString(&bytes));
  io::write_file_atomically(f, bytes);
}
onnx::TensorProto* initializer(onnx::ModelProto& m, const std::string& name) {
  for (auto& t : *m.mutable_graph()->mutable_initializer())
    if (t.name() == name) return &t;
  FAIL("no initializer " << name);
  return nullptr;
}
// mlp4's graph with its first Gemm split into MatMul + Add (as TensorFlow exports a Dense layer):
// nodes MatMul (0), Add (1), LeakyRelu (2), Gemm (3), Identity (4)
onnx::ModelProto matmul_add(const fs::path& exported) {
  auto m = read_model(exported);
  auto* g = m.mutable_graph();
  std::vector<onnx::NodeProto> nodes(g->node().begin(), g->node().end());
  REQUIRE(nodes[0].op_type() == "Gemm");
  onnx::NodeProto mm = nodes[0], add;
  mm.set_op_type("MatMul");
  mm.set_name("dense/MatMul");
  mm.mutable_input()->RemoveLast();  // the bias goes to the Add
  mm.set_output(0, "dense/MatMul_out");
  add.set_op_type("Add");
  add.set_name("dense/BiasAdd");
  add.add_input("dense/MatMul_out");
  add.add_input(nodes[0].input(2));
  add.add_output(nodes[0].output(0));
  g->clear_node();
  *g->add_node() = mm;
  *g->add_node() = add;
  for (std::size_t i = 1; i < nodes.size(); ++i) *g->add_node() = nodes[i];
  return m;
}
}  // namespace

TEST_CASE("import_onnx: a malformed graph is an io_error naming the layer, the node and what is wrong") {
  temp_dir d;
  auto a = make_model<mlp4>(3);
  const fs::path exported = d.path / "mlp.onnx", f = d.path / "bad.onnx";
  export_onnx(a, exported);
  const std::string p = "import_onnx: " + f.string() + ": ";
  auto b = make_model<mlp4>(4);
  const auto before = params(b);
  auto refused = [&](const onnx::ModelProto& m) {
    write_model(m, f);
    std::string what = "(no exception)";
    try {
      import_onnx(b, f);
    } catch (const io_error& e) {
      what = e.what();
    } catch (const std::exception& e) {
      what = std::string("a foreign exception: ") + e.what();
    }
    CHECK(params(b) == before);
    return what;
  };
  const std::string l1 = p + "layer 1 (dense<3, leaky_relu<0.1>>): ";

  // MatMul + Add imports as a dense layer...
  write_model(matmul_add(exported), f);
  auto c = make_model<mlp4>(4);
  import_onnx(c, f);
  CHECK(params(c) == params(a));
  // ... but an Add with one input was a protobuf FatalException (tests/fuzz/corpus/onnx/regress_add_one_input)
  {
    auto m = matmul_add(exported);
    m.mutable_graph()->mutable_node(1)->mutable_input()->RemoveLast();
    CHECK(refused(m) == l1 + "Add 'dense/BiasAdd' (node 1) has 1 inputs; an Add after MatMul adds the bias to its output: 2");
    m.mutable_graph()->mutable_node(1)->clear_input();  // an Add of nothing does not read the MatMul's output
    CHECK(refused(m) == l1 + "the graph computes nothing more from the output of MatMul 'dense/MatMul' (node 0); this "
                             "layer needs LeakyRelu");
  }
  {  // a MatMul without its weight, a Gemm whose weight is no initializer
    auto m = matmul_add(exported);
    m.mutable_graph()->mutable_node(0)->mutable_input()->RemoveLast();
    CHECK(refused(m) == l1 + "MatMul 'dense/MatMul' (node 0) has no weight");
    m = read_model(exported);
    m.mutable_graph()->mutable_node(0)->set_input(1, "input");
    CHECK(refused(m) == l1 + "Gemm 'layer1_gemm_0' (node 0)'s weight 'input' is not a constant");
    m.mutable_graph()->mutable_node(0)->set_input(1, "nowhere");  // a tensor nothing makes
    CHECK(refused(m) == p + "Gemm 'layer1_gemm_0' (node 0) reads 'nowhere', which no node, initializer or graph input makes");
    m = read_model(exported);  // the second Gemm reads the graph input, not the first layer's output
    REQUIRE(m.graph().node(2).op_type() == "Gemm");
    m.mutable_graph()->mutable_node(2)->set_input(0, "input");
    CHECK(refused(m) == p + "layer 2 (dense<2>): the graph computes nothing more from the output of LeakyRelu "
                            "'layer1_act_1' (node 1); this layer needs Gemm or MatMul");
  }
  {  // wrong, negative and huge dims, another data type, values that do not match the dims
    auto m = read_model(exported);
    initializer(m, "layer1_kernel")->set_dims(0, 5);
    CHECK(refused(m) == l1 + "Gemm 'layer1_gemm_0' (node 0) has a weight of 5 x 3; this layer's kernel is 4 x 3");
    m.mutable_graph()->mutable_node(0)->set_name("\x1b[2Jgemm\n");  // names are printed as printable ASCII
    CHECK(refused(m) == l1 + "Gemm '?[2Jgemm?' (node 0) has a weight of 5 x 3; this layer's kernel is 4 x 3");
    m.mutable_graph()->mutable_node(0)->set_name("layer1_gemm_0");
    initializer(m, "layer1_kernel")->set_dims(0, -4);
    CHECK(refused(m) == l1 + "Gemm 'layer1_gemm_0' (node 0)'s weight 'layer1_kernel' has a negative dimension (-4 x 3)");
    initializer(m, "layer1_kernel")->set_dims(0, std::int64_t(1) << 62);
    initializer(m, "layer1_kernel")->set_dims(1, std::int64_t(1) << 62);
    CHECK(refused(m) == l1 + "Gemm 'layer1_gemm_0' (node 0) has a weight of 4611686018427387904 x 4611686018427387904; "
                             "this layer's kernel is 4 x 3");
    m = read_model(exported);
    initializer(m, "layer1_kernel")->set_data_type(onnx::TensorProto::INT64);
    CHECK(refused(m) == l1 + "Gemm 'layer1_gemm_0' (node 0): tensor 'layer1_kernel' is not float32 (ONNX type 7)");
    m = read_model(exported);
    initializer(m, "layer1_kernel")->mutable_raw_data()->resize(47);
    CHECK(refused(m) == l1 + "Gemm 'layer1_gemm_0' (node 0): tensor 'layer1_kernel' holds 47 bytes for 12 floats");
    m = read_model(exported);
    auto* k = initializer(m, "layer1_kernel");
    k->clear_raw_data();
    for (int i = 0; i < 11; ++i) k->add_float_data(0.5f);
    CHECK(refused(m) == l1 + "Gemm 'layer1_gemm_0' (node 0): tensor 'layer1_kernel' holds 11 values for 12 floats");
    k->add_float_data(0.5f);
    write_model(m, f);
    import_onnx(c, f);  // float_data instead of raw_data is fine
    CHECK(c.layer_parameters<0>()[11] == 0.5f);  // the first dense layer: kernel (3, 2)
  }
  {  // attributes of another type than ONNX defines, a NaN slope
    auto m = read_model(exported);
    auto* t = m.mutable_graph()->mutable_node(0)->add_attribute();
    t->set_name("transB");
    t->set_type(onnx::AttributeProto::FLOAT);
    t->set_f(1);
    CHECK(refused(m) == l1 + "Gemm 'layer1_gemm_0' (node 0)'s attribute 'transB' is FLOAT, not INT");
    m = read_model(exported);
    auto* alpha = m.mutable_graph()->mutable_node(1)->mutable_attribute(0);
    REQUIRE(alpha->name() == "alpha");
    alpha->set_f(std::numeric_limits<float>::quiet_NaN());
    CHECK(refused(m).starts_with(l1 + "LeakyRelu 'layer1_act_1' (node 1) has alpha nan; this layer's slope is 0.1"));
  }
  {  // a graph input of huge dims (their product overflowed int64) or none
    auto m = read_model(exported);
    auto* shape = m.mutable_graph()->mutable_input(0)->mutable_type()->mutable_tensor_type()->mutable_shape();
    shape->mutable_dim(1)->set_dim_value(std::int64_t(1) << 62);
    shape->add_dim()->set_dim_value(std::int64_t(1) << 62);
    CHECK(refused(m) == p + "the graph's input is (batch, 4611686018427387904 x 4611686018427387904); this network's "
                            "is (batch, 4)");
    m.mutable_graph()->clear_input();
    CHECK(refused(m) == p + "the graph has no input");
  }
  {  // a file larger than protobuf parses (sparse: nothing is written or read)
    std::ofstream(f, std::ios::binary | std::ios::trunc).close();
    fs::resize_file(f, std::uintmax_t(1) << 31);
    CHECK(message_of([&] { import_onnx(b, f); }) ==
          p + "the file holds 2147483648 bytes, more than the 2147483647 allowed");
    fs::remove(f);
  }
  {  // batch normalization without its statistics
    using bn_net = sequential<input<4>, batch_norm>;
    auto c = make_model<bn_net>(1);
    export_onnx(c, exported);
    auto m = read_model(exported);
    onnx::NodeProto* bn = nullptr;
    for (auto& n : *m.mutable_graph()->mutable_node())
      if (n.op_type() == "BatchNormalization") bn = &n;
    REQUIRE(bn != nullptr);
    bn->mutable_input()->RemoveLast();
    bn->mutable_input()->RemoveLast();
    write_model(m, f);
    auto e = make_model<bn_net>(2);
    CHECK(message_of([&] { import_onnx(e, f); }) ==
          p + "layer 1 (batch_norm): BatchNormalization 'layer1_batchnorm_0' (node 0) has no mean");
  }
}

namespace {
// An activation that declares no onnx_op, and a layer that declares no kind.
struct no_onnx_act : detail::activation_spec<no_onnx_act> {
  static std::string name() { return "no_onnx_act"; }
  template <class B, class T>
  static void forward(T*, std::size_t, std::size_t) {}
  template <class B, class T>
  static void backward(const T*, T*, std::size_t, std::size_t) {}
};
struct kindless_layer {};
template <class Spec, class In = shape<4>>
using bound = typename Spec::template bind<In, precision::float32, cpu<>>;
}  // namespace

TEST_CASE("export_onnx and import_onnx map each layer by the kind it declares, each activation by its onnx_op") {
  using namespace onnx_detail;
  static_assert(is_a<bound<dense<3, relu>>, layer_kind::dense>);
  static_assert(is_a<bound<conv2d<2, 3, 3>, shape<6, 6, 1>>, layer_kind::conv2d>);
  static_assert(is_a<bound<max_pool2d<2>, shape<6, 6, 1>>, layer_kind::pool2d>);
  static_assert(is_a<bound<average_pool2d<2>, shape<6, 6, 1>>, layer_kind::pool2d>);
  static_assert(is_a<bound<batch_norm>, layer_kind::batch_norm>);
  static_assert(is_a<bound<dropout<0.5>>, layer_kind::dropout>);
  static_assert(is_a<bound<flatten, shape<2, 2>>, layer_kind::reshape>);
  static_assert(is_a<bound<global_average_pool, shape<3, 3, 2>>, layer_kind::global_average_pool>);
  static_assert(is_a<bound<softmax>, layer_kind::activation>);
  static_assert(!is_a<bound<dense<3>>, layer_kind::conv2d>);
  static_assert(std::is_same_v<kind_of<kindless_layer>::type, void>);
  // the spatial layers (between Transposes) are the kinds that say so
  static_assert(is_spatial<bound<conv2d<2, 3, 3>, shape<6, 6, 1>>> && is_spatial<bound<max_pool2d<2>, shape<6, 6, 1>>> &&
                is_spatial<bound<global_average_pool, shape<3, 3, 2>>> && !is_spatial<bound<dense<3>>>);
  // a graph layer is spatial when a child is, exportable when every child is
  static_assert(is_spatial<bound<residual<conv2d<2, 3, 3, 1, padding::same>>, shape<6, 6, 2>>> &&
                !is_spatial<bound<add<branch<>, dense<3>>, shape<3>>>);
  static_assert(exportable<bound<add<branch<>, dense<3>>, shape<3>>>() &&
                !exportable<bound<add<branch<>, dense<3, no_onnx_act>>, shape<3>>>());
  // an activation's ONNX operator is its own member; one without it, or a layer without a kind, is not exportable
  CHECK(std::string_view(act_op<relu>()) == "Relu");
  CHECK(std::string_view(act_op<identity>()).empty());
  CHECK(act_alpha<leaky_relu<0.1>> == doctest::Approx(0.1));
  static_assert(act_op<no_onnx_act>() == nullptr);
  static_assert(exportable<bound<dense<3, leaky_relu<0.1>>>>());
  static_assert(exportable<bound<dropout<0.5>>>());
  static_assert(!exportable<bound<dense<3, no_onnx_act>>>());
  static_assert(!exportable<bound<no_onnx_act>>());
  static_assert(!exportable<kindless_layer>());
}

namespace {
// int8 models: dense layers around flatten and dropout (kept by quantized_t)
using qnet = sequential<input<4, 4>, flatten, dense<12, relu>, dropout<0.1>, dense<5>>;
constexpr std::size_t qin = 16;

// qnet with nonzero biases (a fresh dense layer's are 0), so the int32 biases matter
model<qnet> qmodel() {
  auto m = make_model<qnet>(5);
  rng g(17);
  m.for_each_variable([&](const variable_ref& v) {
    if (v.name == "bias")
      for (std::size_t j = 0; j < v.extent; ++j) reinterpret_cast<float*>(v.data)[j] = float(g.uniform(-0.3, 0.3));
  });
  return m;
}

std::vector<float> uniform_rows(std::size_t n, std::uint64_t seed, double r) {
  rng g(seed);
  std::vector<float> x(n * qin);
  for (auto& v : x) v = float(g.uniform(-r, r));
  return x;
}
// The first/last layer's value of a 1-element variable.
template <class V, class M>
V scalar_of(const M& m, std::string_view name, bool last) {
  V out{};
  std::size_t at = last ? 0 : std::size_t(-1);
  m.for_each_variable([&](const variable_ref& v) {
    if (v.name == name && (last ? v.layer >= at : v.layer <= at)) {
      at = v.layer;
      std::memcpy(&out, v.data, sizeof(V));
    }
  });
  return out;
}
const onnx::NodeProto& node_named(const onnx::ModelProto& m, const std::string& prefix) {
  for (const auto& n : m.graph().node())
    if (n.name().rfind(prefix, 0) == 0) return n;
  FAIL("no node " << prefix);
  return m.graph().node(0);
}
const onnx::TensorProto& init_named(const onnx::ModelProto& m, const std::string& name) {
  for (const auto& t : m.graph().initializer())
    if (t.name() == name) return t;
  FAIL("no initializer " << name);
  return m.graph().initializer(0);
}
std::int64_t attr_of(const onnx::NodeProto& n, const char* name) {
  for (const auto& a : n.attribute())
    if (a.name() == name) return a.i();
  return -999;
}

// ctnn's full-integer outputs against onnxruntime's, in output quantization steps: the largest
// difference and how many outputs differ.
struct step_diff {
  double max = 0;
  std::size_t differ = 0, total = 0;
};
step_diff steps_between(const auto& ours, const auto& theirs, float out_scale) {
  REQUIRE(ours.size() == theirs.size());
  step_diff d;
  auto j = theirs.begin();
  for (auto i = ours.begin(); i != ours.end(); ++i, ++j) {
    const double s = std::abs(double(*i) - double(*j)) / double(out_scale);
    d.max = std::max(d.max, s);
    d.differ += s > 0.5;
    ++d.total;
  }
  return d;
}
}  // namespace

TEST_CASE("export_onnx of a full-integer model: a QDQ graph with ctnn's int8 weights, int32 biases and parameters") {
  temp_dir d;
  auto m = qmodel();
  const auto cal = uniform_rows(64, 11, 1.0);
  auto q = quantize_full_integer(m, cal.data(), 64);
  export_onnx(q, d.path / "q.onnx");
  const auto f = read_model(d.path / "q.onnx");
  std::vector<std::string> ops;
  for (const auto& n : f.graph().node()) ops.push_back(n.op_type());
  // flatten; layer 2: Q/DQ of the input, DQ of the kernel and the bias, Gemm, Relu, Q/DQ of the output;
  // layer 4: its input pair omitted (the tensor already went through the same pair), Q/DQ of the output
  const std::vector<std::string> want{"Reshape", "DequantizeLinear", "QuantizeLinear", "DequantizeLinear",
                                      "DequantizeLinear", "Gemm", "Relu", "QuantizeLinear", "DequantizeLinear",
                                      "DequantizeLinear", "DequantizeLinear", "Gemm", "QuantizeLinear",
                                      "DequantizeLinear", "Identity"};
  CHECK(ops == want);
  // the kernel: int8 [K, N], per output channel (axis 1), equal to the layer's unpacked kernel
  const auto& w = init_named(f, "layer4_kernel_quantized");
  REQUIRE(w.data_type() == onnx::TensorProto::INT8);
  REQUIRE((w.dims_size() == 2 && w.dims(0) == 12 && w.dims(1) == 5));
  CHECK(attr_of(node_named(f, "layer4_kernel_dequantize"), "axis") == 1);
  CHECK(init_named(f, "layer4_kernel_scale").dims(0) == 5);
  std::vector<std::int8_t> packed, unpacked(5 * 12);
  q.for_each_variable([&](const variable_ref& v) {
    if (v.layer == 3 && v.name == "kernel") packed.assign(reinterpret_cast<std::int8_t*>(v.data), reinterpret_cast<std::int8_t*>(v.data) + v.extent);
  });
  kernels::cpu::int8::unpack(12, 5, packed.data(), unpacked.data());
  for (std::size_t k = 0; k < 12; ++k)
    for (std::size_t j = 0; j < 5; ++j) CHECK(std::int8_t(w.raw_data()[k * 5 + j]) == unpacked[j * 12 + k]);
  // the bias: int32, scale input_scale * kernel_scale (per channel), no zero point
  const auto& b = init_named(f, "layer4_bias_quantized");
  CHECK(b.data_type() == onnx::TensorProto::INT32);
  CHECK(node_named(f, "layer4_bias_dequantize").input_size() == 2);
  // the output pair carries the calibrated parameters
  const auto& out_zp = f.graph().initializer(f.graph().initializer_size() - 1);
  CHECK(out_zp.data_type() == onnx::TensorProto::INT8);
  CHECK(std::int32_t(std::int8_t(out_zp.raw_data()[0])) == scalar_of<std::int32_t>(q, "output_zero_point", true));
}

TEST_CASE("onnxruntime runs exported int8 models: full integer and QAT within one output step") {
  temp_dir d;
  auto m = qmodel();
  const auto cal = uniform_rows(64, 11, 1.0);
  const auto xv = uniform_rows(48, 12, 1.3);  // partly beyond the calibrated range: saturation
  auto x = xtd::batch_tensor<float, shape<4, 4>>(48);
  std::copy(xv.begin(), xv.end(), x.begin());
  xt::xtensor<float, 2> theirs;

  auto full_integer = [&](auto&& q, const char* what) {
    export_onnx(q, d.path / "q.onnx");
    const auto ours = ctnn::predict(q, x);
    const float out_scale = scalar_of<float>(q, "output_scale", true);
    xt::xtensor<float, 2> unoptimized;
    if (!onnxruntime_predict(d.path / "q.onnx", x, theirs, d.path, &unoptimized)) return;
    for (bool optimize : {false, true}) {
      const auto s = steps_between(ours, optimize ? theirs : unoptimized, out_scale);
      const std::string run = std::string(what) + (optimize ? ", onnxruntime optimized: " : ", onnxruntime unoptimized: ");
      MESSAGE(run << s.differ
                   << " of " << s.total << " outputs differ, at most " << s.max << " output steps");
      CHECK(s.max < 1.01);  // one step: ties and the fixed-point multiplier (docs/interop.md)
      CHECK(s.differ * 10 <= s.total);
    }
  };
  full_integer(quantize_full_integer(m, cal.data(), 64), "full integer");

  // quantization-aware training (one short epoch), converted, exported the same way
  auto qat = quantize_model(m);
  std::vector<std::int32_t> y(64);
  for (std::size_t i = 0; i < 64; ++i) y[i] = std::int32_t(i % 5);
  data::in_memory<shape<4, 4>, sparse_labels> ds(cal, y);
  sgd<> opt{0.05};
  fit(qat, sparse_categorical_crossentropy{.from_logits = true}, opt, ds.batch(16), epochs{1});
  full_integer(convert_qat(qat), "QAT");

  // reduce_range (7-bit weights, as ONNX Runtime's own reduce_range=True writes them): the QDQ
  // kernels hold the layer's int8 values, all in [-64, 64]
  auto reduced = quantize_full_integer<quantization::reduce_range>(m, cal.data(), 64);
  export_onnx(reduced, d.path / "q.onnx");
  const auto f = read_model(d.path / "q.onnx");
  for (const char* name : {"layer2_kernel_quantized", "layer4_kernel_quantized"}) {
    const auto& w = init_named(f, name);
    REQUIRE(w.data_type() == onnx::TensorProto::INT8);
    int top = 0;
    for (char c : w.raw_data()) top = std::max(top, std::abs(int(std::int8_t(c))));
    INFO(name);
    CHECK(top == 64);
  }
  full_integer(reduced, "reduce_range full integer");
  auto qat7 = quantize_model<quantization::reduce_range>(m);
  fit(qat7, sparse_categorical_crossentropy{.from_logits = true}, opt, ds.batch(16), epochs{1});
  full_integer(convert_qat(qat7), "reduce_range QAT");
}

TEST_CASE("onnxruntime runs an exported dynamic-range model within 1e-5") {
  temp_dir d;
  auto m = qmodel();
  const auto xv = uniform_rows(48, 12, 1.3);
  auto x = xtd::batch_tensor<float, shape<4, 4>>(48);
  std::copy(xv.begin(), xv.end(), x.begin());
  xt::xtensor<float, 2> theirs;
  // the per-row input quantization written out, the rest in float
  auto dyn = quantize_dynamic(m);
  export_onnx(dyn, d.path / "dyn.onnx");
  const auto ours = ctnn::predict(dyn, x);
  if (!onnxruntime_predict(d.path / "dyn.onnx", x, theirs, d.path)) return;
  CHECK(max_abs_diff(theirs, ours) < 1e-5);
}

TEST_CASE("onnxruntime runs an exported int8 CNN (quantized_conv2d as QDQ around Conv, max pooling between): within one step") {
  // conv2d same, max pool, conv2d valid: 6x6x2 -> 6x6x4 -> 3x3x4 -> 1x1x3, flatten, dense
  using qcnn = sequential<input<6, 6, 2>, conv2d<4, 3, 3, 1, padding::same, relu>, max_pool2d<2>,
                          conv2d<3, 3, 3, 1, padding::valid>, flatten, dense<5>>;
  temp_dir d;
  auto m = trained<qcnn>(3, 64, 16, 2);
  const auto cal = random_inputs<shape<6, 6, 2>>(64, 21);
  auto x = random_inputs<shape<6, 6, 2>>(40, 22);
  x *= 1.3f;  // partly beyond the calibrated range: saturation
  auto q = quantize_full_integer(m, cal.data(), 64);
  export_onnx(q, d.path / "q.onnx");
  const auto f = read_model(d.path / "q.onnx");
  // layer 1: Q/DQ of the input before the Transpose, the int8 kernel [F, C, KH, KW] dequantized per axis 0
  const auto& w = init_named(f, "layer1_kernel_quantized");
  REQUIRE((w.dims_size() == 4 && w.dims(0) == 4 && w.dims(1) == 2 && w.dims(2) == 3 && w.dims(3) == 3));
  CHECK(attr_of(node_named(f, "layer1_kernel_dequantize"), "axis") == 0);
  std::vector<std::string> ops;
  for (const auto& n : f.graph().node()) ops.push_back(n.op_type());
  const std::vector<std::string> first{"DequantizeLinear", "QuantizeLinear", "DequantizeLinear", "DequantizeLinear",
                                       "Transpose",        "Conv",           "Relu",             "Transpose",
                                       "QuantizeLinear",   "DequantizeLinear"};
  CHECK(std::vector<std::string>(ops.begin(), ops.begin() + 10) == first);
  // ctnn's kernel (kh, kw, c) order against ONNX's (c, kh, kw): one weight by hand
  std::vector<std::int8_t> packed, plain(4 * 18);
  q.for_each_variable([&](const variable_ref& v) {
    if (v.layer == 0 && v.name == "kernel")
      packed.assign(reinterpret_cast<std::int8_t*>(v.data), reinterpret_cast<std::int8_t*>(v.data) + v.extent);
  });
  kernels::cpu::int8::unpack(18, 4, packed.data(), plain.data());
  // filter 3, kh 2, kw 1, c 1: ctnn k = (2 * 3 + 1) * 2 + 1 = 15; ONNX ((3 * 2 + 1) * 3 + 2) * 3 + 1 = 70
  CHECK(std::int8_t(w.raw_data()[70]) == plain[3 * 18 + 15]);
  xt::xtensor<float, 2> theirs, unoptimized;
  if (!onnxruntime_predict(d.path / "q.onnx", x, theirs, d.path, &unoptimized)) return;
  const auto ours = ctnn::predict(q, x);
  const float out_scale = scalar_of<float>(q, "output_scale", true);
  for (bool optimize : {false, true}) {
    const auto st = steps_between(ours, optimize ? theirs : unoptimized, out_scale);
    const std::string run = optimize ? "int8 CNN, onnxruntime optimized: " : "int8 CNN, onnxruntime unoptimized: ";
    MESSAGE(run << st.differ << " of " << st.total
            << " outputs differ, at most " << st.max << " output steps");
    CHECK(st.max < 1.01);  // one step: ties and the fixed-point multiplier (docs/interop.md)
    CHECK(st.differ * 10 <= st.total);
  }
  // dynamic range: the per-sample input quantization written out, the rest in float
  auto dyn = quantize_dynamic(m);
  export_onnx(dyn, d.path / "dyn.onnx");
  if (!onnxruntime_predict(d.path / "dyn.onnx", x, theirs, d.path)) return;
  CHECK(max_abs_diff(theirs, ctnn::predict(dyn, x)) < 1e-5);
  // reduce_range (7-bit weights): the same graphs, onnxruntime within one step (full integer) and
  // 1e-5 (dynamic range); the QDQ form imports back into the reduce_range type bit for bit
  auto q7 = quantize_full_integer<quantization::reduce_range>(m, cal.data(), 64);
  export_onnx(q7, d.path / "q7.onnx");
  if (!onnxruntime_predict(d.path / "q7.onnx", x, theirs, d.path, &unoptimized)) return;
  const auto ours7 = ctnn::predict(q7, x);
  const float out_scale7 = scalar_of<float>(q7, "output_scale", true);
  for (bool optimize : {false, true}) {
    const auto st = steps_between(ours7, optimize ? theirs : unoptimized, out_scale7);
    MESSAGE("reduce_range int8 CNN, onnxruntime " << std::string(optimize ? "optimized: " : "unoptimized: ") << st.differ << " of "
                                                  << st.total << " outputs differ, at most " << st.max << " output steps");
    CHECK(st.max < 1.01);
    CHECK(st.differ * 10 <= st.total);
  }
  auto back7 = quantize_full_integer<quantization::reduce_range>(m, cal.data(), 64);
  import_onnx(back7, d.path / "q7.onnx");
  CHECK(ctnn::predict(back7, x) == ours7);
  // an 8-bit graph does not import into the reduce_range type: its weights reach 127
  const std::string msg = message_of([&] { import_onnx(back7, d.path / "q.onnx"); });
  CHECK(msg.find("reduce_range<full_integer> range is [-64, 64]") != std::string::npos);
  auto dyn7 = quantize_dynamic<quantization::reduce_range>(m);
  export_onnx(dyn7, d.path / "dyn7.onnx");
  if (!onnxruntime_predict(d.path / "dyn7.onnx", x, theirs, d.path)) return;
  CHECK(max_abs_diff(theirs, ctnn::predict(dyn7, x)) < 1e-5);
}

TEST_CASE("int8 max pooling in ONNX: MaxPool between a DQ and a Q of one scale, onnxruntime within one step, imported back exactly") {
  // conv2d, max_pool2d, conv2d, max_pool2d, flatten, dense: int8 between all the layers
  // (quantization::int8_pass runs the pools and the flatten on the int8 tensor)
  // (6x6x2 -> 6x6x4 -> 3x3x4 -> 2x2x8 -> 1x1x8 -> 8 -> 5)
  using pcnn = sequential<input<6, 6, 2>, conv2d<4, 3, 3, 1, padding::same, relu>, max_pool2d<2>,
                          conv2d<8, 2, 2, 1, padding::valid, relu>, max_pool2d<2>, flatten, dense<5>>;
  temp_dir d;
  auto m = trained<pcnn>(3, 64, 16, 2);
  const auto cal = random_inputs<shape<6, 6, 2>>(64, 31);
  auto x = random_inputs<shape<6, 6, 2>>(40, 32);
  x *= 1.3f;  // partly beyond the calibrated range: saturation
  auto q = quantize_full_integer(m, cal.data(), 64);
  // (both pools fused into the conv before them: the export writes the conv, then the MaxPool)
  static_assert(std::is_same_v<std::tuple_element_t<1, decltype(q)::layers>::spec,
                               quantization::fused_pool<max_pool2d<2>, true>>);
  static_assert(std::is_same_v<std::tuple_element_t<4, decltype(q)::layers>::spec, quantization::int8_pass<flatten>>);
  export_onnx(q, d.path / "q.onnx");
  const auto f = read_model(d.path / "q.onnx");
  // each MaxPool reads a DequantizeLinear and feeds a QuantizeLinear (through the layout Transposes)
  // with the same scale and zero point: onnxruntime's pattern of an int8 MaxPool
  std::map<std::string, const onnx::NodeProto*> made;
  std::map<std::string, const onnx::NodeProto*> read;
  for (const auto& n : f.graph().node()) {
    for (const auto& o : n.output()) made[o] = &n;
    for (const auto& i : n.input()) read.emplace(i, &n);
  }
  const auto value_of = [&](const std::string& name) {  // a scalar float or int8 initializer
    const auto& t = init_named(f, name);
    if (t.data_type() == onnx::TensorProto::FLOAT) {
      if (t.float_data_size() > 0) return double(t.float_data(0));
      float v = 0;
      std::memcpy(&v, t.raw_data().data(), 4);
      return double(v);
    }
    return t.int32_data_size() > 0 ? double(t.int32_data(0)) : double(std::int8_t(t.raw_data().at(0)));
  };
  std::size_t pools = 0;
  for (const auto& n : f.graph().node()) {
    if (n.op_type() != "MaxPool") continue;
    ++pools;
    const onnx::NodeProto* before = made.at(n.input(0));
    while (before->op_type() == "Transpose") before = made.at(before->input(0));
    const onnx::NodeProto* after = read.at(n.output(0));
    while (after->op_type() == "Transpose") after = read.at(after->output(0));
    INFO(n.name() << " between " << before->name() << " and " << after->name());
    REQUIRE(before->op_type() == "DequantizeLinear");
    REQUIRE(after->op_type() == "QuantizeLinear");
    CHECK(value_of(before->input(1)) == value_of(after->input(1)));
    CHECK(value_of(before->input(2)) == value_of(after->input(2)));
  }
  CHECK(pools == 2);
  // imported back into the int8-chained type: the same variables, the same outputs
  auto back = make_model<decltype(q)::network>(7);
  import_onnx(back, d.path / "q.onnx");
  const auto ours = ctnn::predict(q, x);
  CHECK(max_abs_diff(ctnn::predict(back, x), ours) == 0.0);
  xt::xtensor<float, 2> theirs, unoptimized;
  if (!onnxruntime_predict(d.path / "q.onnx", x, theirs, d.path, &unoptimized)) return;
  const float out_scale = scalar_of<float>(q, "output_scale", true);
  for (bool optimize : {false, true}) {
    const auto st = steps_between(ours, optimize ? theirs : unoptimized, out_scale);
    const std::string run = optimize ? "int8 CNN with int8 pools, onnxruntime optimized: "
                                     : "int8 CNN with int8 pools, onnxruntime unoptimized: ";
    MESSAGE(run << st.differ << " of " << st.total << " outputs differ, at most " << st.max << " output steps");
    CHECK(st.max < 1.01);  // one step: ties and the fixed-point multiplier (docs/interop.md)
    CHECK(st.differ * 10 <= st.total);
  }
}

TEST_CASE("int8 average pooling in ONNX: AveragePool between a DQ and a Q of one scale, onnxruntime near, imported back exactly") {
  // conv2d, average_pool2d (same, stride 1), conv2d, average_pool2d, flatten, dense: int8 between all
  // the layers (6x6x2 -> 6x6x4 -> 6x6x4 -> 5x5x8 -> 2x2x8 -> 32 -> 5)
  using acnn = sequential<input<6, 6, 2>, conv2d<4, 3, 3, 1, padding::same, relu>, average_pool2d<2, 1, padding::same>,
                          conv2d<8, 2, 2, 1, padding::valid, relu>, average_pool2d<2>, flatten, dense<5>>;
  temp_dir d;
  auto m = trained<acnn>(3, 64, 16, 2);
  const auto cal = random_inputs<shape<6, 6, 2>>(64, 41);
  auto x = random_inputs<shape<6, 6, 2>>(40, 42);
  x *= 1.3f;  // partly beyond the calibrated range: saturation
  auto q = quantize_full_integer(m, cal.data(), 64);
  using Q = decltype(q)::network;
  static_assert(std::is_same_v<std::tuple_element_t<1, decltype(q)::layers>::spec,
                               quantization::int8_pass<average_pool2d<2, 1, padding::same>>>);
  static_assert(std::is_same_v<std::tuple_element_t<3, decltype(q)::layers>::spec, quantization::int8_pass<average_pool2d<2>>>);
  export_onnx(q, d.path / "q.onnx");
  const auto f = read_model(d.path / "q.onnx");
  std::map<std::string, const onnx::NodeProto*> made, read;
  for (const auto& n : f.graph().node()) {
    for (const auto& o : n.output()) made[o] = &n;
    for (const auto& i : n.input()) read.emplace(i, &n);
  }
  std::size_t pools = 0;
  for (const auto& n : f.graph().node()) {
    if (n.op_type() != "AveragePool") continue;
    ++pools;
    CHECK(attr_of(n, "count_include_pad") == 0);  // padding never counts, as Keras and TFLite
    const onnx::NodeProto* before = made.at(n.input(0));
    while (before->op_type() == "Transpose") before = made.at(before->input(0));
    const onnx::NodeProto* after = read.at(n.output(0));
    while (after->op_type() == "Transpose") after = read.at(after->output(0));
    INFO(n.name() << " between " << before->name() << " and " << after->name());
    REQUIRE(before->op_type() == "DequantizeLinear");
    REQUIRE(after->op_type() == "QuantizeLinear");
    CHECK(before->input(1) != after->input(1));  // its own pair, with the producer's values
    CHECK(init_named(f, before->input(1)).raw_data() == init_named(f, after->input(1)).raw_data());
    CHECK(init_named(f, before->input(2)).raw_data() == init_named(f, after->input(2)).raw_data());
  }
  CHECK(pools == 2);
  // imported back into the int8-chained type and into the float-between one: the same variables
  auto back = make_model<Q>(7);
  import_onnx(back, d.path / "q.onnx");
  const auto ours = ctnn::predict(q, x);
  CHECK(max_abs_diff(ctnn::predict(back, x), ours) == 0.0);
  auto fback = make_model<quantization::float_between_t<Q>>(7);
  import_onnx(fback, d.path / "q.onnx");
  CHECK(scalar_of<float>(fback, "output_scale", true) == scalar_of<float>(q, "output_scale", true));
  // an AveragePool that counts the padding is refused, naming the layer and the node
  auto g = read_model(d.path / "q.onnx");
  for (auto& n : *g.mutable_graph()->mutable_node())
    if (n.op_type() == "AveragePool")
      for (auto& a : *n.mutable_attribute())
        if (a.name() == "count_include_pad") a.set_i(1);
  write_model(g, d.path / "counts_pad.onnx");
  const std::string msg = message_of([&] { import_onnx(back, d.path / "counts_pad.onnx"); });
  INFO(msg);
  CHECK(msg.find("layer 2 (average_pool2d<2, 1, same>): AveragePool '") != std::string::npos);
  CHECK(msg.find("counts the padding in its averages") != std::string::npos);
  // onnxruntime: its int8 average (QLinearAveragePool, or DQ, float AveragePool, Q) rounds the float
  // mean half to even; ctnn (as TFLite) rounds the int8 mean half away from zero: a 2x2 mean is a
  // .5 tie for about a quarter of the values, so the layers after see inputs one step apart
  xt::xtensor<float, 2> theirs, unoptimized;
  if (!onnxruntime_predict(d.path / "q.onnx", x, theirs, d.path, &unoptimized)) return;
  const float out_scale = scalar_of<float>(q, "output_scale", true);
  for (bool optimize : {false, true}) {
    const auto st = steps_between(ours, optimize ? theirs : unoptimized, out_scale);
    const std::string run = optimize ? "int8 CNN with int8 average pools, onnxruntime optimized: "
                                     : "int8 CNN with int8 average pools, onnxruntime unoptimized: ";
    MESSAGE(run << st.differ << " of " << st.total << " outputs differ, at most " << st.max << " output steps");
    CHECK(st.max < 2.01);  // 1 measured (docs/interop.md)
    CHECK(st.differ * 4 <= st.total);
  }
}

TEST_CASE("int8 global average pooling in ONNX: ReduceMean between a DQ and a Q of one scale, onnxruntime near, imported back exactly") {
  // conv2d, global_average_pool, dense: int8 between all three (6x6x2 -> 6x6x6 -> 6 -> 4)
  using gnet = sequential<input<6, 6, 2>, conv2d<6, 3, 3, 1, padding::same, relu>, global_average_pool, dense<4>>;
  temp_dir d;
  auto m = trained<gnet>(3, 64, 16, 2);
  const auto cal = random_inputs<shape<6, 6, 2>>(64, 41);
  auto x = random_inputs<shape<6, 6, 2>>(40, 42);
  x *= 1.3f;  // partly beyond the calibrated range: saturation
  auto q = quantize_full_integer(m, cal.data(), 64);
  using Q = decltype(q)::network;
  static_assert(std::is_same_v<std::tuple_element_t<1, decltype(q)::layers>::spec, quantization::int8_pass<global_average_pool>>);
  export_onnx(q, d.path / "g.onnx");
  const auto f = read_model(d.path / "g.onnx");
  std::map<std::string, const onnx::NodeProto*> made, read;
  for (const auto& n : f.graph().node()) {
    for (const auto& o : n.output()) made[o] = &n;
    for (const auto& i : n.input()) read.emplace(i, &n);
  }
  std::size_t means = 0;
  for (const auto& n : f.graph().node()) {
    if (n.op_type() != "ReduceMean") continue;
    ++means;
    const onnx::NodeProto* before = made.at(n.input(0));
    while (before->op_type() == "Transpose") before = made.at(before->input(0));
    const onnx::NodeProto* after = read.at(n.output(0));
    INFO(n.name() << " between " << before->name() << " and " << after->name());
    REQUIRE(before->op_type() == "DequantizeLinear");
    REQUIRE(after->op_type() == "QuantizeLinear");
    CHECK(init_named(f, before->input(1)).raw_data() == init_named(f, after->input(1)).raw_data());
    CHECK(init_named(f, before->input(2)).raw_data() == init_named(f, after->input(2)).raw_data());
  }
  CHECK(means == 1);
  // imported back into the int8-chained type and into the float-between one
  auto back = make_model<Q>(7);
  import_onnx(back, d.path / "g.onnx");
  const auto ours = ctnn::predict(q, x);
  CHECK(max_abs_diff(ctnn::predict(back, x), ours) == 0.0);
  auto fback = make_model<quantization::float_between_t<Q>>(7);
  import_onnx(fback, d.path / "g.onnx");
  CHECK(scalar_of<float>(fback, "output_scale", true) == scalar_of<float>(q, "output_scale", true));
  // a GlobalAveragePool node is taken in its place (the float import's rule; the weights are the same)
  {
    auto g = read_model(d.path / "g.onnx");
    for (auto& n : *g.mutable_graph()->mutable_node())
      if (n.op_type() == "ReduceMean") {
        n.set_op_type("GlobalAveragePool");
        n.clear_attribute();
      }
    write_model(g, d.path / "global.onnx");
    auto gb = make_model<Q>(7);
    import_onnx(gb, d.path / "global.onnx");
    CHECK(max_abs_diff(ctnn::predict(gb, x), ours) == 0.0);
  }
  // a ReduceMean over other axes is refused, naming the layer and the node
  {
    auto g = read_model(d.path / "g.onnx");
    for (auto& n : *g.mutable_graph()->mutable_node())
      if (n.op_type() == "ReduceMean")
        for (auto& a : *n.mutable_attribute())
          if (a.name() == "axes") a.set_ints(0, 2), a.set_ints(1, 3);
    write_model(g, d.path / "axes.onnx");
    const std::string msg = message_of([&] { import_onnx(back, d.path / "axes.onnx"); });
    INFO(msg);
    CHECK(msg.find("layer 2 (global_average_pool): ReduceMean '") != std::string::npos);
    CHECK(msg.find("does not average over axes") != std::string::npos);
  }
  // onnxruntime: DQ, float ReduceMean, Q rounds the float mean half to even; ctnn (as TFLite's
  // AVERAGE_POOL_2D) rounds the int8 mean half away from zero: a mean of 36 values is a .5 tie where
  // the sum is 18 mod 36, and there the dense layer reads inputs one step apart
  xt::xtensor<float, 2> theirs, unoptimized;
  if (!onnxruntime_predict(d.path / "g.onnx", x, theirs, d.path, &unoptimized)) return;
  const float out_scale = scalar_of<float>(q, "output_scale", true);
  for (bool optimize : {false, true}) {
    const auto st = steps_between(ours, optimize ? theirs : unoptimized, out_scale);
    const std::string run = optimize ? "int8 CNN with an int8 global average pool, onnxruntime optimized: "
                                     : "int8 CNN with an int8 global average pool, onnxruntime unoptimized: ";
    MESSAGE(run << st.differ << " of " << st.total << " outputs differ, at most " << st.max << " output steps");
    CHECK(st.max < 1.01);
    CHECK(st.differ * 4 <= st.total);
  }
}

TEST_CASE("quantized_dense_block in ONNX: the kept blocks in a dense int8 initializer, onnxruntime within one step, imported back") {
  // 1x16 blocks (20 of 40 x 2 kept), then 4x4 blocks (4 of 8 x 4 kept), then dense: int8 between all three
  using bnet = sequential<input<40>, sparse_dense_block<40, 32, 320, 1, 16, relu>, sparse_dense_block<32, 16, 64, 4, 4, relu>,
                          dense<5>>;
  using fi = quantization::full_integer;
  temp_dir d;
  auto b = make_model<bnet>(5);
  rng g(51);
  std::vector<float> cal(64 * 40);
  for (auto& v : cal) v = float(g.uniform(-1, 1));
  auto x = xtd::batch_tensor<float, shape<40>>(48);
  for (auto& v : x) v = float(g.uniform(-1.3, 1.3));  // partly beyond the calibrated range: saturation
  auto q = quantize_full_integer(b, cal.data(), 64);
  using Q = decltype(q)::network;
  static_assert(std::is_same_v<std::tuple_element_t<0, decltype(q)::layers>::spec,
                               quantized_dense_block<40, 32, 320, 1, 16, relu, fi, quantization::int8_io<false, true>>>);
  export_onnx(q, d.path / "b.onnx");
  const auto f = read_model(d.path / "b.onnx");
  std::vector<std::string> ops;
  for (const auto& n : f.graph().node()) ops.push_back(n.op_type());
  // as the quantized_dense MLP: DQ of the kernel, Q/DQ of the input, DQ of the bias, Gemm, Relu, Q/DQ of
  // the output; the next layers' input pairs omitted (the same tensor)
  const std::vector<std::string> want{"DequantizeLinear", "QuantizeLinear", "DequantizeLinear", "DequantizeLinear",
                                      "Gemm", "Relu", "QuantizeLinear", "DequantizeLinear",
                                      "DequantizeLinear", "DequantizeLinear", "Gemm", "Relu", "QuantizeLinear", "DequantizeLinear",
                                      "DequantizeLinear", "DequantizeLinear", "Gemm", "QuantizeLinear", "DequantizeLinear",
                                      "Identity"};
  CHECK(ops == want);
  // the first layer's kernel: int8 [40, 32], the stored blocks expanded, 0 in the pruned ones
  using L0 = std::tuple_element_t<0, decltype(q)::layers>;
  const auto& w = init_named(f, "layer1_kernel_quantized");
  REQUIRE(w.data_type() == onnx::TensorProto::INT8);
  REQUIRE((w.dims_size() == 2 && w.dims(0) == 40 && w.dims(1) == 32));
  std::vector<std::int8_t> values, plain(32 * 40);
  std::vector<std::byte> ix;
  q.for_each_variable([&](const variable_ref& v) {
    if (v.layer != 0) return;
    if (v.name == "kernel") values.assign(reinterpret_cast<std::int8_t*>(v.data), reinterpret_cast<std::int8_t*>(v.data) + v.extent);
    if (v.name == "index") ix.assign(v.data, v.data + v.extent);
  });
  kernels::cpu::int8::block::unpack(40, 32, 1, 16, values.data(), L0::index::at<1>(ix.data()), L0::index::at<0>(ix.data()),
                                    plain.data());
  std::size_t nonzero_blocks = 0;
  for (std::size_t k = 0; k < 40; ++k)
    for (std::size_t jb = 0; jb < 2; ++jb) {
      bool any = false;
      for (std::size_t u = 0; u < 16; ++u) {
        const std::int8_t got = std::int8_t(w.raw_data()[k * 32 + jb * 16 + u]);
        CHECK(got == plain[(jb * 16 + u) * 40 + k]);
        any = any || got != 0;
      }
      nonzero_blocks += any;
    }
  CHECK(nonzero_blocks == 20);
  // imported back: into the block layout (the same type), byte for byte; into quantized_dense layers
  // (the dense type of the same weights), the same outputs
  const auto ours = ctnn::predict(q, x);
  auto back = make_model<Q>(7);
  import_onnx(back, d.path / "b.onnx");
  CHECK(max_abs_diff(ctnn::predict(back, x), ours) == 0.0);
  std::vector<std::vector<std::byte>> mine, theirs_state;
  q.for_each_variable([&](const variable_ref& v) { mine.emplace_back(v.data, v.data + v.extent * v.element_bytes); });
  back.for_each_variable([&](const variable_ref& v) { theirs_state.emplace_back(v.data, v.data + v.extent * v.element_bytes); });
  CHECK(mine == theirs_state);
  using dnet = quantized_t<sequential<input<40>, dense<32, relu>, dense<16, relu>, dense<5>>>;
  auto dense = make_model<dnet>(7);
  import_onnx(dense, d.path / "b.onnx");
  CHECK(max_abs_diff(ctnn::predict(dense, x), ours) == 0.0);
  // a block layer keeping fewer blocks than the graph's kernel has: refused, naming the layer and the count
  using fewer = sequential<input<40>, quantized_dense_block<40, 32, 160, 1, 16, relu, fi, quantization::int8_io<false, true>>,
                           quantized_dense_block<32, 16, 64, 4, 4, relu, fi, quantization::int8_io<true, true>>,
                           quantized_dense<16, 5, identity, fi, quantization::int8_io<true, false>>>;
  auto small = make_model<fewer>(7);
  const std::string msg = message_of([&] { import_onnx(small, d.path / "b.onnx"); });
  INFO(msg);
  CHECK(msg.find("layer 1 (quantized_dense_block<40, 32, 160, 1, 16, relu") != std::string::npos);
  CHECK(msg.find("'s kernel has nonzero weights in 20 blocks of 1 x 16; this layer keeps 10") != std::string::npos);
  // onnxruntime (its int8 QGemm on the dense initializer) against ctnn's block kernels
  xt::xtensor<float, 2> ort, unoptimized;
  if (!onnxruntime_predict(d.path / "b.onnx", x, ort, d.path, &unoptimized)) return;
  const float out_scale = scalar_of<float>(q, "output_scale", true);
  for (bool optimize : {false, true}) {
    const auto st = steps_between(ours, optimize ? ort : unoptimized, out_scale);
    const std::string run = optimize ? "block-sparse int8 MLP, onnxruntime optimized: " : "block-sparse int8 MLP, onnxruntime unoptimized: ";
    MESSAGE(run << st.differ << " of " << st.total << " outputs differ, at most " << st.max << " output steps");
    CHECK(st.max < 1.01);  // one step: ties and the fixed-point multiplier (docs/interop.md)
    CHECK(st.differ * 10 <= st.total);
  }
}

TEST_CASE("import_onnx into int8-chained layers refuses a graph that requantizes between them") {
  // two adjacent dense layers: quantized_t keeps int8 between them (one tensor, one scale and zero
  // point); a graph whose second layer quantizes its input with other parameters imports only into
  // the float-between form
  using two = sequential<input<qin>, dense<12, relu>, dense<5>>;
  temp_dir d;
  const auto cal = uniform_rows(16, 11, 1.0);
  auto q = quantize_full_integer(make_model<two>(5), cal.data(), 16);
  auto f = make_model<quantization::float_between_t<decltype(q)::network>>(1);
  std::vector<variable_ref> src;
  q.for_each_variable([&](const variable_ref& v) { src.push_back(v); });
  std::size_t k = 0;
  f.for_each_variable([&](const variable_ref& v) {
    std::memcpy(v.data, src[k++].data, v.extent * v.element_bytes);
    if (v.layer == 1 && v.name == "input_scale") *reinterpret_cast<float*>(v.data) *= 1.5f;
  });
  export_onnx(f, d.path / "requantized.onnx");
  const std::string msg = message_of([&] { import_onnx(q, d.path / "requantized.onnx"); });
  CHECK(msg.find("layer 2 (quantized_dense<12, 5, full_integer>): its input's QuantizeLinear (scale ") !=
        std::string::npos);
  CHECK(msg.find("differs from the previous layer's output one") != std::string::npos);
  auto back = make_model<quantization::float_between_t<decltype(q)::network>>(2);
  import_onnx(back, d.path / "requantized.onnx");
  float s = 0;
  back.for_each_variable([&](const variable_ref& v) {
    if (v.layer == 1 && v.name == "input_scale") std::memcpy(&s, v.data, 4);
  });
  CHECK(s == scalar_of<float>(f, "input_scale", true));
}

TEST_CASE("export_onnx of a quantized model refuses values ONNX cannot carry, naming the layer") {
  temp_dir d;
  auto m = qmodel();
  const auto cal = uniform_rows(16, 11, 1.0);
  auto q = quantize_full_integer(m, cal.data(), 16);
  auto set = [&](std::string_view name, auto value) {
    q.for_each_variable([&](const variable_ref& v) {
      if (v.layer == 1 && v.name == name) std::memcpy(v.data, &value, sizeof(value));
    });
  };
  set("output_zero_point", std::int32_t(200));
  CHECK(message_of([&] { export_onnx(q, d.path / "q.onnx"); }) ==
        "export_onnx: layer 2 (quantized_dense<16, 12, relu, full_integer>): output_zero_point 200 is outside int8 "
        "[-128, 127]");
  set("output_zero_point", std::int32_t(0));
  set("kernel_scale", std::numeric_limits<float>::quiet_NaN());
  CHECK(message_of([&] { export_onnx(q, d.path / "q.onnx"); }).find("layer 2 (quantized_dense<16, 12, relu, "
                                                                     "full_integer>): kernel_scale[0] nan is not a "
                                                                     "positive finite number") != std::string::npos);
  CHECK(!fs::exists(d.path / "q.onnx"));
}

TEST_CASE("import_onnx of a QDQ graph restores a quantized model's int8 state byte for byte") {
  temp_dir d;
  auto m = qmodel();
  const auto cal = uniform_rows(64, 11, 1.0);
  const auto xv = uniform_rows(8, 12, 1.3);
  auto state_bytes = [](const auto& model) {
    std::vector<std::byte> b;
    model.for_each_variable([&](const variable_ref& v) { b.insert(b.end(), v.data, v.data + v.extent * v.element_bytes); });
    return b;
  };
  auto round_trip = [&](auto&& q) {
    export_onnx(q, d.path / "q.onnx");
    std::remove_cvref_t<decltype(q)> r(9);
    REQUIRE(state_bytes(r) != state_bytes(q));
    import_onnx(r, d.path / "q.onnx");
    CHECK(state_bytes(r) == state_bytes(q));
    CHECK(r.predict(xv.data(), 8) == q.predict(xv.data(), 8));
  };
  round_trip(quantize_full_integer(m, cal.data(), 64));
  round_trip(quantize_dynamic(m));

  // a network that differs is refused, naming the layer and what differs
  using wider = sequential<input<4, 4>, flatten, dense<13, relu>, dropout<0.1>, dense<5>>;
  auto w = quantize_full_integer(make_model<wider>(1), cal.data(), 64);
  export_onnx(quantize_full_integer(m, cal.data(), 64), d.path / "q.onnx");
  const auto msg = message_of([&] { import_onnx(w, d.path / "q.onnx"); });
  CHECK(msg.find("layer 2 (quantized_dense<16, 13, relu, full_integer>): DequantizeLinear 'layer2_kernel_dequantize_") !=
        std::string::npos);
  CHECK(msg.find("'s kernel is 16 x 12, not 16 x 13") != std::string::npos);
  {  // the second Gemm reading the first one's input instead of its output
    auto f = read_model(d.path / "q.onnx");
    std::vector<onnx::NodeProto*> gemms;
    for (auto& n : *f.mutable_graph()->mutable_node())
      if (n.op_type() == "Gemm") gemms.push_back(&n);
    REQUIRE(gemms.size() == 2);
    gemms[1]->set_input(0, gemms[0]->input(0));
    write_model(f, d.path / "bad.onnx");
    auto r = quantize_full_integer(m, cal.data(), 64);
    const auto e = message_of([&] { import_onnx(r, d.path / "bad.onnx"); });
    CHECK(e.find(": layer 4 (") != std::string::npos);
    CHECK(e.find("): Gemm 'layer4_gemm_") != std::string::npos);
    CHECK(e.find(" reads the graph input; this layer's input is the output of Gemm 'layer2_gemm_") != std::string::npos);
  }
}

TEST_CASE("import_onnx of a QDQ CNN restores quantized_conv2d and max_pool2d byte for byte, and refuses what differs") {
  using qcnn = sequential<input<6, 6, 2>, conv2d<4, 3, 3, 1, padding::same, relu>, max_pool2d<2>,
                          conv2d<3, 3, 3, 1, padding::valid>, flatten, dense<5>>;
  temp_dir d;
  auto m = trained<qcnn>(3, 64, 16, 2);
  const auto cal = random_inputs<shape<6, 6, 2>>(64, 21);
  auto x = random_inputs<shape<6, 6, 2>>(8, 22);
  x *= 1.3f;
  auto state_bytes = [](const auto& model) {
    std::vector<std::byte> b;
    model.for_each_variable([&](const variable_ref& v) { b.insert(b.end(), v.data, v.data + v.extent * v.element_bytes); });
    return b;
  };
  auto round_trip = [&](auto&& q) {
    export_onnx(q, d.path / "q.onnx");
    std::remove_cvref_t<decltype(q)> r(9);
    REQUIRE(state_bytes(r) != state_bytes(q));
    import_onnx(r, d.path / "q.onnx");
    CHECK(state_bytes(r) == state_bytes(q));
    CHECK(max_abs_diff(ctnn::predict(r, x), ctnn::predict(q, x)) == 0);
  };
  round_trip(quantize_full_integer(m, cal.data(), 64));
  round_trip(quantize_dynamic(m));

  export_onnx(quantize_full_integer(m, cal.data(), 64), d.path / "q.onnx");
  // another stride, another filter count, another pooling window: refused naming the layer and the node
  using strided = sequential<input<6, 6, 2>, conv2d<4, 3, 3, 2, padding::same, relu>, max_pool2d<2>,
                             conv2d<3, 1, 1, 1, padding::valid>, flatten, dense<5>>;
  auto s = quantize_full_integer(make_model<strided>(1), cal.data(), 64);
  auto msg = message_of([&] { import_onnx(s, d.path / "q.onnx"); });
  CHECK(msg.find("layer 1 (quantized_conv2d<4, 3, 3, 2, same, relu, full_integer>): Conv 'layer1_conv_") !=
        std::string::npos);
  CHECK(msg.find("has strides [1, 1]; this layer's stride is 2") != std::string::npos);
  using fewer = sequential<input<6, 6, 2>, conv2d<4, 3, 3, 1, padding::same, relu>, max_pool2d<2>,
                           conv2d<2, 3, 3, 1, padding::valid>, flatten, dense<5>>;
  auto f = quantize_full_integer(make_model<fewer>(1), cal.data(), 64);
  msg = message_of([&] { import_onnx(f, d.path / "q.onnx"); });
  CHECK(msg.find("layer 3 (quantized_conv2d<2, 3, 3, 1, valid, full_integer>): DequantizeLinear "
                 "'layer3_kernel_dequantize_") != std::string::npos);
  CHECK(msg.find("'s kernel is 3 x 4 x 3 x 3, not 2 x 4 x 3 x 3 (filters x channels x height x width)") !=
        std::string::npos);
  using pooled = sequential<input<6, 6, 2>, conv2d<4, 3, 3, 1, padding::same, relu>, max_pool2d<3>,
                            conv2d<3, 2, 2, 1, padding::valid>, flatten, dense<5>>;
  auto p = quantize_full_integer(make_model<pooled>(1), cal.data(), 64);
  msg = message_of([&] { import_onnx(p, d.path / "q.onnx"); });
  CHECK(msg.find("layer 2 (max_pool2d<3>): MaxPool 'layer2_maxpool_") != std::string::npos);
  CHECK(msg.find("has a window of 2 x 2; this layer's is 3 x 3") != std::string::npos);
  // an int8 dense network does not read a CNN's graph: the layer names the node it met
  using dense_only = sequential<input<6, 6, 2>, flatten, dense<5>>;
  auto dn = quantize_full_integer(make_model<dense_only>(1), cal.data(), 64);
  msg = message_of([&] { import_onnx(dn, d.path / "q.onnx"); });
  CHECK(msg.find("layer 2 (quantized_dense<72, 5, full_integer>): the graph's next node is Conv 'layer1_conv_") !=
        std::string::npos);
  // a kernel weight of -128 (ctnn's int8 weights are [-127, 127]): refused with its index in the ONNX tensor
  auto model = read_model(d.path / "q.onnx");
  for (auto& t : *model.mutable_graph()->mutable_initializer())
    if (t.name() == "layer3_kernel_quantized") (*t.mutable_raw_data())[5] = char(-128);
  write_model(model, d.path / "bad.onnx");
  auto q = quantize_full_integer(m, cal.data(), 64);
  msg = message_of([&] { import_onnx(q, d.path / "bad.onnx"); });
  CHECK(msg.find("layer 3 (quantized_conv2d<3, 3, 3, 1, valid, full_integer>): DequantizeLinear "
                 "'layer3_kernel_dequantize_") != std::string::npos);
  CHECK(msg.find("has a weight of -128 at index 5 (ctnn's range is [-127, 127])") != std::string::npos);
}

TEST_CASE("onnxruntime and ctnn at QuantizeLinear ties: ONNX rounds half to even, ctnn (as TFLite) half away from zero") {
  temp_dir d;
  auto m = qmodel();
  const auto cal = uniform_rows(64, 11, 1.0);
  auto q = quantize_full_integer(m, cal.data(), 64);
  // layer 2's input scale set to 1/64, zero point 0 (multipliers recomputed): inputs (k + 1/2) / 64 are exact ties
  {
    float *in_scale = nullptr, *ks = nullptr, *out_scale = nullptr;
    std::int32_t *in_zp = nullptr, *mult = nullptr, *shift = nullptr;
    q.for_each_variable([&](const variable_ref& v) {
      if (v.layer != 1) return;
      if (v.name == "input_scale") in_scale = reinterpret_cast<float*>(v.data);
      if (v.name == "kernel_scale") ks = reinterpret_cast<float*>(v.data);
      if (v.name == "output_scale") out_scale = reinterpret_cast<float*>(v.data);
      if (v.name == "input_zero_point") in_zp = reinterpret_cast<std::int32_t*>(v.data);
      if (v.name == "output_multiplier") mult = reinterpret_cast<std::int32_t*>(v.data);
      if (v.name == "output_shift") shift = reinterpret_cast<std::int32_t*>(v.data);
    });
    REQUIRE((in_scale && ks && out_scale && in_zp && mult && shift));
    *in_scale = 1.0f / 64;
    *in_zp = 0;
    for (std::size_t j = 0; j < 12; ++j) {
      const auto mq = quantization::quantize_multiplier(double(*in_scale) * double(ks[j]) / double(*out_scale));
      mult[j] = mq.q;
      shift[j] = mq.shift;
    }
  }
  rng g(21);
  auto x = xtd::batch_tensor<float, shape<4, 4>>(16);
  auto x_even = x;  // each tie moved by one ulp toward its even neighbour: ctnn then rounds as ONNX does
  for (std::size_t i = 0; i < x.size(); ++i) {
    const auto k = std::int32_t(std::floor(g.uniform(-60, 60)));
    x.data()[i] = (float(k) + 0.5f) / 64;
    x_even.data()[i] = std::nextafter(x.data()[i], float(k % 2 == 0 ? k : k + 1) / 64);
  }
  export_onnx(q, d.path / "q.onnx");
  const float out_scale = scalar_of<float>(q, "output_scale", true);
  const auto ours = ctnn::predict(q, x), ours_even = ctnn::predict(q, x_even);
  xt::xtensor<float, 2> optimized, unoptimized;
  if (!onnxruntime_predict(d.path / "q.onnx", x, optimized, d.path, &unoptimized)) return;
  for (bool optimize : {false, true}) {
    const auto& theirs = optimize ? optimized : unoptimized;
    const auto at_ties = steps_between(ours, theirs, out_scale), even = steps_between(ours_even, theirs, out_scale);
    const std::string run = optimize ? "onnxruntime optimized: " : "onnxruntime unoptimized: ";
    MESSAGE(run << "inputs at ties: " << at_ties.differ << " of " << at_ties.total << " outputs differ, at most "
                << at_ties.max << " output steps; ties moved to the even side: " << even.differ << " differ, at most "
                << even.max);
    CHECK(at_ties.differ > even.differ);  // the ties are what differs
    CHECK(even.max < 1.01);
  }
}

namespace {
// Recurrent layers over 5 steps of 3 features. rnn_stack: lstm returning its sequence read backwards,
// simple_rnn (relu) returning its sequence, gru returning its last state. rnn_back: gru's sequence,
// simple_rnn (leaky_relu) read backwards returning its sequence, a bidirectional lstm averaged.
// rnn_bidi: bidirectional layers returning sequences, merged by sum, mul and concat (output 5 x 4).
constexpr recurrent_options seq_backwards{.return_sequences = true, .go_backwards = true};
using rnn_stack = sequential<input<5, 3>, lstm<8, seq_backwards>, simple_rnn<4, relu, return_sequences>, gru<6>>;
using rnn_back = sequential<input<5, 3>, gru<6, return_sequences>, simple_rnn<4, leaky_relu<0.2>, seq_backwards>,
                            bidirectional<lstm<3>, merge::ave>>;
using rnn_bidi = sequential<input<5, 3>, bidirectional<gru<3, return_sequences>, merge::sum>,
                            bidirectional<lstm<4, return_sequences>, merge::mul>,
                            bidirectional<simple_rnn<2, ctnn::tanh, return_sequences>>>;
// gru with reset_after = false (ONNX's linear_before_reset = 0): a sequence read backwards, then bidirectional
using rnn_before = sequential<input<5, 3>, gru<6, recurrent_options{.return_sequences = true, .go_backwards = true,
                                                                    .reset_after = false}>,
                              bidirectional<gru<4, recurrent_options{.reset_after = false}>>>;

// A model of Net with every parameter (biases included) drawn from [-0.6, 0.6].
template <class Net>
model<Net> random_weights(std::uint64_t seed) {
  auto m = make_model<Net>(seed);
  rng g(seed + 100);
  m.for_each_variable([&](const variable_ref& v) {  // (not parameters(): its alignment gaps stay 0)
    if (v.kind != role::parameter) return;
    for (std::size_t i = 0; i < v.extent; ++i) {
      const float w = float(g.uniform(-0.6, 0.6));
      std::memcpy(v.data + i * sizeof w, &w, sizeof w);
    }
  });
  return m;
}

// Exports Net with random weights; onnxruntime's outputs within 1e-5 of ctnn's, and import_onnx
// into a model of another seed gives the same parameters bit for bit.
template <class Net>
void recurrent_round_trip(const std::string& name, std::uint64_t seed) {
  INFO(name);
  temp_dir d;
  auto a = random_weights<Net>(seed);
  const fs::path f = d.path / (name + ".onnx");
  export_onnx(a, f);
  auto b = make_model<Net>(seed + 1);
  REQUIRE(params(b) != params(a));
  import_onnx(b, f);
  CHECK(params(b) == params(a));
  // 20 rows: past ops<cpu>::packed_rows, so the step products run over the packed recurrent kernel
  const auto x = random_inputs<typename Net::input_type>(20, seed);
  const auto ours = ctnn::predict(a, x);
  CHECK(ctnn::predict(b, x) == ours);
  std::remove_cvref_t<decltype(ours)> theirs;
  if (!onnxruntime_predict(f, x, theirs, d.path)) return;
  REQUIRE(theirs.shape() == ours.shape());
  const double diff = max_abs_diff(theirs, ours);
  MESSAGE(name << ": onnxruntime against ctnn, largest difference " << diff);
  CHECK(diff < 1e-5);
}
}  // namespace

TEST_CASE("recurrent layers export as ONNX RNN, LSTM and GRU: onnxruntime agrees within 1e-5, import restores them") {
  recurrent_round_trip<rnn_stack>("rnn_stack", 1);
  recurrent_round_trip<rnn_back>("rnn_back", 2);
  recurrent_round_trip<rnn_bidi>("rnn_bidi", 3);
  recurrent_round_trip<rnn_before>("rnn_before", 8);
  // the graph: time-major Transposes around each operator, ONNX's gate order, directions
  temp_dir d;
  auto a = random_weights<rnn_stack>(4);
  export_onnx(a, d.path / "s.onnx");
  const auto m = read_model(d.path / "s.onnx");
  std::vector<std::string> ops, dirs;
  for (const auto& n : m.graph().node()) {
    if (n.op_type() == "Transpose" || n.op_type() == "Reshape" || n.op_type() == "Identity") continue;
    ops.push_back(n.op_type());
    for (const auto& at : n.attribute())
      if (at.name() == "direction") dirs.push_back(at.s());
  }
  CHECK(ops == std::vector<std::string>{"LSTM", "Gather", "RNN", "GRU"});  // the Gather reverses LSTM's Y
  CHECK(dirs == std::vector<std::string>{"reverse", "forward", "forward"});
  // LSTM's W row block 1 (ONNX's o gate) is Keras' gate 3 (o) of the kernel [F, 4U]
  const auto& w = *initializer(const_cast<onnx::ModelProto&>(m), "layer1_W");
  const auto wv = onnx_detail::floats_of(w, "test", "s.onnx");
  std::vector<float> kernel;
  a.for_each_variable([&](const variable_ref& v) {
    if (v.layer == 0 && v.name == "kernel") kernel.assign(reinterpret_cast<const float*>(v.data),
                                                          reinterpret_cast<const float*>(v.data) + v.extent);
  });
  REQUIRE(wv.size() == 32 * 3);
  REQUIRE(kernel.size() == 3 * 32);
  for (std::size_t j = 0; j < 8; ++j)
    for (std::size_t f = 0; f < 3; ++f) CHECK(wv[(8 + j) * 3 + f] == kernel[f * 32 + 24 + j]);
}

TEST_CASE("import_onnx of RNN and LSTM nodes with a recurrent bias Rb: the layer's bias is Wb + Rb, onnxruntime agrees") {
  // export_onnx writes Rb = 0 for simple_rnn and lstm; other exporters (PyTorch's b_hh) need not
  temp_dir d;
  auto a = random_weights<rnn_stack>(7);
  const fs::path exported = d.path / "s.onnx", f = d.path / "rb.onnx";
  export_onnx(a, exported);
  auto m = read_model(exported);
  rng g(8);
  for (const char* name : {"layer1_B", "layer2_B"}) {  // LSTM's [1, 64], RNN's [1, 8]: the second half is Rb
    auto* t = initializer(m, name);
    auto v = onnx_detail::floats_of(*t, "test", f);
    for (std::size_t j = v.size() / 2; j < v.size(); ++j) v[j] = float(g.uniform(-0.5, 0.5));
    t->set_raw_data(std::string(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(float)));
  }
  write_model(m, f);
  auto b = make_model<rnn_stack>(9);
  import_onnx(b, f);
  const auto x = random_inputs<shape<5, 3>>(6, 10);
  const auto ours = ctnn::predict(b, x);
  CHECK(max_abs_diff(ours, ctnn::predict(a, x)) > 1e-3);  // Rb changed what the graph computes
  xt::xtensor<float, 2> theirs;
  if (!onnxruntime_predict(f, x, theirs, d.path)) return;
  CHECK(max_abs_diff(theirs, ours) < 1e-5);
}

// masking, embedding (mask_zero or not) and time_distributed have no ONNX mapping: export_onnx's static_assert
// (tests/compile_fail/onnx_export_unmapped_activation.cpp shows its message); the recurrent layers have one
static_assert(!onnx_detail::exportable<masking<>::bind<shape<5, 3>, float, cpu<>>>());
static_assert(!onnx_detail::exportable<embedding<10, 4, true>::bind<shape<5>, float, cpu<>>>());
static_assert(!onnx_detail::exportable<time_distributed<dense<2>>::bind<shape<5, 3>, float, cpu<>>>());
static_assert(onnx_detail::exportable<lstm<4>::bind<shape<5, 3>, float, cpu<>>>());
static_assert(onnx_detail::exportable<bidirectional<simple_rnn<4, leaky_relu<0.2>>>::bind<shape<5, 3>, float, cpu<>>>());

TEST_CASE("import_onnx refuses a recurrent operator that computes something else, naming the node") {
  temp_dir d;
  auto a = random_weights<rnn_stack>(5);
  const fs::path exported = d.path / "s.onnx", f = d.path / "bad.onnx";
  export_onnx(a, exported);
  auto b = make_model<rnn_stack>(6);
  const auto before = params(b);
  // the exported graph with node `op`'s attribute changed (or added) by `edit`
  auto refused = [&](const std::string& op, auto edit) {
    auto m = read_model(exported);
    for (auto& n : *m.mutable_graph()->mutable_node())
      if (n.op_type() == op) edit(n);
    write_model(m, f);
    const std::string what = message_of([&] { import_onnx(b, f); });
    CHECK(params(b) == before);
    return what;
  };
  auto set_attr = [](const char* name, auto value) {
    return [=](onnx::NodeProto& n) {
      onnx::AttributeProto* a = nullptr;
      for (auto& x : *n.mutable_attribute())
        if (x.name() == name) a = &x;
      if (!a) (a = n.add_attribute())->set_name(name);
      if constexpr (std::is_same_v<decltype(value), int>) {
        a->set_type(onnx::AttributeProto::INT);
        a->set_i(value);
      } else if constexpr (std::is_same_v<decltype(value), float>) {
        a->set_type(onnx::AttributeProto::FLOAT);
        a->set_f(value);
      } else {
        a->set_type(onnx::AttributeProto::STRING);
        a->set_s(value);
      }
    };
  };
  const std::string p = "import_onnx: " + f.string() + ": ";
  const std::string l1 = p + "layer 1 (lstm<8, return_sequences, go_backwards>): LSTM 'layer1_lstm_1' (node 1)";
  CHECK(refused("LSTM", set_attr("hidden_size", 7)) == l1 + " has hidden_size 7; this layer has 8 units");
  CHECK(refused("LSTM", set_attr("direction", std::string("forward"))) ==
        l1 + " has direction 'forward'; this layer's is 'reverse' (go_backwards)");
  CHECK(refused("LSTM", set_attr("clip", 3.0f)) == l1 + " clips its gates' inputs (clip); ctnn's recurrent layers do not");
  CHECK(refused("LSTM", set_attr("input_forget", 1)) ==
        l1 + " couples the input and forget gates (input_forget); ctnn's lstm does not");
  CHECK(refused("LSTM", [](onnx::NodeProto& n) {
          while (n.input_size() < 6) n.add_input("");
          n.set_input(5, "input");  // (a tensor the graph has: one it has not is refused before)
        }) == l1 + " has an input initial_h (ctnn's state starts at zero)");
  const std::string l2 = p + "layer 2 (simple_rnn<4, relu, return_sequences>): RNN 'layer2_rnn_";
  const std::string acts = refused("RNN", [](onnx::NodeProto& n) {
    for (auto& x : *n.mutable_attribute())
      if (x.name() == "activations") x.set_strings(0, "Tanh");
  });
  CHECK(acts.starts_with(l2));
  CHECK(acts.ends_with(" has activations [Tanh]; this layer's are [Relu]"));
  const std::string gru = refused("GRU", set_attr("linear_before_reset", 0));
  CHECK(gru.starts_with(p + "layer 3 (gru<6>): GRU 'layer3_gru_"));
  CHECK(gru.ends_with(" has linear_before_reset = 0 (Keras' reset_after = false); this layer is reset_after = true "
                      "(linear_before_reset = 1)"));
  const std::string w = refused("GRU", [](onnx::NodeProto& n) { n.set_input(1, "layer2_W"); });  // an RNN's W [1, 4, 8]
  {  // a gru with reset_after = false refuses linear_before_reset = 1
    auto c = random_weights<rnn_before>(6);
    const fs::path e = d.path / "before.onnx";
    export_onnx(c, e);
    auto m = read_model(e);
    for (auto& n : *m.mutable_graph()->mutable_node())
      if (n.op_type() == "GRU" && n.name().starts_with("layer1")) set_attr("linear_before_reset", 1)(n);
    write_model(m, f);
    auto c2 = make_model<rnn_before>(7);
    const std::string what = message_of([&] { import_onnx(c2, f); });
    CHECK(what.starts_with(p + "layer 1 (gru<6, return_sequences, go_backwards, reset_after = false>): GRU 'layer1_gru"));
    CHECK(what.ends_with(" has linear_before_reset = 1 (Keras' reset_after = true); this layer is reset_after = false "
                         "(linear_before_reset = 0)"));
  }
  CHECK(w.ends_with(" has a W of 1 x 4 x 8; this layer's kernel (as ONNX's W: directions x gates*units x features) is 1 x 18 x 4"));
}

namespace {
// Branches that start alike: a concatenate of three dense<3, relu> (the Concat's order says which is
// which), an add of two dense<4> and one dense<4, relu> (the Adds' order says which is which), a residual
// whose branch and projection are both dense<4>.
using twins = sequential<input<6>, concatenate<-1, dense<3, relu>, dense<3, relu>, dense<3, relu>>,
                         add<dense<4>, dense<4>, dense<4, relu>>, residual_with<dense<4>, dense<4>>, dense<2>>;
// a dag whose nodes have many topological orders (wired's have one): a and b alike from x, a Concat of
// three, an Add of three
using fanned = sequential<input<6>, dag<node<"a", dense<4, relu>>, node<"b", dense<4>, "in">, node<"c", dense<3, relu>, "a">,
                                       node<"d", concatenate_join<-1>, "c", "b", "in">, node<"e", dense<4>, "d">,
                                       node<"f", add_join, "e", "b", "a">>,
                          dense<2>>;

// m's nodes in another topological order (Kahn's algorithm taking a random ready node each time), names kept;
// REQUIREs that the order differs from m's.
void reorder_nodes(onnx::ModelProto& m, std::uint64_t seed) {
  auto* g = m.mutable_graph();
  const std::vector<onnx::NodeProto> nodes(g->node().begin(), g->node().end());
  std::vector<std::size_t> order;
  rng r(seed);
  for (int tries = 0; tries < 100 && (order.empty() || std::is_sorted(order.begin(), order.end())); ++tries) {
  std::set<std::string> made;
  for (const auto& i : g->input()) made.insert(i.name());
  for (const auto& t : g->initializer()) made.insert(t.name());
  std::vector<bool> done(nodes.size(), false);
  order.clear();
  while (order.size() < nodes.size()) {
    std::vector<std::size_t> ready;
    for (std::size_t i = 0; i < nodes.size(); ++i) {
      if (done[i]) continue;
      bool ok = true;
      for (const auto& in : nodes[i].input()) ok = ok && (in.empty() || made.count(in));
      if (ok) ready.push_back(i);
    }
    REQUIRE(!ready.empty());
    const std::size_t i = ready[r.below(ready.size())];
    done[i] = true;
    order.push_back(i);
    for (const auto& o : nodes[i].output()) made.insert(o);
  }
  }
  REQUIRE(!std::is_sorted(order.begin(), order.end()));
  g->clear_node();
  for (std::size_t i : order) *g->add_node() = nodes[i];
}

// The node of m named `name`.
onnx::NodeProto* node_named(onnx::ModelProto& m, const std::string& name) {
  for (auto& n : *m.mutable_graph()->mutable_node())
    if (n.name() == name) return &n;
  FAIL("no node " << name);
  return nullptr;
}
// The index in m's node list of the node named `name`, as import_onnx's messages give it.
std::string index_of(const onnx::ModelProto& m, const std::string& name) {
  for (int i = 0; i < m.graph().node_size(); ++i)
    if (m.graph().node(i).name() == name) return "'" + name + "' (node " + std::to_string(i) + ")";
  FAIL("no node " << name);
  return {};
}

// Exports a trained Net, reorders its nodes with several seeds; each order imports bit for bit.
template <class Net, Shape In>
void imports_in_any_order(model<Net> a, const fs::path& dir, std::uint64_t seed) {
  const fs::path exported = dir / "exported.onnx", f = dir / "reordered.onnx";
  export_onnx(a, exported);
  const auto x = random_inputs<In>(5, 9);
  const auto ours = ctnn::predict(a, x);
  for (std::uint64_t s = 1; s <= 6; ++s) {
    auto m = read_model(exported);
    reorder_nodes(m, seed * 100 + s);
    write_model(m, f);
    auto b = make_model<Net>(99);
    REQUIRE(params(b) != params(a));
    import_onnx(b, f);
    CHECK(params(b) == params(a));
    CHECK(std::vector<float>(b.state().begin(), b.state().end()) == std::vector<float>(a.state().begin(), a.state().end()));
    CHECK(ctnn::predict(b, x) == ours);
  }
  // a join's Add may read its operands the other way round (Add is commutative): the same weights (branches
  // alike meeting at one Add, twins' add and residual, pair by their nodes' names, then by their order)
  auto m = read_model(exported);
  for (auto& n : *m.mutable_graph()->mutable_node())
    if (n.op_type() == "Add" && n.input_size() == 2) {
      const std::string first = n.input(0);
      n.set_input(0, n.input(1));
      n.set_input(1, first);
    }
  reorder_nodes(m, seed);
  write_model(m, f);
  auto b = make_model<Net>(99);
  import_onnx(b, f);
  CHECK(params(b) == params(a));
  CHECK(ctnn::predict(b, x) == ours);
  // names that mislead (the Gemm and Conv nodes' names in reverse order): the joins still say which is which
  m = read_model(exported);
  std::vector<onnx::NodeProto*> named;
  for (auto& n : *m.mutable_graph()->mutable_node())
    if (n.op_type() == "Gemm" || n.op_type() == "Conv") named.push_back(&n);
  for (std::size_t i = 0; i < named.size() / 2; ++i) {
    const std::string first = named[i]->name();
    named[i]->set_name(named[named.size() - 1 - i]->name());
    named[named.size() - 1 - i]->set_name(first);
  }
  reorder_nodes(m, seed + 1);
  write_model(m, f);
  auto c = make_model<Net>(99);
  import_onnx(c, f);
  CHECK(params(c) == params(a));
  CHECK(ctnn::predict(c, x) == ours);
}
}  // namespace

TEST_CASE("import_onnx follows the tensors: any topological order of a graph's nodes imports bit for bit") {
  temp_dir d;
  SUBCASE("residual with and without projection, concatenate, add") {
    imports_in_any_order<graphs, shape<6, 6, 2>>(trained<graphs>(11, 8, 8, 1), d.path, 11);
  }
  SUBCASE("dag") { imports_in_any_order<fanned, shape<6>>(random_weights<fanned>(12), d.path, 12); }
  SUBCASE("branches that start alike: the joins say which is which") {
    imports_in_any_order<twins, shape<6>>(random_weights<twins>(14), d.path, 14);
  }
}

TEST_CASE("import_onnx refuses a graph layer whose nodes read other tensors, naming the node and both tensors") {
  temp_dir d;
  auto a = trained<graphs>(11, 8, 8, 1);
  auto w = trained<wired>(12, 8, 8, 1);
  const fs::path eg = d.path / "graphs.onnx", ew = d.path / "dag.onnx", f = d.path / "bad.onnx";
  export_onnx(a, eg);
  export_onnx(w, ew);
  const std::string p = "import_onnx: " + f.string() + ": ";
  auto b = make_model<graphs>(4);
  auto c = make_model<wired>(4);
  const auto before_b = params(b), before_c = params(c);
  // m written to f and imported into b (or c for the dag); the message, with nothing changed
  auto refused = [&](const onnx::ModelProto& m, bool dag = false) {
    write_model(m, f);
    std::string what = "(no exception)";
    try {
      if (dag) import_onnx(c, f);
      else import_onnx(b, f);
    } catch (const io_error& e) {
      what = e.what();
    } catch (const std::exception& e) {
      what = std::string("a foreign exception: ") + e.what();
    }
    CHECK(params(b) == before_b);
    CHECK(params(c) == before_c);
    return what;
  };
  const std::string l2 = p + "layer 2 (residual<conv2d<4, 3, 3, 1, same>, batch_norm, relu>)";
  const std::string l4 = p + "layer 4 (concatenate<-1, conv2d<2, 1, 1, 1, valid, relu>, branch<>>)";
  const std::string d1 = p + "layer 1 (" + ctnn::detail::type_at_t<0, model<wired>::layers>::name() + ")";

  SUBCASE("a Concat's axis: ONNX's negative axes are counted from the end; another axis is refused") {
    auto m = read_model(eg);
    auto* cat = node_named(m, "layer4_concat_23");
    REQUIRE(cat->attribute(0).name() == "axis");
    cat->mutable_attribute(0)->set_i(-1);  // the same axis: imports
    write_model(m, f);
    import_onnx(b, f);
    CHECK(params(b) == params(a));
    b = make_model<graphs>(4);
    cat->mutable_attribute(0)->set_i(1);
    CHECK(refused(m) == l4 + ": Concat " + index_of(m, "layer4_concat_23") +
                            " joins along axis 1 of rank-4 data (batch first); this layer along axis 3");
    cat->mutable_attribute(0)->set_i(-2);
    CHECK(refused(m) == l4 + ": Concat " + index_of(m, "layer4_concat_23") +
                            " joins along axis -2 (2) of rank-4 data (batch first); this layer along axis 3");
    cat->mutable_attribute(0)->set_i(4);
    CHECK(refused(m) == l4 + ": Concat " + index_of(m, "layer4_concat_23") +
                            " has axis 4, outside [-4, 3] for its rank-4 inputs");
    cat->clear_attribute();
    CHECK(refused(m) == l4 + ": Concat " + index_of(m, "layer4_concat_23") + " has no axis (ONNX requires one)");
    auto n = read_model(ew);  // a dag's concatenate_join
    node_named(n, "layer1_c_concat_7")->mutable_attribute(0)->set_i(2);
    CHECK(refused(n, true) == d1 + ", child c: Concat " + index_of(n, "layer1_c_concat_7") +
                                  " joins along axis 2 of rank-4 data (batch first); this layer along axis 3");
  }
  SUBCASE("a Concat's inputs swapped") {
    auto m = read_model(eg);
    auto* cat = node_named(m, "layer4_concat_23");
    const std::string in0 = cat->input(0), in1 = cat->input(1);
    cat->set_input(0, in1);
    cat->set_input(1, in0);
    CHECK(refused(m) == l4 + ": Concat " + index_of(m, "layer4_concat_23") + "'s input 0 is the output of Add " +
                            index_of(m, "layer3_add_18") + "; this layer's is the output of Relu " +
                            index_of(m, "layer4_0_act_21") + " (child 0's output)");
  }
  SUBCASE("a join reading another tensor: residual, residual with projection, add, dag") {
    auto m = read_model(eg);
    node_named(m, "layer2_add_11")->set_input(1, "transpose_9_out");  // batch_norm's output instead of x
    CHECK(refused(m) == l2 + ": Add " + index_of(m, "layer2_add_11") + " adds the output of Relu " +
                            index_of(m, "layer2_0_2_act_10") + " and the output of BatchNormalization " +
                            index_of(m, "layer2_0_1_batchnorm_8") + "; this layer adds the output of Relu " +
                            index_of(m, "layer2_0_2_act_10") + " and the output of Relu " + index_of(m, "layer1_act_2") +
                            " (child 0's output, and child 1's output)");
    m = read_model(eg);
    node_named(m, "transpose_15")->set_input(0, "transpose_3_out");  // the projection reads layer 1's output
    const std::string l3 = p + "layer 3 (residual<conv2d<6, 3, 3, 2, same>>)";
    CHECK(refused(m) == l3 + ", child 1: the graph computes nothing more from the output of Add " +
                            index_of(m, "layer2_add_11") + "; this layer needs Conv");
    m = read_model(eg);
    node_named(m, "layer7_add_33")->set_input(1, "layer7_2_0_act_30_out");  // add's third branch without its last dense
    CHECK(refused(m) == p + "layer 7 (add<branch<>, dense<8>, branch<dense<4, relu>, dense<8>>>): Add " +
                            index_of(m, "layer7_add_33") + " adds the output of Add " + index_of(m, "layer7_add_32") +
                            " and the output of Relu " + index_of(m, "layer7_2_0_act_30") +
                            "; this layer adds the output of Add " + index_of(m, "layer7_add_32") +
                            " and the output of Gemm " + index_of(m, "layer7_2_1_gemm_31") +
                            " (the sum of children 0 to 1, and child 2's output)");
    auto n = read_model(ew);
    node_named(n, "layer1_e_add_12")->set_input(1, "layer1_a_conv_1_out");  // node 'a' before its relu
    CHECK(refused(n, true) == d1 + ", child e: Add " + index_of(n, "layer1_e_add_12") + " adds the output of Add " +
                                  index_of(n, "layer1_e_add_11") + " and the output of Conv " +
                                  index_of(n, "layer1_a_conv_1") + "; this layer adds the output of Add " +
                                  index_of(n, "layer1_e_add_11") + " and the output of Relu " +
                                  index_of(n, "layer1_a_act_2") +
                                  " (node 'e': the sum of its inputs before input 2, and node 'a''s output)");
  }
  SUBCASE("a missing node (its readers reading its input instead)") {
    auto m = read_model(eg);
    node_named(m, "layer2_add_11")->set_input(0, "transpose_9_out");  // the branch's relu left out
    auto* g = m.mutable_graph();
    for (int i = 0; i < g->node_size(); ++i)
      if (g->node(i).name() == "layer2_0_2_act_10") g->mutable_node()->DeleteSubrange(i, 1);
    CHECK(refused(m) == l2 + ", child 0.2: the graph's next node is Add " + index_of(m, "layer2_add_11") +
                            "; this layer needs Relu");
  }
  SUBCASE("a cycle, a tensor nothing makes, a tensor made twice") {
    auto m = read_model(eg);
    node_named(m, "layer2_0_0_conv_5")->set_input(0, "layer2_add_11_out");  // reads the Add it feeds
    CHECK(refused(m) == p + "Conv " + index_of(m, "layer2_0_0_conv_5") +
                            " reads 'layer2_add_11_out', which Add " + index_of(m, "layer2_add_11") +
                            " makes after it: the nodes are not in topological order (or form a cycle)");
    m = read_model(eg);
    node_named(m, "layer2_add_11")->set_input(1, "ghost");
    CHECK(refused(m) == p + "Add " + index_of(m, "layer2_add_11") +
                            " reads 'ghost', which no node, initializer or graph input makes");
    m = read_model(eg);
    node_named(m, "layer4_0_conv_20")->set_output(0, "layer3_0_0_conv_13_out");
    CHECK(refused(m) == p + "Conv " + index_of(m, "layer4_0_conv_20") + " makes 'layer3_0_0_conv_13_out', which Conv " +
                            index_of(m, "layer3_0_0_conv_13") + " makes too (each tensor is made once)");
    node_named(m, "layer4_0_conv_20")->set_output(0, "layer1_kernel");
    CHECK(refused(m) == p + "Conv " + index_of(m, "layer4_0_conv_20") +
                            " makes 'layer1_kernel', which is a graph input or initializer (each tensor is made once)");
  }
  SUBCASE("a node the network does not compute, an output it does not make") {
    auto m = read_model(eg);
    auto* extra = m.mutable_graph()->add_node();
    extra->set_op_type("Sigmoid");
    extra->set_name("stray");
    extra->add_input("layer6_act_27_out");
    extra->add_output("stray_out");
    CHECK(refused(m) == p + "after the last layer: the graph computes Sigmoid " + index_of(m, "stray") +
                            " from the output of Relu " + index_of(m, "layer6_act_27") + "; this network does not");
    m = read_model(eg);
    node_named(m, "output_identity_40")->set_input(0, "layer8_add_37_out");
    CHECK(refused(m) == p + "after the last layer: the graph's output 'output' is the output of Add " +
                            index_of(m, "layer8_add_37") + "; this network's is the output of Softmax " +
                            index_of(m, "layer9_act_39"));
  }
}

TEST_CASE("import_onnx: a dense branch as MatMul (+ Add of its bias) before a residual's Add: the join is not taken for a bias") {
  using res = sequential<input<4>, residual<dense<4>>, dense<2>>;
  temp_dir d;
  auto a = random_weights<res>(21);
  const fs::path exported = d.path / "res.onnx", f = d.path / "matmul.onnx";
  export_onnx(a, exported);
  // the branch's Gemm as MatMul, its bias added by an Add (TensorFlow's form), then the residual's Add
  auto m = read_model(exported);
  auto* g = m.mutable_graph();
  std::vector<onnx::NodeProto> nodes(g->node().begin(), g->node().end());
  REQUIRE(nodes[0].op_type() == "Gemm");
  onnx::NodeProto mm = nodes[0], bias;
  mm.set_op_type("MatMul");
  mm.mutable_input()->RemoveLast();
  mm.set_output(0, "branch/MatMul_out");
  bias.set_op_type("Add");
  bias.set_name("branch/BiasAdd");
  bias.add_input(nodes[0].input(2));  // the bias first: either operand
  bias.add_input("branch/MatMul_out");
  bias.add_output(nodes[0].output(0));
  g->clear_node();
  *g->add_node() = mm;
  *g->add_node() = bias;
  for (std::size_t i = 1; i < nodes.size(); ++i) *g->add_node() = nodes[i];
  write_model(m, f);
  auto b = make_model<res>(22);
  import_onnx(b, f);
  CHECK(params(b) == params(a));
  // without the bias Add, the MatMul feeds the residual's Add directly: the branch's bias is 0
  g->mutable_node()->DeleteSubrange(1, 1);
  g->mutable_node(0)->set_output(0, nodes[0].output(0));
  write_model(m, f);
  auto c = make_model<res>(23);
  import_onnx(c, f);
  auto want = a.layer_parameters<0>();  // kernel (4 x 4), then bias (4): zero the bias
  std::vector<float> w(want.begin(), want.end());
  auto got = c.layer_parameters<0>();
  REQUIRE(got.size() == w.size());
  for (std::size_t i = 16; i < 20; ++i) w[i] = 0.f;
  CHECK(std::vector<float>(got.begin(), got.end()) == w);
}
