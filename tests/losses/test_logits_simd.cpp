// losses/detail.hpp: the vectorized float path of crossentropy_logits_row
// against crossentropy_logits_row_reference (all in double), on sizes 1, 3,
// 17, 255, 1000, one-hot and soft targets, loss and gradient within 1e-6, on
// every xsimd architecture this CPU runs (tests/kernels/archs.hpp). Only
// float rows are vectorized; double rows run the reference itself.
#include <doctest/doctest.h>

#include <ctnn/core/rng.hpp>
#include <ctnn/backends/cpu/crossentropy.hpp>

#include "kernels/archs.hpp"

#include <cmath>
#include <string>
#include <vector>

using namespace ctnn;

namespace {

template <class Arch>
void check_row(std::size_t n, double spread, bool soft, const char* arch) {
  INFO(std::string(arch) << " n=" << n << " spread=" << spread << " soft=" << soft);
  rng g(n * 31 + std::size_t(spread));
  std::vector<float> z(n);
  for (auto& e : z) e = float(g.uniform(-spread, spread));
  std::vector<double> tv(n, 0.0);
  if (soft) {
    double s = 0;
    for (auto& e : tv) s += (e = g.uniform(0, 1));
    for (auto& e : tv) e /= s;
  } else {
    tv[n / 2] = 1.0;
  }
  auto t = [&](std::size_t j) { return tv[j]; };
  const double scale = 0.25;
  std::vector<float> d1(n), d2(n);
  const double l1 = kernels::cpu::crossentropy_logits_row<float, Arch>(z.data(), t, n, d1.data(), scale);
  const double l2 = kernels::cpu::crossentropy_logits_row_reference(z.data(), t, n, d2.data(), scale);
  CHECK(std::abs(l1 - l2) <= 1e-6);
  for (std::size_t j = 0; j < n; ++j) CHECK(std::abs(double(d1[j]) - double(d2[j])) <= 1e-6);
  // without a gradient buffer, the same loss
  CHECK(kernels::cpu::crossentropy_logits_row<float, Arch>(z.data(), t, n, static_cast<float*>(nullptr), scale) == l1);
}

// A huge logit in a batch or in the tail: no overflow, loss 0, gradient 0 there.
template <class Arch>
void check_huge(std::size_t at, const char* arch) {
  INFO(std::string(arch) << " huge logit at " << at);
  std::vector<float> z(20, 0.0f);
  z[at] = 1000.0f;
  auto t = [at](std::size_t j) { return j == at ? 1.0 : 0.0; };
  std::vector<float> d(20);
  const double l = kernels::cpu::crossentropy_logits_row<float, Arch>(z.data(), t, z.size(), d.data(), 1.0);
  CHECK(std::abs(l) <= 1e-12);
  for (std::size_t j = 0; j < z.size(); ++j) CHECK(std::isfinite(d[j]));
  CHECK(std::abs(d[at]) <= 1e-12);
}

}  // namespace

TEST_CASE("vectorized float crossentropy_logits_row equals the double reference within 1e-6 on every "
          "architecture this CPU runs") {
  const int ran = test::for_each_arch("crossentropy_logits_row", [](auto arch, const char* name) {
    for (std::size_t n : {1, 3, 17, 255, 1000})
      for (double spread : {1.0, 8.0, 100.0})
        for (bool soft : {false, true}) check_row<decltype(arch)>(n, spread, soft, name);
    for (std::size_t at : {3, 19}) check_huge<decltype(arch)>(at, name);
  });
  CHECK(ran >= 1);  // x86-64 always has SSE2
}

TEST_CASE("crossentropy_logits_row with the default architecture is the path the losses call") {
  rng g(5);
  std::vector<float> z(37);  // two AVX-512 batches and a tail
  for (auto& e : z) e = float(g.uniform(-8, 8));
  auto t = [](std::size_t j) { return j == 2 ? 1.0 : 0.0; };
  std::vector<float> d1(37), d2(37);
  const double l1 = kernels::cpu::crossentropy_logits_row(z.data(), t, z.size(), d1.data(), 1.0);
  const double l2 = kernels::cpu::crossentropy_logits_row_reference(z.data(), t, z.size(), d2.data(), 1.0);
  CHECK(std::abs(l1 - l2) <= 1e-6);
  for (std::size_t j = 0; j < z.size(); ++j) CHECK(std::abs(double(d1[j]) - double(d2[j])) <= 1e-6);
}
