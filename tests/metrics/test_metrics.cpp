// accuracy.hpp, sparse_categorical_accuracy.hpp, mean_absolute_error.hpp.
#include <doctest/doctest.h>

#include <ctnn/metrics/accuracy.hpp>
#include <ctnn/metrics/mean_absolute_error.hpp>
#include <ctnn/metrics/metric.hpp>
#include <ctnn/metrics/sparse_categorical_accuracy.hpp>

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

using namespace ctnn;

TEST_CASE("sparse categorical accuracy streams over batches") {
  sparse_categorical_accuracy m;
  const std::vector<float> y{0.1f, 0.8f, 0.1f, 0.6f, 0.3f, 0.1f};
  const std::vector<std::int32_t> l{1, 2};
  m.update<3>(y.data(), l.data(), 2);
  CHECK(m.result() == doctest::Approx(0.5));
  const std::vector<std::int32_t> l2{1, 0};
  m.update<3>(y.data(), l2.data(), 2);
  CHECK(m.result() == doctest::Approx(0.75));
  m.reset();
  CHECK(m.result() == 0.0);
}

TEST_CASE("accuracy: sparse, categorical and binary as Keras picks them") {
  const std::vector<float> y{0.1f, 0.8f, 0.1f, 0.6f, 0.3f, 0.1f};
  accuracy a;
  const std::vector<std::int32_t> l{1, 1};
  a.update<3>(y.data(), l.data(), 2);
  CHECK(a.result() == doctest::Approx(0.5));
  accuracy c;
  const std::vector<float> onehot{0, 1, 0, 1, 0, 0};
  c.update<3>(y.data(), onehot.data(), 2);
  CHECK(c.result() == doctest::Approx(1.0));
  accuracy b;
  const std::vector<float> p{0.7f, 0.2f, 0.4f}, t{1, 0, 1};
  b.update<1>(p.data(), t.data(), 3);
  CHECK(b.result() == doctest::Approx(2.0 / 3));
}

TEST_CASE("mean absolute error") {
  mean_absolute_error m;
  const std::vector<float> y{1, 2, 3, 4}, t{0, 2, 5, 4};
  m.update<2>(y.data(), t.data(), 2);
  CHECK(m.result() == doctest::Approx(0.75));
  static_assert(Metric<mean_absolute_error>);
}

// Issue 14, item 8: the metrics refuse a label that is not a class, as the sparse loss does.
TEST_CASE("sparse_categorical_accuracy and accuracy: a label that is not a class throws std::out_of_range naming the sample") {
  const std::vector<float> y{0.1f, 0.9f, 0.8f, 0.2f, 0.3f, 0.7f};  // 3 samples, 2 classes
  for (std::int32_t bad : {2, 12, -1}) {
    const std::vector<std::int32_t> labels{1, 0, bad};
    sparse_categorical_accuracy m;
    const std::string want = "label " + std::to_string(bad) + " of sample 2";
    CHECK_THROWS_WITH_AS(m.update<2>(y.data(), labels.data(), 3), doctest::Contains(want.c_str()), std::out_of_range);
    accuracy a;
    CHECK_THROWS_AS(a.update<2>(y.data(), labels.data(), 3), std::out_of_range);
  }
  sparse_categorical_accuracy m;
  const std::vector<std::int32_t> ok{1, 0, 1};
  m.update<2>(y.data(), ok.data(), 3);
  CHECK(m.result() == doctest::Approx(1.0));
}
