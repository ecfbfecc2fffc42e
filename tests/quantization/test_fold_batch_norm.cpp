// tests/quantization/test_fold_batch_norm.cpp — batch-norm folding on conversion
// (quantization/fold.hpp): the folded network type, the folded float model against the unfolded
// one (outputs and evaluate), the converted int8 CNN (post-training and QAT) against its float
// model, the int8 chain across where the batch_norm layers were, and the folds that are refused;
// the fold into the layer after (the CNN that normalizes after the pooling) and into the layer
// before (TFMOT's Conv2D/Dense + BatchNormalization [+ ReLU], same padding included).
#include <doctest/doctest.h>

#include <ctnn/ctnn.hpp>
#include <ctnn/quantization/convert.hpp>
#include <ctnn/quantization/fold.hpp>
#include <ctnn/quantization/qat.hpp>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <type_traits>
#include <vector>

using namespace ctnn;

namespace {
// the project's CNN in small (examples/fashion_mnist_cnn.cpp): convolution, pooling, then the
// batch_norm, folded into the next convolution (valid padding) and, through flatten, the dense layer
constexpr std::size_t S = 8, classes = 3;
// (momentum 0.9: the moving statistics settle within the test's few steps)
using bn = batch_normalization<0.9, 1e-3>;
using bn_cnn = sequential<input<S, S, 1>, conv2d<8, 3, 3, 1, padding::valid, relu>, max_pool2d<2>, bn,
                          conv2d<12, 2, 2, 1, padding::valid, relu>, bn, flatten, dense<16, relu>, dropout<0.5f>,
                          dense<classes>>;
using folded_cnn = sequential<input<S, S, 1>, conv2d<8, 3, 3, 1, padding::valid, relu>, max_pool2d<2>,
                              conv2d<12, 2, 2, 1, padding::valid, relu>, flatten, dense<16, relu>, dropout<0.5f>,
                              dense<classes>>;
static_assert(std::is_same_v<quantization::fold_t<bn_cnn>, folded_cnn>);
static_assert(std::is_same_v<quantization::fold_t<folded_cnn>, folded_cnn>);  // nothing to fold: the same type
static_assert(quantization::has_batch_norm_v<bn_cnn> && !quantization::has_batch_norm_v<folded_cnn>);
// a 1x1 convolution with same padding reads no padding either; so does a dense on a flat input
static_assert(std::is_same_v<quantization::fold_t<sequential<input<4, 4, 3>, batch_norm, conv2d<5, 1, 1, 1, padding::same>>>,
                             sequential<input<4, 4, 3>, conv2d<5, 1, 1, 1, padding::same>>>);
static_assert(std::is_same_v<quantization::fold_t<sequential<input<6>, batch_norm, dropout<0.1f>, dense<2>>>,
                             sequential<input<6>, dropout<0.1f>, dense<2>>>);
// into the layer before (TFMOT's rule): a dense, conv2d (any padding) or depthwise_conv2d with identity
// activation right before the batch_norm; an element-wise activation layer after the batch_norm becomes
// that layer's own activation
static_assert(std::is_same_v<quantization::fold_t<sequential<input<6, 6, 2>, conv2d<4, 3, 3, 1, padding::same>, batch_norm,
                                                             relu, flatten, dense<2>>>,
                             sequential<input<6, 6, 2>, conv2d<4, 3, 3, 1, padding::same, relu>, flatten, dense<2>>>);
static_assert(std::is_same_v<quantization::fold_t<sequential<input<6, 6, 2>, depthwise_conv2d<3, 3, 1, padding::same, 2>,
                                                             sync_batch_norm, leaky_relu<>, flatten, dense<2>>>,
                             sequential<input<6, 6, 2>, depthwise_conv2d<3, 3, 1, padding::same, 2, leaky_relu<>>,
                                        flatten, dense<2>>>);
// without an activation layer after it the folded layer keeps identity; where both directions apply
// (a linear dense before, a dense after) the layer before is taken
static_assert(std::is_same_v<quantization::fold_t<sequential<input<6>, dense<5>, batch_norm, dense<2>>>,
                             sequential<input<6>, dense<5>, dense<2>>>);
static_assert(quantization::detail::folding<sequential<input<6>, dense<5>, batch_norm, dense<2>>>::target(1) == 0);
// a dense with its own relu is not linear: the batch_norm after it folds into the next layer, and the
// activation layer after that batch_norm stays a layer
static_assert(std::is_same_v<quantization::fold_t<sequential<input<6>, dense<5, relu>, batch_norm, dense<2>, relu>>,
                             sequential<input<6>, dense<5, relu>, dense<2>, relu>>);
// both at one layer: the first batch_norm into the dense after it, the second into the same dense before it
static_assert(std::is_same_v<quantization::fold_t<sequential<input<6>, batch_norm, dense<5>, batch_norm, ctnn::tanh, dense<2>>>,
                             sequential<input<6>, dense<5, ctnn::tanh>, dense<2>>>);
using fi = quantization::full_integer;
// the int8 chain continues across where the batch_norm layers were
static_assert(std::is_same_v<quantized_t<bn_cnn>, quantized_t<folded_cnn>>);
static_assert(std::is_same_v<qat_t<bn_cnn>, qat_t<folded_cnn>>);
static_assert(std::is_same_v<
              quantized_t<bn_cnn>,
              sequential<input<S, S, 1>,
                         quantized_conv2d<8, 3, 3, 1, padding::valid, relu, fi, quantization::int8_io<false, true>,
                                          max_pool2d<2>>,
                         quantization::fused_pool<max_pool2d<2>, true>,
                         quantized_conv2d<12, 2, 2, 1, padding::valid, relu, fi, quantization::int8_io<true, true>>,
                         quantization::int8_pass<flatten>,
                         quantized_dense<48, 16, relu, fi, quantization::int8_io<true, true>>,
                         quantization::int8_pass<dropout<0.5f>>,
                         quantized_dense<16, classes, identity, fi, quantization::int8_io<true, false>>>>);

struct images {
  std::vector<float> x;
  std::vector<std::int32_t> y;
};
// 8x8 images of one bar (horizontal, vertical or diagonal) on noise, offset and scaled so that the
// batch_norm layers have something to normalize
images make_images(std::size_t n, std::uint64_t seed) {
  rng g(seed);
  images d;
  d.x.resize(n * S * S);
  d.y.resize(n);
  for (std::size_t i = 0; i < n; ++i) {
    const std::size_t k = i % classes, at = std::size_t(g.uniform(1, S - 1));
    d.y[i] = std::int32_t(k);
    float* im = d.x.data() + i * S * S;
    for (std::size_t p = 0; p < S * S; ++p) im[p] = 0.5f + float(g.uniform(-0.6, 0.6));
    for (std::size_t t = 0; t < S; ++t) {
      const std::size_t r = k == 0 ? at : t, c = k == 1 ? at : k == 0 ? t : (t + at) % S;
      im[r * S + c] += 1.5f;
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
using bn_model = decltype(make_model<bn_cnn>(1));
bn_model& trained() {
  static bn_model m = [] {
    auto mm = make_model<bn_cnn>(3);
    const auto tr = make_images(600, 1);
    adam opt{0.01};
    fit(mm, sparse_categorical_crossentropy{.from_logits = true}, opt,
        data::in_memory<shape<S, S, 1>, sparse_labels>(tr.x, tr.y).batch(32), epochs{4});
    return mm;
  }();
  return m;
}
// the trained model with its batch_norm layers' values spread (a negative gamma, means and
// variances further from 0 and 1) so that a wrong fold shows
bn_model perturbed() {
  auto mm = make_model<bn_cnn>(1);
  std::vector<variable_ref> from;
  trained().for_each_variable([&](const variable_ref& v) { from.push_back(v); });
  std::size_t i = 0;
  mm.for_each_variable([&](const variable_ref& v) { std::memcpy(v.data, from.at(i++).data, v.extent * v.element_bytes); });
  rng g(9);
  mm.for_each_variable([&](const variable_ref& v) {
    auto* p = reinterpret_cast<float*>(v.data);
    if (v.name == "gamma")
      for (std::size_t c = 0; c < v.extent; ++c) p[c] *= float(g.uniform(0.5, 1.5)) * (c == 1 ? -1.0f : 1.0f);
    if (v.name == "beta" || v.name == "moving_mean")
      for (std::size_t c = 0; c < v.extent; ++c) p[c] += float(g.uniform(-0.3, 0.3));
    if (v.name == "moving_variance")
      for (std::size_t c = 0; c < v.extent; ++c) p[c] *= float(g.uniform(0.5, 2.0));
  });
  return mm;
}
}  // namespace

TEST_CASE("fold_batch_norm: the folded float CNN equals the unfolded one within float rounding (outputs, evaluate)") {
  auto m = perturbed();
  auto f = fold_batch_norm(m);
  static_assert(std::is_same_v<decltype(f)::network, folded_cnn>);
  const auto te = make_images(300, 4);
  const auto pm = m.predict(te.x.data(), te.y.size()), pf = f.predict(te.x.data(), te.y.size());
  REQUIRE(pm.size() == pf.size());
  double range = 0, worst = 0;
  for (std::size_t i = 0; i < pm.size(); ++i) {
    range = std::max(range, double(std::abs(pm[i])));
    worst = std::max(worst, double(std::abs(pm[i] - pf[i])));
  }
  MESSAGE("folded CNN: max |logit - unfolded| " << worst << " (|logits| <= " << range << ")");
  CHECK(range > 1.0);
  CHECK(worst <= 1e-5 * range);
  const auto ds = data::in_memory<shape<S, S, 1>, sparse_labels>(te.x, te.y).batch(50);
  const sparse_categorical_crossentropy loss{.from_logits = true};
  const auto em = evaluate(m, loss, ds, sparse_categorical_accuracy{});
  const auto ef = evaluate(f, loss, ds, sparse_categorical_accuracy{});
  CHECK(ef["loss"] == doctest::Approx(em["loss"]).epsilon(1e-5));
  CHECK(ef["sparse_categorical_accuracy"] == doctest::Approx(em["sparse_categorical_accuracy"]).epsilon(1e-9));
  // the kept layers' variables are m's: the first convolution (before any batch_norm) as it was
  std::vector<float> a, b;
  m.for_each_variable([&](const variable_ref& v) {
    if (v.layer == 0 && v.name == "kernel") a.assign(reinterpret_cast<float*>(v.data), reinterpret_cast<float*>(v.data) + v.extent);
  });
  f.for_each_variable([&](const variable_ref& v) {
    if (v.layer == 0 && v.name == "kernel") b.assign(reinterpret_cast<float*>(v.data), reinterpret_cast<float*>(v.data) + v.extent);
  });
  CHECK(a == b);
}

TEST_CASE("a CNN with batch_norm converts to int8 (dynamic range, full integer, QAT) within the float model's accuracy") {
  auto& m = trained();
  const auto cal = make_images(200, 3), te = make_images(300, 4);
  const std::size_t n = te.y.size();
  auto qd = quantize_dynamic(m);
  auto qf = quantize_full_integer(m, cal.x.data(), cal.y.size());
  static_assert(std::is_same_v<decltype(qf)::network, quantized_t<bn_cnn>>);
  static_assert(std::is_same_v<decltype(qd)::network, quantized_t<bn_cnn, quantization::dynamic_range>>);
  const auto pf = m.predict(te.x.data(), n), pd = qd.predict(te.x.data(), n), pi = qf.predict(te.x.data(), n, 7);
  const double af = accuracy_of(pf, te.y), ad = accuracy_of(pd, te.y), ai = accuracy_of(pi, te.y);
  double range = 0, mean_i = 0;
  for (std::size_t i = 0; i < pf.size(); ++i) {
    range = std::max(range, double(std::abs(pf[i])));
    mean_i += std::abs(pi[i] - pf[i]) / double(pf.size());
  }
  MESSAGE("batch_norm CNN accuracy: float " << af << ", dynamic range " << ad << ", full integer " << ai
                                            << "; full integer mean |logit - float| " << mean_i << " (|logits| <= "
                                            << range << ")");
  CHECK(af > 0.9);
  CHECK(std::abs(ad - af) <= 0.02);
  CHECK(std::abs(ai - af) <= 0.02);
  CHECK(mean_i < 0.03 * range);
  CHECK(qf.predict(te.x.data(), n, 1) == pi);  // integer arithmetic: the same outputs at any batch size
  // the same as converting the folded float model
  auto ff = quantize_full_integer(fold_batch_norm(m), cal.x.data(), cal.y.size());
  CHECK(ff.predict(te.x.data(), n) == pi);

  // QAT: quantize_model folds first (the moving statistics frozen), fine-tunes, converts
  auto q = quantize_model(m);
  static_assert(std::is_same_v<decltype(q)::network, qat_t<folded_cnn>>);
  const auto tr = make_images(300, 5);
  adam opt{0.001};
  fit(q, sparse_categorical_crossentropy{.from_logits = true}, opt,
      data::in_memory<shape<S, S, 1>, sparse_labels>(tr.x, tr.y).batch(32), epochs{1});
  auto qi = convert_qat(q);
  static_assert(std::is_same_v<decltype(qi)::network, quantized_t<bn_cnn>>);
  const double aq = accuracy_of(q.predict(te.x.data(), n), te.y), aqi = accuracy_of(qi.predict(te.x.data(), n), te.y);
  MESSAGE("QAT of the batch_norm CNN: fake-quantized " << aq << ", int8 " << aqi);
  CHECK(std::abs(aqi - af) <= 0.03);
  CHECK(std::abs(aqi - aq) <= 0.02);
}

TEST_CASE("fold_batch_norm: the folds by hand (a dense through flatten, channel innermost)") {
  // input 2x1x2 (H W C), batch_norm over C = 2, flatten, dense<1>: feature k has channel k % 2
  using net = sequential<input<2, 1, 2>, batch_normalization<0.99, 0.5>, flatten, dense<1>>;
  auto m = make_model<net>(1);
  const float w[4] = {1, 2, 3, 4};
  m.for_each_variable([&](const variable_ref& v) {
    auto* p = reinterpret_cast<float*>(v.data);
    if (v.name == "gamma") p[0] = 2, p[1] = -1;
    if (v.name == "beta") p[0] = 1, p[1] = 0.5f;
    if (v.name == "moving_mean") p[0] = 3, p[1] = -2;
    if (v.name == "moving_variance") p[0] = 1.5f, p[1] = 0.5f;  // + epsilon 0.5: sqrt 2 and 1
    if (v.name == "kernel") std::copy(w, w + 4, p);
    if (v.name == "bias") p[0] = 0.25f;
  });
  auto f = fold_batch_norm(m);
  std::vector<float> k, b;
  f.for_each_variable([&](const variable_ref& v) {
    auto* p = reinterpret_cast<float*>(v.data);
    if (v.name == "kernel") k.assign(p, p + v.extent);
    if (v.name == "bias") b.assign(p, p + v.extent);
  });
  // s = {2 / sqrt 2, -1}, t = {1 - 3 s0, 0.5 - 2} = {1 - 3 sqrt 2, -1.5}
  const double s0 = std::sqrt(2.0), t0 = 1 - 3 * s0, t1 = -1.5;
  REQUIRE(k.size() == 4);
  CHECK(k[0] == doctest::Approx(1 * s0));
  CHECK(k[1] == doctest::Approx(-2));
  CHECK(k[2] == doctest::Approx(3 * s0));
  CHECK(k[3] == doctest::Approx(-4));
  CHECK(b[0] == doctest::Approx(0.25 + 1 * t0 + 2 * t1 + 3 * t0 + 4 * t1));
  const float x[4] = {0.5f, -1, 2, 3};
  CHECK(f.predict(x, 1)[0] == doctest::Approx(m.predict(x, 1)[0]).epsilon(1e-6));
}

namespace {
// The same task with the batch_norm layers where Keras models put them: right after a linear
// convolution or dense (same padding, which cannot fold into the layer after), then the relu layer.
using same_cnn = sequential<input<S, S, 1>, conv2d<8, 3, 3, 1, padding::same>, bn, relu, max_pool2d<2>,
                            conv2d<12, 3, 3, 1, padding::same>, bn, relu, flatten, dense<16>, bn, relu,
                            dense<classes>>;
using same_folded = sequential<input<S, S, 1>, conv2d<8, 3, 3, 1, padding::same, relu>, max_pool2d<2>,
                               conv2d<12, 3, 3, 1, padding::same, relu>, flatten, dense<16, relu>, dense<classes>>;
static_assert(std::is_same_v<quantization::fold_t<same_cnn>, same_folded>);
static_assert(std::is_same_v<quantized_t<same_cnn>, quantized_t<same_folded>>);
static_assert(std::is_same_v<
              quantized_t<same_cnn>,
              sequential<input<S, S, 1>,
                         quantized_conv2d<8, 3, 3, 1, padding::same, relu, fi, quantization::int8_io<false, true>,
                                          max_pool2d<2>>,  // the pool in the convolution's store
                         quantization::fused_pool<max_pool2d<2>, true>,
                         quantized_conv2d<12, 3, 3, 1, padding::same, relu, fi, quantization::int8_io<true, true>>,
                         quantization::int8_pass<flatten>,
                         quantized_dense<192, 16, relu, fi, quantization::int8_io<true, true>>,
                         quantized_dense<16, classes, identity, fi, quantization::int8_io<true, false>>>>);
using same_model = decltype(make_model<same_cnn>(1));
same_model& trained_same() {
  static same_model m = [] {
    auto mm = make_model<same_cnn>(5);
    const auto tr = make_images(600, 1);
    adam opt{0.01};
    fit(mm, sparse_categorical_crossentropy{.from_logits = true}, opt,
        data::in_memory<shape<S, S, 1>, sparse_labels>(tr.x, tr.y).batch(32), epochs{4});
    return mm;
  }();
  return m;
}
// copies of m's variables with the batch_norm statistics spread (a negative gamma) so a wrong fold shows
template <class M>
void spread_batch_norms(M& m, std::uint64_t seed) {
  rng g(seed);
  m.for_each_variable([&](const variable_ref& v) {
    auto* p = reinterpret_cast<float*>(v.data);
    if (v.name == "gamma")
      for (std::size_t c = 0; c < v.extent; ++c) p[c] *= float(g.uniform(0.5, 1.5)) * (c == 1 ? -1.0f : 1.0f);
    if (v.name == "beta" || v.name == "moving_mean")
      for (std::size_t c = 0; c < v.extent; ++c) p[c] += float(g.uniform(-0.3, 0.3));
    if (v.name == "moving_variance")
      for (std::size_t c = 0; c < v.extent; ++c) p[c] *= float(g.uniform(0.5, 2.0));
  });
}
template <class M>
void copy_variables(const M& from, M& to) {
  std::vector<variable_ref> src;
  from.for_each_variable([&](const variable_ref& v) { src.push_back(v); });
  std::size_t i = 0;
  to.for_each_variable([&](const variable_ref& v) { std::memcpy(v.data, src.at(i++).data, v.extent * v.element_bytes); });
}
}  // namespace

TEST_CASE("fold_batch_norm into the layer before: conv2d(same) + batch_norm + relu equals the unfolded CNN (outputs, evaluate)") {
  auto m = make_model<same_cnn>(1);
  copy_variables(trained_same(), m);
  spread_batch_norms(m, 11);
  auto f = fold_batch_norm(m);
  static_assert(std::is_same_v<decltype(f)::network, same_folded>);
  const auto te = make_images(300, 4);
  const auto pm = m.predict(te.x.data(), te.y.size()), pf = f.predict(te.x.data(), te.y.size());
  REQUIRE(pm.size() == pf.size());
  double range = 0, worst = 0;
  for (std::size_t i = 0; i < pm.size(); ++i) {
    range = std::max(range, double(std::abs(pm[i])));
    worst = std::max(worst, double(std::abs(pm[i] - pf[i])));
  }
  MESSAGE("conv2d(same)+batch_norm+relu folded backwards: max |logit - unfolded| " << worst << " (|logits| <= " << range
                                                                                  << ")");
  CHECK(range > 1.0);
  CHECK(worst <= 1e-5 * range);
  const auto ds = data::in_memory<shape<S, S, 1>, sparse_labels>(te.x, te.y).batch(50);
  const sparse_categorical_crossentropy loss{.from_logits = true};
  const auto em = evaluate(m, loss, ds, sparse_categorical_accuracy{});
  const auto ef = evaluate(f, loss, ds, sparse_categorical_accuracy{});
  CHECK(ef["loss"] == doctest::Approx(em["loss"]).epsilon(1e-5));
  CHECK(ef["sparse_categorical_accuracy"] == doctest::Approx(em["sparse_categorical_accuracy"]).epsilon(1e-9));
  // the last dense (no batch_norm next to it) is copied as it was
  std::vector<float> a, b;
  m.for_each_variable([&](const variable_ref& v) {
    if (v.layer == 11 && v.name == "kernel") a.assign(reinterpret_cast<float*>(v.data), reinterpret_cast<float*>(v.data) + v.extent);
  });
  f.for_each_variable([&](const variable_ref& v) {
    if (v.layer == 5 && v.name == "kernel") b.assign(reinterpret_cast<float*>(v.data), reinterpret_cast<float*>(v.data) + v.extent);
  });
  CHECK(!a.empty());
  CHECK(a == b);
}

TEST_CASE("a CNN with conv2d(same) + batch_norm + relu converts to int8 (dynamic range, full integer, QAT) within the float accuracy") {
  auto& m = trained_same();
  const auto cal = make_images(200, 3), te = make_images(300, 4);
  const std::size_t n = te.y.size();
  auto qd = quantize_dynamic(m);
  auto qf = quantize_full_integer(m, cal.x.data(), cal.y.size());
  static_assert(std::is_same_v<decltype(qf)::network, quantized_t<same_cnn>>);
  const auto pf = m.predict(te.x.data(), n), pd = qd.predict(te.x.data(), n), pi = qf.predict(te.x.data(), n, 7);
  const double af = accuracy_of(pf, te.y), ad = accuracy_of(pd, te.y), ai = accuracy_of(pi, te.y);
  double range = 0, mean_i = 0;
  for (std::size_t i = 0; i < pf.size(); ++i) {
    range = std::max(range, double(std::abs(pf[i])));
    mean_i += std::abs(pi[i] - pf[i]) / double(pf.size());
  }
  MESSAGE("conv2d(same)+batch_norm+relu CNN accuracy: float " << af << ", dynamic range " << ad << ", full integer "
                                                             << ai << "; full integer mean |logit - float| " << mean_i
                                                             << " (|logits| <= " << range << ")");
  CHECK(af > 0.9);
  CHECK(std::abs(ad - af) <= 0.02);
  CHECK(std::abs(ai - af) <= 0.02);
  CHECK(mean_i < 0.03 * range);
  CHECK(qf.predict(te.x.data(), n, 1) == pi);
  auto ff = quantize_full_integer(fold_batch_norm(m), cal.x.data(), cal.y.size());
  CHECK(ff.predict(te.x.data(), n) == pi);

  auto q = quantize_model(m);
  static_assert(std::is_same_v<decltype(q)::network, qat_t<same_folded>>);
  const auto tr = make_images(300, 5);
  adam opt{0.001};
  fit(q, sparse_categorical_crossentropy{.from_logits = true}, opt,
      data::in_memory<shape<S, S, 1>, sparse_labels>(tr.x, tr.y).batch(32), epochs{1});
  auto qi = convert_qat(q);
  static_assert(std::is_same_v<decltype(qi)::network, quantized_t<same_cnn>>);
  const double aq = accuracy_of(q.predict(te.x.data(), n), te.y), aqi = accuracy_of(qi.predict(te.x.data(), n), te.y);
  MESSAGE("QAT of the conv2d(same)+batch_norm+relu CNN: fake-quantized " << aq << ", int8 " << aqi);
  CHECK(std::abs(aqi - af) <= 0.03);
  CHECK(std::abs(aqi - aq) <= 0.02);
}

TEST_CASE("fold_batch_norm into the layer before: the fold by hand (per output channel, the relu layer taken in)") {
  // dense<2> on 3 inputs, batch_norm over its 2 outputs (epsilon 0.5), then a relu layer
  using net = sequential<input<3>, dense<2>, batch_normalization<0.99, 0.5>, relu>;
  static_assert(std::is_same_v<quantization::fold_t<net>, sequential<input<3>, dense<2, relu>>>);
  auto m = make_model<net>(1);
  const float w[6] = {1, 2, 3, 4, 5, 6};  // [K = 3, N = 2]
  m.for_each_variable([&](const variable_ref& v) {
    auto* p = reinterpret_cast<float*>(v.data);
    if (v.name == "gamma") p[0] = 2, p[1] = -1;
    if (v.name == "beta") p[0] = 1, p[1] = 0.5f;
    if (v.name == "moving_mean") p[0] = 3, p[1] = -2;
    if (v.name == "moving_variance") p[0] = 1.5f, p[1] = 0.5f;  // + epsilon 0.5: sqrt 2 and 1
    if (v.name == "kernel") std::copy(w, w + 6, p);
    if (v.name == "bias") p[0] = 0.25f, p[1] = -0.75f;
  });
  auto f = fold_batch_norm(m);
  std::vector<float> k, b;
  f.for_each_variable([&](const variable_ref& v) {
    auto* p = reinterpret_cast<float*>(v.data);
    if (v.name == "kernel") k.assign(p, p + v.extent);
    if (v.name == "bias") b.assign(p, p + v.extent);
  });
  // s = {2 / sqrt 2, -1}; W'[k, c] = W[k, c] s_c; b'_c = (b_c - mean_c) s_c + beta_c
  const double s0 = std::sqrt(2.0), s1 = -1;
  REQUIRE(k.size() == 6);
  REQUIRE(b.size() == 2);
  for (std::size_t i = 0; i < 6; ++i) CHECK(k[i] == doctest::Approx(w[i] * (i % 2 == 0 ? s0 : s1)));
  CHECK(b[0] == doctest::Approx((0.25 - 3) * s0 + 1));
  CHECK(b[1] == doctest::Approx((-0.75 + 2) * s1 + 0.5));
  for (const auto& x : {std::array<float, 3>{0.5f, -1, 2}, std::array<float, 3>{-3, 1, 0.25f},
                        std::array<float, 3>{1, 1, -2}}) {
    const auto pm = m.predict(x.data(), 1), pf = f.predict(x.data(), 1);
    CHECK(pf[0] == doctest::Approx(pm[0]).epsilon(1e-6));
    CHECK(pf[1] == doctest::Approx(pm[1]).epsilon(1e-6));
  }
}

namespace {
// Net's model with its batch_norm statistics and biases spread, folded: the folded network is Folded
// and its outputs on random inputs equal the unfolded ones within float rounding
template <class Net, class Folded>
void check_fold(const char* what, std::uint64_t seed) {
  auto m = make_model<Net>(seed);
  spread_batch_norms(m, seed + 20);
  rng g(seed + 40);
  m.for_each_variable([&](const variable_ref& v) {
    auto* p = reinterpret_cast<float*>(v.data);
    if (v.name == "moving_mean" || v.name == "beta" || v.name == "bias")
      for (std::size_t c = 0; c < v.extent; ++c) p[c] += float(g.uniform(-1, 1));
    if (v.name == "moving_variance")
      for (std::size_t c = 0; c < v.extent; ++c) p[c] = float(g.uniform(0.2, 3));
  });
  auto f = fold_batch_norm(m);
  static_assert(std::is_same_v<typename decltype(f)::network, Folded>);
  constexpr std::size_t in = Net::input_type::size, batch = 20;
  std::vector<float> x(batch * in);
  for (auto& v : x) v = float(g.uniform(-2, 2));
  const auto pm = m.predict(x.data(), batch), pf = f.predict(x.data(), batch);
  REQUIRE(pm.size() == pf.size());
  double range = 0, worst = 0;
  for (std::size_t i = 0; i < pm.size(); ++i) {
    range = std::max(range, double(std::abs(pm[i])));
    worst = std::max(worst, double(std::abs(pm[i] - pf[i])));
  }
  MESSAGE(std::string(what) << ": max |output - unfolded| " << worst << " (|outputs| <= " << range << ")");
  CHECK(range > 0.5);
  CHECK(worst <= 1e-5 * range);
}
}  // namespace

TEST_CASE("fold_batch_norm: both directions at one layer, a depthwise_conv2d, a synchronized batch_norm (outputs)") {
  // a batch_norm folds into the dense after it, the next one into that dense before it (then tanh)
  check_fold<sequential<input<6>, bn, dense<5>, bn, ctnn::tanh, dense<2>>,
             sequential<input<6>, dense<5, ctnn::tanh>, dense<2>>>("batch_norm, dense, batch_norm, tanh", 3);
  // depthwise (same padding, multiplier 2) and sync_batch_norm, folded backwards with leaky_relu
  check_fold<sequential<input<5, 5, 2>, depthwise_conv2d<3, 3, 1, padding::same, 2>, sync_batch_norm, leaky_relu<>,
                        flatten, dense<3>>,
             sequential<input<5, 5, 2>, depthwise_conv2d<3, 3, 1, padding::same, 2, leaky_relu<>>, flatten,
                        dense<3>>>("depthwise_conv2d(same), sync_batch_norm, leaky_relu", 4);
  // a strided same-padded conv2d with no activation layer after its batch_norm
  check_fold<sequential<input<7, 7, 3>, conv2d<4, 3, 3, 2, padding::same>, bn, flatten, dense<2>>,
             sequential<input<7, 7, 3>, conv2d<4, 3, 3, 2, padding::same>, flatten, dense<2>>>("conv2d(same, stride 2), batch_norm", 5);
}
