// ctnn/backends/cpu/default_arch.hpp — kernels::cpu::default_arch without xsimd's registers.
//
// default_arch is xsimd::default_arch: the best architecture the compiler flags enable
// (-march=native on an AVX-512 machine: avx512bw; -march=x86-64-v3: fma3<avx2>; no flags on
// x86-64: sse2). cpu<> (backend.hpp) names it, so every header that names a backend reaches it;
// xsimd's own definition (xsimd/config/xsimd_arch.hpp) reads every register header and
// <immintrin.h> (about 0.3 s of a network type's check, docs/performance.md "Compile time and
// memory"). Under xsimd 8 this header picks the same tag from xsimd's configuration macros
// (xsimd_config.hpp: XSIMD_WITH_*, the order of xsimd's all_x86_architectures and
// all_arm_architectures, best first) and declares it; arch.hpp, which every kernel includes,
// checks at compile time that it is xsimd::default_arch. Other xsimd versions (more
// architectures) take xsimd's definition.
#pragma once
#include <xsimd/config/xsimd_config.hpp>

#if XSIMD_VERSION_MAJOR == 8 && (XSIMD_WITH_SSE2 || XSIMD_WITH_NEON)
namespace xsimd {
struct avx512bw;
struct avx512dq;
struct avx512cd;
struct avx512f;
template <class Arch>
struct fma3;
struct avx2;
struct avx;
struct fma4;
struct sse4_2;
struct sse4_1;
struct ssse3;
struct sse3;
struct sse2;
struct neon64;
struct neon;
}  // namespace xsimd

namespace ctnn::kernels::cpu {
#if XSIMD_WITH_AVX512BW
using default_arch = xsimd::avx512bw;
#elif XSIMD_WITH_AVX512DQ
using default_arch = xsimd::avx512dq;
#elif XSIMD_WITH_AVX512CD
using default_arch = xsimd::avx512cd;
#elif XSIMD_WITH_AVX512F
using default_arch = xsimd::avx512f;
#elif XSIMD_WITH_FMA3_AVX2
using default_arch = xsimd::fma3<xsimd::avx2>;
#elif XSIMD_WITH_AVX2
using default_arch = xsimd::avx2;
#elif XSIMD_WITH_FMA3_AVX
using default_arch = xsimd::fma3<xsimd::avx>;
#elif XSIMD_WITH_AVX
using default_arch = xsimd::avx;
#elif XSIMD_WITH_FMA4
using default_arch = xsimd::fma4;
#elif XSIMD_WITH_FMA3_SSE
using default_arch = xsimd::fma3<xsimd::sse4_2>;
#elif XSIMD_WITH_SSE4_2
using default_arch = xsimd::sse4_2;
#elif XSIMD_WITH_SSE4_1
using default_arch = xsimd::sse4_1;
#elif XSIMD_WITH_SSSE3
using default_arch = xsimd::ssse3;
#elif XSIMD_WITH_SSE3
using default_arch = xsimd::sse3;
#elif XSIMD_WITH_SSE2
using default_arch = xsimd::sse2;
#elif XSIMD_WITH_NEON64
using default_arch = xsimd::neon64;
#else
using default_arch = xsimd::neon;
#endif
}  // namespace ctnn::kernels::cpu
#else
#include <xsimd/config/xsimd_arch.hpp>

namespace ctnn::kernels::cpu {
using default_arch = xsimd::default_arch;
}  // namespace ctnn::kernels::cpu
#endif
