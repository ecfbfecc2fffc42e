// pipeline.hpp, stages.hpp, element.hpp: sources, the serial stages, and fit on a pipeline.
#include <doctest/doctest.h>

#include <ctnn/data/element.hpp>
#include <ctnn/data/pipeline.hpp>

#include "labels.hpp"
#include <ctnn/data/stages.hpp>
#include <ctnn/ctnn.hpp>

#include <algorithm>
#include <numeric>
#include <vector>

using namespace ctnn;
using S2 = data::sample<shape<2>>;
using B2 = data::batch_of<shape<2>>;

namespace {
// n samples of shape<2>: x = {i, -i}, y = i.
data::dataset<S2> numbers(std::size_t n) {
  std::vector<float> x;
  std::vector<int> y;
  for (std::size_t i = 0; i < n; ++i) {
    x.push_back(float(i));
    x.push_back(-float(i));
    y.push_back(int(i));
  }
  return data::from_tensors<shape<2>>(x, y);
}
using ctnn_test::labels;
std::vector<int> iota(int from, int to) {
  std::vector<int> v(std::size_t(to - from));
  std::iota(v.begin(), v.end(), from);
  return v;
}
}  // namespace

TEST_CASE("pipeline: the element type carries the sample shape, only batches are a Dataset") {
  static_assert(data::Sample<S2> && !data::Batch<S2> && data::Batch<B2>);
  static_assert(data::Dataset<data::dataset<B2>>);
  static_assert(!data::Dataset<data::dataset<S2>>);  // fit needs .batch(n)
  static_assert(std::is_same_v<data::dataset<B2>::sample_shape, shape<2>>);
  static_assert(std::is_same_v<decltype(numbers(1).batch(2)), data::dataset<B2>>);
  CHECK(data::element_name<S2>() == "sample<2, sparse, 4-byte float>");
  CHECK(data::element_name<data::batch_of<shape<3, 4>, dense_targets<shape<5>>>>() == "batch_of<3x4, dense 5, 4-byte float>");
}

TEST_CASE("pipeline: from_tensors checks sizes and yields every sample in order") {
  CHECK_THROWS_WITH_AS(data::from_tensors<shape<2>>(std::vector<float>(5), std::vector<int>(2)),
                       doctest::Contains("from_tensors: 5 input values are not a whole number of samples of shape 2"),
                       std::invalid_argument);
  CHECK_THROWS_WITH_AS(data::from_tensors<shape<2>>(std::vector<float>(4), std::vector<int>(3)),
                       doctest::Contains("from_tensors: 2 samples but 3 target values (expected 2)"), std::invalid_argument);
  auto d = numbers(5);
  auto c = d.open(0);
  S2 s;
  for (int i = 0; i < 5; ++i) {
    REQUIRE(c.next(s));
    CHECK(s.x == std::vector<float>{float(i), -float(i)});
    CHECK(s.y[0] == i);
  }
  CHECK_FALSE(c.next(s));
  CHECK_FALSE(c.next(s));
}

TEST_CASE("pipeline: batch packs samples row-major, drop_remainder drops the short last batch") {
  auto d = numbers(5).batch(2);
  auto c = d.open(0);
  B2 b;
  REQUIRE(c.next(b));
  CHECK(b.size == 2);
  CHECK(b.x == std::vector<float>{0, -0.f, 1, -1});
  CHECK(b.y == std::vector<int>{0, 1});
  REQUIRE(c.next(b));
  REQUIRE(c.next(b));
  CHECK(b.size == 1);
  CHECK(b.x == std::vector<float>{4, -4});
  CHECK_FALSE(c.next(b));
  CHECK(labels(numbers(5).batch(2, true)) == iota(0, 4));
  CHECK_THROWS_AS(numbers(5).batch(0), std::invalid_argument);

  // The trainer's batch is the pipeline's element type (one batch type: data::batch_of).
  static_assert(std::is_same_v<data::batch_for<decltype(d)>, B2>);
  auto c2 = d.open(0);
  data::batch_for<decltype(d)> mb;
  REQUIRE(c2.next(mb));
  CHECK(mb.size == 2);
  CHECK(mb.y == std::vector<int>{0, 1});
}

TEST_CASE("pipeline: filter, take, skip, repeat") {
  CHECK(labels(numbers(10).filter([](const S2& s) { return s.y[0] % 3 == 0; })) == std::vector<int>{0, 3, 6, 9});
  CHECK(labels(numbers(10).take(3)) == iota(0, 3));
  CHECK(labels(numbers(10).skip(7)) == iota(7, 10));
  CHECK(labels(numbers(3).take(10)).size() == 3);
  CHECK(labels(numbers(3).skip(10)).empty());
  CHECK(labels(numbers(3).repeat(2)) == std::vector<int>{0, 1, 2, 0, 1, 2});
  CHECK(labels(numbers(3).repeat(0)).empty());
  CHECK(labels(numbers(3).repeat().take(7)) == std::vector<int>{0, 1, 2, 0, 1, 2, 0});
  CHECK(labels(numbers(0).repeat()).empty());  // an empty pass ends an endless repeat
  CHECK(labels(numbers(7).batch(3).repeat(2)) == std::vector<int>{0, 1, 2, 3, 4, 5, 6, 0, 1, 2, 3, 4, 5, 6});
  auto bad = numbers(5).filter([](const S2& s) -> bool {
    if (s.y[0] == 3) throw std::runtime_error("odd sample");
    return true;
  });
  CHECK_THROWS_WITH_AS(labels(bad), doctest::Contains("filter: the function threw on element 3 of pass 0: odd sample"),
                       data::pipeline_error);
}

TEST_CASE("pipeline: shuffle draws a new permutation every pass, the same one for the same seed") {
  auto d = numbers(100).shuffle(100, 7);
  const auto a0 = labels(d, 0), a1 = labels(d, 1);
  CHECK(a0 != a1);
  CHECK(a0 != iota(0, 100));
  CHECK(labels(numbers(100).shuffle(100, 7), 0) == a0);
  CHECK(labels(numbers(100).shuffle(100, 8), 0) != a0);
  for (auto v : {a0, a1}) {
    std::sort(v.begin(), v.end());
    CHECK(v == iota(0, 100));
  }
  // A buffer of 1 keeps the order; a small buffer only moves elements forward a little.
  CHECK(labels(numbers(20).shuffle(1, 3)) == iota(0, 20));
  const auto local = labels(numbers(50).shuffle(4, 3));
  for (std::size_t i = 0; i < local.size(); ++i) CHECK(local[i] <= int(i) + 3);
  // Repeat gives every inner pass its own order.
  const auto rep = labels(numbers(30).shuffle(30, 1).repeat(2));
  CHECK(std::vector<int>(rep.begin(), rep.begin() + 30) != std::vector<int>(rep.begin() + 30, rep.end()));
  CHECK_THROWS_AS(numbers(3).shuffle(0, 1), std::invalid_argument);
}

TEST_CASE("pipeline: map transforms elements and may change their type") {
  auto doubled = numbers(4).map([](S2 s) {
    for (auto& v : s.x) v *= 2;
    return s;
  });
  auto c = doubled.open(0);
  S2 s;
  REQUIRE(c.next(s));
  REQUIRE(c.next(s));
  CHECK(s.x == std::vector<float>{2, -2});
  using S3 = data::sample<shape<3>>;
  auto widened = numbers(4).map([](const S2& s) {
    S3 t;
    t.x = {s.x[0], s.x[1], 1};
    t.y = s.y;
    return t;
  });
  static_assert(std::is_same_v<decltype(widened)::element_type, S3>);
  CHECK(labels(widened.batch(4)) == iota(0, 4));
  // A map that breaks the shape its type promises is caught by batch.
  auto broken = numbers(2).map([](S2 s) {
    s.x.push_back(0);
    return s;
  });
  CHECK_THROWS_WITH_AS(labels(broken.batch(2)), doctest::Contains("batch: a sample holds 3 values"), data::pipeline_error);
}

TEST_CASE("pipeline: from(in_memory) yields the in_memory dataset's samples") {
  data::in_memory<shape<2>, sparse_labels> m(std::vector<float>{1, 2, 3, 4, 5, 6}, std::vector<int>{7, 8, 9});
  CHECK(labels(data::from(m.skip(1))) == std::vector<int>{8, 9});
}

using net = sequential<input<2>, dense<3>>;

TEST_CASE("pipeline: fit trains on a pipeline and logs the input verdict") {
  auto train = numbers(40).map([](S2 s) {
    s.y[0] %= 3;
    s.x[0] *= 0.1f;
    s.x[1] *= 0.1f;
    return s;
  }, 2).shuffle(40, 1).batch(8).prefetch(2);
  auto m = make_model<net>(1);
  adam opt;
  const sparse_categorical_crossentropy loss{.from_logits = true};
  auto h = fit(m, loss, opt, train, epochs{3}, validation_data(numbers(9).map([](S2 s) {
                 s.y[0] %= 3;
                 return s;
               }).batch(4)));
  CHECK(h.epochs() == 3);
  CHECK(m.optimizer_iterations() == 15);
  CHECK(h.contains("input_bound"));
  CHECK(h.contains("val_loss"));
  const double share = h["input_share"][2];
  CHECK(h["input_bound"][2] == double(int(input_bound(share))));
  CHECK(h.input_verdict(2) == input_verdict(share));
  // The same pipeline, evaluated.
  CHECK(std::isfinite(evaluate(m, loss, train)["loss"]));
}

// Issue 14, item 2.
TEST_CASE("pipeline: batch(n) holds what arrives, a batch size that would wrap throws size_error") {
  CHECK_THROWS_WITH_AS(numbers(3).batch(std::size_t(1) << 62), doctest::Contains("does not fit in 64 bits"), size_error);
  CHECK_THROWS_AS(numbers(3).batch(std::size_t(-1)), std::length_error);
  // 100 samples in a batch of 10 million: one batch of 100, buffers of 100 samples, not 10 million.
  const auto d = numbers(100).batch(10'000'000);
  auto c = d.open(0);
  data::batch_for<decltype(d)> b;
  REQUIRE(c.next(b));
  CHECK(b.size == 100);
  CHECK(b.x.capacity() < 1000);
  CHECK(b.y.capacity() < 1000);
  CHECK(!c.next(b));
  // in_memory: the same checks.
  const data::in_memory<shape<2>, sparse_labels> m(std::vector<float>(200), std::vector<int>(100));
  CHECK_THROWS_AS(m.batch(std::size_t(1) << 62), size_error);
  CHECK(m.batch(std::size_t(-1) / 16).batches_per_epoch() == 1);
}
