// Values of sparse_categorical_crossentropy.hpp, categorical_crossentropy.hpp
// and mean_squared_error.hpp against hand-computed numbers; stability for
// huge logits; bad labels. (Gradients: tests/gradcheck.)
#include <doctest/doctest.h>

#include <ctnn/losses/categorical_crossentropy.hpp>
#include <ctnn/losses/loss.hpp>
#include <ctnn/losses/mean_squared_error.hpp>
#include <ctnn/losses/sparse_categorical_crossentropy.hpp>

#include <cmath>
#include <cstdint>
#include <stdexcept>
#include <vector>

using namespace ctnn;

TEST_CASE("sparse categorical cross-entropy from logits and from probabilities") {
  const std::vector<float> logits{1, 2, 3};  // softmax = 0.0900306, 0.2447285, 0.6652410
  const std::vector<std::int32_t> label{2};
  const sparse_categorical_crossentropy from_logits{.from_logits = true};
  CHECK(from_logits.compute<3>(logits.data(), label.data(), static_cast<float*>(nullptr), 1) ==
        doctest::Approx(0.4076059644));
  const std::vector<float> probs{0.0900306f, 0.2447285f, 0.6652410f};
  const sparse_categorical_crossentropy from_probs{};
  CHECK(from_probs.compute<3>(probs.data(), label.data(), static_cast<float*>(nullptr), 1) ==
        doctest::Approx(0.4076059644).epsilon(1e-5));
  // a zero probability is clipped at 1e-7, not log(0)
  const std::vector<float> zero{1, 0, 0};
  CHECK(from_probs.compute<3>(zero.data(), label.data(), static_cast<float*>(nullptr), 1) ==
        doctest::Approx(-std::log(1e-7)));
}

TEST_CASE("from_logits is stable for huge logits") {
  const std::vector<float> logits{1000, 0, -1000};
  const std::vector<std::int32_t> label{0};
  std::vector<float> d(3);
  const double l = sparse_categorical_crossentropy{.from_logits = true}.compute<3>(logits.data(), label.data(), d.data(), 1);
  CHECK(l == doctest::Approx(0.0));
  CHECK(std::isfinite(d[0]));
  const std::vector<std::int32_t> label2{2};
  CHECK(sparse_categorical_crossentropy{.from_logits = true}.compute<3>(logits.data(), label2.data(), d.data(), 1) ==
        doctest::Approx(2000.0));
}

TEST_CASE("a label outside the classes is reported with its sample") {
  const std::vector<float> y(6, 0.5f);
  const std::vector<std::int32_t> labels{1, 3};
  CHECK_THROWS_WITH_AS(sparse_categorical_crossentropy{}.compute<3>(y.data(), labels.data(), static_cast<float*>(nullptr), 2),
                       "sparse_categorical_crossentropy: label 3 of sample 1 in the batch is outside [0, 3)",
                       std::out_of_range);
}

TEST_CASE("categorical cross-entropy equals the sparse one on one-hot targets, batch mean") {
  const std::vector<double> z{1, 2, 3, 0.5, -1, 2};
  const std::vector<double> onehot{0, 0, 1, 1, 0, 0};
  const std::vector<std::int32_t> labels{2, 0};
  const double a = categorical_crossentropy{.from_logits = true}.compute<3>(z.data(), onehot.data(), static_cast<double*>(nullptr), 2);
  const double b = sparse_categorical_crossentropy{.from_logits = true}.compute<3>(z.data(), labels.data(), static_cast<double*>(nullptr), 2);
  CHECK(a == doctest::Approx(b));
}

TEST_CASE("mean squared error: mean over outputs, summed over the batch") {
  const std::vector<float> y{1, 2, 3, 4};
  const std::vector<float> t{1, 0, 0, 4};
  std::vector<float> d(4);
  // sample 0: (0 + 4) / 2 = 2; sample 1: (9 + 0) / 2 = 4.5
  CHECK(mean_squared_error{}.compute<2>(y.data(), t.data(), d.data(), 2) == doctest::Approx(6.5));
  CHECK(d[1] == doctest::Approx(2.0 / 2 / 2 * 2));  // 2/N/B * e = 0.5 * 2
  static_assert(std::is_same_v<loss_target_kind_t<mean_squared_error, 4>, dense_targets<shape<4>>>);
  static_assert(std::is_same_v<loss_target_kind_t<sparse_categorical_crossentropy, 4>, sparse_labels>);
}
