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
  // add_penalty: the same value into a step's scalars (the model's path), with the bits of penalty
  step_scalars s;
  l1_l2<0.5f, 0.25f>::add_penalty(w.data(), 2, &s);
  CHECK(s.penalty == l1_l2<0.5f, 0.25f>::penalty(w.data(), 2));
  l1_l2<0.5f, 0.25f>::add_penalty(w.data(), 2, &s);
  CHECK(s.penalty == 2 * l1_l2<0.5f, 0.25f>::penalty(w.data(), 2));
}

TEST_CASE("dynamic_l2, dynamic_l1: the factor read through its pointer where the op runs, checked as a file holds it") {
  const std::vector<double> w{3, -4};
  const float f2 = 0.25f, f1 = 0.5f;
  step_scalars s;
  dynamic_l2::add_penalty(w.data(), 2, &f2, &s);
  CHECK(s.penalty == l2<0.25f>::penalty(w.data(), 2));
  step_scalars t;
  dynamic_l1::add_penalty(w.data(), 2, &f1, &t);
  CHECK(t.penalty == l1<0.5f>::penalty(w.data(), 2));
  std::vector<double> g{0, 0}, h{0, 0};
  dynamic_l2::add_gradient(w.data(), g.data(), 2, &f2);
  l2<0.25f>::add_gradient(w.data(), h.data(), 2);
  CHECK(g == h);
  CHECK(dynamic_l2::check_factor(reinterpret_cast<const std::byte*>(&f2)).empty());
  const float bad = -2.0f;
  CHECK(dynamic_l1::check_factor(reinterpret_cast<const std::byte*>(&bad)) ==
        "dynamic_l1: the factor is -2, not finite and >= 0");
}
