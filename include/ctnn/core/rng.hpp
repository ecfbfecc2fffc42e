// ctnn/core/rng.hpp — the deterministic random number generator.
//
// xoshiro256** seeded through splitmix64. Every random decision in ctnn
// (weight init, shuffling, dropout masks) is drawn from it, and the float
// conversions are written out here rather than taken from <random>'s
// distributions (whose results differ between standard libraries), so a seed
// gives the same numbers on every platform.
#pragma once
#include <cstdint>

namespace ctnn {

class rng {
 public:
  explicit constexpr rng(std::uint64_t seed = 0) noexcept { reseed(seed); }

  constexpr void reseed(std::uint64_t seed) noexcept {
    std::uint64_t x = seed;
    for (auto& w : s_) w = splitmix(x);
  }

  // Independent stream derived from this seed and a tag (e.g. the epoch).
  static constexpr rng derive(std::uint64_t seed, std::uint64_t tag) noexcept {
    std::uint64_t x = seed ^ (0x9E3779B97F4A7C15ull * (tag + 1));
    return rng(splitmix(x));
  }

  constexpr std::uint64_t next() noexcept {
    const std::uint64_t result = rotl(s_[1] * 5, 7) * 9;
    const std::uint64_t t = s_[1] << 17;
    s_[2] ^= s_[0];
    s_[3] ^= s_[1];
    s_[1] ^= s_[2];
    s_[0] ^= s_[3];
    s_[2] ^= t;
    s_[3] = rotl(s_[3], 45);
    return result;
  }

  // Uniform in [0, 1) with 53 random bits.
  constexpr double uniform() noexcept { return static_cast<double>(next() >> 11) * 0x1.0p-53; }
  constexpr double uniform(double lo, double hi) noexcept { return lo + (hi - lo) * uniform(); }

  // Uniform integer in [0, n), n > 0 (Lemire's nearly-divisionless method).
  constexpr std::uint64_t below(std::uint64_t n) noexcept {
    unsigned __int128 m = static_cast<unsigned __int128>(next()) * n;
    auto low = static_cast<std::uint64_t>(m);
    if (low < n) {
      const std::uint64_t threshold = (0 - n) % n;
      while (low < threshold) {
        m = static_cast<unsigned __int128>(next()) * n;
        low = static_cast<std::uint64_t>(m);
      }
    }
    return static_cast<std::uint64_t>(m >> 64);
  }

 private:
  static constexpr std::uint64_t rotl(std::uint64_t x, int k) noexcept { return (x << k) | (x >> (64 - k)); }
  static constexpr std::uint64_t splitmix(std::uint64_t& x) noexcept {
    std::uint64_t z = (x += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  std::uint64_t s_[4]{};
};

// Fisher-Yates shuffle of [first, first + n).
template <class It>
constexpr void shuffle(It first, std::uint64_t n, rng& g) {
  for (std::uint64_t i = n; i > 1; --i) {
    const std::uint64_t j = g.below(i);
    auto tmp = first[i - 1];
    first[i - 1] = first[j];
    first[j] = tmp;
  }
}

}  // namespace ctnn
