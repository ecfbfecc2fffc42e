// onnx/import.hpp on graphs that onnxruntime's quantize_static wrote (QDQ, per-channel symmetric int8
// weights, int8 activations) from float models that export_onnx wrote: an MLP and a CNN (conv2d,
// max_pool2d, dense; also conv2d with relu, which export_onnx writes Conv, Relu, Transpose so that
// quantize_static quantizes Conv and Relu once) import into ctnn's quantized type and predict within one
// output step of onnxruntime running the same file; a conv2d's Relu after a Transpose (quantize_static
// quantizes the Conv's output before the Relu: two roundings) and what else differs are refused, naming
// the node. Skipped with a
// message where python3 with numpy, onnx and onnxruntime is missing (tests/onnx/ort_quantize_static.py).
#include <doctest/doctest.h>

#include <ctnn/io/atomic_file.hpp>
#include <ctnn/io/read_file.hpp>
#include <ctnn/npy.hpp>
#include <ctnn/onnx.hpp>
#include <ctnn/quantization/convert.hpp>
#include <ctnn/xtensor.hpp>

#include "onnx/onnx_util.hpp"

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <sys/wait.h>

using namespace ctnn;
using namespace ctnn::test::onnx_util;

namespace {
// the float model with nonzero biases (a fresh layer's are 0), exported; onnxruntime's quantize_static
// over 256 calibration inputs in [-1, 1]; onnxruntime runs the result on x (optimized and not).
// False (after CTNN_SKIP) where python3, numpy, onnx or onnxruntime are missing.
// change(f): applied to the exported float graph before quantize_static (default: nothing).
onnx::ModelProto read_model(const fs::path& f);
void write_model(const onnx::ModelProto& m, const fs::path& f);
template <class Net, Shape In>
bool ort_quantized(const fs::path& dir, model<Net>& m, const auto& x, xt::xtensor<float, 2>& optimized,
                   xt::xtensor<float, 2>& unoptimized, void (*change)(onnx::ModelProto&) = nullptr) {
  rng g(17);
  m.for_each_variable([&](const variable_ref& v) {
    if (v.name == "bias")
      for (std::size_t j = 0; j < v.extent; ++j) reinterpret_cast<float*>(v.data)[j] = float(g.uniform(-0.3, 0.3));
  });
  export_onnx(m, dir / "float.onnx");
  if (change) {
    auto f = read_model(dir / "float.onnx");
    change(f);
    write_model(f, dir / "float.onnx");
  }
  save_npy(dir / "cal.npy", random_inputs<In>(256, 31));
  save_npy(dir / "x.npy", x);
  const std::string cmd = "python3 " CTNN_ONNX_TEST_DIR "/ort_quantize_static.py " + (dir / "float.onnx").string() +
                          " " + (dir / "cal.npy").string() + " " + (dir / "q.onnx").string() + " " +
                          (dir / "x.npy").string() + " " + (dir / "y.npy").string() + " " +
                          (dir / "y_noopt.npy").string();
  const int rc = std::system(cmd.c_str());
  if (rc != 0 && WIFEXITED(rc) && (WEXITSTATUS(rc) == 3 || WEXITSTATUS(rc) == 127)) {
    MESSAGE("CTNN_SKIP: python3 with numpy, onnx and onnxruntime is not available (pip install onnxruntime onnx)");
    return false;
  }
  REQUIRE(rc == 0);
  optimized = load_npy<float, 2>(dir / "y.npy");
  unoptimized = load_npy<float, 2>(dir / "y_noopt.npy");
  return true;
}

// ctnn's outputs against onnxruntime's in output steps (the last layer's output scale): at most one
// step apart, and at most 10 % of them apart at all
template <class M>
void within_one_step(const M& q, const auto& ours, const xt::xtensor<float, 2>& optimized,
                     const xt::xtensor<float, 2>& unoptimized, const char* what) {
  float scale = 0;
  q.for_each_variable([&](const variable_ref& v) {
    if (v.name == "output_scale") std::memcpy(&scale, v.data, sizeof scale);  // (the last layer's wins)
  });
  REQUIRE(scale > 0);
  for (const auto* theirs : {&optimized, &unoptimized}) {
    REQUIRE(ours.size() == theirs->size());
    double most = 0;
    std::size_t differ = 0;
    auto j = theirs->begin();
    for (auto i = ours.begin(); i != ours.end(); ++i, ++j) {
      const double s = std::abs(double(*i) - double(*j)) / double(scale);
      most = std::max(most, s);
      differ += s > 0.5;
    }
    MESSAGE(std::string(what) << std::string(theirs == &optimized ? ", onnxruntime optimized: " : ", onnxruntime unoptimized: ") << differ
                 << " of " << ours.size() << " outputs differ, at most " << most << " output steps");
    CHECK(most < 1.01);  // the requantization: ctnn's fixed-point multiplier against onnxruntime's float (docs/interop.md)
    CHECK(differ * 10 <= ours.size());
  }
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
onnx::TensorProto& initializer(onnx::ModelProto& m, const std::string& name) {
  for (auto& t : *m.mutable_graph()->mutable_initializer())
    if (t.name() == name) return t;
  FAIL("no initializer " << name);
  return *m.mutable_graph()->mutable_initializer(0);
}
}  // namespace

TEST_CASE("import_onnx of onnxruntime's quantize_static MLP (Relu folded into the clamp): within one output step of onnxruntime") {
  using net = sequential<input<4, 4>, flatten, dense<12, relu>, dropout<0.1>, dense<5>>;
  temp_dir d("ort_qdq_mlp");
  auto m = make_model<net>(5);
  auto x = random_inputs<shape<4, 4>>(48, 32);
  x *= 1.3f;  // partly beyond the calibrated range: saturation
  xt::xtensor<float, 2> optimized, unoptimized;
  if (!ort_quantized<net, shape<4, 4>>(d.path, m, x, optimized, unoptimized)) return;
  const auto cal = random_inputs<shape<4, 4>>(16, 1);
  auto q = quantize_full_integer(m, cal.data(), 16);  // (its type; import_onnx replaces every value)
  import_onnx(q, d.path / "q.onnx");
  within_one_step(q, ctnn::predict(q, x), optimized, unoptimized, "quantize_static MLP");

  // what ctnn cannot compute is refused, naming the node
  auto refused = [&](auto&& change) {
    auto f = read_model(d.path / "q.onnx");
    change(f);
    write_model(f, d.path / "bad.onnx");
    return message_of([&] { import_onnx(q, d.path / "bad.onnx"); });
  };
  // a Relu left out while the output's zero point is not -128: the clamp would not be a Relu
  auto msg = refused([](onnx::ModelProto& f) {
    for (auto& t : *f.mutable_graph()->mutable_initializer())
      if (t.name().rfind("layer2_", 0) == 0 && t.name().find("_out_zero_point") != std::string::npos) {
        REQUIRE(t.int32_data_size() == 1);  // (onnxruntime 1.32 writes its zero points there, not in raw_data)
        t.set_int32_data(0, -100);
      }
  });
  CHECK(msg.find("layer 2 (quantized_dense<16, 12, relu, full_integer>): Gemm 'layer2_gemm_") != std::string::npos);
  CHECK(msg.find("with zero point -100 and no Relu; this layer's activation is Relu (folded into the QuantizeLinear "
                 "only with zero point -128)") != std::string::npos);
  // a nonzero int32 zero point of the bias
  msg = refused([](onnx::ModelProto& f) {
    auto& t = initializer(f, "layer4_bias_quantized_zero_point");
    REQUIRE(t.raw_data().size() == 5 * 4);  // (here onnxruntime 1.32 writes raw_data)
    const std::int32_t one = 1;
    std::memcpy(t.mutable_raw_data()->data() + 4, &one, 4);
  });
  CHECK(msg.find("layer 4 (quantized_dense<12, 5, full_integer>): DequantizeLinear 'layer4_bias_DequantizeLinear' has "
                 "a nonzero zero point (1; ctnn's int32 bias has none)") != std::string::npos);
  // uint8 activations (quantize_static's default QUInt8)
  msg = refused([](onnx::ModelProto& f) {
    for (auto& t : *f.mutable_graph()->mutable_initializer())
      if (t.name() == "layer4_gemm_4_out_zero_point" || t.name().find("layer4_gemm") != std::string::npos)
        if (t.data_type() == onnx::TensorProto::INT8) t.set_data_type(onnx::TensorProto::UINT8);
  });
  CHECK(msg.find("layer 4 (quantized_dense<12, 5, full_integer>): QuantizeLinear '") != std::string::npos);
  CHECK(msg.find("'s zero point is uint8: ctnn's activations are int8 (onnxruntime's quantize_static: "
                 "activation_type=QuantType.QInt8)") != std::string::npos);
}

TEST_CASE("import_onnx of onnxruntime's quantize_static CNN: conv2d (also with relu), max_pool2d, dense within one output step, a Relu after a Transpose refused") {
  temp_dir d("ort_qdq_cnn");
  auto x = random_inputs<shape<6, 6, 2>>(40, 33);
  x *= 1.3f;
  const auto cal = random_inputs<shape<6, 6, 2>>(16, 1);
  xt::xtensor<float, 2> optimized, unoptimized;
  {  // conv2d without an activation: its Q/DQ pairs around the Transposes and the MaxPool keep one scale
    using net = sequential<input<6, 6, 2>, conv2d<4, 3, 3, 1, padding::same>, max_pool2d<2>,
                           conv2d<3, 3, 3, 1, padding::valid>, flatten, dense<8, relu>, dense<5>>;
    auto m = make_model<net>(3);
    if (!ort_quantized<net, shape<6, 6, 2>>(d.path, m, x, optimized, unoptimized)) return;
    auto q = quantize_full_integer(m, cal.data(), 16);
    import_onnx(q, d.path / "q.onnx");
    within_one_step(q, ctnn::predict(q, x), optimized, unoptimized, "quantize_static CNN");
  }
  {  // conv2d with relu: export_onnx writes Conv, Relu, Transpose; quantize_static drops the Relu and quantizes
     // the Conv's output once with the Relu's range (zero point -128), the Transpose's pair with the same
    using net = sequential<input<6, 6, 2>, conv2d<4, 3, 3, 1, padding::same, relu>, max_pool2d<2>,
                           conv2d<3, 3, 3, 1, padding::valid, relu>, flatten, dense<5>>;
    auto m = make_model<net>(4);
    if (!ort_quantized<net, shape<6, 6, 2>>(d.path, m, x, optimized, unoptimized)) return;
    auto q = quantize_full_integer(m, cal.data(), 16);
    import_onnx(q, d.path / "q.onnx");
    within_one_step(q, ctnn::predict(q, x), optimized, unoptimized, "quantize_static CNN with relu convolutions");
    // each Conv's output goes to one QuantizeLinear with zero point -128 (the Relu folded into the clamp)
    const auto f = read_model(d.path / "q.onnx");
    std::size_t convs = 0;
    for (const auto& n : f.graph().node()) {
      if (n.op_type() != "Conv") continue;
      ++convs;
      std::size_t readers = 0;
      for (const auto& r : f.graph().node())
        for (const auto& i : r.input())
          if (i == n.output(0)) {
            ++readers;
            CHECK(r.op_type() == "QuantizeLinear");
          }
      CHECK(readers == 1);
    }
    CHECK(convs == 2);
  }
  {  // the older order, Conv, Transpose, Relu (a graph written so by another tool): quantize_static quantizes the
     // Conv's output (its full range), then the Relu's after the Transpose (zero point -128), and drops the Relu:
     // two roundings, refused
    using net = sequential<input<6, 6, 2>, conv2d<4, 3, 3, 1, padding::same, relu>, max_pool2d<2>, flatten, dense<5>>;
    auto m = make_model<net>(4);
    const auto relu_after_transpose = [](onnx::ModelProto& f) {
      // Conv -> Relu -> Transpose becomes Conv -> Transpose -> Relu (the same values)
      auto* g = f.mutable_graph();
      for (int i = 0; i + 1 < g->node_size(); ++i) {
        auto* relu = g->mutable_node(i);
        auto* tr = g->mutable_node(i + 1);
        if (relu->op_type() != "Relu" || tr->op_type() != "Transpose" || tr->input(0) != relu->output(0)) continue;
        const std::string in = relu->input(0), mid = relu->output(0), out = tr->output(0);
        tr->set_input(0, in);
        tr->set_output(0, mid);
        relu->set_input(0, mid);
        relu->set_output(0, out);
        g->mutable_node()->SwapElements(i, i + 1);
        return;  // (one Relu: the layout Transpose before the pool's is the next node)
      }
    };
    if (!ort_quantized<net, shape<6, 6, 2>>(d.path, m, x, optimized, unoptimized, +relu_after_transpose)) return;
    auto q = quantize_full_integer(m, cal.data(), 16);
    const auto msg = message_of([&] { import_onnx(q, d.path / "q.onnx"); });
    CHECK(msg.find("layer 1 (quantized_conv2d<4, 3, 3, 1, same, relu, full_integer>): Conv 'layer1_conv_") !=
          std::string::npos);
    CHECK(msg.find("'s output is quantized by QuantizeLinear 'layer1_conv_") != std::string::npos);
    CHECK(msg.find("before its Relu, folded into QuantizeLinear '") != std::string::npos);
    CHECK(msg.find("zero point -128): the graph rounds twice, ctnn's layer once") != std::string::npos);
  }
}
