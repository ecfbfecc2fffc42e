// layers/batch_norm.hpp: Keras init, batch statistics in training, moving
// statistics updated with the momentum and used at inference.
#include <doctest/doctest.h>

#include <ctnn/backends/cpu/ops.hpp>  // the bound layers run on cpu<> (layer headers declare ops<B> only)
#include <ctnn/layers/batch_norm.hpp>

#include <cmath>
#include <vector>

using namespace ctnn;

using L = batch_norm::bind<shape<2, 3>, double, cpu<>>;  // 2 positions, 3 channels
static_assert(L::parameter_count == 6 && L::state_count == 6);
static_assert(std::is_same_v<L::out_shape, shape<2, 3>>);
static_assert(batch_norm::momentum == 0.99 && batch_norm::epsilon == 1e-3);  // exact in double (Keras defaults)

namespace {
struct fixture {
  std::vector<double> p = std::vector<double>(6), g = std::vector<double>(6), st = std::vector<double>(6),
                      cache = std::vector<double>(2 * L::cache_per_sample);
  layer_slot<double> slot() { return {p.data(), g.data(), st.data(), cache.data()}; }
};
}  // namespace

TEST_CASE("batch_norm init: gamma 1, beta 0, moving mean 0, moving variance 1") {
  fixture f;
  rng r(1);
  L::init(f.slot(), r);
  CHECK(f.p == std::vector<double>{1, 1, 1, 0, 0, 0});
  CHECK(f.st == std::vector<double>{0, 0, 0, 1, 1, 1});
}

TEST_CASE("batch_norm training: normalises with the batch statistics and moves the moving ones by 1 - momentum") {
  fixture f;
  rng r(1);
  L::init(f.slot(), r);
  f.p[0] = 2.0;  // gamma of channel 0
  f.p[4] = 0.5;  // beta of channel 1
  // batch of 2 samples x 2 positions: channel 0 takes 1, 2, 3, 4; channel 1 takes 10 (constant); channel 2 0, 0, 0, 8
  const std::vector<double> x{1, 10, 0, 2, 10, 0, /**/ 3, 10, 0, 4, 10, 8};
  std::vector<double> y(12);
  L::forward(f.slot(), x.data(), y.data(), run_info{2, true, nullptr});
  const double inv0 = 1 / std::sqrt(1.25 + 1e-3);  // channel 0: mean 2.5, biased variance 1.25
  CHECK(y[0] == doctest::Approx(2.0 * (1 - 2.5) * inv0));
  CHECK(y[9] == doctest::Approx(2.0 * (4 - 2.5) * inv0));
  CHECK(y[1] == doctest::Approx(0.5));  // constant channel: x - mean = 0, only beta
  CHECK(y[11] == doctest::Approx((8 - 2) / std::sqrt(12 + 1e-3)));  // channel 2: mean 2, variance 12
  CHECK(f.st[0] == doctest::Approx(0.01 * 2.5));
  CHECK(f.st[1] == doctest::Approx(0.01 * 10));
  CHECK(f.st[3] == doctest::Approx(0.99 + 0.01 * 1.25));
  CHECK(f.st[4] == doctest::Approx(0.99));
  CHECK(f.st[5] == doctest::Approx(0.99 + 0.01 * 12));

  // n steps on the same batch: moving = batch * (1 - 0.99^n) (+ 0.99^n for the variance's initial 1)
  for (int i = 1; i < 50; ++i) L::forward(f.slot(), x.data(), y.data(), run_info{2, true, nullptr});
  CHECK(f.st[0] == doctest::Approx(2.5 * (1 - std::pow(0.99, 50))));
  CHECK(f.st[3] == doctest::Approx(1.25 + (1 - 1.25) * std::pow(0.99, 50)));
}

TEST_CASE("batch_norm inference: uses the moving statistics and leaves them alone") {
  fixture f;
  rng r(1);
  L::init(f.slot(), r);
  f.st = {1, 2, 3, 4, 9, 16};
  f.p = {2, 1, 1, 0, 0, 5};
  const std::vector<double> x{3, 2, 3, 1, 5, 7};
  std::vector<double> y(6);
  L::forward(f.slot(), x.data(), y.data(), run_info{1, false, nullptr});
  CHECK(y[0] == doctest::Approx(2 * (3 - 1) / std::sqrt(4 + 1e-3)));
  CHECK(y[1] == doctest::Approx(0.0));
  CHECK(y[2] == doctest::Approx(5.0));
  CHECK(y[4] == doctest::Approx((5 - 2) / std::sqrt(9 + 1e-3)));
  CHECK(f.st == std::vector<double>{1, 2, 3, 4, 9, 16});
}

TEST_CASE("batch_norm spec text: the defaults print as batch_norm") {
  CHECK(batch_norm::name() == "batch_norm");
  CHECK(batch_normalization<0.9f, 1e-5f>::name() == "batch_normalization<0.9, 1e-05>");
}
