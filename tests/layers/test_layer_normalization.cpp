// layers/layer_normalization.hpp: Keras' LayerNormalization (axis -1, center and
// scale) on rank-1 and rank-3 inputs, values by hand, the parameters' gradient,
// in a network. (Gradients by finite differences: tests/gradcheck/test_gradcheck.cpp.)
#include <doctest/doctest.h>

#include <ctnn/layers/layer_normalization.hpp>

#include <ctnn/ctnn.hpp>  // sequential, make_model, fit

#include <cmath>
#include <vector>

using namespace ctnn;

TEST_CASE("layer_normalization: each position by its own mean and variance, gamma and beta") {
  using L = layer_normalization<>::bind<shape<4>, float, cpu<>>;
  static_assert(L::parameter_count == 8 && L::cache_per_sample == 2);
  std::vector<float> params{1, 2, 1, 1, 0, 0, 0.5f, 0}, cache(4), grads(8);
  const std::vector<float> x{1, 2, 3, 4, 10, 10, 10, 10};  // 2 samples
  std::vector<float> y(8);
  layer_slot<float> s;
  s.params = params.data();
  s.cache = cache.data();
  s.grads = grads.data();
  L::forward(s, x.data(), y.data(), run_info{2, true, nullptr});
  const double inv = 1 / std::sqrt(1.25 + 1e-3);  // mean 2.5, biased variance 1.25, Keras' epsilon 1e-3
  CHECK(y[0] == doctest::Approx(-1.5 * inv));
  CHECK(y[1] == doctest::Approx(2 * -0.5 * inv));
  CHECK(y[2] == doctest::Approx(0.5 * inv + 0.5));
  CHECK(y[3] == doctest::Approx(1.5 * inv));
  CHECK(y[4] == doctest::Approx(0.0));  // a constant row: xhat = 0, y = beta
  CHECK(y[6] == doctest::Approx(0.5));
  std::vector<float> dy{1, 0, 0, 0, 1, 1, 1, 1}, dx(8);
  L::backward(s, x.data(), y.data(), dy.data(), dx.data(), run_info{2, true, nullptr});
  CHECK(grads[0] == doctest::Approx(-1.5 * inv));  // dgamma = sum dy xhat
  CHECK(grads[4] == doctest::Approx(2.0));         // dbeta = sum dy
  CHECK(grads[5] == doctest::Approx(1.0));
  // sample 1 (constant: xhat = 0): dx = inv (g - mean g), g = gamma dy = (1, 2, 1, 1), inv = 1 / sqrt(1e-3)
  const double inv1 = 1 / std::sqrt(1e-3);
  for (std::size_t c = 0; c < 4; ++c) CHECK(dx[4 + c] == doctest::Approx(inv1 * (params[c] - 1.25)).epsilon(1e-5));
  CHECK(layer_normalization<>::name() == "layer_normalization");
  CHECK(layer_normalization<1e-5>::name() == "layer_normalization<1e-05>");
}

TEST_CASE("layer_normalization over the channels of every position, in a network") {
  using L = layer_normalization<>::bind<shape<2, 3, 4>, float, cpu<>>;
  static_assert(std::is_same_v<L::out_shape, shape<2, 3, 4>> && L::parameter_count == 8 && L::cache_per_sample == 12);
  using net = sequential<input<6, 6, 1>, conv2d<4, 3, 3>, layer_normalization<>, relu, flatten, dense<2>>;
  static_assert(net::parameter_count == (9 + 1) * 4 + 8 + 4 * 4 * 4 * 2 + 2);
  auto m = make_model<net>(3);
  std::vector<float> x(32 * 36);
  std::vector<std::int32_t> l(32);
  rng g(4);
  for (std::size_t i = 0; i < l.size(); ++i) {
    l[i] = std::int32_t(i % 2);
    for (std::size_t j = 0; j < 36; ++j) x[i * 36 + j] = float(g.uniform(-1, 1)) + (l[i] && j % 2 ? 1.0f : 0.0f);
  }
  adam opt{0.01};
  const auto h = fit(m, sparse_categorical_crossentropy{.from_logits = true}, opt,
                     data::in_memory<shape<6, 6, 1>, sparse_labels>(x, l).batch(8), epochs{10});
  CHECK(h["loss"].back() < h["loss"].front());
}
