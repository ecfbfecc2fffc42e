// ctnn/kernels/cpu/arch.hpp — which xsimd architecture the CPU kernels use.
//
// default_arch is xsimd::default_arch: the best architecture the compiler
// flags enable (-march=native on an AVX-512 machine: avx512bw; no flags on
// x86-64: sse2). It is a compile-time choice, so one translation unit's types
// and kernels mean the same everywhere. has_simd_v<T> says whether T (float,
// double) runs xsimd kernels; otherwise the scalar reference runs.
// arch_available<Arch>() says at run time whether this CPU executes Arch
// (the tests use it to check every architecture the machine supports).
#pragma once
#include <type_traits>

#include <xsimd/xsimd.hpp>

namespace ctnn::kernels::cpu {

using default_arch = xsimd::default_arch;

template <class T>
inline constexpr bool has_simd_v =
    (std::is_same_v<T, float> || std::is_same_v<T, double>)&&!std::is_same_v<default_arch, xsimd::unavailable>;

template <class Arch>
bool arch_available() noexcept {
  if constexpr (!Arch::supported()) {
    return false;
  } else {
    return Arch::version() <= xsimd::available_architectures().best;
  }
}

}  // namespace ctnn::kernels::cpu
