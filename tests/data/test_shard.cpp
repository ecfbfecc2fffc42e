// pipeline.hpp / stages.hpp: dataset.shard(count, index) (tf.data's shard) and the per-shard
// seeds of the shuffles and seeded maps after it (data-parallel input: docs/distributed.md).
#include <doctest/doctest.h>

#include <ctnn/data/pipeline.hpp>

#include "labels.hpp"

#include <algorithm>
#include <numeric>
#include <stdexcept>
#include <vector>

using namespace ctnn;
using S1 = data::sample<shape<1>>;

namespace {
// n samples of shape<1>: x = i, y = i.
data::dataset<S1> numbers(std::size_t n) {
  std::vector<float> x;
  std::vector<int> y;
  for (std::size_t i = 0; i < n; ++i) {
    x.push_back(float(i));
    y.push_back(int(i));
  }
  return data::from_tensors<shape<1>>(x, y);
}
using ctnn_test::labels;
}  // namespace

TEST_CASE("shard(count, index): the elements i with i % count == index, every pass") {
  const auto d = numbers(10);
  CHECK(labels(d.shard(3, 0)) == std::vector<int>{0, 3, 6, 9});
  CHECK(labels(d.shard(3, 1)) == std::vector<int>{1, 4, 7});
  CHECK(labels(d.shard(3, 2)) == std::vector<int>{2, 5, 8});
  CHECK(labels(d.shard(3, 2), 1) == std::vector<int>{2, 5, 8});
  CHECK(labels(d.shard(1, 0)) == labels(d));
  CHECK(labels(d.shard(20, 12)).empty());
  // after a filter: the index counts the elements that reach the shard
  CHECK(labels(d.filter([](const S1& s) { return s.y[0] % 2 == 0; }).shard(2, 1)) == std::vector<int>{2, 6});
  // shards compose: shard(2, 1).shard(3, 2) keeps i = 1 + 2 * (3k + 2), i.e. shard(6, 5)
  const auto twice = d.shard(2, 1).shard(3, 2);
  CHECK(labels(twice) == std::vector<int>{5});
  CHECK(labels(numbers(30).shard(2, 1).shard(3, 2)) == labels(numbers(30).shard(6, 5)));
  CHECK(twice.shard_count() == 6);
  CHECK(twice.shard_index() == 5);
}

TEST_CASE("shard: count 0 or index >= count is refused, naming both") {
  const auto d = numbers(4);
  CHECK_THROWS_WITH_AS(d.shard(0, 0), "shard: count must be >= 1, got 0 (index 0)", std::invalid_argument);
  CHECK_THROWS_WITH_AS(d.shard(2, 2), "shard: index 2 is not below count 2 (index must be in [0, count))",
                       std::invalid_argument);
}

TEST_CASE("shard then batch: the ranks' batches of 32 are the global batch of 64, interleaved") {
  const auto d = numbers(200);
  const auto global = labels(d.batch(64));
  const auto r0 = labels(d.shard(2, 0).batch(32)), r1 = labels(d.shard(2, 1).batch(32));
  REQUIRE(r0.size() == 100);
  REQUIRE(r1.size() == 100);
  for (std::size_t i = 0; i < 100; ++i) {
    CHECK(r0[i] == global[2 * i]);
    CHECK(r1[i] == global[2 * i + 1]);
  }
}

TEST_CASE("shuffle before shard: one global order (the same seed on every rank), each rank its part") {
  const auto d = numbers(50);
  for (std::size_t pass = 0; pass < 3; ++pass) {
    const auto global = labels(d.shuffle(50, 7), pass);
    const auto r0 = labels(d.shuffle(50, 7).shard(2, 0), pass), r1 = labels(d.shuffle(50, 7).shard(2, 1), pass);
    REQUIRE(r0.size() == 25);
    for (std::size_t i = 0; i < 25; ++i) {
      CHECK(r0[i] == global[2 * i]);
      CHECK(r1[i] == global[2 * i + 1]);
    }
  }
}

TEST_CASE("shuffle after shard: each shard its own stream, derived from the seed") {
  const auto d = numbers(400);
  const auto r0 = d.shard(2, 0), r1 = d.shard(2, 1);
  // the seed becomes shard_seed(seed): rng::derive(seed, 2^32 * count + index).next()
  CHECK(r0.shard_seed(7) == rng::derive(7, (std::uint64_t(2) << 32) + 0).next());
  CHECK(r1.shard_seed(7) == rng::derive(7, (std::uint64_t(2) << 32) + 1).next());
  CHECK(d.shard_seed(7) == 7);
  CHECK(d.shard(1, 0).shard_seed(7) == 7);
  // reproducible; rank 1's order is not rank 0's order of its own elements (a shared seed would give
  // both ranks the same permutation of their positions)
  const auto a = labels(r0.shuffle(200, 7)), b = labels(r1.shuffle(200, 7));
  CHECK(a == labels(r0.shuffle(200, 7)));
  std::vector<int> b_positions(b.size()), a_positions(a.size());
  std::transform(a.begin(), a.end(), a_positions.begin(), [](int v) { return v / 2; });
  std::transform(b.begin(), b.end(), b_positions.begin(), [](int v) { return v / 2; });
  CHECK(a_positions != b_positions);
  // each shard still holds exactly its own elements
  auto sorted = b;
  std::sort(sorted.begin(), sorted.end());
  CHECK(sorted == labels(r1));
  // the shard's seed is kept by the stages after it (map, batch, prefetch)
  const auto later = r1.map([](S1 s) { return s; }).prefetch(2);
  CHECK(labels(later.shuffle(200, 7)) == b);
  CHECK(later.batch(10).shard_seed(7) == r1.shard_seed(7));
}

TEST_CASE("a seeded map after shard draws from the shard's seed") {
  const auto d = numbers(16);
  auto noise = [](S1 s, rng& g) {
    s.x[0] = float(g.uniform());
    return s;
  };
  auto values = [](const auto& ds) {
    std::vector<float> v;
    auto c = ds.open(0);
    S1 e;
    while (c.next(e)) v.push_back(e.x[0]);
    return v;
  };
  const auto r0 = values(d.shard(2, 0).map(noise, data::random_seed{3}));
  const auto r1 = values(d.shard(2, 1).map(noise, data::random_seed{3}));
  CHECK(r0 != r1);  // one seed for both would give rank 1 the same draws for its i-th element
  CHECK(r0 == values(d.shard(2, 0).map(noise, data::random_seed{3})));  // reproducible
}
