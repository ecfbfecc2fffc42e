// activation.hpp: values of every activation, in dense and as layers.
#include <doctest/doctest.h>

#include <ctnn/backends/cpu/ops.hpp>  // the bound layers run on cpu<> (layer headers declare ops<B> only)
#include <ctnn/layers/activation.hpp>

#include <cmath>
#include <vector>

using namespace ctnn;

TEST_CASE("activation values") {
  std::vector<double> v{-2, -0.5, 0, 0.5, 2};
  auto run = [&](auto act) {
    auto y = v;
    decltype(act)::template forward<cpu<>>(y.data(), 1, y.size());
    return y;
  };
  CHECK(run(relu{}) == std::vector<double>{0, 0, 0, 0.5, 2});
  const auto lr = run(leaky_relu<>{});
  CHECK(lr[0] == -2 * 0.2);  // exact in double: the slope is the double 0.2, not 0.2f
  CHECK(lr[4] == 2);
  const auto sg = run(sigmoid{});
  CHECK(sg[2] == 0.5);
  CHECK(sg[4] == doctest::Approx(1 / (1 + std::exp(-2.0))));
  CHECK(sg[0] == doctest::Approx(1 / (1 + std::exp(2.0))));
  const auto th = run(ctnn::tanh{});
  CHECK(th[3] == doctest::Approx(std::tanh(0.5)));
  CHECK(run(identity{}) == v);
  const auto sm = run(softmax{});
  double s = 0;
  for (double x : sm) s += x;
  CHECK(s == doctest::Approx(1.0));
  CHECK(sm[4] / sm[3] == doctest::Approx(std::exp(1.5)));
}

TEST_CASE("sigmoid and softmax do not overflow") {
  std::vector<float> v{-1000, 1000};
  sigmoid::forward<cpu<>>(v.data(), 1, 2);
  CHECK(v[0] == 0.0f);
  CHECK(v[1] == 1.0f);
  std::vector<float> w{1000, 1000, -1000};
  softmax::forward<cpu<>>(w.data(), 1, 3);
  CHECK(w[0] == doctest::Approx(0.5));
  CHECK(w[2] == 0.0f);
}

TEST_CASE("softmax as a layer normalises each row of the last axis") {
  using L = softmax::bind<shape<2, 3>, float, cpu<>>;
  static_assert(L::out_shape::size == 6 && L::parameter_count == 0);
  const std::vector<float> x{1, 2, 3, 0, 0, 0};
  std::vector<float> y(6);
  L::forward({}, x.data(), y.data(), run_info{1, false, nullptr});
  CHECK(y[0] + y[1] + y[2] == doctest::Approx(1.0));
  CHECK(y[3] == doctest::Approx(1.0 / 3));
}
