// onnx/export.hpp for the layers of issue 29 beyond the graphs: depthwise_conv2d (a Conv with
// group = C) and separable_conv2d (that Conv, then a 1x1 Conv), with depth multipliers 1 to 4,
// strides, same and valid padding, a rank-2 input, activations; conv1d (a 1-D Conv),
// layer_normalization (LayerNormalization), zero_padding2d (Pad) and up_sampling2d (Resize,
// nearest): onnxruntime computes ctnn's predictions of trained networks within 1e-5; import_onnx reads
// each back bit for bit, and refuses a graph whose group, pads, Resize mode or LayerNormalization epsilon or
// axis differ from the network's, naming the layer and the node.
#include <doctest/doctest.h>

#include <ctnn/ctnn.hpp>
#include <ctnn/onnx.hpp>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "onnx/onnx_util.hpp"

using namespace ctnn;
using namespace ctnn::test::onnx_util;

namespace {
using mobile = sequential<input<8, 8, 3>, depthwise_conv2d<3, 3, 1, padding::same, 2, relu>, batch_norm,
                          separable_conv2d<8, 3, 3, 2, padding::same, 1, relu>,
                          depthwise_conv2d<2, 2, 1, padding::valid, 1, ctnn::tanh>,
                          separable_conv2d<6, 3, 3, 1, padding::valid, 2>, global_average_pool, dense<3>>;
using gray = sequential<input<7, 7>, depthwise_conv2d<3, 3, 2, padding::same, 4, sigmoid>, separable_conv2d<5, 2, 2>,
                        flatten, dense<2>>;

using resized = sequential<input<5, 6, 2>, zero_padding2d<1, 2, 0, 3>, conv2d<3, 3, 3, 1, padding::valid, relu>,
                           up_sampling2d<2, 3>, layer_normalization<>, max_pool2d<2>, flatten, dense<2>>;
using sequence = sequential<input<12, 3>, conv1d<4, 3, 2, padding::same, relu>, layer_normalization<1e-2>,
                            conv1d<5, 2, 1, padding::valid, ctnn::tanh>, flatten, dense<2>>;

template <class Net, Shape In>
model<Net> trained(std::uint64_t seed) {
  auto m = make_model<Net>(seed);
  const auto x = random_inputs<In>(48, seed + 1);
  std::vector<std::int32_t> y(48);
  for (std::size_t i = 0; i < y.size(); ++i) y[i] = std::int32_t(i % 2);
  data::in_memory<In, sparse_labels> d(std::vector<float>(x.begin(), x.end()), y);
  adam opt{0.01};
  fit(m, sparse_categorical_crossentropy{.from_logits = true}, opt, d.batch(16), epochs{3});
  return m;
}

// a model's parameters and states, as bytes (bit for bit)
template <class M>
std::string variable_bytes(const M& m) {
  std::string s;
  m.for_each_variable([&](const variable_ref& r) {
    if (r.kind != role::parameter && r.kind != role::state) return;
    s.append(static_cast<const char*>(static_cast<const void*>(r.data)), r.extent * r.element_bytes);
  });
  return s;
}

// export_onnx(trained), then import_onnx into a model of another seed: every variable comes back bit for bit
template <class Net, Shape In>
void round_trip(std::uint64_t seed, const fs::path& f) {
  auto a = trained<Net, In>(seed);
  export_onnx(a, f);
  auto b = make_model<Net>(seed + 100);
  REQUIRE(variable_bytes(b) != variable_bytes(a));
  import_onnx(b, f);
  CHECK(variable_bytes(b) == variable_bytes(a));
  const auto x = random_inputs<In>(5, seed + 2);
  CHECK(ctnn::predict(b, x) == ctnn::predict(a, x));
}

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
// the first node with op `op` (REQUIREd)
onnx::NodeProto& node_of(onnx::ModelProto& m, const std::string& op) {
  for (auto& n : *m.mutable_graph()->mutable_node())
    if (n.op_type() == op) return n;
  FAIL("no " << op << " node");
  return *m.mutable_graph()->mutable_node(0);
}
onnx::AttributeProto& attribute(onnx::NodeProto& n, const std::string& name) {
  for (auto& a : *n.mutable_attribute())
    if (a.name() == name) return a;
  auto* a = n.add_attribute();
  a->set_name(name);
  return *a;
}
}  // namespace

TEST_CASE("export_onnx: depthwise_conv2d and separable_conv2d run in onnxruntime as in ctnn (within 1e-5)") {
  temp_dir d("onnx_layers");
  auto a = trained<mobile, shape<8, 8, 3>>(3);
  export_onnx(a, d.path / "mobile.onnx");
  const auto x = random_inputs<shape<8, 8, 3>>(9, 11);
  xt::xtensor<float, 2> theirs;
  if (!onnxruntime_predict(d.path / "mobile.onnx", x, theirs, d.path)) return;
  REQUIRE(theirs.dimension() == 2);
  CHECK(theirs.shape()[0] == 9);
  CHECK(max_abs_diff(theirs, ctnn::predict(a, x)) < 1e-5);

  auto b = trained<gray, shape<7, 7>>(5);
  export_onnx(b, d.path / "gray.onnx");
  const auto xg = random_inputs<shape<7, 7>>(6, 12);
  if (!onnxruntime_predict(d.path / "gray.onnx", xg, theirs, d.path)) return;
  CHECK(max_abs_diff(theirs, ctnn::predict(b, xg)) < 1e-5);
}

TEST_CASE("export_onnx: conv1d, layer_normalization, zero_padding2d and up_sampling2d run in onnxruntime as in ctnn") {
  temp_dir d("onnx_layers");
  xt::xtensor<float, 2> theirs;
  auto a = trained<resized, shape<5, 6, 2>>(7);
  export_onnx(a, d.path / "resized.onnx");
  const auto x = random_inputs<shape<5, 6, 2>>(7, 13);
  if (!onnxruntime_predict(d.path / "resized.onnx", x, theirs, d.path)) return;
  CHECK(max_abs_diff(theirs, ctnn::predict(a, x)) < 1e-5);

  auto b = trained<sequence, shape<12, 3>>(9);
  export_onnx(b, d.path / "sequence.onnx");
  const auto xs = random_inputs<shape<12, 3>>(8, 14);
  if (!onnxruntime_predict(d.path / "sequence.onnx", xs, theirs, d.path)) return;
  CHECK(max_abs_diff(theirs, ctnn::predict(b, xs)) < 1e-5);
}

TEST_CASE("import_onnx reads depthwise_conv2d, separable_conv2d, conv1d, layer_normalization, zero_padding2d and "
          "up_sampling2d back bit for bit") {
  temp_dir d("onnx_layers");
  round_trip<mobile, shape<8, 8, 3>>(3, d.path / "mobile.onnx");
  round_trip<gray, shape<7, 7>>(5, d.path / "gray.onnx");
  round_trip<resized, shape<5, 6, 2>>(7, d.path / "resized.onnx");
  round_trip<sequence, shape<12, 3>>(9, d.path / "sequence.onnx");
}

TEST_CASE("import_onnx refuses another group, Pad's pads, Resize's mode, LayerNormalization's epsilon or axis") {
  temp_dir d("onnx_layers");
  const fs::path f = d.path / "edited.onnx";
  const std::string p = "import_onnx: " + f.string() + ": ";
  {
    auto a = trained<mobile, shape<8, 8, 3>>(3);
    export_onnx(a, d.path / "mobile.onnx");
    auto m = read_model(d.path / "mobile.onnx");
    attribute(node_of(m, "Conv"), "group").set_i(1);
    write_model(m, f);
    auto b = make_model<mobile>(1);
    const auto before = variable_bytes(b);
    CHECK(message_of([&] { import_onnx(b, f); }) ==
          p + "layer 1 (depthwise_conv2d<3, 3, 1, same, 2, relu>): Conv 'layer1_depthwise_1' (node 1) has group 1; "
              "this layer's depthwise convolution has group 3 (one per input channel)");
    CHECK(variable_bytes(b) == before);
  }
  auto a = trained<resized, shape<5, 6, 2>>(7);
  export_onnx(a, d.path / "resized.onnx");
  auto b = make_model<resized>(1);
  {
    auto m = read_model(d.path / "resized.onnx");
    auto* pads = m.mutable_graph()->mutable_initializer(0);
    REQUIRE(pads->data_type() == onnx::TensorProto::INT64);
    pads->set_int64_data(1, 2);  // top: 2, not 1
    write_model(m, f);
    CHECK(message_of([&] { import_onnx(b, f); }) ==
          p + "layer 1 (zero_padding2d<1, 2, 0, 3>): Pad 'layer1_pad_0' (node 0) has pads [0, 2, 0, 0, 0, 2, 3, 0]; "
              "this layer's are [0, 1, 0, 0, 0, 2, 3, 0] (batch, height, width, channels: begins, then ends)");
  }
  {
    auto m = read_model(d.path / "resized.onnx");
    attribute(node_of(m, "Resize"), "mode").set_s("linear");
    write_model(m, f);
    const std::string msg = message_of([&] { import_onnx(b, f); });
    CHECK(msg.starts_with(p + "layer 3 (up_sampling2d<2, 3>): Resize 'layer3_resize_"));
    CHECK(msg.ends_with(" has mode 'linear'; up_sampling2d's is 'nearest'"));
  }
  {
    auto m = read_model(d.path / "resized.onnx");
    attribute(node_of(m, "LayerNormalization"), "epsilon").set_f(1e-5f);
    write_model(m, f);
    const std::string msg = message_of([&] { import_onnx(b, f); });
    CHECK(msg.starts_with(p + "layer 4 (layer_normalization): LayerNormalization 'layer4_layernorm_"));
    CHECK(msg.ends_with(" has epsilon 9.99999975e-06; this layer's is 0.001"));
  }
  {
    auto m = read_model(d.path / "resized.onnx");
    attribute(node_of(m, "LayerNormalization"), "axis").set_i(1);
    write_model(m, f);
    const std::string msg = message_of([&] { import_onnx(b, f); });
    CHECK(msg.starts_with(p + "layer 4 (layer_normalization): LayerNormalization 'layer4_layernorm_"));
    CHECK(msg.ends_with(" normalises from axis 1 of rank-4 data (batch first); layer_normalization over the last "
                        "one (axis -1)"));
  }
}
