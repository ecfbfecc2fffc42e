// classification_report: confusion matrix, per-class precision/recall/F1 against hand-computed values.
#include <doctest/doctest.h>

#include <ctnn/layers/dense.hpp>
#include <ctnn/losses/sparse_categorical_crossentropy.hpp>
#include <ctnn/metrics/classification_report.hpp>
#include <ctnn/data/pipeline.hpp>
#include <ctnn/train/fit.hpp>

#include <cstdint>
#include <vector>

using namespace ctnn;

namespace {
// 10 samples, 4 classes (class 3 never occurs nor is predicted):
//   true: 0 0 0 1 1 2 2 2 2 1
//   pred: 0 1 0 1 0 2 2 0 2 1
const std::vector<std::int32_t> truth{0, 0, 0, 1, 1, 2, 2, 2, 2, 1};
const std::vector<std::int32_t> pred{0, 1, 0, 1, 0, 2, 2, 0, 2, 1};

std::vector<float> one_hot_rows(const std::vector<std::int32_t>& c) {
  std::vector<float> y(c.size() * 4, 0.f);
  for (std::size_t i = 0; i < c.size(); ++i) y[i * 4 + std::size_t(c[i])] = 1.f;
  return y;
}
}  // namespace

TEST_CASE("classification_report: counts and ratios match the hand computation") {
  classification_report r;
  const auto y = one_hot_rows(pred);
  r.update<4>(y.data(), truth.data(), 6);  // two batches count as one
  r.update<4>(y.data() + 24, truth.data() + 6, 4);
  REQUIRE(r.classes() == 4);
  // confusion (rows true, columns predicted):
  //   t0: 2 1 0 0   t1: 1 2 0 0   t2: 1 0 3 0   t3: 0 0 0 0
  const std::uint64_t want[4][4] = {{2, 1, 0, 0}, {1, 2, 0, 0}, {1, 0, 3, 0}, {0, 0, 0, 0}};
  for (std::size_t t = 0; t < 4; ++t)
    for (std::size_t p = 0; p < 4; ++p) CHECK(r.confusion(t, p) == want[t][p]);
  CHECK(r.total() == 10);
  CHECK(r.support(2) == 4);
  CHECK(r.predicted(0) == 4);
  CHECK(r.precision(0) == doctest::Approx(2.0 / 4));
  CHECK(r.precision(1) == doctest::Approx(2.0 / 3));
  CHECK(r.precision(2) == doctest::Approx(1.0));
  CHECK(r.recall(0) == doctest::Approx(2.0 / 3));
  CHECK(r.recall(1) == doctest::Approx(2.0 / 3));
  CHECK(r.recall(2) == doctest::Approx(3.0 / 4));
  CHECK(r.f1(0) == doctest::Approx(4.0 / 7));
  CHECK(r.f1(1) == doctest::Approx(2.0 / 3));
  CHECK(r.f1(2) == doctest::Approx(6.0 / 7));
  // a class with no samples and no predictions: 0 (scikit-learn's zero_division=0)
  CHECK(r.precision(3) == 0.0);
  CHECK(r.recall(3) == 0.0);
  CHECK(r.f1(3) == 0.0);
  CHECK(r.accuracy() == doctest::Approx(0.7));
  CHECK(r.macro_f1() == doctest::Approx((4.0 / 7 + 2.0 / 3 + 6.0 / 7) / 4));
  CHECK(r.weighted_f1() == doctest::Approx(5.0 / 7));
  CHECK(r.result() == r.macro_f1());
  CHECK_THROWS_WITH(r.confusion(4, 0), "classification_report: true class 4 is not one of the 4 classes");
  CHECK_THROWS_WITH(r.str({"a", "b"}), "classification_report: 2 class names for 4 classes");
  const std::string s = r.str({"tee", "pants", "coat", "bag"});
  CHECK(s.find("   coat     1.0000     0.7500     0.8571          4") != std::string::npos);
  CHECK(s.find("   pants      1      2      0      0") != std::string::npos);
  const char* const names[] = {"tee", "pants", "coat", "bag"};  // as data::fashion_mnist::class_names
  CHECK(r.str(names) == s);
}

TEST_CASE("classification_report: dense targets, bad labels, reset") {
  classification_report r;
  const auto y = one_hot_rows(pred);
  const auto t = one_hot_rows(truth);
  r.update<4>(y.data(), t.data(), 10);
  CHECK(r.confusion(2, 0) == 1);
  CHECK(r.f1(2) == doctest::Approx(6.0 / 7));
  const std::int32_t bad[1] = {4};
  CHECK_THROWS_WITH(r.update<4>(y.data(), bad, 1),
                    "classification_report: label 4 of sample 0 is not a class of the 4 outputs");
  r.reset();
  CHECK(r.classes() == 0);
  CHECK(r.total() == 0);
}

TEST_CASE("evaluate fills the report the caller keeps and logs macro_f1") {
  // a dense layer whose kernel is the identity maps one-hot inputs to the same logits
  using net = sequential<input<4>, dense<4>>;
  auto m = make_model<net>(0);
  auto p = m.layer_parameters<0>();
  for (std::size_t i = 0; i < 20; ++i) p[i] = (i < 16 && i % 5 == 0) ? 1.f : 0.f;
  const auto ds = data::from_tensors<shape<4>>(one_hot_rows(pred), truth).batch(3);
  classification_report report;
  const auto l = evaluate(m, sparse_categorical_crossentropy{true}, ds, report);
  CHECK(report.total() == 10);
  CHECK(report.confusion(1, 0) == 1);
  CHECK(l["macro_f1"] == doctest::Approx((4.0 / 7 + 2.0 / 3 + 6.0 / 7) / 4));
  // a second evaluate starts from zero
  evaluate(m, sparse_categorical_crossentropy{true}, ds, report);
  CHECK(report.total() == 10);
}
