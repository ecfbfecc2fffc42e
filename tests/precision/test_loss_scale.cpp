// loss_scale (train/loss_scale.hpp): float16 gradients that underflow without
// it, overflow skipping a step without touching weights or slots, growth,
// clipping and accumulation on unscaled gradients, NaN in the data.
#include <doctest/doctest.h>

#include <ctnn/mixed_precision.hpp>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

using namespace ctnn;

namespace {

using tiny = sequential<input<4>, dense<8, ctnn::tanh>, dense<1>>;
using toy = sequential<input<4>, dense<8, relu>, dense<3>>;

struct toy_set {
  std::vector<float> x;
  std::vector<std::int32_t> y;
};
toy_set toy_data(std::size_t n = 48) {
  toy_set d{std::vector<float>(n * 4), std::vector<std::int32_t>(n)};
  rng g(5);
  for (auto& v : d.x) v = float(g.uniform(-1, 1));
  for (std::size_t i = 0; i < n; ++i) d.y[i] = std::int32_t(d.x[i * 4] > 0) + std::int32_t(d.x[i * 4 + 1] > 0);
  return d;
}
data::in_memory<shape<4>, sparse_labels> toy_dataset(std::size_t n = 48) {
  auto d = toy_data(n);
  return {d.x, d.y};
}

// Records the gradients phase 4 hands on (after the hooks before it).
struct capture {
  std::vector<float> g;
  template <class M>
  void transform_gradients(step_state<M>& s) {
    g.assign(s.gradients.begin(), s.gradients.end());
  }
};
// Writes an infinity into one gradient when armed (an overflow, injected).
struct inject_overflow {
  bool armed = false;
  template <class M>
  void transform_gradients(step_state<M>& s) {
    if (armed) s.gradients[3] = std::numeric_limits<float>::infinity();
  }
};

template <class M>
std::vector<unsigned char> bytes(std::span<const float> s) {
  std::vector<unsigned char> b(s.size() * 4);
  std::memcpy(b.data(), s.data(), b.size());
  return b;
}

// The tiny regression: its last kernel is +-2^-23 (a float16 subnormal, so
// rounding the kernel to float16 changes nothing), so dL/dx of the last layer
// (about 7e-9) is below half of float16's smallest subnormal (2^-24 = 6e-8).
template <class P>
auto tiny_model() {
  auto m = make_model<tiny, P>(1);
  float* w2 = m.template layer_parameters<1>().data();
  for (std::size_t i = 0; i < 8; ++i) w2[i] = std::ldexp(i % 2 ? -1.0f : 1.0f, -23);
  return m;
}
struct tiny_set {
  std::vector<float> x, t;
};
tiny_set tiny_data() {
  tiny_set d{std::vector<float>(32 * 4), std::vector<float>(32)};
  rng g(9);
  for (auto& v : d.x) v = float(g.uniform(-1, 1));
  for (auto& v : d.t) v = float(g.uniform(-1, 1));
  return d;
}
// Layer 0's gradients (kernel and bias: 40 values) after one step with the given hooks.
template <class M, class... H>
std::vector<float> first_layer_gradients(M& m, const tiny_set& d, H&... h) {
  capture cap;
  adam opt{1e-3f};
  train_step<M, mean_squared_error, adam<>, H..., capture> step(m, mean_squared_error{}, opt, std::tie(h..., cap));
  step.run(d.x.data(), d.t.data(), 32, 0, 0);
  return {cap.g.begin(), cap.g.begin() + 40};
}
std::size_t zeros(const std::vector<float>& v) {
  std::size_t n = 0;
  for (float x : v) n += x == 0.0f;
  return n;
}
double rel_l2(const std::vector<float>& a, const std::vector<float>& b) {
  double num = 0, den = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    num += (double(a[i]) - b[i]) * (double(a[i]) - b[i]);
    den += double(b[i]) * b[i];
  }
  return std::sqrt(num / den);
}

}  // namespace

TEST_CASE("loss_scale: float16 gradients that underflow to zero without it match float32 with it") {
  const auto d = tiny_data();
  auto ref = tiny_model<precision::float32>();
  const auto g32 = first_layer_gradients(ref, d);
  CHECK(zeros(g32) == 0);

  auto plain = tiny_model<precision::mixed_float16>();
  const auto w0 = std::vector<float>(plain.layer_parameters<0>().begin(), plain.layer_parameters<0>().end());
  const auto g16 = first_layer_gradients(plain, d);
  CHECK(zeros(g16) == 40);  // every gradient of the first layer underflowed
  // so Adam left the first layer exactly where it was
  CHECK(std::vector<float>(plain.layer_parameters<0>().begin(), plain.layer_parameters<0>().end()) == w0);

  auto scaled = tiny_model<precision::mixed_float16>();
  loss_scale ls;  // dynamic, 2^15
  const auto gs = first_layer_gradients(scaled, d, ls);
  CHECK(zeros(gs) == 0);
  const double e = rel_l2(gs, g32);
  MESSAGE("first-layer gradients under mixed_float16 with loss scaling: relative L2 error " << e << " vs float32");
  CHECK(e < 2e-3);
  CHECK(ls.skipped_steps() == 0);
  // and the first layer trained as float32's did (Adam normalises the tiny gradients)
  std::vector<float> dw_s(40), dw_r(40);
  auto ws = scaled.layer_parameters<0>();
  auto wr = ref.layer_parameters<0>();
  for (std::size_t i = 0; i < 40; ++i) {
    dw_s[i] = ws[i] - w0[i];
    dw_r[i] = wr[i] - w0[i];
  }
  CHECK(zeros(dw_r) == 0);
  CHECK(rel_l2(dw_s, dw_r) < 2e-2);
}

TEST_CASE("loss_scale: an injected overflow halves the scale, skips the step, leaves weights and slots bit-identical") {
  const auto d = toy_data(16);
  auto m = make_model<toy, precision::mixed_float16>(2);
  optimizer_options o;
  o.use_ema = true;
  o.clipnorm = 1.0;
  with_options opt(adam{1e-2f}, o);
  inject_overflow inj;
  loss_scale ls;
  train_step<decltype(m), sparse_categorical_crossentropy, decltype(opt), inject_overflow, loss_scale> step(
      m, sparse_categorical_crossentropy{.from_logits = true}, opt, std::tie(inj, ls));
  for (std::size_t i = 0; i < 3; ++i) CHECK(step.run(d.x.data(), d.y.data(), 16, 0, i).updated);
  const auto w = bytes<float>(m.parameters()), sl = bytes<float>(m.optimizer_slots());
  const auto state = m.optimizer_state();
  CHECK(ls.scale() == 32768.0);
  inj.armed = true;
  const step_result r = step.run(d.x.data(), d.y.data(), 16, 0, 3);
  CHECK(r.skipped);
  CHECK_FALSE(r.updated);
  CHECK(ls.scale() == 16384.0);
  CHECK(ls.skipped_steps() == 1);
  CHECK(bytes<float>(m.parameters()) == w);
  CHECK(bytes<float>(m.optimizer_slots()) == sl);  // Adam's moments, the EMA
  CHECK(m.optimizer_state().iterations == state.iterations);
  CHECK(m.optimizer_state().steps == state.steps);
  inj.armed = false;
  CHECK(step.run(d.x.data(), d.y.data(), 16, 0, 4).updated);
  CHECK(bytes<float>(m.parameters()) != w);
  CHECK(ls.scale() == 16384.0);
  CHECK(ls.good_steps() == 1);
}

TEST_CASE("loss_scale: a real overflow (initial scale 2^24) is skipped until the scale fits, then trains") {
  auto m = make_model<toy, precision::mixed_float16>(3);
  loss_scale_options o;
  o.initial_scale = std::ldexp(1.0, 24);
  loss_scale ls(o);
  adam opt{1e-2f};
  const auto h = fit(m, sparse_categorical_crossentropy{.from_logits = true}, opt, toy_dataset(96).batch(8).shuffle(1),
                     epochs{8}, ls, sparse_categorical_accuracy{});
  const auto& skipped = h.values.at("skipped_steps");
  const auto& scale = h.values.at("loss_scale");
  MESSAGE("skipped per epoch: " << skipped[0] << " " << skipped[1] << "; scale after epoch 1: " << scale[0]);
  CHECK(skipped[0] > 0);
  CHECK(skipped[0] < 12);  // not every step of the epoch
  CHECK(scale[0] == std::ldexp(1.0, 24 - int(skipped[0])));  // halved once per skipped step
  double total = 0;
  for (double k : skipped) total += k;
  CHECK(scale.back() == std::ldexp(1.0, 24 - int(total)));
  CHECK(total - skipped[0] <= 2);  // later epochs skip rarely, if at all
  CHECK(h.values.at("sparse_categorical_accuracy").back() > 0.8);
  CHECK(m.optimizer_iterations() == 8 * 12 - std::int64_t(total));  // skipped steps are not counted
}

TEST_CASE("loss_scale: the scale doubles after dynamic_growth_steps finite steps, a fixed one never changes") {
  loss_scale_options o;
  o.dynamic_growth_steps = 3;
  loss_scale ls(o);
  auto m = make_model<toy, precision::mixed_float16>(4);
  sgd opt{0.01f};
  const auto h = fit(m, sparse_categorical_crossentropy{.from_logits = true}, opt, toy_dataset(16).batch(8), epochs{3}, ls);
  CHECK(h.values.at("loss_scale") == std::vector<double>{32768.0, 65536.0, 131072.0});  // steps 3 and 6 grow it
  CHECK(h.values.at("skipped_steps") == std::vector<double>{0, 0, 0});

  auto fixed = loss_scale::fixed(1024);
  auto m2 = make_model<toy, precision::mixed_float16>(4);
  const auto h2 = fit(m2, sparse_categorical_crossentropy{.from_logits = true}, opt, toy_dataset(16).batch(8), epochs{3}, fixed);
  CHECK(h2.values.at("loss_scale") == std::vector<double>{1024.0, 1024.0, 1024.0});

  CHECK_THROWS_WITH_AS(loss_scale(loss_scale_options{.initial_scale = 0}), doctest::Contains("initial_scale must be finite and > 0"),
                       std::invalid_argument);
  CHECK_THROWS_WITH_AS(loss_scale(loss_scale_options{.dynamic_growth_steps = 0}),
                       doctest::Contains("dynamic_growth_steps must be >= 1"), std::invalid_argument);
}

TEST_CASE("loss_scale: clipping and gradient accumulation see unscaled gradients (float32: the same bits)") {
  const auto d = toy_data(16);
  for (int variant = 0; variant < 2; ++variant) {
    optimizer_options o;
    if (variant == 0) o.clipvalue = 1e-3;  // clips every gradient: a scaled one would clip differently
    else o.gradient_accumulation_steps = 2;
    auto a = make_model<toy>(6);
    auto b = make_model<toy>(6);
    with_options oa(sgd{0.1f}, o), ob(sgd{0.1f}, o);
    loss_scale ls = loss_scale::fixed(1024);  // a power of two: exact in float32
    train_step<decltype(a), sparse_categorical_crossentropy, decltype(oa)> sa(a, sparse_categorical_crossentropy{.from_logits = true}, oa);
    train_step<decltype(b), sparse_categorical_crossentropy, decltype(ob), loss_scale> sb(
        b, sparse_categorical_crossentropy{.from_logits = true}, ob, std::tie(ls));
    for (std::size_t i = 0; i < 4; ++i) {
      sa.run(d.x.data(), d.y.data(), 16, 0, i);
      sb.run(d.x.data(), d.y.data(), 16, 0, i);
    }
    CAPTURE(variant);
    CHECK(bytes<float>(a.parameters()) == bytes<float>(b.parameters()));
    CHECK(a.optimizer_iterations() == b.optimizer_iterations());
  }
}

TEST_CASE("loss_scale: a NaN in the data still stops fit with its error instead of being skipped") {
  auto d = toy_data(48);
  d.x[4 * 20 + 1] = std::numeric_limits<float>::quiet_NaN();  // sample 20: batch 3 of 8
  const data::in_memory<shape<4>, sparse_labels> ds(d.x, d.y);
  SUBCASE("a NaN that reaches the loss: the loss became NaN") {
    using lin = sequential<input<4>, dense<8, ctnn::tanh>, dense<3>>;
    auto m = make_model<lin, precision::mixed_float16>(1);
    loss_scale ls;
    adam opt;
    CHECK_THROWS_WITH_AS(fit(m, sparse_categorical_crossentropy{.from_logits = true}, opt, ds.batch(8), epochs{2}, ls),
                         doctest::Contains("fit: the loss became NaN at epoch 1, step 3"), numeric_error);
    CHECK(ls.skipped_steps() == 0);
  }
  SUBCASE("a NaN a relu hides from the loss: the update's parameters are NaN") {
    auto m = make_model<toy, precision::mixed_float16>(1);
    loss_scale ls;
    adam opt;
    CHECK_THROWS_WITH_AS(fit(m, sparse_categorical_crossentropy{.from_logits = true}, opt, ds.batch(8), epochs{2}, ls),
                         doctest::Contains("fit: after the update of epoch 1, step 3"), numeric_error);
    CHECK(ls.skipped_steps() == 0);
  }
}
