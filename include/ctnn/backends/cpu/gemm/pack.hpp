// ctnn/backends/cpu/gemm/pack.hpp — packing of GEMM operands, and the per-thread scratch they go to.
//
// simd::pack_a(MR, a, i0, m, k, ap): rows [i0, i0+MR) of a strided A as
// ap[p*MR + r] (zero rows past m). simd::pack_b(NR, b, j0, n, k, bp): columns
// [j0, j0+NR) of B as bp[p*NR + j] (zero columns past n). simd::scratch<T>(n):
// this thread's buffer of at least n values, 64-byte aligned, grown on demand,
// never shrunk; a gemm_plan's named slots (plan.hpp) are offsets into it.
// docs/design.md, "SIMD".
#pragma once
#include <algorithm>
#include <cstddef>
#include <cstring>
#include <new>

#include "plan.hpp"

namespace ctnn::kernels::cpu::simd {

// Per-thread scratch, 64-byte aligned, grown on demand, never shrunk.
template <class T>
T* scratch(std::size_t n) {
  struct buf {
    T* p = nullptr;
    std::size_t n = 0;
    ~buf() {
      if (p) ::operator delete[](p, std::align_val_t{64});
    }
  };
  thread_local buf b;
  if (n > b.n) {
    if (b.p) ::operator delete[](b.p, std::align_val_t{64});
    b.p = static_cast<T*>(::operator new[](n * sizeof(T), std::align_val_t{64}));
    b.n = n;
  }
  return b.p;
}

// Packs rows [i0, i0+MR) of A (zero past m) as ap[p*MR + r], p in [0, k).
template <class T>
void pack_a(std::size_t MR, strided<T> a, std::size_t i0, std::size_t m, std::size_t k, T* ap) {
  const std::size_t rows = std::min(MR, m - i0);
  if (a.cs == 1) {
    for (std::size_t r = 0; r < rows; ++r) {
      const T* src = a.p + (i0 + r) * a.rs;
      for (std::size_t p = 0; p < k; ++p) ap[p * MR + r] = src[p];
    }
    for (std::size_t r = rows; r < MR; ++r)
      for (std::size_t p = 0; p < k; ++p) ap[p * MR + r] = T(0);
  } else {
    for (std::size_t p = 0; p < k; ++p) {
      const T* src = a.p + p * a.cs + i0 * a.rs;
      T* dst = ap + p * MR;
      for (std::size_t r = 0; r < rows; ++r) dst[r] = src[r * a.rs];
      for (std::size_t r = rows; r < MR; ++r) dst[r] = T(0);
    }
  }
}

// Packs columns [j0, j0+NR) of B (zero past n) as bp[p*NR + j], p in [0, k).
template <class T>
void pack_b(std::size_t NR, strided<T> b, std::size_t j0, std::size_t n, std::size_t k, T* bp) {
  const std::size_t cols = std::min(NR, n - j0);
  if (b.cs == 1) {
    for (std::size_t p = 0; p < k; ++p) {
      const T* src = b.p + p * b.rs + j0;
      T* dst = bp + p * NR;
      std::memcpy(dst, src, cols * sizeof(T));
      for (std::size_t j = cols; j < NR; ++j) dst[j] = T(0);
    }
  } else {
    // Blocks of 8 values of each of the panel's columns: reads stay in a few
    // cache lines per column, writes are contiguous.
    constexpr std::size_t PB = 8;
    const T* src = b.p + j0 * b.cs;
    std::size_t p0 = 0;
    if (b.rs == 1)
      for (; p0 + PB <= k; p0 += PB) {
        T* dst = bp + p0 * NR;
        for (std::size_t j = 0; j < cols; ++j) {
          const T* s = src + j * b.cs + p0;
#pragma GCC unroll 8
          for (std::size_t q = 0; q < PB; ++q) dst[q * NR + j] = s[q];
        }
        for (std::size_t q = 0; q < PB; ++q)
          for (std::size_t j = cols; j < NR; ++j) dst[q * NR + j] = T(0);
      }
    for (std::size_t p = p0; p < k; ++p) {
      for (std::size_t j = 0; j < cols; ++j) bp[p * NR + j] = src[j * b.cs + p * b.rs];
      for (std::size_t j = cols; j < NR; ++j) bp[p * NR + j] = T(0);
    }
  }
}

}  // namespace ctnn::kernels::cpu::simd
