// ctnn/backends/cpu/reduce.hpp — sums of squares and of absolute values on the CPU.
//
// sum_of<Arch, Abs>(x, n) returns the sum over x[0, n) of x^2 (Abs false) or
// |x| (Abs true) in double. float: xsimd::batch<float, Arch> accumulators
// over blocks of 256 values (as the CUDA reduction's float32 per-block sums),
// each block's total added in double, the last n % L values in double; chunks
// of 2^15 values run on the thread pool and their sums are added in chunk
// order, so the result depends on n only, not on the thread count. double
// and the 16-bit types: one plain loop in double, in index order (a double
// model's penalty keeps the bits of the sum written out by hand). The tests
// compare it with a plain double loop.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <type_traits>
#include <vector>

#include <xsimd/xsimd.hpp>

#include "arch.hpp"
#include "thread_pool.hpp"

namespace ctnn::kernels::cpu {

template <class Arch, bool Abs, class T>
double sum_range(const T* x, std::size_t lo, std::size_t hi) {
  double total = 0;
  std::size_t i = lo;
  if constexpr (simd_v<T, Arch> && std::is_same_v<T, float>) {
    using B = xsimd::batch<T, Arch>;
    constexpr std::size_t L = B::size, block = 256;
    while (i + L <= hi) {
      const std::size_t end = i + std::min(block, (hi - i) / L * L);
      B acc(T(0));
      for (; i < end; i += L) {
        const B v = B::load_unaligned(x + i);
        if constexpr (Abs) acc += xsimd::abs(v);
        else acc = xsimd::fma(v, v, acc);
      }
      total += double(xsimd::hadd(acc));
    }
  }
  for (; i < hi; ++i) {
    const double v = double(x[i]);
    total += Abs ? std::abs(v) : v * v;
  }
  return total;
}

template <class Arch, bool Abs, class T>
double sum_of(const T* x, std::size_t n) {
  constexpr std::size_t chunk = std::size_t(1) << 15;
  const std::size_t chunks = (n + chunk - 1) / chunk;
  if (chunks <= 1 || !std::is_same_v<T, float>) return sum_range<Arch, Abs>(x, 0, n);
  std::vector<double> part(chunks);
  thread_pool& pool = thread_pool::global();
  pool.run(
      chunks, [&](std::size_t c) { part[c] = sum_range<Arch, Abs>(x, c * chunk, std::min(n, (c + 1) * chunk)); },
      pool.size() > 1);
  double total = 0;
  for (double p : part) total += p;
  return total;
}

}  // namespace ctnn::kernels::cpu
