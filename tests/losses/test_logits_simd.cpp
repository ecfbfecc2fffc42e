// losses/detail.hpp: the vectorized float path of crossentropy_logits_row
// against crossentropy_logits_row_reference (all in double), on sizes 1, 3,
// 17, 255, 1000, one-hot and soft targets, loss and gradient within 1e-6.
#include <doctest/doctest.h>

#include <ctnn/core/rng.hpp>
#include <ctnn/losses/detail.hpp>

#include <cmath>
#include <vector>

using namespace ctnn;

namespace {

void check_row(std::size_t n, double spread, bool soft) {
  INFO("n=" << n << " spread=" << spread << " soft=" << soft);
  rng g(n * 31 + std::size_t(spread));
  std::vector<float> z(n);
  for (auto& e : z) e = float(g.uniform(-spread, spread));
  std::vector<double> tv(n, 0.0);
  if (soft) {
    double s = 0;
    for (auto& e : tv) s += (e = g.uniform(0, 1));
    for (auto& e : tv) e /= s;
  } else {
    tv[n / 2] = 1.0;
  }
  auto t = [&](std::size_t j) { return tv[j]; };
  const double scale = 0.25;
  std::vector<float> d1(n), d2(n);
  const double l1 = detail::crossentropy_logits_row(z.data(), t, n, d1.data(), scale);
  const double l2 = detail::crossentropy_logits_row_reference(z.data(), t, n, d2.data(), scale);
  CHECK(std::abs(l1 - l2) <= 1e-6);
  for (std::size_t j = 0; j < n; ++j) CHECK(std::abs(double(d1[j]) - double(d2[j])) <= 1e-6);
  // without a gradient buffer, the same loss
  CHECK(detail::crossentropy_logits_row(z.data(), t, n, static_cast<float*>(nullptr), scale) == l1);
}

}  // namespace

TEST_CASE("vectorized float crossentropy_logits_row equals the double reference within 1e-6") {
  for (std::size_t n : {1, 3, 17, 255, 1000})
    for (double spread : {1.0, 8.0, 100.0})
      for (bool soft : {false, true}) check_row(n, spread, soft);
}

TEST_CASE("vectorized float crossentropy_logits_row: a huge logit does not overflow") {
  std::vector<float> z(20, 0.0f);
  z[3] = 1000.0f;
  auto t = [](std::size_t j) { return j == 3 ? 1.0 : 0.0; };
  std::vector<float> d(20);
  const double l = detail::crossentropy_logits_row(z.data(), t, z.size(), d.data(), 1.0);
  CHECK(std::abs(l) <= 1e-12);
  for (std::size_t j = 0; j < z.size(); ++j) CHECK(std::isfinite(d[j]));
  CHECK(std::abs(d[3]) <= 1e-12);
}
