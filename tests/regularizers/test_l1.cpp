// regularizers/l1.hpp: penalty, gradient (sign, 0 at 0), text.
#include <doctest/doctest.h>

#include <ctnn/layers/dense.hpp>
#include <ctnn/regularizers/l1.hpp>

#include <vector>

using namespace ctnn;

static_assert(Regularizer<l1<0.1f>>);

TEST_CASE("l1: Lambda * sum |w|, gradient Lambda * sign(w)") {
  const std::vector<double> w{3, -4, 0, 0.5};
  CHECK(l1<0.5f>::penalty(w.data(), 4) == doctest::Approx(0.5 * 7.5));
  std::vector<double> g{1, 1, 1, 1};
  l1<0.5f>::add_gradient(w.data(), g.data(), 4);
  CHECK(g == std::vector<double>{1.5, 0.5, 1, 1.5});
  CHECK(l1<0.01f>::name() == "l1<0.01>");
  CHECK(dense<3, relu, l1<0.01f>>::name() == "dense<3, relu, l1<0.01>>");
}
