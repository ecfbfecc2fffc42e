// tests/quantization/test_reduce_range.cpp — quantization::reduce_range (ONNX Runtime's reduce_range:
// 7-bit weights, symmetric per channel in [-64, 64]): the converters (full integer, dynamic range, QAT)
// and the layers' outputs against an independent scalar int8 implementation (the MLP) or the scalar
// path (the CNN, whose pools run in the convolutions' stores) bit for bit on every architecture this
// CPU runs, weights files and the errors. Also built into test_int8_avx2 (-march=x86-64-v3,
// tests/CMakeLists.txt), where fma3<avx2> takes the avx2_u8 product (int8.hpp); the kernels alone:
// test_int8.cpp.
#include <doctest/doctest.h>

#include <ctnn/ctnn.hpp>
#include <ctnn/io/weights.hpp>
#include <ctnn/quantization/convert.hpp>
#include <ctnn/quantization/qat.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <limits>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include "kernels/archs.hpp"

using namespace ctnn;
namespace q8 = ctnn::quantization;
namespace i8 = ctnn::kernels::cpu::int8;

namespace {
constexpr std::size_t D = 16, C = 3;
using net = sequential<input<D>, dense<32, relu>, dense<24, relu>, dense<C>>;
using rfi = q8::reduce_range<q8::full_integer>;
using rdr = q8::reduce_range<q8::dynamic_range>;

struct samples {
  std::vector<float> x;
  std::vector<std::int32_t> y;
};
// three Gaussian blobs in 16 dimensions, overlapping a little
samples make_blobs(std::size_t n, std::uint64_t seed) {
  rng centers(7), g(seed);
  std::vector<float> c(C * D);
  for (auto& v : c) v = float(centers.uniform(-1.5, 1.5));
  samples b;
  b.x.resize(n * D);
  b.y.resize(n);
  for (std::size_t i = 0; i < n; ++i) {
    b.y[i] = std::int32_t(i % C);
    for (std::size_t d = 0; d < D; ++d) b.x[i * D + d] = c[(i % C) * D + d] + float(g.uniform(-1.7, 1.7));
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
auto& trained() {
  static auto m = [] {
    auto mm = make_model<net>(5);
    const auto tr = make_blobs(600, 1);
    adam opt{0.01};
    fit(mm, sparse_categorical_crossentropy{.from_logits = true}, opt,
        data::in_memory<shape<D>, sparse_labels>(tr.x, tr.y).batch(32), epochs{6});
    return mm;
  }();
  return m;
}

// The model m's variables copied into a model of the same network on backend B.
template <class B, class M>
auto on_backend(const M& m) {
  model<typename M::network, precision::float32, B> out(1);
  std::vector<variable_ref> src;
  m.for_each_variable([&](const variable_ref& v) { src.push_back(v); });
  std::size_t i = 0;
  out.for_each_variable([&](const variable_ref& v) {
    REQUIRE(i < src.size());
    REQUIRE(src[i].extent * src[i].element_bytes == v.extent * v.element_bytes);
    std::memcpy(v.data, src[i].data, v.extent * v.element_bytes);
    ++i;
  });
  return out;
}

// Each quantized layer's int8 kernel [N, K] (unpacked) and scales, by layer index.
struct kernel_of {
  std::size_t K = 0, N = 0;
  std::vector<std::int8_t> w;
  std::vector<float> scale;
  const void* bias = nullptr;
  float is = 0, os = 0;
  std::int32_t iz = 0, oz = 0;
};
template <class QM>
std::vector<kernel_of> kernels_of(const QM& qm, std::size_t layers) {
  std::vector<kernel_of> ls(layers);
  qm.for_each_variable([&](const variable_ref& v) {
    auto& l = ls[v.layer];
    const std::string name(v.name);
    if (name == "kernel") {  // packed {N, padded_k(K)}: this net's K are multiples of 4
      l.N = v.dims[0];
      l.K = v.dims[1];
      l.w.resize(l.N * l.K);
      i8::unpack(l.K, l.N, reinterpret_cast<const std::int8_t*>(v.data), l.w.data());
    }
    if (name == "kernel_scale")
      l.scale.assign(reinterpret_cast<const float*>(v.data), reinterpret_cast<const float*>(v.data) + v.extent);
    if (name == "bias") l.bias = v.data;
    if (name == "input_scale") l.is = *reinterpret_cast<const float*>(v.data);
    if (name == "output_scale") l.os = *reinterpret_cast<const float*>(v.data);
    if (name == "input_zero_point") l.iz = *reinterpret_cast<const std::int32_t*>(v.data);
    if (name == "output_zero_point") l.oz = *reinterpret_cast<const std::int32_t*>(v.data);
  });
  return ls;
}

// TFLite's RoundingDivideByPOT and SaturatingRoundingDoublingHighMul written another way (as
// test_quantized_dense.cpp's independent pipeline)
std::int64_t rdbpot(std::int64_t x, int e) {
  if (e == 0) return x;
  const std::int64_t h = std::int64_t(1) << (e - 1);
  return x >= 0 ? (x + h) >> e : -((-x + h) >> e);
}
std::int64_t srdhm(std::int64_t a, std::int64_t b) {
  if (a == INT32_MIN && b == INT32_MIN) return INT32_MAX;
  const std::int64_t ab = a * b;
  const std::int64_t num = ab + (ab >= 0 ? (std::int64_t(1) << 30) : 1 - (std::int64_t(1) << 30));
  return num >= 0 ? num >> 31 : -((-num) >> 31);
}

// The independent int8 pipeline of the full-integer MLP (int8 between the layers, float at the ends).
std::vector<float> full_reference(const std::vector<kernel_of>& ls, const std::vector<float>& x, std::size_t n) {
  std::vector<std::int32_t> q(n * D);
  for (std::size_t i = 0; i < n * D; ++i)
    q[i] = std::int32_t(std::clamp(std::round(double(x[i] / ls[0].is)) + ls[0].iz, -128.0, 127.0));
  for (std::size_t l = 0; l < ls.size(); ++l) {
    const auto& L = ls[l];
    const bool relu = l + 1 < ls.size();
    std::vector<std::int32_t> out(n * L.N);
    for (std::size_t j = 0; j < L.N; ++j) {
      const auto mult = q8::quantize_multiplier(double(L.is) * double(L.scale[j]) / double(L.os));
      const int left = std::max(mult.shift, 0), right = std::max(-mult.shift, 0);
      for (std::size_t i = 0; i < n; ++i) {
        std::int64_t acc = static_cast<const std::int32_t*>(L.bias)[j];
        for (std::size_t k = 0; k < L.K; ++k) acc += std::int64_t(q[i * L.K + k] - L.iz) * L.w[j * L.K + k];
        const std::int64_t r = rdbpot(srdhm(acc * (std::int64_t(1) << left), mult.q), right) + L.oz;
        out[i * L.N + j] = std::int32_t(std::clamp<std::int64_t>(r, relu ? std::max(-128, L.oz) : -128, 127));
      }
    }
    q = std::move(out);
  }
  std::vector<float> y(q.size());
  for (std::size_t i = 0; i < q.size(); ++i) y[i] = ls.back().os * float(q[i] - ls.back().oz);
  return y;
}
// The dynamic-range MLP: each row quantized symmetrically by its own max |x| / 127, the sums scaled
// back in float, relu between the layers (the layer's own float expressions).
std::vector<float> dynamic_reference(const std::vector<kernel_of>& ls, std::vector<float> x, std::size_t n) {
  for (std::size_t l = 0; l < ls.size(); ++l) {
    const auto& L = ls[l];
    std::vector<float> y(n * L.N);
    for (std::size_t i = 0; i < n; ++i) {
      float amax = 0;
      for (std::size_t k = 0; k < L.K; ++k) amax = std::max(amax, std::abs(x[i * L.K + k]));
      const float rs = amax / 127.0f, div = amax > 0 ? rs : 1.0f;
      std::vector<std::int32_t> q(L.K);
      for (std::size_t k = 0; k < L.K; ++k) q[k] = std::int32_t(std::clamp(std::round(x[i * L.K + k] / div), -127.0f, 127.0f));
      for (std::size_t j = 0; j < L.N; ++j) {
        std::int32_t acc = 0;
        for (std::size_t k = 0; k < L.K; ++k) acc += q[k] * L.w[j * L.K + k];
        float v = float(acc) * (rs * L.scale[j]) + static_cast<const float*>(L.bias)[j];
        if (l + 1 < ls.size()) v = std::max(v, 0.0f);
        y[i * L.N + j] = v;
      }
    }
    x = std::move(y);
  }
  return x;
}

// Every kernel in [-64, 64], each channel's largest |w| quantized to 64 exactly (scale max|W| / 64).
void check_reduced_kernels(const std::vector<kernel_of>& ls, const std::vector<std::size_t>& which) {
  for (std::size_t l : which) {
    const auto& L = ls[l];
    REQUIRE(L.w.size() == L.N * L.K);
    std::size_t at64 = 0;
    for (std::size_t j = 0; j < L.N; ++j) {
      int top = 0;
      for (std::size_t k = 0; k < L.K; ++k) top = std::max(top, std::abs(int(L.w[j * L.K + k])));
      at64 += top == 64;
      CHECK(top <= 64);
    }
    INFO("layer " << l + 1);
    CHECK(at64 == L.N);
  }
}
}  // namespace

TEST_CASE("reduce_range: the converted types, weights in [-64, 64] with scale max|W| / 64, the same bytes") {
  using fi = q8::full_integer;
  static_assert(std::is_same_v<quantized_t<net, rfi>,
                               sequential<input<D>, quantized_dense<16, 32, relu, rfi, q8::int8_io<false, true>>,
                                          quantized_dense<32, 24, relu, rfi, q8::int8_io<true, true>>,
                                          quantized_dense<24, C, identity, rfi, q8::int8_io<true, false>>>>);
  static_assert(quantized_t<net, rfi>::plan<>::memory(1).state == quantized_t<net, fi>::plan<>::memory(1).state);
  static_assert(q8::is_full_integer_v<rfi> && !q8::is_full_integer_v<rdr> && q8::is_scheme_v<rdr>);
  static_assert(q8::weight_range_v<rfi> == i8::weight_range::reduced && q8::weight_range_v<fi> == i8::weight_range::full);
  CHECK(quantized_dense<16, 32, relu, rfi>::name() == "quantized_dense<16, 32, relu, reduce_range<full_integer>>");
  auto& m = trained();
  const auto cal = make_blobs(300, 3);
  auto qf = quantize_full_integer<q8::reduce_range>(m, cal.x.data(), cal.y.size());
  auto qd = quantize_dynamic<q8::reduce_range>(m);
  static_assert(std::is_same_v<decltype(qf)::network, quantized_t<net, rfi>>);
  static_assert(std::is_same_v<decltype(qd)::network, quantized_t<net, rdr>>);
  const auto lf = kernels_of(qf, 3), ld = kernels_of(qd, 3);
  check_reduced_kernels(lf, {0, 1, 2});
  check_reduced_kernels(ld, {0, 1, 2});
  // the scales: max |W[:, j]| / 64 of the float kernel
  std::vector<float> w0;
  m.for_each_variable([&](const variable_ref& v) {
    if (v.layer == 0 && v.name == "kernel") w0.assign(reinterpret_cast<const float*>(v.data), reinterpret_cast<const float*>(v.data) + v.extent);
  });
  for (std::size_t j = 0; j < 32; ++j) {
    double amax = 0;
    for (std::size_t k = 0; k < D; ++k) amax = std::max(amax, double(std::abs(w0[k * 32 + j])));
    CHECK(lf[0].scale[j] == float(amax / 64));
  }
}

TEST_CASE("reduce_range: the MLP equals an independent scalar int8 implementation bit for bit on every architecture") {
  auto& m = trained();
  const auto cal = make_blobs(300, 3);
  auto qf = quantize_full_integer<q8::reduce_range>(m, cal.x.data(), cal.y.size());
  auto qd = quantize_dynamic<q8::reduce_range>(m);
  const auto te = make_blobs(130, 4);
  auto xs = te.x;
  xs[0] = 1000.0f;  // saturates
  xs[1] = -1000.0f;
  const auto want_f = full_reference(kernels_of(qf, 3), xs, te.y.size());
  const auto want_d = dynamic_reference(kernels_of(qd, 3), xs, te.y.size());
  const int ran = ctnn::test::for_each_arch("reduce_range MLP", [&]<class Arch>(Arch, const char* name) {
    const bool u8 = i8::int8_path_of<Arch, i8::weight_range::reduced>() == i8::int8_path::avx2_u8;
    MESSAGE(std::string(name) << ": the reduce_range product takes " << std::string(u8 ? "avx2_u8" : "its usual path"));
    auto f = on_backend<cpu<Arch>>(qf);
    auto d = on_backend<cpu<Arch>>(qd);
    for (std::size_t batch : {1, 7, 64}) {
      INFO(name << ", batch " << batch);
      const auto gf = f.predict(xs.data(), te.y.size(), batch), gd = d.predict(xs.data(), te.y.size(), batch);
      std::size_t diff_f = 0, diff_d = 0;
      for (std::size_t i = 0; i < gf.size(); ++i) diff_f += gf[i] != want_f[i];
      for (std::size_t i = 0; i < gd.size(); ++i) diff_d += gd[i] != want_d[i];
      CHECK(diff_f == 0);
      CHECK(diff_d == 0);
    }
  });
  CHECK(ran >= 1);
}

TEST_CASE("reduce_range post-training quantization: accuracy within 2 points of float and of the 8-bit weights") {
  auto& m = trained();
  const auto cal = make_blobs(300, 3);
  const auto te = make_blobs(600, 2);
  const double acc = accuracy_of(m.predict(te.x.data(), te.y.size()), te.y);
  const double f8 = accuracy_of(quantize_full_integer(m, cal.x.data(), cal.y.size()).predict(te.x.data(), te.y.size()), te.y);
  const double f7 = accuracy_of(
      quantize_full_integer<q8::reduce_range>(m, cal.x.data(), cal.y.size()).predict(te.x.data(), te.y.size()), te.y);
  const double d7 = accuracy_of(quantize_dynamic<q8::reduce_range>(m).predict(te.x.data(), te.y.size()), te.y);
  MESSAGE("accuracy float " << acc << ", full integer " << f8 << ", reduce_range full integer " << f7
                            << ", reduce_range dynamic range " << d7);
  CHECK(acc > 0.85);
  CHECK(std::abs(f7 - acc) <= 0.02);
  CHECK(std::abs(f7 - f8) <= 0.02);
  CHECK(std::abs(d7 - acc) <= 0.02);
}

namespace {
// a small CNN on 8x8 bar images: conv2d (same, relu) with the max pooling in its store, conv2d, dense
constexpr std::size_t S = 8;
using cnn = sequential<input<S, S, 1>, conv2d<8, 3, 3, 1, padding::same, relu>, max_pool2d<2>,
                       conv2d<16, 3, 3, 1, padding::valid, relu>, flatten, dense<C>>;
samples make_images(std::size_t n, std::uint64_t seed) {
  rng g(seed);
  samples d;
  d.x.resize(n * S * S);
  d.y.resize(n);
  for (std::size_t i = 0; i < n; ++i) {
    const std::size_t k = i % C, at = std::size_t(g.uniform(1, S - 1));
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
}  // namespace

TEST_CASE("reduce_range CNN (the pool in the convolution's store): every architecture equals the scalar path bit for bit") {
  auto m = make_model<cnn>(3);
  const auto tr = make_images(300, 1);
  adam opt{0.01};
  fit(m, sparse_categorical_crossentropy{.from_logits = true}, opt,
      data::in_memory<shape<S, S, 1>, sparse_labels>(tr.x, tr.y).batch(32), epochs{3});
  auto qf = quantize_full_integer<q8::reduce_range>(m, tr.x.data(), 64);
  auto qd = quantize_dynamic<q8::reduce_range>(m);
  static_assert(std::is_same_v<std::tuple_element_t<0, decltype(qf)::layers>::spec,
                               quantized_conv2d<8, 3, 3, 1, padding::same, relu, rfi, q8::int8_io<false, true>, max_pool2d<2>>>);
  check_reduced_kernels(kernels_of(qf, 5), {0, 2, 4});
  auto te = make_images(70, 2);
  te.x[0] = 50.0f;  // saturates
  auto sf = on_backend<cpu<xsimd::sse2>>(qf);
  auto sd = on_backend<cpu<xsimd::sse2>>(qd);
  const auto want_f = sf.predict(te.x.data(), te.y.size(), 64), want_d = sd.predict(te.x.data(), te.y.size(), 64);
  const auto sat = q8::saturation(sf);
  const int ran = ctnn::test::for_each_arch("reduce_range CNN", [&]<class Arch>(Arch, const char* name) {
    auto f = on_backend<cpu<Arch>>(qf);
    auto d = on_backend<cpu<Arch>>(qd);
    for (std::size_t batch : {1, 7, 64}) {
      INFO(name << ", batch " << batch);
      q8::reset_saturation(f);
      CHECK(f.predict(te.x.data(), te.y.size(), batch) == want_f);
      CHECK(d.predict(te.x.data(), te.y.size(), batch) == want_d);
      const auto got = q8::saturation(f);
      REQUIRE(got.size() == sat.size());
      for (std::size_t l = 0; l < got.size(); ++l) {
        CHECK(got[l].inputs == sat[l].inputs);
        CHECK(got[l].outputs == sat[l].outputs);
      }
    }
  });
  CHECK(ran >= 1);
  CHECK(sat[0].inputs > 0);
  const auto ev = make_images(300, 5);
  const auto acc = [&](auto& mm) {
    const auto p = mm.predict(ev.x.data(), ev.y.size());
    return accuracy_of(p, ev.y);
  };
  const double af = acc(m), a7 = acc(qf), a8 = [&] {
    auto q = quantize_full_integer(m, tr.x.data(), 64);
    return acc(q);
  }();
  MESSAGE("CNN accuracy: float " << af << ", full integer " << a8 << ", reduce_range full integer " << a7);
  CHECK(std::abs(a7 - af) <= 0.03);
}

TEST_CASE("reduce_range QAT: the kernels fake-quantized to [-64, 64], converted within one output step") {
  auto& m = trained();
  auto q = quantize_model<q8::reduce_range>(m);
  static_assert(std::is_same_v<decltype(q)::network, qat_t<net, rfi>>);
  static_assert(std::is_same_v<qat_t<net, rfi>, sequential<input<D>, qat_dense<32, relu, false, rfi>,
                                                           qat_dense<24, relu, false, rfi>, qat_dense<C, identity, true, rfi>>>);
  CHECK(qat_dense<24, relu, false, rfi>::name() == "qat_dense<24, relu, reduce_range<full_integer>>");
  // the fake-quantized kernel: per unit j, multiples of max |W[:, j]| / 64 from -64 to 64 times it
  using L0 = std::tuple_element_t<0, decltype(q)::layers>;
  std::vector<float> w, wq(D * 32);
  q.for_each_variable([&](const variable_ref& v) {
    if (v.layer == 0 && v.name == "kernel") w.assign(reinterpret_cast<const float*>(v.data), reinterpret_cast<const float*>(v.data) + v.extent);
  });
  L0::fake_quant_kernel(w.data(), wq.data());
  std::size_t off_grid = 0;
  for (std::size_t j = 0; j < 32; ++j) {
    float amax = 0;
    for (std::size_t k = 0; k < D; ++k) amax = std::max(amax, std::abs(w[k * 32 + j]));
    const float scale = float(double(amax) / 64);
    for (std::size_t k = 0; k < D; ++k) {
      const float level = std::round(w[k * 32 + j] / scale);
      off_grid += std::abs(level) > 64 || wq[k * 32 + j] != scale * level;
    }
  }
  CHECK(off_grid == 0);
  const auto tr = make_blobs(600, 1), te = make_blobs(600, 2);
  adam opt{0.001};
  fit(q, sparse_categorical_crossentropy{.from_logits = true}, opt,
      data::in_memory<shape<D>, sparse_labels>(tr.x, tr.y).batch(32), epochs{2});
  auto qi = convert_qat(q);
  static_assert(std::is_same_v<decltype(qi)::network, quantized_t<net, rfi>>);
  check_reduced_kernels(kernels_of(qi, 3), {0, 1, 2});
  const auto pq = q.predict(te.x.data(), te.y.size()), pi = qi.predict(te.x.data(), te.y.size());
  const float step = kernels_of(qi, 3)[2].os;
  std::size_t within = 0;
  double worst = 0;
  for (std::size_t i = 0; i < pq.size(); ++i) {
    within += std::abs(pq[i] - pi[i]) <= step * 1.0001f;
    worst = std::max(worst, double(std::abs(pq[i] - pi[i]) / step));
  }
  const double acc_f = accuracy_of(m.predict(te.x.data(), te.y.size()), te.y), acc_i = accuracy_of(pi, te.y);
  MESSAGE("reduce_range QAT: " << within << " of " << pq.size() << " logits within one output step, worst " << worst
                               << " steps; accuracy float " << acc_f << ", int8 " << acc_i);
  // (a one-step difference in a hidden layer's output, from the fixed-point requantization and the
  // int32 bias against the QAT model's float sums, carried through the next layer: 1799 of 1800 when
  // written, as test_quantized_conv2d's QAT of the CNN allows)
  CHECK(within * 100 >= pq.size() * 99);
  CHECK(worst < 2.01);
  CHECK(std::abs(acc_i - acc_f) <= 0.02);
}

TEST_CASE("reduce_range weights files: they load into the reduce_range type only, a weight beyond 64 is refused") {
  auto& m = trained();
  const auto cal = make_blobs(300, 3);
  auto qf = quantize_full_integer<q8::reduce_range>(m, cal.x.data(), cal.y.size());
  const auto dir = std::filesystem::temp_directory_path() / "ctnn_test_reduce_range";
  std::filesystem::create_directories(dir);
  io::save_weights(qf, dir / "r.weights");
  auto back = make_model<quantized_t<net, rfi>>(9);
  io::load_weights(back, dir / "r.weights");
  const auto te = make_blobs(40, 6);
  CHECK(back.predict(te.x.data(), 40) == qf.predict(te.x.data(), 40));
  // the 8-bit type refuses it (the network names differ), and the other way round
  auto full = make_model<quantized_t<net>>(9);
  CHECK_THROWS_WITH_AS(io::load_weights(full, dir / "r.weights"),
                       doctest::Contains("quantized_dense<16, 32, relu, reduce_range<full_integer>>"), io::weights_error);
  io::save_weights(quantize_full_integer(m, cal.x.data(), cal.y.size()), dir / "f.weights");
  CHECK_THROWS_AS(io::load_weights(back, dir / "f.weights"), io::weights_error);
  // a weight of 65 (its unit's kernel_sum kept consistent): the avx2_u8 product could saturate
  qf.for_each_variable([&](const variable_ref& v) {
    if (v.layer == 1 && v.name == "kernel") {
      auto* k = reinterpret_cast<std::int8_t*>(v.data);
      const std::int8_t old = k[i8::packed_index(32, 24, 3, 5)];
      k[i8::packed_index(32, 24, 3, 5)] = 65;
      qf.for_each_variable([&](const variable_ref& s) {
        if (s.layer == 1 && s.name == "kernel_sum") reinterpret_cast<std::int32_t*>(s.data)[3] += 65 - old;
      });
    }
  });
  io::save_weights(qf, dir / "bad.weights");
  CHECK_THROWS_WITH_AS(io::load_weights(back, dir / "bad.weights"),
                       doctest::Contains("is 65; reduce_range weights are in [-64, 64]"), io::weights_error);
  std::filesystem::remove_all(dir);
}
