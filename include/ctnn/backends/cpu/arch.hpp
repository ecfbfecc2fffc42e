// ctnn/kernels/cpu/arch.hpp — which xsimd architecture the CPU kernels use.
//
// default_arch (default_arch.hpp) is xsimd::default_arch: the best architecture the compiler
// flags enable (-march=native on an AVX-512 machine: avx512bw; no flags on
// x86-64: sse2). It is a compile-time choice, so one translation unit's types
// and kernels mean the same everywhere. simd_v<T, Arch> says whether T
// (float, double) runs the xsimd kernels of Arch (one the compiler can target);
// has_simd_v<T> is simd_v<T, default_arch>; otherwise the scalar reference runs.
// Kernels take Arch as a template parameter defaulting to default_arch; only
// the tests name other architectures. arch_available<Arch>() says at run time
// whether this CPU executes Arch (the tests use it to check every architecture
// the machine supports).
#pragma once
#include <type_traits>

#include <xsimd/config/xsimd_arch.hpp>

#include "default_arch.hpp"

namespace ctnn::kernels::cpu {

// default_arch.hpp names it without xsimd's register headers; here they are, and it must agree.
static_assert(std::is_same_v<default_arch, xsimd::default_arch>,
              "backends/cpu/default_arch.hpp: default_arch is not xsimd::default_arch for these compiler flags");

template <class T, class Arch>
inline constexpr bool simd_v = (std::is_same_v<T, float> || std::is_same_v<T, double>)&&Arch::supported();

template <class T>
inline constexpr bool has_simd_v = simd_v<T, default_arch>;

template <class Arch>
bool arch_available() noexcept {
  if constexpr (!Arch::supported()) {
    return false;
  } else {
    return Arch::version() <= xsimd::available_architectures().best;
  }
}

}  // namespace ctnn::kernels::cpu
