// tests/quantization/int8_paths_main.cpp — the main of test_int8_<isa> (tests/CMakeLists.txt):
// test_int8.cpp built again for one instruction set, so that the avx2-derived architectures take
// another int8 path than in the -march=native build:
//   avx2      -march=x86-64-v3: the pmaddubsw path (and test_quantized_conv2d_pool.cpp with it)
//   vnni256   -march=x86-64-v3 -mavx512vnni -mavx512vl: the 256-bit VNNI path, EVEX vpdpbusd
//   avxvnni   -march=x86-64-v3 -mavxvnni: the same path, AVX-VNNI's VEX vpdpbusd
// Where this CPU lacks what the build encodes, it prints CTNN_SKIP (CTest: skipped) and runs
// nothing. CTest starts it through int8_isa_launcher (built for the baseline x86-64), which makes
// the same check first: this program's static initializers (doctest registering the test cases)
// are compiled for the ISA too and already use zmm registers in the vnni256 build.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <ctnn/backends/cpu/int8.hpp>

#include <cstdio>

int main(int argc, char** argv) {
  namespace i8 = ctnn::kernels::cpu::int8;
#if defined(__AVXVNNI__) || (defined(__AVX512VNNI__) && defined(__AVX512VL__))
  if (!i8::cpu_has_vnni256()) {
#if defined(__AVXVNNI__)
    std::puts("CTNN_SKIP: this CPU has no AVX-VNNI (cpuid 7.1:EAX[4]); the VEX vpdpbusd path was compiled only");
#else
    std::puts("CTNN_SKIP: this CPU has no AVX512_VNNI with AVX512VL; the 256-bit VNNI path was compiled only");
#endif
    return 0;
  }
#endif
  if (!ctnn::kernels::cpu::arch_available<xsimd::fma3<xsimd::avx2>>()) {
    std::puts("CTNN_SKIP: this CPU has no AVX2 with FMA");
    return 0;
  }
  const auto p = i8::int8_path_of<xsimd::fma3<xsimd::avx2>>();
  const auto pr = i8::int8_path_of<xsimd::fma3<xsimd::avx2>, i8::weight_range::reduced>();
  std::printf("int8 path of fma3<avx2> in this build: %s (reduce_range weights: %s)\n",
              p == i8::int8_path::vnni256 ? "vnni256" : p == i8::int8_path::avx2 ? "avx2" : "other",
              pr == i8::int8_path::vnni256 ? "vnni256" : pr == i8::int8_path::avx2_u8 ? "avx2_u8" : "other");
  doctest::Context context(argc, argv);
  return context.run();
}
