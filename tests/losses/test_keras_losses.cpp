// binary_crossentropy.hpp, huber.hpp and kl_divergence.hpp against numbers
// computed by hand from Keras 3's formulas (keras/src/losses/losses.py,
// backend/tensorflow/nn.py; Keras' docstring examples where it has them),
// reduction the mean over the batch (sum_over_batch_size); the clipping of
// probabilities; ops<cpu<Arch>>::pointwise_loss on every architecture.
// (Gradients by finite differences: tests/gradcheck/test_gradcheck.cpp.)
#include <doctest/doctest.h>

#include <ctnn/backends/cpu/ops.hpp>
#include <ctnn/kernels/loss_functors.hpp>
#include <ctnn/losses/binary_crossentropy.hpp>
#include <ctnn/losses/huber.hpp>
#include <ctnn/losses/kl_divergence.hpp>
#include <ctnn/losses/loss.hpp>

#include "kernels/archs.hpp"

#include <cmath>
#include <limits>
#include <string>
#include <type_traits>
#include <vector>

using namespace ctnn;

namespace {
const double* none = nullptr;
double* no_dy = nullptr;
}  // namespace

TEST_CASE("binary_crossentropy on probabilities: Keras' example, the mean over outputs then over the batch") {
  // keras.losses.binary_crossentropy([[0, 1], [0, 0]], [[0.6, 0.4], [0.4, 0.6]]) = [0.916, 0.714]
  const std::vector<double> y{0.6, 0.4, 0.4, 0.6}, t{0, 1, 0, 0};
  const double s0 = (-std::log(0.4) - std::log(0.4)) / 2, s1 = (-std::log(0.6) - std::log(0.4)) / 2;
  CHECK(s0 == doctest::Approx(0.916).epsilon(1e-3));
  CHECK(s1 == doctest::Approx(0.714).epsilon(1e-3));
  std::vector<double> dy(4);
  CHECK(binary_crossentropy{}.compute<2>(y.data(), t.data(), dy.data(), 2) == doctest::Approx(s0 + s1).epsilon(1e-12));
  // d/dy of the batch mean: (-t / y + (1 - t) / (1 - y)) / (N B)
  CHECK(dy[0] == doctest::Approx((1 / 0.4) / 4).epsilon(1e-12));
  CHECK(dy[1] == doctest::Approx((-1 / 0.4) / 4).epsilon(1e-12));
  static_assert(std::is_same_v<loss_target_kind_t<binary_crossentropy, 3>, dense_targets<shape<3>>>);
  static_assert(Loss<binary_crossentropy> && Loss<huber> && Loss<kl_divergence>);
}

TEST_CASE("binary_crossentropy clips probabilities to [1e-7, 1 - 1e-7] as Keras, gradient 0 where clipped") {
  const std::vector<double> y{0.0, 1.0}, t{1, 0};
  std::vector<double> dy(2, 5.0);
  const double l = binary_crossentropy{}.compute<2>(y.data(), t.data(), dy.data(), 1);
  CHECK(l == doctest::Approx(-std::log(1e-7)).epsilon(1e-9));  // (2 * -log(1e-7)) / 2 outputs
  CHECK(dy[0] == 0.0);
  CHECK(dy[1] == 0.0);
}

TEST_CASE("binary_crossentropy from logits: sigmoid_cross_entropy_with_logits, stable for huge logits") {
  const std::vector<double> z{1, -2}, t{1, 0};
  std::vector<double> dy(2);
  // log(1 + e^-1) and log(1 + e^-2), averaged over the 2 outputs
  const double want = (std::log1p(std::exp(-1.0)) + std::log1p(std::exp(-2.0))) / 2;
  CHECK(want == doctest::Approx(0.2200948492806));
  CHECK(binary_crossentropy{.from_logits = true}.compute<2>(z.data(), t.data(), dy.data(), 1) ==
        doctest::Approx(want).epsilon(1e-12));
  CHECK(dy[0] == doctest::Approx((1 / (1 + std::exp(-1.0)) - 1) / 2).epsilon(1e-12));  // (sigmoid(z) - t) / N
  CHECK(dy[1] == doctest::Approx((1 / (1 + std::exp(2.0))) / 2).epsilon(1e-12));
  const std::vector<double> big{1000, -1000}, zero{0, 0};
  CHECK(binary_crossentropy{.from_logits = true}.compute<2>(big.data(), zero.data(), dy.data(), 1) ==
        doctest::Approx(500.0));  // (1000 + 0) / 2
  CHECK(std::isfinite(dy[0]));
  CHECK(dy[0] == doctest::Approx(0.5));
  CHECK(dy[1] == doctest::Approx(0.0));
}

TEST_CASE("huber: Keras' example and delta") {
  // keras.losses.Huber()([[0, 1], [0, 0]], [[0.6, 0.4], [0.4, 0.6]]) = 0.155
  const std::vector<double> y{0.6, 0.4, 0.4, 0.6}, t{0, 1, 0, 0};
  CHECK(huber{}.compute<2>(y.data(), t.data(), no_dy, 2) / 2 == doctest::Approx(0.155).epsilon(1e-12));
  // e = 0.5 and 3: delta 1: 0.125 and 3 - 0.5; delta 2: 0.125 and 6 - 2
  const std::vector<double> y2{0.5, 3}, t2{0, 0};
  std::vector<double> dy(2);
  CHECK(huber{}.compute<2>(y2.data(), t2.data(), dy.data(), 1) == doctest::Approx((0.125 + 2.5) / 2));
  CHECK(dy[0] == doctest::Approx(0.5 / 2));
  CHECK(dy[1] == doctest::Approx(1.0 / 2));  // delta sign(e) / N
  CHECK(huber{.delta = 2}.compute<2>(y2.data(), t2.data(), dy.data(), 1) == doctest::Approx((0.125 + 4) / 2));
  CHECK(dy[1] == doctest::Approx(2.0 / 2));
  const std::vector<double> neg{-3};
  const std::vector<double> t0{0};
  huber{}.compute<1>(neg.data(), t0.data(), dy.data(), 1);
  CHECK(dy[0] == doctest::Approx(-1.0));
}

TEST_CASE("kl_divergence: Keras' example, the targets and outputs clipped to [1e-7, 1]") {
  // keras.losses.KLDivergence()([[0, 1], [0, 0]], [[0.6, 0.4], [0.4, 0.6]]) = 0.458
  const std::vector<double> y{0.6, 0.4, 0.4, 0.6}, t{0, 1, 0, 0};
  const double e = 1e-7;
  const double s0 = e * std::log(e / 0.6) + std::log(1 / 0.4), s1 = e * std::log(e / 0.4) + e * std::log(e / 0.6);
  std::vector<double> dy(4);
  const double l = kl_divergence{}.compute<2>(y.data(), t.data(), dy.data(), 2);
  CHECK(l == doctest::Approx(s0 + s1).epsilon(1e-12));
  CHECK(l / 2 == doctest::Approx(0.458).epsilon(1e-3));
  CHECK(dy[1] == doctest::Approx(-1 / 0.4 / 2).epsilon(1e-12));  // -tc / y / B
  CHECK(dy[0] == doctest::Approx(-e / 0.6 / 2).epsilon(1e-12));
  const std::vector<double> zero{0.0, 1.0}, half{0.5, 0.5};
  CHECK(kl_divergence{}.compute<2>(zero.data(), half.data(), dy.data(), 1) ==
        doctest::Approx(0.5 * std::log(0.5 / 1e-7) + 0.5 * std::log(0.5)).epsilon(1e-12));
  CHECK(dy[0] == 0.0);  // clipped
}

TEST_CASE("pointwise_loss: sum / divisor, d times scale and the loss scale, the non-finite flag, every architecture") {
  const int ran = test::for_each_arch("pointwise_loss", [](auto a, const char* name) {
    using O = ops<cpu<decltype(a)>>;
    INFO(name);
    std::vector<float> y{0.2f, 0.9f, -1.5f, 2.0f}, t{0.0f, 1.0f, 1.0f, 0.0f}, d(4);
    step_scalars s;
    s.loss_sum = 1.0;
    s.loss_scale = 4.0;
    const fn::huber_rule r{1.0};
    O::pointwise_loss(r, y.data(), t.data(), 4, d.data(), 0.25, 2.0, &s);
    double want = 0;
    for (std::size_t i = 0; i < 4; ++i) {
      want += r.value(double(y[i]), double(t[i]));
      CHECK(double(d[i]) == doctest::Approx(0.25 * r.gradient(double(y[i]), double(t[i])) * 4.0).epsilon(1e-6));
    }
    CHECK(s.loss_sum == doctest::Approx(1.0 + want / 2.0));
    CHECK(s.non_finite == 0);
    y[2] = std::numeric_limits<float>::quiet_NaN();
    step_scalars bad;
    O::pointwise_loss(fn::binary_crossentropy_rule{}, y.data(), t.data(), 4, d.data(), 1.0, 1.0, &bad);
    CHECK(bad.non_finite != 0);
    CHECK(std::isnan(d[2]));
  });
  CHECK(ran >= 1);
}
