// Finite-difference checks of the layers and regularizers whose factor is a
// run-time value (dynamic_dropout, dynamic_l2, dynamic_l1) and of dense<up_to<N>>
// at an active width below N, in double precision.
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include <ctnn/layers/dense.hpp>
#include <ctnn/layers/dropout.hpp>
#include <ctnn/regularizers/regularizers.hpp>

#include "gradcheck.hpp"

using namespace ctnn;

TEST_CASE("gradcheck: dynamic_dropout at rate 0.3 in training (fixed mask) and at inference") {
  CHECK(gradcheck::check_layer<dynamic_dropout, shape<4, 5>>({.training = true, .metadata = {0.3f}}) < 1e-6);
  CHECK(gradcheck::check_layer<dynamic_dropout, shape<20>>({.training = false, .metadata = {0.5f}}) < 1e-6);
}

TEST_CASE("gradcheck: dense with dynamic_l2 and dynamic_l1, data and penalties") {
  CHECK(gradcheck::check_layer<dense<4, relu, dynamic_l2>, shape<3>>({.metadata = {0.01f}}) < 1e-6);
  CHECK(gradcheck::check_penalty<dense<4, identity, dynamic_l2>, shape<3>>({0.01f}) < 1e-6);
  CHECK(gradcheck::check_penalty<dense<4, identity, dynamic_l1>, shape<3>>({0.02f}) < 1e-6);
  // The penalty is the compile-time form's with the same factor.
  using A = dense<4, identity, l2<0.01f>>::bind<shape<3>, double, cpu<>>;
  using B = dense<4, identity, dynamic_l2>::bind<shape<3>, double, cpu<>>;
  std::vector<double> p(A::parameter_count, 0.5);
  float meta[4] = {0.01f};
  layer_slot<double> sa{p.data()}, sb{p.data(), nullptr, nullptr, nullptr, nullptr, reinterpret_cast<std::byte*>(meta)};
  CHECK(A::penalty(sa) == B::penalty(sb));
  // A factor made bad behind set_regularization's back is no silent number: the penalty and
  // the gradient it adds are NaN (the step then stops on a non-finite loss).
  for (const float bad : {-1.0f, std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity()}) {
    meta[0] = bad;
    CHECK(std::isnan(B::penalty(sb)));
    std::vector<double> g(B::parameter_count, 0.0);
    sb.grads = g.data();
    B::add_penalty_gradient(sb);
    CHECK(std::isnan(g[0]));
    CHECK(g[B::kernel_count] == 0.0);  // the bias takes no penalty
  }
}

TEST_CASE("gradcheck: dense<up_to<9>> at active width 4: its inputs and all its parameters (the inactive ones: 0)") {
  CHECK(gradcheck::check_layer<dense<up_to<9>, ctnn::tanh>, shape<5>>({.metadata_u32 = {4}}) < 1e-6);
  CHECK(gradcheck::check_layer<dense<up_to<9>, relu>, shape<5>>({.metadata_u32 = {9}}) < 1e-6);
}
