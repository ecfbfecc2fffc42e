// core/backend.hpp: cpu<Arch> carries its architecture in the type. Two
// translation units built with different -march flags (arch_sse2.cpp,
// arch_avx2.cpp) each instantiate the same network type, fit and predict,
// and are linked into this one program: each runs its own kernels (no ODR
// clash between two bodies of one function) and they agree up to rounding
// (FMA versus separate multiply and add).
#include <doctest/doctest.h>

#include <ctnn/backends/cpu/arch.hpp>

#include <cmath>

#include "two_archs.hpp"

TEST_CASE("two TUs built for sse2 and avx2 link into one program, run their own kernels and agree") {
  if (!ctnn::kernels::cpu::arch_available<xsimd::fma3<xsimd::avx2>>()) {
    MESSAGE("CTNN_SKIP: this CPU does not run AVX2+FMA");
    return;
  }
  const arch_run a = train_sse2();
  const arch_run b = train_avx2();
  CHECK(a.backend == "cpu<sse2>");
  CHECK(b.backend == "cpu<fma3+avx2>");  // xsimd names fma3<avx2> "fma3+avx2"
  REQUIRE(a.params.size() == b.params.size());
  double worst = 0;
  for (std::size_t i = 0; i < a.params.size(); ++i) worst = std::max(worst, double(std::abs(a.params[i] - b.params[i])));
  CHECK(worst < 1e-3);
  CHECK(worst > 0);  // different kernels really ran (FMA rounds differently)
  std::size_t same_class = 0;
  for (std::size_t i = 0; i < 256; ++i) {
    auto arg = [](const std::vector<float>& o, std::size_t r) {
      std::size_t k = 0;
      for (std::size_t j = 1; j < 4; ++j)
        if (o[r * 4 + j] > o[r * 4 + k]) k = j;
      return k;
    };
    same_class += arg(a.outputs, i) == arg(b.outputs, i);
  }
  CHECK(same_class >= 250);
}
