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

onnx::TensorProto* initializer(onnx::ModelProto& m, const std::string& name) {
  for (auto& t : *m.mutable_graph()->mutable_initializer())
    if (t.name() == name) return &t;
  FAIL("no initializer " << name);
  return nullptr;
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
    auto* pads = initializer(m, "layer1_pads");
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

TEST_CASE("import_onnx refuses a conv1d's other stride, a Resize's default coordinates and a pointwise Conv's group") {
  temp_dir d("onnx_layers");
  const fs::path f = d.path / "edited.onnx";
  const std::string p = "import_onnx: " + f.string() + ": ";
  {
    auto a = trained<sequence, shape<12, 3>>(9);
    export_onnx(a, d.path / "sequence.onnx");
    auto m = read_model(d.path / "sequence.onnx");
    attribute(node_of(m, "Conv"), "strides").set_ints(0, 1);
    write_model(m, f);
    auto b = make_model<sequence>(1);
    const std::string msg = message_of([&] { import_onnx(b, f); });
    CHECK(msg.starts_with(p + "layer 1 (conv1d<4, 3, 2, same, relu>): Conv 'layer1_conv_"));
    CHECK(msg.ends_with(" has strides [1]; this layer's stride is 2"));
  }
  {
    auto a = trained<resized, shape<5, 6, 2>>(7);
    export_onnx(a, d.path / "resized.onnx");
    auto m = read_model(d.path / "resized.onnx");
    auto& r = node_of(m, "Resize");
    auto* at = r.mutable_attribute();
    for (int i = 0; i < at->size(); ++i)
      if (at->Get(i).name() == "coordinate_transformation_mode") at->DeleteSubrange(i, 1);
    write_model(m, f);
    auto b = make_model<resized>(1);
    const std::string msg = message_of([&] { import_onnx(b, f); });
    CHECK(msg.starts_with(p + "layer 3 (up_sampling2d<2, 3>): Resize 'layer3_resize_"));
    CHECK(msg.ends_with(" has coordinate_transformation_mode 'half_pixel' (the default); up_sampling2d's is "
                        "'asymmetric'"));
  }
  {
    auto a = trained<gray, shape<7, 7>>(5);
    export_onnx(a, d.path / "gray.onnx");
    auto m = read_model(d.path / "gray.onnx");
    int convs = 0;
    for (auto& n : *m.mutable_graph()->mutable_node())
      if (n.op_type() == "Conv" && ++convs == 3) {  // the separable's pointwise one (export_onnx writes no group)
        auto& a = attribute(n, "group");
        a.set_type(onnx::AttributeProto::INT);
        a.set_i(2);
      }
    write_model(m, f);
    auto b = make_model<gray>(1);
    const std::string msg = message_of([&] { import_onnx(b, f); });
    CHECK(msg.starts_with(p + "layer 2 (separable_conv2d<5, 2, 2, 1, valid>): Conv 'layer2_pointwise_"));
    CHECK(msg.ends_with(" has group 2; this layer's pointwise convolution has group 1"));
  }
}

TEST_CASE("import_onnx reads other spellings of the same nodes: Pad and Resize by axes, LayerNormalization's axis "
          "counted from the front, opset 10's Pad and Resize, a zero bias on a separable depthwise Conv") {
  temp_dir d("onnx_layers");
  const fs::path f = d.path / "edited.onnx";
  auto a = trained<resized, shape<5, 6, 2>>(7);
  export_onnx(a, d.path / "resized.onnx");
  auto m = read_model(d.path / "resized.onnx");
  auto* g = m.mutable_graph();
  // Pad: pads (top, left, bottom, right) for axes (1, 2), given as an int64 tensor (opset 18's axes input)
  auto* pads = initializer(m, "layer1_pads");
  pads->clear_int64_data();
  for (std::int64_t v : {1, 0, 2, 3}) pads->add_int64_data(v);
  pads->set_dims(0, 4);
  auto* axes = g->add_initializer();
  axes->set_name("pad_axes");
  axes->set_data_type(onnx::TensorProto::INT64);
  axes->add_dims(2);
  axes->add_int64_data(1);
  axes->add_int64_data(-2);
  auto& pad = node_of(m, "Pad");
  pad.add_input("");  // no constant_value
  pad.add_input("pad_axes");
  // Resize: scales (2, 3) for axes (1, 2)
  auto& resize = node_of(m, "Resize");
  auto* scales = initializer(m, resize.input(2));
  scales->set_dims(0, 2);
  const float sc[] = {2.f, 3.f};
  scales->set_raw_data(std::string(reinterpret_cast<const char*>(sc), sizeof sc));
  auto& ra = attribute(resize, "axes");
  ra.set_type(onnx::AttributeProto::INTS);
  ra.add_ints(1);
  ra.add_ints(2);
  // LayerNormalization over axis 3 of rank-4 data: the last one
  attribute(node_of(m, "LayerNormalization"), "axis").set_i(3);
  write_model(m, f);
  auto b = make_model<resized>(100);
  import_onnx(b, f);
  CHECK(variable_bytes(b) == variable_bytes(a));

  // opset 10: Pad's pads as an attribute (Pad-2), Resize-10's (X, scales), nearest being asymmetric and floor
  m = read_model(d.path / "resized.onnx");
  for (auto& o : *m.mutable_opset_import())
    if (o.domain().empty()) o.set_version(10);
  auto& pad10 = node_of(m, "Pad");
  const auto* pv = initializer(m, pad10.input(1));
  auto& pa = attribute(pad10, "pads");
  pa.set_type(onnx::AttributeProto::INTS);
  for (auto v : pv->int64_data()) pa.add_ints(v);
  pad10.mutable_input()->RemoveLast();
  auto& r10 = node_of(m, "Resize");
  r10.set_input(1, r10.input(2));
  r10.mutable_input()->RemoveLast();
  auto* ra10 = r10.mutable_attribute();
  for (int i = ra10->size(); i-- > 0;)
    if (ra10->Get(i).name() != "mode") ra10->DeleteSubrange(i, 1);
  write_model(m, f);
  auto b10 = make_model<resized>(101);
  import_onnx(b10, f);
  CHECK(variable_bytes(b10) == variable_bytes(a));

  auto c = trained<mobile, shape<8, 8, 3>>(3);
  export_onnx(c, d.path / "mobile.onnx");
  auto n = read_model(d.path / "mobile.onnx");
  for (auto& node : *n.mutable_graph()->mutable_node())
    if (node.name().starts_with("layer3_depthwise")) {  // the separable's depthwise Conv: a bias of zeros
      auto* z = n.mutable_graph()->add_initializer();
      z->set_name("zero_bias");
      z->set_data_type(onnx::TensorProto::FLOAT);
      z->add_dims(6);  // C M = 6 x 1
      for (int i = 0; i < 6; ++i) z->add_float_data(0.f);
      node.add_input("zero_bias");
    }
  write_model(n, f);
  auto e = make_model<mobile>(100);
  import_onnx(e, f);
  CHECK(variable_bytes(e) == variable_bytes(c));
  // ... but not a nonzero one (ctnn's separable_conv2d has no bias before its pointwise step)
  initializer(n, "zero_bias")->set_float_data(2, 0.5f);
  write_model(n, f);
  const std::string msg = message_of([&] { import_onnx(e, f); });
  CHECK(msg.starts_with("import_onnx: " + f.string() + ": layer 3 (separable_conv2d<8, 3, 3, 2, same, 1, relu>): Conv "
                        "'layer3_depthwise_"));
  CHECK(msg.ends_with(" has a nonzero bias; separable_conv2d's depthwise step has none"));
}
