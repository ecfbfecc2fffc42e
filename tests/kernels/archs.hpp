// tests/kernels/archs.hpp — the xsimd architectures the kernel tests check.
//
// for_each_arch(what, f) calls f(Arch{}, "name") for each of avx512bw,
// avx512f, fma3<avx2>, avx2 and sse2 that the compiler can target
// (Arch::supported()) and this CPU runs (kernels::cpu::arch_available<Arch>()),
// posts a doctest MESSAGE "<what> checked on <name>" for each, and returns how
// many ran; callers CHECK that at least one did (x86-64 always has SSE2).
// Built with CTNN_TEST_DEFAULT_ARCH_ONLY (CMake CTNN_TEST_ALL_ARCHS=OFF, the
// sanitizer build) it checks kernels::cpu::default_arch alone.
// Used by tests/kernels and tests/losses (include "kernels/archs.hpp").
#pragma once
#include <doctest/doctest.h>

#include <ctnn/backends/cpu/arch.hpp>

#include <string>

namespace ctnn::test {

template <class Arch, class F>
void check_if_available(const char* what, const char* name, F& f, int& ran) {
  if constexpr (Arch::supported()) {
    if (kernels::cpu::arch_available<Arch>()) {
      f(Arch{}, name);
      ++ran;
      MESSAGE(std::string(what) << " checked on " << std::string(name));
    }
  }
}

template <class F>
int for_each_arch(const char* what, F&& f) {
  int ran = 0;
#ifdef CTNN_TEST_DEFAULT_ARCH_ONLY
  check_if_available<kernels::cpu::default_arch>(what, kernels::cpu::default_arch::name(), f, ran);
#else
  check_if_available<xsimd::avx512bw>(what, "avx512bw", f, ran);
  check_if_available<xsimd::avx512f>(what, "avx512f", f, ran);
  check_if_available<xsimd::fma3<xsimd::avx2>>(what, "fma3<avx2>", f, ran);
  check_if_available<xsimd::avx2>(what, "avx2", f, ran);
  check_if_available<xsimd::sse2>(what, "sse2", f, ran);
#endif
  return ran;
}

}  // namespace ctnn::test
