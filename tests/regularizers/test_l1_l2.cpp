// regularizers/l1_l2.hpp: the sum of both penalties and gradients, defaults, text.
#include <doctest/doctest.h>

#include <ctnn/regularizers/l1_l2.hpp>

#include <vector>

using namespace ctnn;

static_assert(Regularizer<l1_l2<>>);
static_assert(l1_l2<>::lambda1 == 0.01 && l1_l2<>::lambda2 == 0.01);  // keras.regularizers.l1_l2 defaults

TEST_CASE("l1_l2: L1 * sum |w| + L2 * sum w^2, gradient L1 * sign(w) + 2 * L2 * w") {
  const std::vector<double> w{3, -4};
  CHECK(l1_l2<0.5f, 0.25f>::penalty(w.data(), 2) == doctest::Approx(0.5 * 7 + 0.25 * 25));
  std::vector<double> g{0, 0};
  l1_l2<0.5f, 0.25f>::add_gradient(w.data(), g.data(), 2);
  CHECK(g[0] == doctest::Approx(0.5 + 2 * 0.25 * 3));
  CHECK(g[1] == doctest::Approx(-0.5 - 2 * 0.25 * 4));
  CHECK(l1_l2<0.5f, 0.25f>::name() == "l1_l2<0.5, 0.25>");
}
