// Shared by the translation units of test_two_archs: each trains the same
// small MLP with the same seed and data in a TU built for its own -march.
#pragma once
#include <string>
#include <vector>

struct arch_run {
  std::string backend;          // cpu<...>::name() of that TU's default backend
  std::vector<float> params;    // after training
  std::vector<float> outputs;   // predictions of the trained model
};

arch_run train_sse2();  // arch_sse2.cpp: -march=x86-64 (xsimd::default_arch = sse2)
arch_run train_avx2();  // arch_avx2.cpp: -march=haswell (xsimd::default_arch = fma3<avx2>)
