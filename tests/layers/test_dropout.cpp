// layers/dropout.hpp: identity at inference, inverted scaling and a seeded
// mask kept in the cache at training time, backward through the mask.
#include <doctest/doctest.h>

#include <ctnn/layers/dropout.hpp>

#include <vector>

using namespace ctnn;

using L = dropout<0.25f>::bind<shape<1000>, float, cpu<>>;
static_assert(L::cache_per_sample == 1000 && L::parameter_count == 0 && L::state_count == 0);
static_assert(std::is_same_v<L::out_shape, shape<1000>>);

TEST_CASE("dropout at inference is the identity, forward and backward") {
  std::vector<float> x(2000), y(2000), cache(2000), dy(2000, 3.0f), dx(2000);
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = float(i) - 7.5f;
  rng g(1);
  L::forward({nullptr, nullptr, nullptr, cache.data()}, x.data(), y.data(), run_info{2, false, &g});
  CHECK(y == x);
  L::backward({nullptr, nullptr, nullptr, cache.data()}, x.data(), y.data(), dy.data(), dx.data(),
              run_info{2, false, &g});
  CHECK(dx == dy);
}

TEST_CASE("dropout in training: about Rate of the values dropped, the rest scaled by 1 / (1 - Rate)") {
  std::vector<float> x(2000, 2.0f), y(2000), cache(2000);
  rng g(1);
  L::forward({nullptr, nullptr, nullptr, cache.data()}, x.data(), y.data(), run_info{2, true, &g});
  std::size_t dropped = 0;
  for (std::size_t i = 0; i < y.size(); ++i) {
    if (y[i] == 0.0f) {
      ++dropped;
      CHECK(cache[i] == 0.0f);
    } else {
      CHECK(y[i] == doctest::Approx(2.0f / 0.75f));
      CHECK(cache[i] == doctest::Approx(1.0f / 0.75f));
    }
  }
  CHECK(dropped > 400);  // expected 500, sd ~19
  CHECK(dropped < 600);

  std::vector<float> dy(2000, 1.0f), dx(2000);
  L::backward({nullptr, nullptr, nullptr, cache.data()}, x.data(), y.data(), dy.data(), dx.data(),
              run_info{2, true, &g});
  for (std::size_t i = 0; i < dx.size(); ++i) CHECK(dx[i] == cache[i]);
}

TEST_CASE("dropout masks are drawn from the generator: same seed, same mask, next draw differs") {
  std::vector<float> x(1000, 1.0f), a(1000), b(1000), c(1000), cache(1000);
  rng g1(42), g2(42);
  layer_slot<float> s{nullptr, nullptr, nullptr, cache.data()};
  L::forward(s, x.data(), a.data(), run_info{1, true, &g1});
  L::forward(s, x.data(), b.data(), run_info{1, true, &g2});
  CHECK(a == b);
  L::forward(s, x.data(), c.data(), run_info{1, true, &g1});
  CHECK(a != c);
}

TEST_CASE("dropout<0> keeps everything, spec text, a missing generator is an error") {
  using Z = dropout<0.0f>::bind<shape<4>, float, cpu<>>;
  std::vector<float> x{1, 2, 3, 4}, y(4), cache(4);
  rng g(3);
  Z::forward({nullptr, nullptr, nullptr, cache.data()}, x.data(), y.data(), run_info{1, true, &g});
  CHECK(y == x);
  CHECK(dropout<0.5f>::name() == "dropout<0.5>");
  CHECK_THROWS_WITH(Z::forward({nullptr, nullptr, nullptr, cache.data()}, x.data(), y.data(), run_info{1, true, nullptr}),
                    doctest::Contains("dropout: training needs a random generator"));
}
