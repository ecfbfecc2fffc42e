// piecewise_constant.hpp, polynomial_decay.hpp, inverse_time_decay.hpp,
// cosine_decay.hpp, warmup.hpp (and the checks of schedules/detail.hpp):
// values at chosen steps. The expected numbers were computed by hand with a
// Python one-off implementing Keras 3's published formulas (double precision)
// and are written out here, not recomputed.
#include <doctest/doctest.h>

#include <ctnn/core/concepts.hpp>
#include <ctnn/optimizers/adam.hpp>
#include <ctnn/schedules/constant_schedule.hpp>
#include <ctnn/schedules/cosine_decay.hpp>
#include <ctnn/schedules/exponential_decay.hpp>
#include <ctnn/schedules/inverse_time_decay.hpp>
#include <ctnn/schedules/piecewise_constant.hpp>
#include <ctnn/schedules/polynomial_decay.hpp>
#include <ctnn/schedules/warmup.hpp>

#include <stdexcept>
#include <type_traits>

using namespace ctnn;

static_assert(Schedule<piecewise_constant>);
static_assert(Schedule<polynomial_decay>);
static_assert(Schedule<inverse_time_decay>);
static_assert(Schedule<cosine_decay>);
static_assert(Schedule<warmup<cosine_decay>>);
static_assert(Schedule<warmup<warmup<exponential_decay>>>);
// A warmup composes at compile time: the optimizer's type names the whole schedule.
static_assert(std::is_same_v<decltype(adam{warmup{0.0, 10, cosine_decay{0.1, 100}}}), adam<warmup<cosine_decay>>>);

TEST_CASE("piecewise_constant: values[i] up to and including boundaries[i]") {
  const piecewise_constant s{{10, 20}, {1.0, 0.5, 0.1}};
  CHECK(s(0) == 1.0);
  CHECK(s(10) == 1.0);
  CHECK(s(11) == 0.5);
  CHECK(s(20) == 0.5);
  CHECK(s(21) == 0.1);
  CHECK(s(1'000'000) == 0.1);
  CHECK(s.name() == "piecewise_constant(1 |10| 0.5 |20| 0.1)");
  CHECK_THROWS_WITH_AS(piecewise_constant({10, 20}, {1.0, 0.5}),
                       "piecewise_constant: values must have one more entry than boundaries, got 2 values for 2 boundaries",
                       std::invalid_argument);
  CHECK_THROWS_WITH_AS(piecewise_constant({10, 10}, {1.0, 0.5, 0.1}),
                       "piecewise_constant: boundaries must be >= 0 and strictly increasing, got 10 at index 1",
                       std::invalid_argument);
  CHECK_THROWS_AS(piecewise_constant({10}, {1.0, -0.5}), std::invalid_argument);
}

TEST_CASE("polynomial_decay: linear, quadratic, cycle") {
  const polynomial_decay lin{0.1, 100, 0.001};
  CHECK(lin(0) == doctest::Approx(0.1).epsilon(1e-12));
  CHECK(lin(25) == doctest::Approx(0.07525000000000001).epsilon(1e-12));
  CHECK(lin(100) == doctest::Approx(0.001).epsilon(1e-12));
  CHECK(lin(150) == doctest::Approx(0.001).epsilon(1e-12));
  const polynomial_decay quad{0.1, 100, 0.001, 2.0};
  CHECK(quad(30) == doctest::Approx(0.04951).epsilon(1e-12));
  const polynomial_decay cyc{0.1, 100, 0.001, 0.5, true};
  CHECK(cyc(0) == doctest::Approx(0.1).epsilon(1e-12));
  CHECK(cyc(50) == doctest::Approx(0.07100357133746821).epsilon(1e-12));
  CHECK(cyc(100) == doctest::Approx(0.001).epsilon(1e-12));
  CHECK(cyc(150) == doctest::Approx(0.0505).epsilon(1e-12));
  CHECK(cyc(250) == doctest::Approx(0.04141658075592244).epsilon(1e-12));
  CHECK_THROWS_WITH_AS(polynomial_decay(0.1, 0), "polynomial_decay: decay_steps must be > 0, got 0",
                       std::invalid_argument);
  CHECK_THROWS_WITH_AS(polynomial_decay(0.1, 10, -1.0), "polynomial_decay: end_learning_rate must be finite and >= 0, got -1",
                       std::invalid_argument);
  CHECK_THROWS_AS(polynomial_decay(0.1, 10, 0.0, 0.0), std::invalid_argument);
  CHECK_THROWS_AS(polynomial_decay(0.0, 10), std::invalid_argument);
}

TEST_CASE("inverse_time_decay: smooth and staircase") {
  const inverse_time_decay smooth{0.1, 10, 0.5};
  CHECK(smooth(0) == doctest::Approx(0.1).epsilon(1e-12));
  CHECK(smooth(5) == doctest::Approx(0.08).epsilon(1e-12));
  CHECK(smooth(10) == doctest::Approx(0.06666666666666667).epsilon(1e-12));
  CHECK(smooth(25) == doctest::Approx(0.044444444444444446).epsilon(1e-12));
  const inverse_time_decay stair{0.1, 10, 0.5, true};
  CHECK(stair(9) == doctest::Approx(0.1).epsilon(1e-12));
  CHECK(stair(10) == doctest::Approx(0.06666666666666667).epsilon(1e-12));
  CHECK(stair(25) == doctest::Approx(0.05).epsilon(1e-12));
  CHECK_THROWS_WITH_AS(inverse_time_decay(0.1, 10, -0.5), "inverse_time_decay: decay_rate must be finite and >= 0, got -0.5",
                       std::invalid_argument);
  CHECK_THROWS_AS(inverse_time_decay(0.1, -3, 0.5), std::invalid_argument);
}

TEST_CASE("cosine_decay: plain, alpha, Keras 3 warmup") {
  const cosine_decay plain{0.1, 100};
  CHECK(plain(0) == doctest::Approx(0.1).epsilon(1e-12));
  CHECK(plain(25) == doctest::Approx(0.08535533905932738).epsilon(1e-12));
  CHECK(plain(50) == doctest::Approx(0.05).epsilon(1e-12));
  CHECK(plain(100) == doctest::Approx(0.0));
  CHECK(plain(200) == doctest::Approx(0.0));
  const cosine_decay with_alpha{0.1, 100, 0.1};
  CHECK(with_alpha(30) == doctest::Approx(0.0814503363531613).epsilon(1e-12));
  CHECK(with_alpha(100) == doctest::Approx(0.010000000000000002).epsilon(1e-12));
  // Keras 3: CosineDecay(0.0, 100, alpha=0.1, warmup_target=0.2, warmup_steps=10)
  const cosine_decay warm{0.0, 100, 0.1, 0.2, 10};
  CHECK(warm(0) == 0.0);
  CHECK(warm(4) == doctest::Approx(0.08000000000000002).epsilon(1e-12));
  CHECK(warm(10) == doctest::Approx(0.2).epsilon(1e-12));
  CHECK(warm(35) == doctest::Approx(0.1736396103067893).epsilon(1e-12));
  CHECK(warm(110) == doctest::Approx(0.020000000000000004).epsilon(1e-12));
  CHECK(warm(500) == doctest::Approx(0.020000000000000004).epsilon(1e-12));
  CHECK_THROWS_WITH_AS(cosine_decay(0.1, 100, 1.5), "cosine_decay: alpha must be in [0, 1], got 1.5", std::invalid_argument);
  CHECK_THROWS_WITH_AS(cosine_decay(0.0, 100), "cosine_decay: initial_learning_rate must be finite and > 0, got 0",
                       std::invalid_argument);
  CHECK_THROWS_AS(cosine_decay(0.1, 100, 0.0, 0.2, -1), std::invalid_argument);
  CHECK_THROWS_AS(cosine_decay(0.1, 100, 0.0, -0.2, 10), std::invalid_argument);
}

TEST_CASE("warmup<S> wraps any schedule, warmup<cosine_decay> equals Keras' cosine warmup") {
  const warmup w{0.0, 10, cosine_decay{0.2, 100, 0.1}};
  const cosine_decay keras{0.0, 100, 0.1, 0.2, 10};
  for (std::int64_t s : {0, 1, 4, 9, 10, 11, 35, 60, 109, 110, 111, 500}) CHECK(w(s) == doctest::Approx(keras(s)).epsilon(1e-12));
  const warmup e{0.01, 4, exponential_decay{0.1, 10, 0.5}};
  CHECK(e(0) == doctest::Approx(0.01));
  CHECK(e(2) == doctest::Approx(0.055));
  CHECK(e(4) == doctest::Approx(0.1));
  CHECK(e(14) == doctest::Approx(0.05));
  const warmup none{0.5, 0, inverse_time_decay{0.1, 10, 0.5}};
  CHECK(none(0) == doctest::Approx(0.1));
  CHECK(e.name() == "warmup(0.01 over 4 steps, then exponential_decay(0.1, 10, 0.5))");
  CHECK_THROWS_WITH_AS(warmup(0.0, -1, constant_schedule{0.1}), "warmup: warmup_steps must be >= 0, got -1", std::invalid_argument);
}
