// dense.hpp: forward values by hand, Keras init, regularizer wiring.
#include <doctest/doctest.h>

#include <ctnn/backends/cpu/ops.hpp>  // the bound layers run on cpu<> (layer headers declare ops<B> only)
#include <ctnn/layers/dense.hpp>

#include <algorithm>
#include <array>
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

TEST_CASE("dense init: the default is glorot_uniform, drawn exactly as before it could be chosen") {
  using L = dense<20>::bind<shape<30>, float, cpu<>>;
  static_assert(std::is_same_v<dense<20>::initializer, glorot_uniform>);
  std::vector<float> a(L::parameter_count);
  rng g(3), ref(3);
  L::init({a.data(), nullptr, nullptr, nullptr}, g);
  const double limit = std::sqrt(6.0 / 50.0);
  for (std::size_t i = 0; i < L::kernel_count; ++i) CHECK(a[i] == float(ref.uniform(-limit, limit)));
}

TEST_CASE("dense init: he_uniform, he_normal, glorot_normal have Keras' variances, options in either order") {
  // fan_in 400, fan_out 300: 120,000 kernel values
  auto stats = [](auto spec) {
    using L = typename decltype(spec)::template bind<shape<400>, float, cpu<>>;
    std::vector<float> p(L::parameter_count);
    rng g(11);
    L::init({p.data(), nullptr, nullptr, nullptr}, g);
    double sum = 0, sum_sq = 0, max_abs = 0;
    for (std::size_t i = 0; i < L::kernel_count; ++i) {
      sum += p[i];
      sum_sq += double(p[i]) * p[i];
      max_abs = std::max(max_abs, double(std::abs(p[i])));
    }
    const double n = double(L::kernel_count);
    for (std::size_t j = 0; j < 300; ++j) CHECK(p[L::kernel_count + j] == 0.0f);
    return std::array<double, 3>{sum / n, sum_sq / n, max_abs};
  };
  const auto hu = stats(dense<300, relu, he_uniform>{});
  CHECK(hu[1] == doctest::Approx(2.0 / 400).epsilon(0.03));  // (sqrt(6/400))^2 / 3
  CHECK(hu[2] <= std::sqrt(6.0 / 400));
  const auto hn = stats(dense<300, relu, l2<0.001f>, he_normal>{});
  CHECK(hn[1] == doctest::Approx(2.0 / 400).epsilon(0.03));
  CHECK(hn[2] <= 2 * std::sqrt(2.0 / 400) / 0.87962566103423978);  // truncated at two stddevs
  CHECK(std::abs(hn[0]) < 1e-3);
  const auto gn = stats(dense<300, identity, glorot_normal, l2<0.25f>>{});
  CHECK(gn[1] == doctest::Approx(2.0 / 700).epsilon(0.03));
  static_assert(std::is_same_v<dense<300, relu, l2<0.001f>, he_normal>::regularizer, l2<0.001f>>);
  static_assert(std::is_same_v<dense<300, identity, glorot_normal, l2<0.25f>>::regularizer, l2<0.25f>>);
  static_assert(std::is_same_v<dense<300, identity, glorot_normal, l2<0.25f>>::initializer, glorot_normal>);
  CHECK(dense<3, relu, he_uniform>::name() == "dense<3, relu, he_uniform>");
  CHECK(dense<3, relu, l2<0.5f>, he_normal>::name() == "dense<3, relu, l2<0.5>, he_normal>");
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
