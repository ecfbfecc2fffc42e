// lion.hpp (the "Add an optimizer" example of docs/design.md): three steps
// against values computed by hand from Keras 3's rule (written out here), the
// xsimd body and tail against the rule in double, the hyperparameter checks,
// and a regression trained with it through fit (and with_options).
#include <doctest/doctest.h>

#include <ctnn/ctnn.hpp>
#include <ctnn/core/rng.hpp>
#include <ctnn/optimizers/lion.hpp>
#include <ctnn/optimizers/options.hpp>

#include <array>
#include <cmath>
#include <stdexcept>
#include <vector>

using namespace ctnn;

namespace {
// Three updates of one parameter (w0 = 1); returns w and m after each.
std::vector<double> run(const lion<>& opt, std::array<double, 3> gs) {
  double w = 1.0, m = 0.0;
  std::vector<double> out;
  std::int64_t it = 0;
  for (double g : gs) {
    opt.update<cpu<>>(update_args<double>{&w, &g, &m, 1, it, opt.learning_rate(it)});
    ++it;
    out.insert(out.end(), {w, m});
  }
  return out;
}
void expect(const std::vector<double>& got, std::array<double, 6> want) {
  for (std::size_t i = 0; i < 6; ++i) CHECK(got[i] == doctest::Approx(want[i]).epsilon(1e-12));
}
}  // namespace

static_assert(Optimizer<lion<>> && Optimizer<lion<>, double>);
static_assert(lion<>::max_slots_per_parameter == 1);

TEST_CASE("lion: Keras 3's rule, step by step (sign of the interpolation, then the momentum)") {
  // c = 0.9 m + 0.1 g; w -= 0.1 sign(c); m = 0.99 m + 0.01 g
  // g 0.5:  c = 0.05 -> w 0.9;  m 0.005
  // g -0.3: c = 0.0045 - 0.03 = -0.0255 -> w 1.0;  m 0.00495 - 0.003 = 0.00195
  // g 0.2:  c = 0.001755 + 0.02 > 0 -> w 0.9;  m 0.0019305 + 0.002 = 0.0039305
  expect(run(lion{0.1}, {0.5, -0.3, 0.2}), {0.9, 0.005, 1.0, 0.00195, 0.9, 0.0039305});
  // the momentum outweighs a small opposite gradient; sign(0) = 0 leaves w
  // g 1:     c = 0.1 -> w 0.9; m 0.01
  // g -0.05: c = 0.009 - 0.005 = 0.004 > 0 -> w 0.8; m 0.0099 - 0.0005 = 0.0094
  // g 0:     c = 0.00846 -> w 0.7; m 0.009306
  expect(run(lion{0.1}, {1.0, -0.05, 0.0}), {0.9, 0.01, 0.8, 0.0094, 0.7, 0.009306});
  expect(run(lion{0.1}, {0.0, 0.0, 0.0}), {1.0, 0.0, 1.0, 0.0, 1.0, 0.0});
  const lion<> d;
  CHECK(d.learning_rate(0) == 0.001);
  CHECK(d.beta_1 == 0.9);
  CHECK(d.beta_2 == 0.99);
  CHECK(d.name() == "lion");
  CHECK(d.slots_per_parameter() == 1);
}

TEST_CASE("lion: the vector body and the scalar tail follow the rule in double") {
  const std::size_t n = 3 * (std::size_t(1) << 15) + 77;
  rng gen(5);
  std::vector<float> w(n), g(n), m(n);
  for (std::size_t i = 0; i < n; ++i) {
    w[i] = float(gen.uniform(-1, 1));
    g[i] = float(gen.uniform(-1, 1));
    m[i] = float(gen.uniform(-0.1, 0.1));
  }
  const std::vector<float> w0 = w, m0 = m;
  const lion opt{0.01, 0.8, 0.95};
  CHECK(opt.update<cpu<>>(update_args<float>{w.data(), g.data(), m.data(), n, 0, 0.01}));
  std::size_t checked = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const double c = 0.8 * m0[i] + 0.2 * double(g[i]);
    CHECK(m[i] == doctest::Approx(0.95 * m0[i] + 0.05 * double(g[i])).epsilon(1e-6));
    if (std::abs(c) < 1e-6) continue;  // float rounding may give the other sign
    CHECK(w[i] == doctest::Approx(double(w0[i]) - 0.01 * (c > 0 ? 1 : -1)).epsilon(1e-6));
    ++checked;
  }
  CHECK(checked > n - 100);
}

TEST_CASE("lion: invalid hyperparameters are named") {
  CHECK_THROWS_WITH_AS(lion(0.001, 0.0), "lion: beta_1 must be finite and > 0, got 0", std::invalid_argument);
  CHECK_THROWS_WITH_AS(lion(0.001, 1.5), "lion: beta_1 must be in [0, 1], got 1.5", std::invalid_argument);
  CHECK_THROWS_WITH_AS(lion(0.001, 0.9, -0.1), "lion: beta_2 must be in [0, 1], got -0.1", std::invalid_argument);
  CHECK_NOTHROW(lion(0.001, 1.0, 1.0));
}

TEST_CASE("lion trains a regression through fit, alone and with Keras' options") {
  using net = sequential<input<2>, dense<1>>;
  using data_t = data::in_memory<shape<2>, dense_targets<shape<1>>>;
  std::vector<float> x, y;
  for (int i = 0; i < 32; ++i) {
    const float a = float(i % 8) / 8, b = float(i / 8) / 4;
    x.insert(x.end(), {a, b});
    y.push_back(0.5f * a - 0.75f * b + 0.25f);
  }
  const data_t d(x, y);
  auto m = make_model<net>(1);
  lion opt{0.01};
  const auto h = fit(m, mean_squared_error{}, opt, d.batch(8), epochs{60});
  CHECK(h["loss"].back() < 0.05 * h["loss"].front());
  CHECK(m.layout().bytes(role::optimizer_slot) ==
        net::plan<float>::layout(m.batch_capacity(), 1).bytes(role::optimizer_slot));

  auto m2 = make_model<net>(1);
  with_options opt2{lion{0.01}, optimizer_options{.clipnorm = 1.0, .weight_decay = 0.01}};
  CHECK(opt2.slots_per_parameter() == 3);
  const auto h2 = fit(m2, mean_squared_error{}, opt2, d.batch(8), epochs{60});
  CHECK(h2["loss"].back() < 0.05 * h2["loss"].front());
}
