// prefetch.hpp: order, depth, errors, stopping a producer that runs ahead.
#include <doctest/doctest.h>

#include <ctnn/data/pipeline.hpp>
#include <ctnn/data/prefetch.hpp>

#include <algorithm>
#include <numeric>
#include <stdexcept>
#include <vector>

using namespace ctnn;
using S1 = data::sample<shape<1>>;

namespace {
data::dataset<S1> numbers(std::size_t n) {
  std::vector<float> x(n);
  std::vector<int> y(n);
  std::iota(x.begin(), x.end(), 0.f);
  std::iota(y.begin(), y.end(), 0);
  return data::from_tensors<shape<1>>(x, y);
}
std::vector<int> labels(const data::dataset<S1>& d, std::size_t pass = 0) {
  std::vector<int> out;
  auto c = d.open(pass);
  S1 s;
  while (c.next(s)) out.push_back(s.y[0]);
  return out;
}
}  // namespace

TEST_CASE("prefetch: any depth yields the same elements in the same order") {
  const auto want = labels(numbers(100).shuffle(100, 2), 1);
  for (std::size_t depth : {1, 2, 7, 500}) CHECK(labels(numbers(100).shuffle(100, 2).prefetch(depth), 1) == want);
  CHECK(labels(numbers(100).shuffle(100, 2).prefetch(data::autotune), 1) == want);
  CHECK(labels(numbers(0).prefetch(3)).empty());
  CHECK_THROWS_WITH_AS(numbers(1).prefetch(0), doctest::Contains("prefetch: the depth must be >= 1"), std::invalid_argument);
}

TEST_CASE("prefetch: an upstream error arrives after the elements before it, once") {
  auto d = numbers(10)
               .filter([](const S1& s) -> bool {
                 if (s.y[0] == 6) throw std::runtime_error("disk");
                 return true;
               })
               .prefetch(3);
  auto c = d.open(0);
  S1 s;
  for (int i = 0; i < 6; ++i) {
    REQUIRE(c.next(s));
    CHECK(s.y[0] == i);
  }
  CHECK_THROWS_WITH_AS(c.next(s), doctest::Contains("element 6 of pass 0: disk"), data::pipeline_error);
  CHECK_FALSE(c.next(s));
}

TEST_CASE("prefetch: destroying a cursor stops a producer that is ahead or blocked on a full queue") {
  auto d = numbers(5).repeat().prefetch(2).prefetch(3);
  for (int i = 0; i < 100; ++i) {
    auto c = d.open(std::size_t(i));
    S1 s;
    for (int k = 0; k < i % 4; ++k) REQUIRE(c.next(s));
  }
  CHECK(labels(d.take(7)) == std::vector<int>{0, 1, 2, 3, 4, 0, 1});
}

TEST_CASE("prefetch: a cursor outlives the dataset it came from") {
  auto c = [] {
    auto d = numbers(5).shuffle(5, 1).repeat().prefetch(data::autotune).map([](S1 s) { return s; }, data::autotune);
    return d.open(0);
  }();
  S1 s;
  std::vector<int> seen;
  for (int i = 0; i < 20; ++i) {
    REQUIRE(c.next(s));
    seen.push_back(s.y[0]);
  }
  std::sort(seen.begin(), seen.begin() + 5);
  CHECK(std::vector<int>(seen.begin(), seen.begin() + 5) == std::vector<int>{0, 1, 2, 3, 4});
}
