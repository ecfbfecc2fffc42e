// layers/dropout.hpp: identity at inference, inverted scaling and a seeded
// mask kept in the cache at training time, backward through the mask.
#include <doctest/doctest.h>

#include <ctnn/backends/cpu/ops.hpp>  // the bound layers run on cpu<> (layer headers declare ops<B> only)
#include <ctnn/layers/dropout.hpp>

#include <cstddef>
#include <cstring>
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

TEST_CASE("dynamic_dropout gives dropout<Rate>'s masks and outputs bit for bit, forward and backward") {
  auto same_as_fixed = []<class T, auto Rate>() {
    using F = typename dropout<Rate>::template bind<shape<300>, T, cpu<>>;
    using D = dynamic_dropout::bind<shape<300>, T, cpu<>>;
    std::vector<T> x(600), yf(600), yd(600), cf(600), cd(600), dy(600, T(1.5)), dxf(600), dxd(600);
    for (std::size_t i = 0; i < x.size(); ++i) x[i] = T(i % 17) - T(8.25);
    const float rate = float(Rate);
    alignas(float) std::byte meta[4];
    std::memcpy(meta, &rate, sizeof rate);
    rng gf(9), gd(9);
    const layer_slot<T> sf{nullptr, nullptr, nullptr, cf.data()};
    const layer_slot<T> sd{nullptr, nullptr, nullptr, cd.data(), nullptr, meta};
    F::forward(sf, x.data(), yf.data(), run_info{2, true, &gf});
    D::forward(sd, x.data(), yd.data(), run_info{2, true, &gd});
    F::backward(sf, x.data(), yf.data(), dy.data(), dxf.data(), run_info{2, true, &gf});
    D::backward(sd, x.data(), yd.data(), dy.data(), dxd.data(), run_info{2, true, &gd});
    return D::rate(sd) == double(Rate) && yf == yd && cf == cd && dxf == dxd && gf.next() == gd.next();
  };
  CHECK(same_as_fixed.template operator()<float, 0.25f>());
  CHECK(same_as_fixed.template operator()<double, 0.3f>());
  CHECK(same_as_fixed.template operator()<float, 0.0f>());
}

TEST_CASE("dynamic_dropout refuses a rate outside 0 <= rate < 1 in training only, after the generator check") {
  using D = dynamic_dropout::bind<shape<4>, float, cpu<>>;
  std::vector<float> x{1, 2, 3, 4}, y(4), cache(4);
  const float bad = 1.0f;
  alignas(float) std::byte meta[4];
  std::memcpy(meta, &bad, sizeof bad);
  const layer_slot<float> s{nullptr, nullptr, nullptr, cache.data(), nullptr, meta};
  rng g(1);
  CHECK_THROWS_WITH(D::forward(s, x.data(), y.data(), run_info{1, true, &g}),
                    "dynamic_dropout: the dropout rate must be in [0, 1), got 1");
  CHECK_THROWS_WITH(D::forward(s, x.data(), y.data(), run_info{1, true, nullptr}),
                    doctest::Contains("dynamic_dropout: training needs a random generator"));
  D::forward(s, x.data(), y.data(), run_info{1, false, nullptr});
  CHECK(y == x);
}
