// rng.hpp: known answers. rng promises the same numbers on every platform; these values come from an
// independent implementation of splitmix64 + xoshiro256** (Python, exact integers), not from ctnn itself.
#include <doctest/doctest.h>

#include <ctnn/core/rng.hpp>

#include <array>
#include <cstdint>
#include <vector>

using ctnn::rng;

TEST_CASE("rng: xoshiro256** seeded through splitmix64 gives the reference numbers") {
  rng a(42);
  CHECK(a.next() == 0x15780b2e0c2ec716ull);
  CHECK(a.next() == 0x6104d9866d113a7eull);
  CHECK(a.next() == 0xae17533239e499a1ull);
  CHECK(a.next() == 0xecb8ad4703b360a1ull);
  rng z(0);
  CHECK(z.next() == 0x99ec5f36cb75f2b4ull);
  CHECK(z.next() == 0xbf6e1f784956452aull);
}

TEST_CASE("rng: uniform, below, derive and shuffle give the reference values") {
  rng a(42);
  CHECK(a.uniform() == 0.08386297105988216);
  CHECK(a.uniform() == 0.3789802506626686);
  rng b(7);
  std::vector<std::uint64_t> draws;
  for (int i = 0; i < 10; ++i) draws.push_back(b.below(10));
  CHECK(draws == std::vector<std::uint64_t>{7, 2, 8, 9, 9, 8, 0, 1, 4, 1});
  rng d = rng::derive(1, 3);
  CHECK(d.next() == 0x167e4a6d4828aa71ull);
  CHECK(d.next() == 0xfb08bd8b8f541ec4ull);
  std::array<int, 10> v{0, 1, 2, 3, 4, 5, 6, 7, 8, 9};
  rng s(5);
  ctnn::shuffle(v.begin(), v.size(), s);
  CHECK(v == std::array<int, 10>{1, 0, 4, 9, 6, 3, 7, 8, 5, 2});
}

TEST_CASE("rng: the numbers are the same at compile time") {
  constexpr auto first = [] {
    rng g(42);
    return g.next();
  }();
  static_assert(first == 0x15780b2e0c2ec716ull);
}
