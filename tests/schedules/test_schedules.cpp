// constant.hpp and exponential_decay.hpp: values at chosen steps (computed by hand).
#include <doctest/doctest.h>

#include <ctnn/schedules/constant_schedule.hpp>
#include <ctnn/schedules/exponential_decay.hpp>

#include <limits>
#include <stdexcept>

using namespace ctnn;

TEST_CASE("constant") {
  const constant_schedule c{0.25};
  CHECK(c(0) == 0.25);
  CHECK(c(1'000'000) == 0.25);
  CHECK_THROWS_AS(constant_schedule(0.0), std::invalid_argument);
  CHECK_THROWS_AS(constant_schedule{std::numeric_limits<double>::quiet_NaN()}, std::invalid_argument);
}

TEST_CASE("exponential_decay, smooth and staircase") {
  const exponential_decay smooth{0.1, 10, 0.5};
  const exponential_decay stair{0.1, 10, 0.5, true};
  CHECK(smooth(0) == doctest::Approx(0.1));
  CHECK(smooth(1) == doctest::Approx(0.09330329915368074));
  CHECK(smooth(10) == doctest::Approx(0.05));
  CHECK(smooth(15) == doctest::Approx(0.03535533905932738));
  CHECK(stair(15) == doctest::Approx(0.05));
  CHECK(stair(9) == doctest::Approx(0.1));
  CHECK(stair(100) == doctest::Approx(9.765625e-05));
  CHECK_THROWS_WITH_AS(exponential_decay(0.1, 0, 0.5), "exponential_decay: decay_steps must be > 0, got 0",
                       std::invalid_argument);
  CHECK_THROWS_AS(exponential_decay(0.1, 10, -0.5), std::invalid_argument);
  CHECK_THROWS_AS(exponential_decay(-0.1, 10, 0.5), std::invalid_argument);
}
