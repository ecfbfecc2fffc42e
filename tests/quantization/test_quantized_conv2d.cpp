// tests/quantization/test_quantized_conv2d.cpp — quantized_conv2d (layers/quantized_conv2d.hpp): bit-exact
// against an independent scalar int8 convolution on every architecture, a small CNN converted by
// post-training quantization (quantization/convert.hpp) and by quantization-aware training
// (quantization/qat.hpp, qat_conv2d) against its float model, weights files, and the errors.
#include <doctest/doctest.h>

#include <ctnn/ctnn.hpp>
#include <ctnn/io/weights.hpp>
#include <ctnn/layers/quantized_conv2d.hpp>
#include <ctnn/quantization/convert.hpp>
#include <ctnn/quantization/qat.hpp>

#include "kernels/archs.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <vector>

using namespace ctnn;

namespace {

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

// The independent int8 convolution: a direct loop over windows (no im2col, no packing), padding
// skipped (a padded input equals the zero point, which adds nothing), the weights unpacked.
// full: TFLite's per-channel int8 Conv2D; otherwise the hybrid one (per-sample symmetric input).
template <class L>
std::vector<float> conv_reference(std::byte* state, const std::vector<float>& x, std::size_t batch) {
  constexpr auto g = L::geometry;
  const auto v = L::view(state);
  std::vector<std::int8_t> w(g.f * L::K);
  kernels::cpu::int8::unpack(L::K, g.f, v.kernel, w.data());
  std::vector<float> y(batch * g.out_size());
  for (std::size_t n = 0; n < batch; ++n) {
    const float* xs = x.data() + n * g.in_size();
    std::vector<std::int32_t> q(g.in_size());
    float sample_scale = 0;
    std::int32_t iz = 0;
    if constexpr (L::full) {
      iz = *v.in_zp;
      for (std::size_t i = 0; i < q.size(); ++i)
        q[i] = std::clamp(std::int32_t(std::round(xs[i] / *v.in_scale)) + iz, -128, 127);
    } else {
      float amax = 0;
      for (std::size_t i = 0; i < q.size(); ++i) amax = std::max(amax, std::abs(xs[i]));
      sample_scale = amax / 127.0f;
      for (std::size_t i = 0; i < q.size(); ++i)
        q[i] = amax > 0 ? std::clamp(std::int32_t(std::round(xs[i] / sample_scale)), -127, 127) : 0;
    }
    for (std::size_t oh = 0; oh < g.oh; ++oh)
      for (std::size_t ow = 0; ow < g.ow; ++ow)
        for (std::size_t f = 0; f < g.f; ++f) {
          std::int64_t acc = 0;
          for (std::size_t i = 0; i < g.kh; ++i)
            for (std::size_t j = 0; j < g.kw; ++j) {
              const long r = long(oh * g.stride + i) - long(g.pt), s = long(ow * g.stride + j) - long(g.pl);
              if (r < 0 || s < 0 || r >= long(g.h) || s >= long(g.w)) continue;
              for (std::size_t c = 0; c < g.c; ++c)
                acc += std::int64_t(q[(std::size_t(r) * g.w + std::size_t(s)) * g.c + c] - iz) *
                       w[f * L::K + (i * g.kw + j) * g.c + c];
            }
          float& out = y[n * g.out_size() + (oh * g.ow + ow) * g.f + f];
          if constexpr (L::full) {
            acc += static_cast<const std::int32_t*>(v.bias)[f];
            const int left = std::max(v.shift[f], 0), right = std::max(-v.shift[f], 0);
            std::int64_t rq = rdbpot(srdhm(acc * (std::int64_t(1) << left), v.mult[f]), right) + *v.out_zp;
            rq = std::clamp<std::int64_t>(rq, std::is_same_v<typename L::Act, relu> ? std::max(-128, *v.out_zp) : -128,
                                          127);
            out = *v.out_scale * float(rq - *v.out_zp);
          } else {
            out = float(acc) * (sample_scale * v.kernel_scale[f]) + static_cast<const float*>(v.bias)[f];
            if constexpr (std::is_same_v<typename L::Act, relu>) out = std::max(out, 0.0f);
          }
        }
  }
  return y;
}

// A layer's state filled with random int8 weights and parameters as a converter would set them.
template <class L>
struct filled {
  std::vector<std::uint64_t> mem = std::vector<std::uint64_t>(L::state_bytes / 8 + 16);
  std::byte* base = reinterpret_cast<std::byte*>((reinterpret_cast<std::uintptr_t>(mem.data()) + 63) / 64 * 64);
  explicit filled(std::uint64_t seed) {
    layer_slot<float> s;
    s.state = reinterpret_cast<float*>(base);
    rng g(seed);
    L::init(s, g);
    auto v = L::view(base);
    std::vector<std::int8_t> w(L::N * L::K);
    for (auto& e : w) e = std::int8_t(std::lround(g.uniform(-127.4, 127.4)));
    w[0] = 127;
    w[1] = -127;
    kernels::cpu::int8::pack(L::K, L::N, w.data(), L::K, v.kernel);
    kernels::cpu::int8::packed_sums(L::N, L::K, v.kernel, v.kernel_sum);
    for (std::size_t j = 0; j < L::N; ++j) v.kernel_scale[j] = float(g.uniform(0.001, 0.01));
    if constexpr (L::full) {
      *v.in_scale = 0.02f;
      *v.in_zp = -17;
      *v.out_scale = 0.15f;
      *v.out_zp = 9;
      for (std::size_t j = 0; j < L::N; ++j) {
        static_cast<std::int32_t*>(v.bias)[j] = std::int32_t(g.uniform(-3000, 3000));
        const auto m = quantization::quantize_multiplier(double(*v.in_scale) * v.kernel_scale[j] / *v.out_scale);
        v.mult[j] = m.q;
        v.shift[j] = m.shift;
      }
    } else {
      for (std::size_t j = 0; j < L::N; ++j) static_cast<float*>(v.bias)[j] = float(g.uniform(-0.5, 0.5));
    }
  }
};

// the two shapes: same padding, stride 2, K = 27 (padded to 28), 5 filters (a narrow panel);
// valid, stride 1, K = 8, 20 filters (a full panel and a narrow one)
template <class B>
using full_layer = quantized_conv2d_layer<quantized_conv2d<5, 3, 3, 2, padding::same, relu>, shape<7, 6, 3>,
                                          precision::float32, B>;
template <class B>
using dynamic_layer = quantized_conv2d_layer<quantized_conv2d<20, 2, 2, 1, padding::valid, identity,
                                                              quantization::dynamic_range>,
                                             shape<5, 4, 2>, precision::float32, B>;

// the vector paths' implicit im2col (backends/cpu/int8_conv.hpp): a C = 1 first layer (each kernel
// row re-packed to 4 bytes, read in place past its window), a layer whose kernel rows are whole
// groups (KW C = 24), a dynamic-range layer with padding (a bordered copy, pad 0)
template <class B>
using first_layer = quantized_conv2d_layer<quantized_conv2d<32, 3, 3, 1, padding::valid, relu>, shape<9, 8, 1>,
                                           precision::float32, B>;
template <class B>
using deep_layer = quantized_conv2d_layer<quantized_conv2d<16, 3, 3, 1, padding::valid, relu>, shape<6, 6, 8>,
                                          precision::float32, B>;
template <class B>
using dynamic_same = quantized_conv2d_layer<quantized_conv2d<8, 3, 3, 1, padding::same, relu,
                                                             quantization::dynamic_range>,
                                            shape<5, 6, 3>, precision::float32, B>;

template <class L>
void check_exact(std::size_t batch, std::uint64_t seed) {
  filled<L> st(seed);
  std::vector<float> x(batch * L::geometry.in_size());
  rng g(seed + 1);
  for (auto& e : x) e = float(g.uniform(-2.0, 2.9));
  x[0] = 1000.0f;   // saturates to 127
  x[1] = -1000.0f;  // saturates to -128 (-127 in the dynamic range: its own scale)
  if (batch > 2)
    for (std::size_t i = 0; i < L::geometry.in_size(); ++i) x[2 * L::geometry.in_size() + i] = 0.0f;  // a zero sample
  std::vector<float> y(batch * L::geometry.out_size());
  layer_slot<float> s;
  s.state = reinterpret_cast<float*>(st.base);
  L::forward(s, x.data(), y.data(), run_info{batch, false});
  const auto want = conv_reference<L>(st.base, x, batch);
  std::size_t diff = 0;
  for (std::size_t i = 0; i < y.size(); ++i) diff += y[i] != want[i];
  INFO(L::name() << ", batch " << batch);
  CHECK(diff == 0);
}

// ---- a small CNN: 8x8 images of one bar (horizontal, vertical or diagonal) on noise ----
constexpr std::size_t S = 8, classes = 3;
// 8x8x1 -> 8x8x8 -> max pool 4x4x8 -> 2x2x8 -> 32 -> 3
using cnn = sequential<input<S, S, 1>, conv2d<8, 3, 3, 1, padding::same, relu>, max_pool2d<2>,
                       conv2d<8, 3, 3, 1, padding::valid, relu>, flatten, dense<classes>>;
using float_cnn = decltype(make_model<cnn>(1));

struct images {
  std::vector<float> x;
  std::vector<std::int32_t> y;
};
images make_images(std::size_t n, std::uint64_t seed) {
  rng g(seed);
  images d;
  d.x.resize(n * S * S);
  d.y.resize(n);
  for (std::size_t i = 0; i < n; ++i) {
    const std::size_t k = i % classes, at = std::size_t(g.uniform(1, S - 1));
    d.y[i] = std::int32_t(k);
    float* im = d.x.data() + i * S * S;
    for (std::size_t p = 0; p < S * S; ++p) im[p] = float(g.uniform(-0.6, 0.6));
    for (std::size_t t = 0; t < S; ++t) {
      const std::size_t r = k == 0 ? at : t, c = k == 1 ? at : k == 0 ? t : (t + at) % S;
      im[r * S + c] += 1.0f;
    }
  }
  return d;
}
double accuracy_of(const std::vector<float>& logits, const std::vector<std::int32_t>& y) {
  std::size_t ok = 0;
  for (std::size_t i = 0; i < y.size(); ++i) {
    std::size_t best = 0;
    for (std::size_t j = 1; j < classes; ++j)
      if (logits[i * classes + j] > logits[i * classes + best]) best = j;
    ok += best == std::size_t(y[i]);
  }
  return double(ok) / double(y.size());
}
float_cnn& trained_cnn() {
  static float_cnn m = [] {
    auto mm = make_model<cnn>(3);
    const auto tr = make_images(600, 1);
    adam opt{0.01};
    fit(mm, sparse_categorical_crossentropy{.from_logits = true}, opt,
        data::in_memory<shape<S, S, 1>, sparse_labels>(tr.x, tr.y).batch(32), epochs{4});
    return mm;
  }();
  return m;
}

}  // namespace

TEST_CASE("quantized_conv2d: equals an independent scalar int8 convolution bit for bit on every architecture") {
  const int ran = ctnn::test::for_each_arch("quantized_conv2d", []<class Arch>(Arch, const char*) {
    for (std::size_t batch : {1, 3}) {
      check_exact<full_layer<cpu<Arch>>>(batch, 10 + batch);
      check_exact<dynamic_layer<cpu<Arch>>>(batch, 20 + batch);
      check_exact<first_layer<cpu<Arch>>>(batch, 30 + batch);
      check_exact<deep_layer<cpu<Arch>>>(batch, 40 + batch);
      check_exact<dynamic_same<cpu<Arch>>>(batch, 50 + batch);
    }
  });
  CHECK(ran >= 1);
}

namespace {
// A full-integer layer between int8 layers (int8 in, int8 out) on architecture Arch: its int8
// outputs and saturation counts for the int8 input x8.
template <template <class> class L, class Arch>
std::pair<std::vector<std::int8_t>, std::vector<std::uint64_t>> run_int8(const std::vector<std::int8_t>& x8,
                                                                          std::size_t batch) {
  using layer = L<cpu<Arch>>;
  filled<layer> st(7);
  std::vector<std::int8_t> y(batch * layer::geometry.out_size(), 99);
  layer_slot<float> s;
  s.state = reinterpret_cast<float*>(st.base);
  layer::forward(s, reinterpret_cast<const float*>(x8.data()), reinterpret_cast<float*>(y.data()),
                 run_info{batch, false});
  const auto v = layer::view(st.base);
  return {y, {v.saturated[0], v.saturated[1], v.saturated[2], v.saturated[3]}};
}
template <class B>
using int8_first = quantized_conv2d_layer<quantized_conv2d<12, 3, 3, 1, padding::valid, relu, quantization::full_integer,
                                                           quantization::int8_io<true, true>>,
                                          shape<8, 7, 1>, precision::float32, B>;
template <class B>
using int8_same = quantized_conv2d_layer<quantized_conv2d<20, 3, 3, 2, padding::same, identity,
                                                          quantization::full_integer, quantization::int8_io<true, true>>,
                                         shape<7, 6, 3>, precision::float32, B>;
template <template <class> class L>
void check_int8_io() {
  for (std::size_t batch : {1, 3}) {
    // the input exactly as large as the batch: a window read past it would be outside the buffer
    std::vector<std::int8_t> x8(batch * L<cpu<xsimd::sse2>>::geometry.in_size());
    rng g(batch);
    for (auto& e : x8) e = std::int8_t(std::lround(g.uniform(-128.4, 127.4)));
    const auto want = run_int8<L, xsimd::sse2>(x8, batch);  // the scalar path: im2col_s8, gemm_s8
    ctnn::test::for_each_arch("quantized_conv2d int8 in and out", [&]<class Arch>(Arch, const char* name) {
      INFO(name << ", batch " << batch);
      const auto got = run_int8<L, Arch>(x8, batch);
      CHECK(got.first == want.first);
      CHECK(got.second == want.second);
    });
  }
}
}  // namespace

TEST_CASE("quantized_conv2d between int8 layers: the vector paths equal the scalar im2col path bit for bit") {
  check_int8_io<int8_first>();  // read in place needs slack past the input: a copy
  check_int8_io<int8_same>();   // padding: a bordered copy with the input's zero point
}

TEST_CASE("quantized_t: conv2d becomes quantized_conv2d, the state bytes are ~4x smaller than the float parameters") {
  using q = quantized_t<cnn>;
  using fi = quantization::full_integer;
  // int8 between all the layers: the max pooling in the first conv's store (quantization::fused_pool,
  // test_quantized_conv2d_pool.cpp), the flatten on the int8 tensor (quantization::int8_pass,
  // test_int8_pool.cpp); float between them in float_between_t
  static_assert(std::is_same_v<q, sequential<input<S, S, 1>,
                                             quantized_conv2d<8, 3, 3, 1, padding::same, relu, fi,
                                                              quantization::int8_io<false, true>, max_pool2d<2>>,
                                             quantization::fused_pool<max_pool2d<2>, true>,
                                             quantized_conv2d<8, 3, 3, 1, padding::valid, relu, fi, quantization::int8_io<true, true>>,
                                             quantization::int8_pass<flatten>,
                                             quantized_dense<32, classes, identity, fi, quantization::int8_io<true, false>>>>);
  static_assert(std::is_same_v<quantization::float_between_t<q>,
                               sequential<input<S, S, 1>, quantized_conv2d<8, 3, 3, 1, padding::same, relu>,
                                          max_pool2d<2>, quantized_conv2d<8, 3, 3, 1, padding::valid, relu>, flatten,
                                          quantized_dense<32, classes>>>);
  static_assert(std::is_same_v<quantized_t<cnn, quantization::dynamic_range>,
                               sequential<input<S, S, 1>,
                                          quantized_conv2d<8, 3, 3, 1, padding::same, relu, quantization::dynamic_range>,
                                          max_pool2d<2>,
                                          quantized_conv2d<8, 3, 3, 1, padding::valid, relu, quantization::dynamic_range>,
                                          flatten, quantized_dense<32, classes, identity, quantization::dynamic_range>>>);
  // the second conv: K = 72 int8 weights per filter, 20 bytes per filter and 32 of scalars and
  // saturation counts, against 4 (72 + 1) per filter
  using L = std::tuple_element_t<2, decltype(make_model<q>(1))::layers>;
  static_assert(L::K == 72 && L::state_bytes == 72 * 8 + 20 * 8 + 32);
  static_assert(L::state_bytes * 3 < 4 * (72 * 8 + 8));
  // the network's bytes (summary's KB): each value at its element size, int8 kernels 1 byte a weight
  // (K padded to a multiple of 4: the first conv's 9 to 12)
  static_assert(q::parameter_bytes == 0 && q::parameter_count == 0);
  static_assert(q::state_bytes == (12 * 8 + 20 * 8 + 32) + (72 * 8 + 20 * 8 + 32) + (32 * classes + 20 * classes + 32));
  static_assert(cnn::parameter_bytes == 4 * (9 * 8 + 8 + 72 * 8 + 8 + 32 * classes + classes));
}

TEST_CASE("post-training quantization of a small CNN: accuracy close to float, full integer exact across batches") {
  auto& m = trained_cnn();
  const auto cal = make_images(200, 3), te = make_images(300, 4);
  auto qd = quantize_dynamic(m);
  auto qf = quantize_full_integer(m, cal.x.data(), cal.y.size());
  const auto pf = m.predict(te.x.data(), te.y.size()), pd = qd.predict(te.x.data(), te.y.size()),
             pi = qf.predict(te.x.data(), te.y.size(), 7);
  const double af = accuracy_of(pf, te.y), ad = accuracy_of(pd, te.y), ai = accuracy_of(pi, te.y);
  double range = 0, worst_d = 0, mean_i = 0;
  for (std::size_t i = 0; i < pf.size(); ++i) {
    range = std::max(range, double(std::abs(pf[i])));
    worst_d = std::max(worst_d, double(std::abs(pd[i] - pf[i])));
    mean_i += std::abs(pi[i] - pf[i]) / double(pf.size());
  }
  MESSAGE("CNN accuracy: float " << af << ", dynamic range " << ad << ", full integer " << ai << "; |logit - float|: "
                                 << "dynamic max " << worst_d << ", full integer mean " << mean_i << " (|logits| <= "
                                 << range << ")");
  CHECK(af > 0.9);
  CHECK(std::abs(ad - af) <= 0.02);
  CHECK(std::abs(ai - af) <= 0.02);
  CHECK(worst_d < 0.05 * range);
  CHECK(mean_i < 0.03 * range);
  // integer arithmetic: the same outputs at any batch size
  CHECK(qf.predict(te.x.data(), te.y.size(), 1) == pi);
  CHECK(qf.predict(te.x.data(), te.y.size(), 64) == pi);
  // the max pooling keeps its input's quantization: the second conv's input parameters are the
  // first one's output parameters (so the pooled values quantize back exactly), the dense layer's
  // the second conv's
  std::vector<float> scales(6);
  std::vector<std::int32_t> zps(6);
  qf.for_each_variable([&](const variable_ref& v) {
    const std::string name(v.name);
    const std::size_t at = v.layer == 0 ? 0 : v.layer == 2 ? 2 : 4;
    if (name == "input_scale" || name == "output_scale") scales[at + (name[0] == 'o')] = *reinterpret_cast<float*>(v.data);
    if (name == "input_zero_point" || name == "output_zero_point")
      zps[at + (name[0] == 'o')] = *reinterpret_cast<std::int32_t*>(v.data);
  });
  CHECK(scales[2] == scales[1]);
  CHECK(zps[2] == zps[1]);
  CHECK(scales[4] == scales[3]);
  CHECK(zps[4] == zps[3]);
}

// Two adjacent convolutions: int8 between them (quantization::int8_io, test_quantized_dense_block for
// the dense layers), the same outputs and saturation counts as float between them.
TEST_CASE("int8 between two quantized_conv2d layers: bit for bit the float-between model, the plan's int8 block") {
  using chain = sequential<input<S, S, 1>, conv2d<4, 3, 3, 1, padding::same, relu>, conv2d<3, 3, 3, 2, padding::valid>,
                           flatten, dense<classes>>;
  using q = quantized_t<chain>;
  using f = quantization::float_between_t<q>;
  using fi = quantization::full_integer;
  static_assert(std::is_same_v<q, sequential<input<S, S, 1>,
                                             quantized_conv2d<4, 3, 3, 1, padding::same, relu, fi, quantization::int8_io<false, true>>,
                                             quantized_conv2d<3, 3, 3, 2, padding::valid, identity, fi, quantization::int8_io<true, true>>,
                                             quantization::int8_pass<flatten>,
                                             quantized_dense<27, classes, identity, fi, quantization::int8_io<true, false>>>>);
  // the first convolution's 8x8x4 output: 256 bytes a sample as int8, 1024 as float; the second's
  // 3x3x3: 27 bytes as int8 (a 64-byte block), 108 as float (128)
  static_assert(f::plan<>::bytes(role::activation, 1) - q::plan<>::bytes(role::activation, 1) ==
                (1024 - 256) + (128 - 64));
  const auto cal = make_images(100, 5), x = make_images(64, 6);
  auto m = make_model<chain>(3);
  auto qm = quantize_full_integer(m, cal.x.data(), cal.y.size());
  auto fm = make_model<f>(1);
  std::vector<variable_ref> src;
  qm.for_each_variable([&](const variable_ref& v) { src.push_back(v); });
  std::size_t k = 0;
  fm.for_each_variable([&](const variable_ref& v) { std::memcpy(v.data, src[k++].data, v.extent * v.element_bytes); });
  std::vector<float> wild = x.x;  // some values beyond the calibrated range: saturation counted alike
  for (std::size_t i = 0; i < wild.size(); i += 7) wild[i] *= 4;
  for (std::size_t n : {1, 7, 64}) {
    INFO("batch " << n);
    quantization::reset_saturation(qm);
    quantization::reset_saturation(fm);
    CHECK(qm.predict(wild.data(), 64, n) == fm.predict(wild.data(), 64, n));
    const auto sq = quantization::saturation(qm), sf = quantization::saturation(fm);
    REQUIRE(sq.size() == 3);
    REQUIRE(sf.size() == 3);
    for (std::size_t l = 0; l < 3; ++l) {
      CHECK(sq[l].inputs == sf[l].inputs);
      CHECK(sq[l].outputs == sf[l].outputs);
    }
    CHECK(sq[0].inputs > 0);
    CHECK(sq[1].inputs == 0);
  }
}

TEST_CASE("quantized CNN: the weights file carries the int8 kernels, int32 biases, scales and zero points") {
  auto& m = trained_cnn();
  const auto cal = make_images(200, 3), te = make_images(40, 5);
  auto qf = quantize_full_integer(m, cal.x.data(), cal.y.size(), {.percentile = 99.9});
  const auto dir = std::filesystem::temp_directory_path() / "ctnn_test_quantized_conv2d";
  std::filesystem::create_directories(dir);
  io::save_weights(qf, dir / "q.weights");
  auto back = make_model<quantized_t<cnn>>(99);
  CHECK(back.predict(te.x.data(), 40) != qf.predict(te.x.data(), 40));
  io::load_weights(back, dir / "q.weights");
  CHECK(back.predict(te.x.data(), 40) == qf.predict(te.x.data(), 40));
  std::vector<std::string> names;
  back.for_each_variable([&](const variable_ref& v) {
    if (v.layer == 0) names.emplace_back(v.name);
  });
  CHECK(names == std::vector<std::string>{"bias", "kernel_scale", "kernel_sum", "input_scale", "input_zero_point",
                                          "output_scale", "output_zero_point", "output_multiplier", "output_shift",
                                          "saturated", "kernel"});
  // a filter weight of -128 or a kernel_sum that does not match the kernel: refused at load, naming
  // the tensor, the filter and the input (the packed index too); the model keeps its values
  auto corrupt = [&](std::size_t layer, const char* name, std::size_t at, auto value) {
    std::vector<std::byte> keep;
    qf.for_each_variable([&](const variable_ref& v) {
      if (v.layer != layer || v.name != name) return;
      keep.assign(v.data, v.data + v.extent * v.element_bytes);
      std::memcpy(v.data + at * sizeof(value), &value, sizeof(value));
    });
    io::save_weights(qf, dir / "bad.weights");
    qf.for_each_variable([&](const variable_ref& v) {
      if (v.layer == layer && v.name == name) std::memcpy(v.data, keep.data(), keep.size());
    });
    return dir / "bad.weights";
  };
  const std::size_t at = kernels::cpu::int8::packed_index(72, 8, 5, 70);
  const std::string minus128 = "layer 3 state 'kernel': the weight of filter 5, input 70 (packed index " +
                               std::to_string(at) + ") is -128; symmetric per-channel int8 weights are in [-127, 127]";
  CHECK_THROWS_WITH_AS(io::load_weights(back, corrupt(2, "kernel", at, std::int8_t(-128))),
                       doctest::Contains(minus128.c_str()), io::weights_error);
  // the first conv's K = 9 is padded to 12: a padding byte that is not 0 is refused too
  const std::size_t pad = kernels::cpu::int8::packed_index(9, 8, 1, 10);
  CHECK_THROWS_WITH_AS(io::load_weights(back, corrupt(0, "kernel", pad, std::int8_t(3))),
                       doctest::Contains("layer 1 state 'kernel': the padding byte of filter 1, input 10"),
                       io::weights_error);
  std::int32_t sum4 = 0;
  qf.for_each_variable([&](const variable_ref& v) {
    if (v.layer == 2 && v.name == "kernel_sum") std::memcpy(&sum4, v.data + 4 * 4, 4);
  });
  const std::string mismatch = "layer 3 state 'kernel': kernel_sum[4] is " + std::to_string(sum4 + 1) +
                               " but filter 4's weights sum to " + std::to_string(sum4);
  CHECK_THROWS_WITH_AS(io::load_weights(back, corrupt(2, "kernel_sum", 4, sum4 + 1)),
                       doctest::Contains(mismatch.c_str()), io::weights_error);
  CHECK(back.predict(te.x.data(), 40) == qf.predict(te.x.data(), 40));
  io::load_weights(back, corrupt(2, "kernel_sum", 4, sum4));  // the same value: loads
  std::filesystem::remove_all(dir);
}

TEST_CASE("quantized CNN: a constant calibration set or a dead conv layer is a clear error") {
  auto& m = trained_cnn();
  CHECK_THROWS_WITH_AS(quantize_full_integer(m, nullptr, 0), doctest::Contains("calibration set is empty"),
                       std::invalid_argument);
  const std::vector<float> zeros(10 * S * S, 0.0f);
  CHECK_THROWS_WITH_AS(quantize_full_integer(m, zeros.data(), 10), doctest::Contains("layer 1's input"),
                       std::invalid_argument);
  // a conv layer whose outputs are all 0 on the calibration set has no range to calibrate
  auto dead = m;
  dead.for_each_variable([&](const variable_ref& v) {
    if (v.layer == 2 && v.kind == role::parameter) std::fill_n(reinterpret_cast<float*>(v.data), v.extent, 0.0f);
  });
  const auto cal = make_images(20, 3);
  CHECK_THROWS_WITH_AS(quantize_full_integer(dead, cal.x.data(), 20), doctest::Contains("layer 3's output (calibration)"),
                       std::invalid_argument);
  using L = std::tuple_element_t<0, decltype(make_model<quantized_t<cnn>>(1))::layers>;
  CHECK_THROWS_WITH_AS(L::backward({}, nullptr, nullptr, nullptr, nullptr, {}), doctest::Contains("inference only"),
                       std::logic_error);
  // a corrupt requantization shift in a loaded model
  auto q = quantize_full_integer(m, cal.x.data(), 20);
  q.for_each_variable([&](const variable_ref& v) {
    if (v.layer == 0 && v.name == "output_shift") reinterpret_cast<std::int32_t*>(v.data)[2] = 40;
  });
  CHECK_THROWS_WITH_AS(q.predict(cal.x.data(), 1), doctest::Contains("quantized_conv2d<8, 3, 3, 1, same, relu, full_integer>: filter 2"),
                       std::invalid_argument);
}

// ---- quantization-aware training: qat_conv2d ----

TEST_CASE("qat_t: conv2d becomes qat_conv2d, its backward is straight-through (finite differences)") {
  static_assert(std::is_same_v<qat_t<cnn>, sequential<input<S, S, 1>, qat_conv2d<8, 3, 3, 1, padding::same, relu>,
                                                      max_pool2d<2>, qat_conv2d<8, 3, 3, 1, padding::valid, relu>,
                                                      flatten, qat_dense<classes, identity, true>>>);
  static_assert(std::is_same_v<quantized_t<qat_t<cnn>>, quantized_t<cnn>>);
  static_assert(qat_t<cnn>::parameter_count == cnn::parameter_count);
  // same padding, stride 2: 4x3x2 -> 2x2x3, K = 18
  using L = qat_conv2d_layer<qat_conv2d<3, 3, 3, 2, padding::same, identity, true>, shape<4, 3, 2>, precision::float32,
                             cpu<>>;
  constexpr auto g = L::geometry;
  constexpr std::size_t M = 2, K = L::K, F = 3;
  std::vector<float> params(K * F + F), grads(K * F + F), state{-2, 2, -50, 50}, cache(M * L::cache_per_sample);
  rng r(4);
  for (auto& v : params) v = float(r.uniform(-1, 1));
  std::vector<float> x(M * g.in_size()), y(M * g.out_size()), dy(M * g.out_size()), dx(M * g.in_size());
  for (auto& v : x) v = float(r.uniform(-1.8, 1.8));
  x[3] = 5.0f;
  x[30] = -3.0f;
  layer_slot<float> s;
  s.params = params.data();
  s.grads = grads.data();
  s.state = state.data();
  s.cache = cache.data();
  std::vector<float> c(dy.size());
  for (auto& v : c) v = float(r.uniform(-1, 1));
  L::forward(s, x.data(), y.data(), run_info{M, false});
  // the forward: the fake-quantized input and kernel through the float convolution, the output's fake quant
  std::vector<float> wq(K * F), xq(x.size()), z(y.size());
  L::fake_quant_kernel(params.data(), wq.data());
  const auto ip = quantization::choose_params(-2, 2), op = quantization::choose_params(-50, 50);
  for (std::size_t i = 0; i < x.size(); ++i) xq[i] = quantization::fake_quant(x[i], ip);
  kernels::reference::conv_forward(g, xq.data(), wq.data(), params.data() + K * F, z.data(), M);
  for (std::size_t i = 0; i < y.size(); ++i)
    CHECK(y[i] == doctest::Approx(quantization::fake_quant(z[i], op)).epsilon(1e-5));
  dy = c;
  L::backward(s, x.data(), y.data(), dy.data(), dx.data(), run_info{M, false});
  // the smooth function the estimator differentiates: sum c conv(x, W^) + b inside the input's range
  const auto f = [&](const std::vector<float>& xs, const std::vector<float>& w) {
    std::vector<float> o(y.size());
    kernels::reference::conv_forward(g, xs.data(), w.data(), params.data() + K * F, o.data(), M);
    double t = 0;
    for (std::size_t i = 0; i < o.size(); ++i) t += double(c[i]) * o[i];
    return t;
  };
  const double h = 1e-3;
  for (std::size_t i = 0; i < x.size(); ++i) {
    auto xp = x, xm = x;
    xp[i] += float(h);
    xm[i] -= float(h);
    INFO("x[" << i << "] = " << x[i]);
    if (std::abs(x[i]) < 1.9f)
      CHECK(dx[i] == doctest::Approx((f(xp, wq) - f(xm, wq)) / (2 * h)).epsilon(2e-3));
    else
      CHECK(dx[i] == 0.0f);
  }
  for (std::size_t e = 0; e < K * F + F; ++e) {
    double fd;
    if (e < K * F) {
      auto wp = wq, wm = wq;
      wp[e] += float(h);
      wm[e] -= float(h);
      fd = (f(xq, wp) - f(xq, wm)) / (2 * h);
    } else {
      const std::size_t j = e - K * F;
      double t = 0;
      for (std::size_t i = j; i < c.size(); i += F) t += c[i];
      fd = t;
    }
    INFO("parameter " << e);
    CHECK(grads[e] == doctest::Approx(fd).epsilon(2e-3));
  }
}

TEST_CASE("QAT of the CNN: fine-tune, convert, int8 outputs within one output step of the QAT model") {
  auto& m = trained_cnn();
  auto q = quantize_model(m);
  const auto tr = make_images(600, 1), te = make_images(300, 2);
  adam opt{0.001};
  fit(q, sparse_categorical_crossentropy{.from_logits = true}, opt,
      data::in_memory<shape<S, S, 1>, sparse_labels>(tr.x, tr.y).batch(32), epochs{2});
  auto qi = convert_qat(q);
  const auto pq = q.predict(te.x.data(), te.y.size()), pi = qi.predict(te.x.data(), te.y.size());
  float step = 0;
  qi.for_each_variable([&](const variable_ref& v) {
    if (v.layer == 4 && v.name == "output_scale") step = *reinterpret_cast<const float*>(v.data);
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
  MESSAGE("CNN QAT: " << within << " of " << pq.size() << " logits within one output step (" << step
                      << ") of the fake-quant model, worst " << worst << " steps; accuracy float " << acc_f << ", QAT "
                      << acc_q << ", int8 " << acc_i);
  // a one-step difference in an intermediate conv output (the fixed-point requantization and the int32
  // bias against the QAT model's float sums) is carried through the next layers: most, not all, within one step
  CHECK(double(within) >= 0.9 * double(pq.size()));
  CHECK(worst <= 4.0);
  CHECK(std::abs(acc_i - acc_f) <= 0.02);
  CHECK(std::abs(acc_i - acc_q) <= 0.01);
}
