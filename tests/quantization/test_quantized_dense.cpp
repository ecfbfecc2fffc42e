// tests/quantization/test_quantized_dense.cpp — quantized_dense and post-training quantization
// (quantization/convert.hpp) and quantization-aware training (quantization/qat.hpp): sizes, accuracy against the float model, exactness against an
// independent scalar int8 implementation, weights files, and the errors.
#include <doctest/doctest.h>

#include <ctnn/ctnn.hpp>
#include <ctnn/io/weights.hpp>
#include <ctnn/layers/quantized_dense.hpp>
#include <ctnn/quantization/convert.hpp>
#include <ctnn/quantization/qat.hpp>

#include "quantization/int8_fixture.hpp"

#include <array>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

using namespace ctnn;

namespace {
constexpr std::size_t D = 16, C = 3;
using net = sequential<input<D>, dense<32, relu>, dropout<0.1f>, dense<24, relu>, dense<C>>;

// three Gaussian blobs in 16 dimensions, overlapping a little
struct blobs {
  std::vector<float> x;
  std::vector<std::int32_t> y;
};
blobs make_blobs(std::size_t n, std::uint64_t seed) {
  rng centers(7), g(seed);
  std::vector<float> c(C * D);
  for (auto& v : c) v = float(centers.uniform(-1.5, 1.5));
  blobs b;
  b.x.resize(n * D);
  b.y.resize(n);
  for (std::size_t i = 0; i < n; ++i) {
    const std::size_t k = i % C;
    b.y[i] = std::int32_t(k);
    for (std::size_t d = 0; d < D; ++d) b.x[i * D + d] = c[k * D + d] + float(g.uniform(-1.7, 1.7));
  }
  return b;
}
double accuracy_of(const std::vector<float>& logits, const std::vector<std::int32_t>& y) {
  std::size_t ok = 0;
  for (std::size_t i = 0; i < y.size(); ++i) {
    std::size_t best = 0;
    for (std::size_t j = 1; j < C; ++j)
      if (logits[i * C + j] > logits[i * C + best]) best = j;
    ok += best == std::size_t(y[i]);
  }
  return double(ok) / double(y.size());
}
template <class M>
M& trained() {
  static M m = [] {
    auto mm = make_model<net>(5);
    const auto tr = make_blobs(600, 1);
    adam opt{0.01};
    fit(mm, sparse_categorical_crossentropy{.from_logits = true}, opt,
        data::in_memory<shape<D>, sparse_labels>(tr.x, tr.y).batch(32), epochs{8});
    return mm;
  }();
  return m;
}
using float_model = decltype(make_model<net>(5));

// TFLite's RoundingDivideByPOT written another way: |x| / 2^e rounded half up, with x's sign.
std::int64_t rdbpot(std::int64_t x, int e) {
  if (e == 0) return x;
  const std::int64_t h = std::int64_t(1) << (e - 1);
  return x >= 0 ? (x + h) >> e : -((-x + h) >> e);
}
// SaturatingRoundingDoublingHighMul: (a b + (a b >= 0 ? 2^30 : 1 - 2^30)) / 2^31, truncated toward 0.
std::int64_t srdhm(std::int64_t a, std::int64_t b) {
  if (a == INT32_MIN && b == INT32_MIN) return INT32_MAX;
  const std::int64_t ab = a * b;
  const std::int64_t num = ab + (ab >= 0 ? (std::int64_t(1) << 30) : 1 - (std::int64_t(1) << 30));
  return num >= 0 ? num >> 31 : -((-num) >> 31);
}

// The independent int8 pipeline: int8 tensors between the layers, float only at both ends.
// sat (if given): per dense layer, the input values and the outputs it clamped to [-128, 127].
template <class QM>
std::vector<float> int8_reference(const QM& qm, const std::vector<float>& x, std::size_t n,
                                  std::vector<std::array<std::uint64_t, 2>>* sat = nullptr) {
  struct layer {
    std::size_t K = 0, N = 0;
    bool relu = false;
    std::vector<std::int8_t> w;  // unpacked, [N, K]
    const std::int32_t* b = nullptr;
    const float* ws = nullptr;
    float is = 0, os = 0;
    std::int32_t iz = 0, oz = 0;
  };
  std::vector<layer> ls(5);
  qm.for_each_variable([&](const variable_ref& v) {
    auto& l = ls[v.layer];
    const std::string name(v.name);
    if (name == "kernel") {  // packed {N, padded_k(K)}: this net's K are multiples of 4
      l.N = v.dims[0];
      l.K = v.dims[1];
      l.w.resize(l.N * l.K);
      kernels::cpu::int8::unpack(l.K, l.N, reinterpret_cast<const std::int8_t*>(v.data), l.w.data());
    }
    if (name == "bias") l.b = reinterpret_cast<const std::int32_t*>(v.data);
    if (name == "kernel_scale") l.ws = reinterpret_cast<const float*>(v.data);
    if (name == "input_scale") l.is = *reinterpret_cast<const float*>(v.data);
    if (name == "output_scale") l.os = *reinterpret_cast<const float*>(v.data);
    if (name == "input_zero_point") l.iz = *reinterpret_cast<const std::int32_t*>(v.data);
    if (name == "output_zero_point") l.oz = *reinterpret_cast<const std::int32_t*>(v.data);
  });
  ls[0].relu = ls[2].relu = true;
  std::vector<layer> dense_layers{ls[0], ls[2], ls[3]};
  if (sat) sat->assign(3, {0, 0});
  std::vector<std::int32_t> q(n * D);
  for (std::size_t i = 0; i < n * D; ++i) {
    const double r = std::round(double(x[i] / dense_layers[0].is)) + dense_layers[0].iz;
    if (sat && (r < -128 || r > 127)) ++(*sat)[0][0];
    q[i] = r != r ? dense_layers[0].iz : std::int32_t(std::clamp(r, -128.0, 127.0));  // a NaN: the zero point
  }
  std::size_t at = 0;
  float last_scale = 0;
  std::int32_t last_zp = 0;
  for (const auto& l : dense_layers) {
    std::vector<std::int32_t> out(n * l.N);
    for (std::size_t j = 0; j < l.N; ++j) {
      const auto mult = quantization::quantize_multiplier(double(l.is) * double(l.ws[j]) / double(l.os));
      const int left = std::max(mult.shift, 0), right = std::max(-mult.shift, 0);
      for (std::size_t i = 0; i < n; ++i) {
        std::int64_t acc = l.b[j];
        for (std::size_t k = 0; k < l.K; ++k) acc += std::int64_t(q[i * l.K + k] - l.iz) * l.w[j * l.K + k];
        std::int64_t r = rdbpot(srdhm(acc * (std::int64_t(1) << left), mult.q), right) + l.oz;
        if (sat && (r > 127 || (!l.relu && r < -128))) ++(*sat)[at][1];  // below -128 after a relu: the activation
        r = std::clamp<std::int64_t>(r, l.relu ? std::max(-128, l.oz) : -128, 127);
        out[i * l.N + j] = std::int32_t(r);
      }
    }
    q = std::move(out);
    ++at;
    last_scale = l.os;
    last_zp = l.oz;
  }
  std::vector<float> y(q.size());
  for (std::size_t i = 0; i < q.size(); ++i) y[i] = last_scale * float(q[i] - last_zp);
  return y;
}
}  // namespace

TEST_CASE("quantized_t: dense becomes quantized_dense, the state bytes are ~4x smaller than the float parameters") {
  using qnet = quantized_t<net>;
  using dnet = quantized_t<net, quantization::dynamic_range>;
  // int8 between all the full-integer layers, also across the dropout (the identity at inference:
  // quantization::int8_pass, int8 in and out)
  using fi = quantization::full_integer;
  static_assert(std::is_same_v<qnet, sequential<input<D>, quantized_dense<D, 32, relu, fi, quantization::int8_io<false, true>>,
                                                quantization::int8_pass<dropout<0.1f>>,
                                                quantized_dense<32, 24, relu, fi, quantization::int8_io<true, true>>,
                                                quantized_dense<24, C, identity, fi, quantization::int8_io<true, false>>>>);
  static_assert(std::is_same_v<quantization::float_between_t<qnet>,
                               sequential<input<D>, quantized_dense<D, 32, relu>, dropout<0.1f>,
                                          quantized_dense<32, 24, relu>, quantized_dense<24, C>>>);
  static_assert(std::is_same_v<dnet, sequential<input<D>, quantized_dense<D, 32, relu, quantization::dynamic_range>,
                                                dropout<0.1f>, quantized_dense<32, 24, relu, quantization::dynamic_range>,
                                                quantized_dense<24, C, identity, quantization::dynamic_range>>>);
  CHECK(qnet::spec_string() == quantization::float_between_t<qnet>::spec_string());  // the same weights files
  static_assert(qnet::parameter_count == 0);
  constexpr auto fp = net::plan<>::memory(1).parameters;
  constexpr auto qs = qnet::plan<>::memory(1).state;
  constexpr auto ds = dnet::plan<>::memory(1).state;
  // float: 4 (16*32 + 32 + 32*24 + 24 + 24*3 + 3) = 5636 bytes (64-byte aligned per layer)
  static_assert(fp >= 4 * (D * 32 + 32 + 32 * 24 + 24 + 24 * C + C));
  // int8: K N + 12 N + 16 per layer, aligned: 2.9x at these tiny sizes
  static_assert(qs < fp / 2 && ds < fp / 2);
  // a 784 x 256 x 10 MLP: the weights dominate and the ratio approaches 4
  using big = sequential<input<784>, dense<256, relu>, dense<10>>;
  constexpr double ratio = double(big::plan<>::memory(1).parameters) / double(quantized_t<big>::plan<>::memory(1).state);
  static_assert(ratio > 3.9 && ratio < 4.0);
  MESSAGE("784x256x10 MLP: float parameters / int8 state bytes = " << ratio);
  // the values' own bytes (summary's KB): float 4 a value; int8 K N + 20 N + 32 (full integer:
  // int32 bias, scale, kernel_sum, multiplier and shift per unit; 4 scalars and the saturation counts)
  static_assert(big::parameter_bytes == 4 * (784 * 256 + 256 + 256 * 10 + 10) && big::state_bytes == 0);
  static_assert(quantized_t<big>::parameter_bytes == 0);
  static_assert(quantized_t<big>::state_bytes == (784 * 256 + 20 * 256 + 32) + (256 * 10 + 20 * 10 + 32));
  static_assert(quantized_t<big, quantization::dynamic_range>::state_bytes == (784 * 256 + 12 * 256) + (256 * 10 + 12 * 10));
  std::ostringstream out;
  summary<quantized_t<big>>(out);
  char kb[64];
  std::snprintf(kb, sizeof kb, " (%.2f KB)", double(quantized_t<big>::state_bytes) / 1024.0);
  INFO(out.str());
  CHECK(out.str().find("Total params: " + std::to_string(quantized_t<big>::state_count).insert(3, ",") + kb) !=
        std::string::npos);
  CHECK(out.str().find("Trainable params: 0 (0.00 KB)") != std::string::npos);
  CHECK(quantized_dense<D, 32, relu>::name() == "quantized_dense<16, 32, relu, full_integer>");
}

TEST_CASE("post-training quantization of a trained MLP: accuracy within 2 points of float, outputs close") {
  auto& m = trained<float_model>();
  const auto te = make_blobs(600, 2);
  const auto cal = make_blobs(300, 3);
  const double acc_f = accuracy_of(m.predict(te.x.data(), te.y.size()), te.y);
  auto qd = quantize_dynamic(m);
  auto qf = quantize_full_integer(m, cal.x.data(), cal.y.size());
  auto qp = quantize_full_integer(m, cal.x.data(), cal.y.size(), {.percentile = 99.9});
  const auto pd = qd.predict(te.x.data(), te.y.size()), pf = qf.predict(te.x.data(), te.y.size());
  const double acc_d = accuracy_of(pd, te.y), acc_q = accuracy_of(pf, te.y),
               acc_p = accuracy_of(qp.predict(te.x.data(), te.y.size()), te.y);
  MESSAGE("accuracy float " << acc_f << ", dynamic range " << acc_d << ", full integer " << acc_q
                            << ", full integer (99.9 percentile) " << acc_p);
  CHECK(acc_f > 0.85);
  CHECK(std::abs(acc_d - acc_f) <= 0.02);
  CHECK(std::abs(acc_q - acc_f) <= 0.02);
  CHECK(std::abs(acc_p - acc_f) <= 0.02);
  // logits: on average within a few output quantization steps of the float ones (a test logit
  // beyond the calibrated range saturates, so the largest difference is only reported)
  const auto pfl = m.predict(te.x.data(), te.y.size());
  double worst_d = 0, worst_f = 0, mean_d = 0, mean_f = 0, range = 0;
  for (std::size_t i = 0; i < pfl.size(); ++i) {
    worst_d = std::max(worst_d, double(std::abs(pd[i] - pfl[i])));
    worst_f = std::max(worst_f, double(std::abs(pf[i] - pfl[i])));
    mean_d += double(std::abs(pd[i] - pfl[i])) / double(pfl.size());
    mean_f += double(std::abs(pf[i] - pfl[i])) / double(pfl.size());
    range = std::max(range, double(std::abs(pfl[i])));
  }
  MESSAGE("|logit - float logit|: dynamic mean " << mean_d << " max " << worst_d << ", full integer mean " << mean_f
                                                 << " max " << worst_f << " (|logits| <= " << range << ")");
  CHECK(worst_d < 0.02 * range);
  CHECK(mean_f < 0.02 * range);
}

TEST_CASE("full integer: outputs equal an independent scalar int8 implementation exactly, at batch 1, 7 and 64") {
  auto& m = trained<float_model>();
  const auto cal = make_blobs(300, 3);
  auto qf = quantize_full_integer(m, cal.x.data(), cal.y.size());
  const auto te = make_blobs(130, 4);
  auto xs = te.x;
  xs[0] = 1000.0f;   // saturates to 127
  xs[1] = -1000.0f;  // saturates to -128
  for (std::size_t i = 2; i < 40; ++i) xs[i * 3] *= 3.0f;  // some beyond the calibrated range
  xs[2] = std::numeric_limits<float>::infinity();   // saturates, counted
  xs[4] = std::numeric_limits<float>::quiet_NaN();  // the zero point, not counted
  std::vector<std::array<std::uint64_t, 2>> sat;
  const auto want = int8_reference(qf, xs, te.y.size(), &sat);
  for (std::size_t batch : {1, 7, 64}) {
    quantization::reset_saturation(qf);
    const auto got = qf.predict(xs.data(), te.y.size(), batch);
    REQUIRE(got.size() == want.size());
    std::size_t diff = 0;
    for (std::size_t i = 0; i < got.size(); ++i) diff += got[i] != want[i];
    INFO("batch " << batch);
    CHECK(diff == 0);
    // the saturation counts: the input values and outputs each layer clamped, as the reference counts them
    const auto counts = quantization::saturation(qf);
    REQUIRE(counts.size() == 3);
    for (std::size_t l = 0; l < 3; ++l) {
      CHECK(counts[l].layer == std::size_t(l == 0 ? 1 : l + 2));
      CHECK(counts[l].inputs == sat[l][0]);
      CHECK(counts[l].outputs == sat[l][1]);
    }
  }
  MESSAGE("saturated: layer 1 inputs " << sat[0][0] << ", outputs " << sat[0][1] << "; layer 3 outputs " << sat[1][1]
                                       << "; layer 4 outputs " << sat[2][1]);
  CHECK(sat[0][0] >= 3);                     // +-1000 and the infinity at least
  CHECK(sat[1][0] + sat[2][0] == 0);         // a layer's input is the previous one's int8 output: never clamped
  CHECK(quantization::saturation(qf)[0].name == "quantized_dense<16, 32, relu, full_integer>");
  // the counts accumulate over passes and are 64-bit: 2^32 - 1 plus one pass's count carries into the high word
  qf.for_each_variable([&](const variable_ref& v) {
    if (v.layer == 0 && v.name == "saturated") {
      const std::uint32_t c[4] = {0xffffffffu, 0, 0, 0};
      std::memcpy(v.data, c, sizeof c);
    }
  });
  (void)qf.predict(xs.data(), te.y.size());
  CHECK(quantization::saturation(qf)[0].inputs == 0xffffffffull + sat[0][0]);
  quantization::reset_saturation(qf);
  CHECK(quantization::saturation(qf)[0].inputs == 0);
  // dynamic range quantizes each row by its own maximum: nothing saturates, no counts
  CHECK(quantization::saturation(quantize_dynamic(m)).empty());
  // a requantization shift outside quantize_multiplier's range (a corrupt file): predict names the layer and the unit
  qf.for_each_variable([&](const variable_ref& v) {
    if (v.layer == 2 && v.name == "output_shift") {
      const std::int32_t s = 31;
      std::memcpy(v.data + 5 * 4, &s, 4);
    }
  });
  CHECK_THROWS_WITH_AS((void)qf.predict(xs.data(), 2),
                       doctest::Contains("quantized_dense<32, 24, relu, full_integer>: unit 5's requantization multiplier ("),
                       std::invalid_argument);
}

TEST_CASE("int8 across a dropout: the chained model equals the float-between one bit for bit, int8 dropout inference only") {
  // the dropout between layers 1 and 3 is the identity at inference: it hands layer 1's int8 values on
  // (quantization::int8_pass<dropout>), as float_between_t's dequantize, float dropout, quantize does
  auto& m = trained<float_model>();
  const auto cal = make_blobs(300, 3);
  auto qf = quantize_full_integer(m, cal.x.data(), cal.y.size());
  auto fb = make_model<quantization::float_between_t<quantized_t<net>>>(1);
  std::vector<variable_ref> from;
  qf.for_each_variable([&](const variable_ref& v) { from.push_back(v); });
  std::size_t i = 0;
  fb.for_each_variable([&](const variable_ref& v) { std::memcpy(v.data, from.at(i++).data, v.extent * v.element_bytes); });
  CHECK(i == from.size());
  const auto te = make_blobs(70, 4);
  for (std::size_t batch : {1, 7, 64}) {
    INFO("batch " << batch);
    CHECK(qf.predict(te.x.data(), te.y.size(), batch) == fb.predict(te.x.data(), te.y.size(), batch));
  }
  // one sample's activations: layer 1's 32 outputs int8 (1 byte a value), the dropout their memory
  static_assert(quantized_t<net>::plan<>::bytes(role::activation, 1) <
                quantization::float_between_t<quantized_t<net>>::plan<>::bytes(role::activation, 1));
  using L = std::tuple_element_t<1, decltype(qf)::layers>;
  static_assert(std::is_same_v<L::kind, layer_kind::dropout> && L::aliases_input);
  static_assert(std::is_same_v<L::input_element, std::int8_t> && std::is_same_v<L::output_element, std::int8_t>);
  CHECK(L::name() == "dropout<0.1>");
  CHECK_THROWS_WITH_AS(L::backward({}, nullptr, nullptr, nullptr, nullptr, {}), doctest::Contains("inference only"),
                       std::logic_error);
}

TEST_CASE("quantized_dense: every 4-byte buffer is 4-byte aligned when K N is odd") {
  using L = quantized_dense_layer<quantized_dense<7, 3, relu>, shape<7>, precision::float32, cpu<>>;
  for (std::size_t i = 0; i < L::buffers.size(); ++i)
    if (L::buffers[i].type != elem::i8) CHECK(buffer_offset<precision::float32>(L::buffers, i) % 4 == 0);
  using odd = sequential<input<7>, dense<3, relu>, dense<5>>;
  auto m = make_model<odd>(3);
  std::vector<float> x(20 * 7);
  rng g(2);
  for (auto& v : x) v = float(g.uniform(-1, 1));
  auto q = quantize_full_integer(m, x.data(), 20);
  const auto p = q.predict(x.data(), 20), f = m.predict(x.data(), 20);
  for (std::size_t i = 0; i < p.size(); ++i) CHECK(std::abs(p[i] - f[i]) < 0.1);
}

// Every int8 layer's packed kernel starts on a 64-byte boundary of its state block (buffer::aligned:
// the plan pads before it), whatever N, K, scheme or io; the 4-byte buffers before it keep their offsets.
template <class L>
constexpr bool kernel_on_a_line() {
  return L::kernel_offset % 64 == 0 && L::kernel_offset == buffer_offset<precision::float32>(L::buffers, L::b_kernel) &&
         L::buffers[L::b_kernel].name == "kernel" && L::b_kernel + 1 == L::buffers.size() &&
         L::state_bytes == L::kernel_offset + L::buffers[L::b_kernel].extent &&
         L::kernel_offset - layer_role_value_bytes<precision::float32>(L::buffers, role::state) + L::buffers[L::b_kernel].extent < 64;
}
template <class Spec, std::size_t K>
using bound_dense = quantized_dense_layer<Spec, shape<K>, precision::float32, cpu<>>;
using rr = quantization::reduce_range<quantization::full_integer>;
static_assert(kernel_on_a_line<bound_dense<quantized_dense<256, 128, relu>, 256>>());
static_assert(bound_dense<quantized_dense<256, 128, relu>, 256>::kernel_offset == 2624);  // 20 N + 32 = 2592 before
static_assert(bound_dense<quantized_dense<784, 256, relu>, 784>::kernel_offset == 5184);  // 5152 before
static_assert(kernel_on_a_line<bound_dense<quantized_dense<784, 256, relu, quantization::dynamic_range>, 784>>());
static_assert(bound_dense<quantized_dense<784, 256, relu, quantization::dynamic_range>, 784>::kernel_offset == 12 * 256);
static_assert(kernel_on_a_line<bound_dense<quantized_dense<7, 3, relu>, 7>>());
static_assert(kernel_on_a_line<bound_dense<quantized_dense<16, 10, identity, rr>, 16>>());
static_assert(kernel_on_a_line<bound_dense<quantized_dense<10, 5, identity, quantization::dynamic_range>, 10>>());
static_assert(kernel_on_a_line<bound_dense<quantized_dense<16, 10, relu, quantization::full_integer,
                                                           quantization::int8_io<true, true>>, 16>>());
static_assert(kernel_on_a_line<quantized_conv2d<6, 3, 3, 1, padding::valid, relu>::bind<shape<5, 5, 3>, float, cpu<>>>());
static_assert(kernel_on_a_line<quantized_conv2d<32, 3, 3, 1, padding::same, relu, quantization::dynamic_range>::bind<
                  shape<28, 28, 1>, float, cpu<>>>());
static_assert(kernel_on_a_line<quantized_dense_block<32, 16, 64, 4, 4, relu>::bind<shape<32>, float, cpu<>>>());
static_assert(kernel_on_a_line<
              quantized_dense_block<40, 32, 320, 1, 16, relu, quantization::dynamic_range>::bind<shape<40>, float, cpu<>>>());
// the values a file holds (Net::state_bytes) do not count the padding
static_assert(int8_fixture::net::state_bytes ==
              (28 * 6 + 20 * 6 + 32) + (56 * 32 + 12 * 32) + (4 * 4 * 4 + (5 * 4 + 4 * 2) + 20 * 16 + 32) + (16 * 3 + 20 * 3 + 32));

TEST_CASE("int8 layers: the packed kernels of a model lie on 64-byte boundaries") {
  auto m = make_model<int8_fixture::net>(1);
  std::size_t kernels = 0;
  m.for_each_variable([&](const variable_ref& v) {
    if (v.name != "kernel") return;
    ++kernels;
    INFO("layer " << v.layer + 1);
    CHECK(reinterpret_cast<std::uintptr_t>(v.data) % 64 == 0);
  });
  CHECK(kernels == 4);
}

TEST_CASE("int8 layers: a weights file of the layout before the 64-byte kernels loads, every tensor as saved") {
  // written by main at 02dea38, the kernels 152, 384, 372 and 92 bytes into their state blocks
  // (int8_fixture.hpp); the file holds logical tensors, so the padding this build adds never shows
  const std::filesystem::path file = std::filesystem::path(CTNN_QUANT_FIXTURES) / "int8_layers.weights";
  auto want = make_model<int8_fixture::net>(1);
  int8_fixture::fill_int8_fixture(want);
  auto got = make_model<int8_fixture::net>(2);
  io::load_weights(got, file);
  std::vector<std::vector<std::byte>> a, b;
  want.for_each_variable([&](const variable_ref& v) { a.emplace_back(v.data, v.data + v.extent * v.element_bytes); });
  got.for_each_variable([&](const variable_ref& v) { b.emplace_back(v.data, v.data + v.extent * v.element_bytes); });
  REQUIRE(a.size() == b.size());
  for (std::size_t i = 0; i < a.size(); ++i) {
    INFO("tensor " << i);
    CHECK(a[i] == b[i]);
  }
  // saved again by this build: the same bytes (the format did not change)
  const auto dir = std::filesystem::temp_directory_path() / "ctnn_int8_fixture";
  std::filesystem::create_directories(dir);
  io::save_weights(got, dir / "again.weights");
  auto bytes = [](const std::filesystem::path& p) {
    std::ifstream f(p, std::ios::binary);
    return std::vector<char>(std::istreambuf_iterator<char>(f), {});
  };
  CHECK(bytes(dir / "again.weights") == bytes(file));
  // and the outputs of the loaded model are those of the filled one
  std::vector<float> x(4 * 75);
  rng g(3);
  for (auto& v : x) v = float(g.uniform(-1, 1));
  CHECK(got.predict(x.data(), 4) == want.predict(x.data(), 4));
  std::filesystem::remove_all(dir);
}

TEST_CASE("quantized models: the weights file carries int8 kernels, int32 biases, scales and zero points") {
  auto& m = trained<float_model>();
  const auto cal = make_blobs(300, 3);
  auto qf = quantize_full_integer(m, cal.x.data(), cal.y.size());
  const auto dir = std::filesystem::temp_directory_path() / "ctnn_test_quantized";
  std::filesystem::create_directories(dir);
  const auto path = dir / "q.weights";
  io::save_weights(qf, path);
  auto back = make_model<quantized_t<net>>(99);
  const auto te = make_blobs(50, 5);
  CHECK(back.predict(te.x.data(), 50) != qf.predict(te.x.data(), 50));
  io::load_weights(back, path);
  CHECK(back.predict(te.x.data(), 50) == qf.predict(te.x.data(), 50));
  // a dynamic-range model's file does not load into the full-integer type (the network names differ)
  auto qd = quantize_dynamic(m);
  io::save_weights(qd, dir / "d.weights");
  CHECK_THROWS_WITH_AS(io::load_weights(back, dir / "d.weights"), doctest::Contains("quantized_dense<16, 32, relu, dynamic_range>"),
                       io::weights_error);
  std::filesystem::remove_all(dir);
}

TEST_CASE("full integer: an empty or constant calibration set is a clear error") {
  auto& m = trained<float_model>();
  CHECK_THROWS_WITH_AS(quantize_full_integer(m, nullptr, 0), doctest::Contains("calibration set is empty"),
                       std::invalid_argument);
  const std::vector<float> zeros(10 * D, 0.0f);
  CHECK_THROWS_WITH_AS(quantize_full_integer(m, zeros.data(), 10), doctest::Contains("layer 1's input"),
                       std::invalid_argument);
  std::vector<float> nan(10 * D, 1.0f);
  nan[3] = std::nanf("");
  CHECK_THROWS_WITH_AS(quantize_full_integer(m, nan.data(), 10), doctest::Contains("not finite"),
                       std::invalid_argument);
  const auto cal = make_blobs(30, 3);
  CHECK_THROWS_AS(quantize_full_integer(m, cal.x.data(), 30, {.percentile = 20}), std::invalid_argument);
}

TEST_CASE("quantized_dense: backward is refused") {
  auto q = make_model<quantized_t<net>>(1);
  using L = std::tuple_element_t<0, decltype(q)::layers>;
  CHECK_THROWS_WITH_AS(L::backward({}, nullptr, nullptr, nullptr, nullptr, {}), doctest::Contains("inference only"),
                       std::logic_error);
}

// ---- quantization-aware training (quantization/qat.hpp) ----

TEST_CASE("qat_t: dense becomes qat_dense, the last one fake-quantizes its output, the ranges are state") {
  using qnet = qat_t<net>;
  static_assert(std::is_same_v<qnet, sequential<input<D>, qat_dense<32, relu>, dropout<0.1f>, qat_dense<24, relu>,
                                                qat_dense<C, identity, true>>>);
  static_assert(std::is_same_v<quantized_t<qnet>, quantized_t<net>>);
  static_assert(qnet::parameter_count == net::parameter_count);
  using L = qat_dense_layer<qat_dense<3, relu, true>, shape<4>, precision::float32, cpu<>>;
  static_assert(L::state_count == 4 && L::cache_per_sample == 7);
}

TEST_CASE("qat_dense forward: the quantize-dequantize formula, ranges moving only in training") {
  constexpr std::size_t K = 5, N = 3, M = 4;
  using L = qat_dense_layer<qat_dense<N, relu, true>, shape<K>, precision::float32, cpu<>>;
  std::vector<float> params(K * N + N), state(4), cache(M * (K + N)), x(M * K), y(M * N);
  rng g(3);
  for (auto& v : params) v = float(g.uniform(-1, 1));
  for (auto& v : x) v = float(g.uniform(-2, 3));
  x[7] = 40.0f;  // saturates
  layer_slot<float> s;
  s.params = params.data();
  s.state = state.data();
  s.cache = cache.data();
  L::init(s, g);
  CHECK(state == std::vector<float>{-6, 6, -6, 6});
  for (std::size_t i = 0; i < params.size(); ++i) params[i] = float(g.uniform(-1, 1));
  L::forward(s, x.data(), y.data(), run_info{M, false});
  CHECK(state == std::vector<float>{-6, 6, -6, 6});  // inference: frozen
  const auto ip = quantization::choose_params(-6, 6), op = ip;
  for (std::size_t i = 0; i < M; ++i)
    for (std::size_t j = 0; j < N; ++j) {
      double amax = 0;
      for (std::size_t k = 0; k < K; ++k) amax = std::max(amax, double(std::abs(params[k * N + j])));
      const quantization::params wp{float(amax / 127), 0};
      float z = params[K * N + j];
      for (std::size_t k = 0; k < K; ++k) {
        const float xq = ip.scale * float(quantization::quantize(x[i * K + k], ip) - ip.zero_point);
        const float wq = wp.scale * float(quantization::quantize(params[k * N + j], wp, -127, 127));
        z += xq * wq;
      }
      z = std::max(z, 0.0f);
      const float want = op.scale * float(quantization::quantize(z, op) - op.zero_point);
      CHECK(y[i * N + j] == doctest::Approx(want).epsilon(1e-6));  // the float sum's order may differ
    }
  // training: each range moves 0.1 % of the way to the batch's [min(x, 0), max(x, 0)]
  L::forward(s, x.data(), y.data(), run_info{M, true});
  const float xmax = *std::max_element(x.begin(), x.end()), xmin = std::min(0.0f, *std::min_element(x.begin(), x.end()));
  CHECK(state[0] == doctest::Approx(-6 + (xmin + 6) * 0.001));
  CHECK(state[1] == doctest::Approx(6 + (xmax - 6) * 0.001));
  CHECK(state[3] != 6.0f);
}

TEST_CASE("qat_dense backward: straight-through in the range (finite differences), zero outside") {
  constexpr std::size_t K = 4, N = 3, M = 2;
  using L = qat_dense_layer<qat_dense<N, identity, true>, shape<K>, precision::float32, cpu<>>;
  std::vector<float> params(K * N + N), grads(K * N + N), state{-2, 2, -50, 50}, cache(M * (K + N));
  rng g(4);
  for (auto& v : params) v = float(g.uniform(-1, 1));
  std::vector<float> x{0.3f, -1.2f, 1.7f, 5.0f, -0.4f, 0.9f, -3.0f, 0.05f}, y(M * N), dy(M * N), dx(M * K);
  layer_slot<float> s;
  s.params = params.data();
  s.grads = grads.data();
  s.state = state.data();
  s.cache = cache.data();
  const std::vector<float> c{0.5f, -1.0f, 2.0f, 1.5f, 0.25f, -0.75f};
  L::forward(s, x.data(), y.data(), run_info{M, false});
  dy = c;
  L::backward(s, x.data(), y.data(), dy.data(), dx.data(), run_info{M, false});
  // the smooth function the straight-through estimator differentiates: sum c (x W^ + b), W^ the
  // fake-quantized kernel, for x inside the input's range [-2, 2] (its edges nudged to the grid)
  std::vector<float> wq(K * N);
  L::fake_quant_kernel(params.data(), wq.data());
  const auto f = [&](const std::vector<float>& xs, const std::vector<float>& w) {
    double t = 0;
    for (std::size_t i = 0; i < M; ++i)
      for (std::size_t j = 0; j < N; ++j) {
        double z = params[K * N + j];
        for (std::size_t k = 0; k < K; ++k) z += double(xs[i * K + k]) * w[k * N + j];
        t += c[i * N + j] * z;
      }
    return t;
  };
  const double h = 1e-3;
  for (std::size_t i = 0; i < M * K; ++i) {
    auto xp = x, xm = x;
    xp[i] += float(h);
    xm[i] -= float(h);
    const double fd = (f(xp, wq) - f(xm, wq)) / (2 * h);
    INFO("x[" << i << "] = " << x[i]);
    if (std::abs(x[i]) < 1.9f)
      CHECK(dx[i] == doctest::Approx(fd).epsilon(1e-3));
    else
      CHECK(dx[i] == 0.0f);  // 5.0 and -3.0: outside [-2, 2]
  }
  std::vector<float> xq(M * K);
  for (std::size_t i = 0; i < M * K; ++i) xq[i] = cache[i / K * (K + N) + i % K];
  for (std::size_t e = 0; e < K * N; ++e) {
    auto wp = wq, wm = wq;
    wp[e] += float(h);
    wm[e] -= float(h);
    CHECK(grads[e] == doctest::Approx((f(xq, wp) - f(xq, wm)) / (2 * h)).epsilon(1e-3));
  }
  // an output outside its range passes no gradient
  state[2] = -0.01f;
  state[3] = 0.01f;
  L::forward(s, x.data(), y.data(), run_info{M, false});
  dy = c;
  L::backward(s, x.data(), y.data(), dy.data(), dx.data(), run_info{M, false});
  std::size_t blocked = 0;
  for (std::size_t i = 0; i < M * N; ++i) blocked += std::abs(cache[i / N * (K + N) + K + i % N]) > 0.02f && dy[i] == 0;
  CHECK(blocked >= 4);
}

TEST_CASE("QAT: fine-tune the trained MLP, convert, int8 outputs within one output step of the QAT model") {
  auto& m = trained<float_model>();
  auto q = quantize_model(m);
  const auto te = make_blobs(600, 2);
  CHECK(q.predict(te.x.data(), 50) != m.predict(te.x.data(), 50));  // fake quantization changes the outputs
  const auto tr = make_blobs(600, 1);
  adam opt{0.001};
  fit(q, sparse_categorical_crossentropy{.from_logits = true}, opt,
      data::in_memory<shape<D>, sparse_labels>(tr.x, tr.y).batch(32), epochs{3});
  auto qi = convert_qat(q);
  const auto pq = q.predict(te.x.data(), te.y.size()), pi = qi.predict(te.x.data(), te.y.size());
  float step = 0;
  qi.for_each_variable([&](const variable_ref& v) {
    if (v.layer == 3 && v.name == "output_scale") step = *reinterpret_cast<const float*>(v.data);
  });
  REQUIRE(step > 0);
  std::size_t within = 0;
  double worst = 0;
  for (std::size_t i = 0; i < pq.size(); ++i) {
    within += std::abs(pq[i] - pi[i]) <= step * 1.0001f;
    worst = std::max(worst, double(std::abs(pq[i] - pi[i]) / step));
  }
  const double acc_f = accuracy_of(m.predict(te.x.data(), te.y.size()), te.y), acc_q = accuracy_of(pq, te.y),
               acc_i = accuracy_of(pi, te.y);
  MESSAGE("QAT: " << within << " of " << pq.size() << " logits within one output step (" << step
                  << ") of the fake-quant model, worst " << worst << " steps; accuracy float " << acc_f << ", QAT "
                  << acc_q << ", int8 " << acc_i);
  CHECK(within == pq.size());
  CHECK(std::abs(acc_i - acc_f) <= 0.02);
  CHECK(std::abs(acc_i - acc_q) <= 0.01);
  // the ranges are state: they travel in weights files
  const auto dir = std::filesystem::temp_directory_path() / "ctnn_test_qat";
  std::filesystem::create_directories(dir);
  io::save_weights(q, dir / "q.weights");
  auto back = make_model<qat_t<net>>(1);
  io::load_weights(back, dir / "q.weights");
  CHECK(back.predict(te.x.data(), 50) == q.predict(te.x.data(), 50));
  std::filesystem::remove_all(dir);
}
