// train/runtime_factors.hpp: set_dropout_rate and set_regularization write
// every matching metadata value of a model and return how many layers they
// set; a value out of range throws and changes nothing; the values set act
// as the compile-time factors would (the same outputs in training, the same
// penalty), a rate put out of range behind their back is refused by the
// next training pass, and a regularization factor put out of range gives a NaN
// penalty (read by the ops where they run), so the step stops before updating.
// train/widths.hpp: a dense<up_to<16>> model at active width 5 computes what the
// static dense<5> model strip_to gives computes (predict, one adam step), its
// inactive weights do not move; widths out of range and a target whose widths
// differ throw naming the layer; the width travels with the weights.
#include <ctnn/train/runtime_factors.hpp>
#include <ctnn/train/widths.hpp>

#include <doctest/doctest.h>

#include <ctnn/layers/dense.hpp>
#include <ctnn/layers/dropout.hpp>
#include <ctnn/losses/sparse_categorical_crossentropy.hpp>
#include <ctnn/io/weights.hpp>
#include <ctnn/optimizers/adam.hpp>
#include <ctnn/optimizers/sgd.hpp>
#include <ctnn/regularizers/l1.hpp>
#include <ctnn/regularizers/regularizers.hpp>
#include <ctnn/train/model.hpp>
#include <ctnn/train/step.hpp>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <limits>
#include <string>
#include <vector>

using namespace ctnn;

namespace {

using dyn_net = sequential<input<6>, dense<8, relu, dynamic_l2>, dynamic_dropout, dense<4, identity, dynamic_l1>,
                           dynamic_dropout>;
using fixed_net = sequential<input<6>, dense<8, relu, l2<0.01f>>, dropout<0.5f>, dense<4, identity, l1<0.02f>>,
                             dropout<0.5f>>;
using plain_net = sequential<input<6>, dense<4>>;

// The f32 metadata values named `name`, layer by layer.
template <class M>
std::vector<float> values(const M& m, std::string_view name) {
  std::vector<float> v;
  m.for_each_variable([&](const variable_ref& r) {
    if (r.kind != role::metadata || r.name != name) return;
    float f;
    std::memcpy(&f, r.data, sizeof f);
    v.push_back(f);
  });
  return v;
}

std::vector<float> inputs(std::size_t batch) {
  std::vector<float> x(batch * 6);
  rng g(17);
  for (auto& v : x) v = float(g.uniform(-1, 1));
  return x;
}

}  // namespace

TEST_CASE("set_dropout_rate and set_regularization set every matching layer and count them") {
  auto m = make_model<dyn_net>(3);
  CHECK(values(m, "rate") == std::vector<float>{0.0f, 0.0f});  // init: no dropout, no penalty
  CHECK(values(m, "l2") == std::vector<float>{0.0f});
  CHECK(values(m, "l1") == std::vector<float>{0.0f});
  CHECK(m.penalty() == 0.0);

  CHECK(set_dropout_rate(m, 0.5) == 2);
  CHECK(values(m, "rate") == std::vector<float>{0.5f, 0.5f});
  CHECK(set_regularization(m, "l2", 0.01) == 1);
  CHECK(set_regularization(m, "l1", 0.02) == 1);
  CHECK(values(m, "l2") == std::vector<float>{0.01f});
  CHECK(values(m, "l1") == std::vector<float>{0.02f});
  CHECK(values(m, "rate") == std::vector<float>{0.5f, 0.5f});  // each setter touches its own buffers only

  // set_metadata_value is the common writer: any f32 metadata buffer by name.
  CHECK(set_metadata_value(m, "rate", 0.25f) == 2);
  CHECK(values(m, "rate") == std::vector<float>{0.25f, 0.25f});
  CHECK(set_metadata_value(m, "no such buffer", 1.0f) == 0);

  // A network without run-time factors: nothing to set, no error.
  auto plain = make_model<plain_net>(3);
  CHECK(set_dropout_rate(plain, 0.3) == 0);
  CHECK(set_regularization(plain, "l2", 0.1) == 0);
}

TEST_CASE("runtime factors out of range throw, naming the setter and the value, and change nothing") {
  auto m = make_model<dyn_net>(3);
  set_dropout_rate(m, 0.5);
  set_regularization(m, "l2", 0.01);
  CHECK_THROWS_WITH(set_dropout_rate(m, 1.0), "set_dropout_rate: the dropout rate must be in [0, 1), got 1");
  CHECK_THROWS_WITH(set_dropout_rate(m, -0.25), "set_dropout_rate: the dropout rate must be in [0, 1), got -0.25");
  CHECK_THROWS_AS(set_dropout_rate(m, std::numeric_limits<double>::quiet_NaN()), std::invalid_argument);
  CHECK_THROWS_WITH(set_regularization(m, "l3", 0.1), "set_regularization: the kind must be \"l2\" or \"l1\", got \"l3\"");
  CHECK_THROWS_WITH(set_regularization(m, "l2", -1.0),
                    "set_regularization: the l2 factor must be finite and >= 0, got -1");
  CHECK_THROWS_AS(set_regularization(m, "l1", std::numeric_limits<double>::infinity()), std::invalid_argument);
  CHECK(values(m, "rate") == std::vector<float>{0.5f, 0.5f});
  CHECK(values(m, "l2") == std::vector<float>{0.01f});
  CHECK(values(m, "l1") == std::vector<float>{0.0f});
}

TEST_CASE("runtime factors act as the compile-time ones: the same training outputs and penalty, bit for bit") {
  auto fixed = make_model<fixed_net>(5);
  auto dyn = make_model<dyn_net>(5);
  const std::vector<float> x = inputs(3);

  // Rate 0 (after init): training passes keep every value.
  std::vector<float> inference(dyn.predict(x.data(), 3));
  const float* y = dyn.forward(x.data(), 3, true);
  CHECK(std::vector<float>(y, y + 12) == inference);

  auto dyn_again = make_model<dyn_net>(5);  // a fresh generator, as `fixed` has
  set_dropout_rate(dyn_again, 0.5);
  set_regularization(dyn_again, "l2", 0.01);
  set_regularization(dyn_again, "l1", 0.02);
  for (int pass = 0; pass < 3; ++pass) {  // the masks differ per pass and agree between the two models
    const float* a = fixed.forward(x.data(), 3, true);
    const float* b = dyn_again.forward(x.data(), 3, true);
    CHECK(std::vector<float>(a, a + 12) == std::vector<float>(b, b + 12));
  }
  CHECK(dyn_again.penalty() == fixed.penalty());
  CHECK(dyn_again.penalty() > 0.0);

  // A rate made invalid behind the setter's back is refused by the next training pass, not by inference.
  CHECK(set_metadata_value(dyn_again, "rate", 1.5f) == 2);
  CHECK_THROWS_WITH(dyn_again.forward(x.data(), 3, true), "dynamic_dropout: the dropout rate must be in [0, 1), got 1.5");
  CHECK_NOTHROW(dyn_again.forward(x.data(), 3, false));
}

TEST_CASE("a regularization factor made bad behind the setter's back gives a NaN penalty: the step stops, no update") {
  auto m = make_model<dyn_net>(5);
  set_regularization(m, "l2", 0.01);
  const std::vector<float> x = inputs(3);
  const std::vector<std::int32_t> y{0, 3, 1};
  sgd opt{0.1};
  train_step step(m, sparse_categorical_crossentropy{.from_logits = true}, opt);
  CHECK(std::isfinite(step.run(x.data(), y.data(), 3, 0, 0).penalty));
  for (const float bad : {-1.0f, std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity()}) {
    CAPTURE(bad);
    CHECK(set_metadata_value(m, "l2", bad) == 1);
    const auto before = std::vector<float>(m.parameters().begin(), m.parameters().end());
    const std::int64_t updates = m.optimizer_iterations();
    const step_result r = step.run(x.data(), y.data(), 3, 0, 1);
    CHECK(std::isnan(r.penalty));
    CHECK(std::isfinite(r.loss_sum));
    CHECK_FALSE(r.updated);
    CHECK(std::vector<float>(m.parameters().begin(), m.parameters().end()) == before);
    CHECK(m.optimizer_iterations() == updates);
    CHECK(std::isnan(m.penalty()));
  }
}

namespace {
using wide_net = sequential<input<6>, dense<up_to<16>, relu>, dynamic_dropout, dense<4>>;
using narrow_net = sequential<input<6>, dense<5, relu>, dynamic_dropout, dense<4>>;

bool close(std::span<const float> a, std::span<const float> b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i)
    if (std::abs(a[i] - b[i]) > 1e-5f * std::max(1.0f, std::abs(b[i]))) return false;
  return true;
}
}  // namespace

TEST_CASE("dense<up_to<16>> at active width 5 computes dense<5>: predict and one adam step, weights by strip_to") {
  static_assert(decltype(make_model<wide_net>(1))::network::parameter_count == 6 * 16 + 16 + 16 * 4 + 4);
  auto wide = make_model<wide_net>(3);
  for (auto& p : wide.layer_parameters<0>()) p += 0.05f;  // non-zero biases
  const std::vector<float> x = inputs(3);
  const std::vector<std::int32_t> y{0, 3, 1};
  CHECK(width<0>(wide) == 16);
  sgd first{0.01};  // a step at full width first: every unit's outputs and gradients non-zero (no slots)
  train_step(wide, sparse_categorical_crossentropy{.from_logits = true}, first).run(x.data(), y.data(), 3, 0, 0);
  set_width<0>(wide, 5);
  CHECK(width<0>(wide) == 5);
  auto narrow = strip_to<narrow_net>(wide);
  const auto yw = wide.predict(x.data(), 3), yn = narrow.predict(x.data(), 3);
  CHECK(close(yw, yn));

  const std::vector<float> before(wide.parameters().begin(), wide.parameters().end());
  adam ow{0.05}, on{0.05};
  train_step sw(wide, sparse_categorical_crossentropy{.from_logits = true}, ow);
  train_step sn(narrow, sparse_categorical_crossentropy{.from_logits = true}, on);
  const step_result rw = sw.run(x.data(), y.data(), 3, 0, 0);
  const step_result rn = sn.run(x.data(), y.data(), 3, 0, 0);
  CHECK(rw.loss_sum == doctest::Approx(rn.loss_sum).epsilon(1e-5));
  CHECK(close(strip_to<narrow_net>(wide).parameters(), narrow.parameters()));
  // The inactive units: layer 1's kernel columns and biases 5..15, layer 3's kernel rows 5..15, unmoved.
  const std::span<const float> after = wide.parameters();
  std::size_t moved = 0, kept = 0;
  for (std::size_t k = 0; k < 6; ++k)
    for (std::size_t j = 0; j < 16; ++j) (j < 5 ? moved : kept) += (after[k * 16 + j] != before[k * 16 + j]);
  for (std::size_t j = 5; j < 16; ++j) kept += after[96 + j] != before[96 + j];
  for (std::size_t r = 5; r < 16; ++r)
    for (std::size_t o = 0; o < 4; ++o) kept += after[112 + r * 4 + o] != before[112 + r * 4 + o];
  CHECK(moved == 30);
  CHECK(kept == 0);
}

TEST_CASE("widths out of range and a target of other widths throw naming the layer, the width is saved with the weights") {
  auto m = make_model<wide_net>(3);
  CHECK_THROWS_WITH(set_width<0>(m, 17), "set_width: layer 1 (dense<up_to<16>, relu>): the active width 17 is outside [1, 16]");
  CHECK_THROWS_WITH(set_width<0>(m, 0), "set_width: layer 1 (dense<up_to<16>, relu>): the active width 0 is outside [1, 16]");
  CHECK_THROWS_WITH(set_units(m, 20), "set_units: layer 1 (dense<up_to<16>, relu>): the active width 20 is outside [1, 16]");
  CHECK(width<0>(m) == 16);
  CHECK(set_units(m, 8) == 1);
  CHECK(width<0>(m) == 8);
  auto plain = make_model<plain_net>(1);
  CHECK(set_units(plain, 8) == 0);
  CHECK_THROWS_WITH(strip_to<narrow_net>(m),
                    "strip_to: layer 1 (dense<up_to<16>, relu>) computes with 8 units but the target's dense<5, relu> has 5");

  const auto file = std::filesystem::temp_directory_path() / "ctnn_test_widths.ctnn";
  io::save_weights(m, file);
  auto back = make_model<wide_net>(9);
  io::load_weights(back, file);
  CHECK(width<0>(back) == 8);
  // A width the layer cannot run, behind the setter's back: refused by the next pass and by load_weights.
  const std::uint32_t bad = 40;
  detail::with_variable(m, 0, "units", [&](const variable_ref& u) { std::memcpy(u.data, &bad, sizeof bad); });
  const std::vector<float> x = inputs(1);
  CHECK_THROWS_WITH(m.forward(x.data(), 1, false), "dense<up_to<16>, relu>: the active width 40 is outside [1, 16]");
  io::save_weights(m, file);
  CHECK_THROWS_WITH_AS(io::load_weights(back, file), doctest::Contains("the active width 40 is outside [1, 16]"),
                       io_error);
  std::filesystem::remove(file);
}
