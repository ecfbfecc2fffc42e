// dense.hpp: forward values by hand, Keras init, regularizer wiring.
#include <doctest/doctest.h>

#include <ctnn/layers/dense.hpp>

#include <cmath>
#include <vector>

using namespace ctnn;

TEST_CASE("dense forward: y = act(x W + b) with W row-major [in, out]") {
  using L = dense<2, relu>::bind<shape<3>, float, cpu<>>;
  static_assert(L::parameter_count == 3 * 2 + 2);
  std::vector<float> p{1, -1,   // W row 0
                       2, 0,    // W row 1
                       0, 1,    // W row 2
                       0.5f, -10};  // bias
  layer_slot<float> s{p.data(), nullptr, nullptr, nullptr};
  const std::vector<float> x{1, 2, 3, -1, 0, 0};
  std::vector<float> y(4);
  L::forward(s, x.data(), y.data(), run_info{2, false, nullptr});
  CHECK(y[0] == 5.5f);  // 1 + 4 + 0 + 0.5
  CHECK(y[1] == 0.0f);  // relu(-1 + 0 + 3 - 10)
  CHECK(y[2] == 0.0f);  // relu(-1 + 0.5)
  CHECK(y[3] == 0.0f);  // relu(1 - 10)
}

TEST_CASE("dense init: Glorot-uniform kernel within sqrt(6 / (in + out)), zero bias, seeded") {
  using L = dense<50>::bind<shape<30>, float, cpu<>>;
  std::vector<float> a(L::parameter_count), b(L::parameter_count);
  rng g1(9), g2(9);
  L::init({a.data(), nullptr, nullptr, nullptr}, g1);
  L::init({b.data(), nullptr, nullptr, nullptr}, g2);
  CHECK(a == b);
  const float limit = std::sqrt(6.0f / 80.0f);
  double sum_sq = 0;
  for (std::size_t i = 0; i < L::kernel_count; ++i) {
    CHECK(std::abs(a[i]) <= limit);
    sum_sq += double(a[i]) * a[i];
  }
  // variance of U(-l, l) is l^2 / 3
  CHECK(sum_sq / L::kernel_count == doctest::Approx(limit * limit / 3).epsilon(0.1));
  for (std::size_t j = 0; j < 50; ++j) CHECK(a[L::kernel_count + j] == 0.0f);
}

TEST_CASE("dense spec text names units, activation and regularizer") {
  CHECK(dense<10>::name() == "dense<10>");
  CHECK(dense<3, sigmoid, l2<0.5f>>::name() == "dense<3, sigmoid, l2<0.5>>");
  CHECK(dense<3, leaky_relu<0.1f>>::name() == "dense<3, leaky_relu<0.1>>");
}

TEST_CASE("l2 penalty of a dense layer: lambda * sum of squared kernel weights, bias excluded") {
  using L = dense<1, identity, l2<0.5f>>::bind<shape<2>, float, cpu<>>;
  std::vector<float> p{3, 4, 100};
  CHECK(L::penalty({p.data(), nullptr, nullptr, nullptr}) == doctest::Approx(0.5 * 25));
}
