// ctnn/backends/cpu/gemm/pack.hpp — packing of GEMM operands, and the per-thread scratch they go to.
//
// simd::pack_a(MR, a, i0, m, k, ap): rows [i0, i0+MR) of a strided A as
// ap[p*MR + r] (zero rows past m); simd::pack_a_columns<Arch, MR>(a, b0, b1, k, ap): the full
// blocks [b0, b1) of a transposed A so, block b at ap + b*MR*k. simd::pack_b<Arch>(NR, b, j0, n, k, bp): columns
// [j0, j0+NR) of B as bp[p*NR + j] (zero columns past n). simd::transpose_narrow<N, Arch>(K,
// src, dst): dst[i*N + j] = src[j*K + i] (the narrow dW). simd::scratch<T>(n):
// this thread's buffer of at least n values, 64-byte aligned, grown on demand,
// never shrunk; a gemm_plan's named slots (plan.hpp) are offsets into it.
// docs/design.md, "SIMD".
#pragma once
#include <algorithm>
#include <cstddef>
#include <cstring>
#include <new>
#include <type_traits>

#include <xsimd/xsimd.hpp>

#include "../../../config.hpp"
#include "plan.hpp"

namespace ctnn::kernels::cpu::simd {

// Per-thread scratch, 64-byte aligned, grown on demand, never shrunk; each Tag is a buffer of its
// own (0: the GEMM's; fused_mlp.hpp uses 1-3).
template <class T, int Tag = 0>
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

// dst[i*N + j] = src[j*K + i], i < K, j < N (N below the vector's lanes): dW from the dW^T that
// simd::narrow_weights_gradient computes. AVX-512 floats: 16 columns of src at a time, its N rows
// and 16 - N zero vectors transposed as 16 x 16 in registers, N lanes of each stored; the rest one
// value at a time. The value-at-a-time loop over all of dW (128 x 10: 1280 gathered values) took
// about a quarter of dW = X^T dY of the 128x10 layer at batch 64 (gemm31).
template <std::size_t N, class Arch, class T>
void transpose_narrow(std::size_t K, const T* src, T* dst) {
  std::size_t i = 0;
#if defined(__AVX512F__)
  if constexpr (std::is_same_v<T, float> && std::is_base_of_v<xsimd::avx512f, Arch> && N < 16) {
    const __mmask16 lanes = __mmask16((1u << N) - 1);
    for (; i + 16 <= K; i += 16) {
      __m512 r[16], t[16];
#pragma GCC unroll 16
      for (std::size_t j = 0; j < 16; ++j) r[j] = j < N ? _mm512_loadu_ps(src + j * K + i) : _mm512_setzero_ps();
#pragma GCC unroll 8
      for (std::size_t j = 0; j < 16; j += 2) {
        t[j] = _mm512_unpacklo_ps(r[j], r[j + 1]);
        t[j + 1] = _mm512_unpackhi_ps(r[j], r[j + 1]);
      }
#pragma GCC unroll 4
      for (std::size_t j = 0; j < 16; j += 4) {
        r[j] = _mm512_shuffle_ps(t[j], t[j + 2], 0x44);
        r[j + 1] = _mm512_shuffle_ps(t[j], t[j + 2], 0xEE);
        r[j + 2] = _mm512_shuffle_ps(t[j + 1], t[j + 3], 0x44);
        r[j + 3] = _mm512_shuffle_ps(t[j + 1], t[j + 3], 0xEE);
      }
#pragma GCC unroll 4
      for (std::size_t q = 0; q < 4; ++q) {
        t[q] = _mm512_shuffle_f32x4(r[q], r[q + 4], 0x88);
        t[q + 4] = _mm512_shuffle_f32x4(r[q], r[q + 4], 0xDD);
        t[q + 8] = _mm512_shuffle_f32x4(r[q + 8], r[q + 12], 0x88);
        t[q + 12] = _mm512_shuffle_f32x4(r[q + 8], r[q + 12], 0xDD);
      }
#pragma GCC unroll 8
      for (std::size_t q = 0; q < 8; ++q) {
        r[q] = _mm512_shuffle_f32x4(t[q], t[q + 8], 0x88);
        r[q + 8] = _mm512_shuffle_f32x4(t[q], t[q + 8], 0xDD);
      }
#pragma GCC unroll 16
      for (std::size_t l = 0; l < 16; ++l) _mm512_mask_storeu_ps(dst + (i + l) * N, lanes, r[l]);
    }
  }
#endif
  for (; i < K; ++i)
#pragma GCC unroll 16
    for (std::size_t j = 0; j < N; ++j) dst[i * N + j] = src[j * K + i];
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
  } else if (a.rs == 1 && rows == MR && (MR == 6 || MR == 8 || MR == 12)) {
    // A transposed (dW = X^T dY), a full block: MR contiguous values of each
    // column, copied with a constant count (the loop below, whose count and
    // stride are run-time values, copied one value at a time)
    auto copy = [&]<std::size_t R>(std::integral_constant<std::size_t, R>) {
      for (std::size_t p = 0; p < k; ++p) {
        const T* src = a.p + p * a.cs + i0;
#pragma GCC unroll 12
        for (std::size_t r = 0; r < R; ++r) ap[p * R + r] = src[r];
      }
    };
    if (MR == 6)
      copy(std::integral_constant<std::size_t, 6>{});
    else if (MR == 8)
      copy(std::integral_constant<std::size_t, 8>{});
    else
      copy(std::integral_constant<std::size_t, 12>{});
  } else {
    for (std::size_t p = 0; p < k; ++p) {
      const T* src = a.p + p * a.cs + i0 * a.rs;
      T* dst = ap + p * MR;
      for (std::size_t r = 0; r < rows; ++r) dst[r] = src[r * a.rs];
      for (std::size_t r = rows; r < MR; ++r) dst[r] = T(0);
    }
  }
}

// Packs the full MR-row blocks [b0, b1) of a transposed A (a.rs == 1: MR contiguous values of
// each column) as pack_a does, block b at ap + b*MR*k: K outermost, the blocks of a strip side by
// side, one vector load and one vector store a block and column (the vector is at least MR wide:
// at most 2 MR: its last lanes land in the next column's slot, written next; the last column is
// copied exactly; a.cs at least the vector, so that no load passes A's last storage row). One value
// at a time, block by block, that copy took 7.5 % of dW of 784x256 at 256 on AVX2, 6.2 % so
// (s34 gemm34, perf, one thread).
template <class Arch, std::size_t MR, class T>
void pack_a_columns(strided<T> a, std::size_t b0, std::size_t b1, std::size_t k, T* ap) {
  using V = xsimd::batch<T, Arch>;
  static_assert(V::size >= MR && V::size <= 2 * MR, "pack_a_columns: a vector must hold a column of a block, and at most two");
  if (k == 0) return;
  for (std::size_t p = 0; p + 1 < k; ++p) {
    const T* src = a.p + p * a.cs;
    for (std::size_t b = b0; b < b1; ++b) V::load_unaligned(src + b * MR).store_unaligned(ap + b * MR * k + p * MR);
  }
  const T* src = a.p + (k - 1) * a.cs;
  for (std::size_t b = b0; b < b1; ++b) {
    T* dst = ap + b * MR * k + (k - 1) * MR;
#pragma GCC unroll 16
    for (std::size_t r = 0; r < MR; ++r) dst[r] = src[b * MR + r];
  }
}

// Whether pack_b transposes 8 x 8 blocks of floats with AVX shuffles on Arch.
template <class Arch, class T>
inline constexpr bool avx_transpose_v =
    std::is_same_v<T, float> && (std::is_base_of_v<xsimd::avx, Arch> || std::is_base_of_v<xsimd::avx512f, Arch>);

#if defined(__AVX__)
// dst[q*ld + j] = src[j*cs + q] for j, q in [0, 8): eight columns of B (8
// contiguous values each) to eight rows of the panel.
CTNN_FORCEINLINE void transpose8(const float* src, std::size_t cs, float* dst, std::size_t ld) {
  __m256 r[8], t[8], s[8];
#pragma GCC unroll 8
  for (int j = 0; j < 8; ++j) r[j] = _mm256_loadu_ps(src + j * cs);
#pragma GCC unroll 4
  for (int j = 0; j < 8; j += 2) {
    t[j] = _mm256_unpacklo_ps(r[j], r[j + 1]);
    t[j + 1] = _mm256_unpackhi_ps(r[j], r[j + 1]);
  }
#pragma GCC unroll 2
  for (int h = 0; h < 8; h += 4) {
    s[h] = _mm256_shuffle_ps(t[h], t[h + 2], 0x44);
    s[h + 1] = _mm256_shuffle_ps(t[h], t[h + 2], 0xEE);
    s[h + 2] = _mm256_shuffle_ps(t[h + 1], t[h + 3], 0x44);
    s[h + 3] = _mm256_shuffle_ps(t[h + 1], t[h + 3], 0xEE);
  }
#pragma GCC unroll 4
  for (int q = 0; q < 4; ++q) {
    _mm256_storeu_ps(dst + q * ld, _mm256_permute2f128_ps(s[q], s[q + 4], 0x20));
    _mm256_storeu_ps(dst + (q + 4) * ld, _mm256_permute2f128_ps(s[q], s[q + 4], 0x31));
  }
}
#endif

// Packs columns [j0, j0+NR) of B (zero past n) as bp[p*NR + j], p in [0, k).
// B with contiguous columns (dX = dY W^T): 8 x 8 blocks transposed in
// registers on AVX and AVX-512 (floats), one value at a time otherwise.
template <class Arch, class T>
void pack_b(std::size_t NR, strided<T> b, std::size_t j0, std::size_t n, std::size_t k, T* bp) {
  const std::size_t cols = std::min(NR, n - j0);
  if (b.cs == 1) {
    using V = xsimd::batch<T, Arch>;
    constexpr std::size_t L = V::size;
    // Full panels (NR a multiple of the vector: every plan's) by whole
    // vectors: a memcpy call per row of 16 floats cost 6 % of Y = X W of
    // 784x256 at batch 256 on AVX2 (gemm20).
    if (cols == NR && NR % L == 0) {
      for (std::size_t p = 0; p < k; ++p) {
        const T* src = b.p + p * b.rs + j0;
        T* dst = bp + p * NR;
        for (std::size_t j = 0; j < NR; j += L) V::load_unaligned(src + j).store_unaligned(dst + j);
      }
      return;
    }
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
      for (std::size_t next = 0; next < k && k >= PB; next += PB) {
        // a last partial block of rows: the block of the last PB rows
        // instead (rows written twice with the same values; K = 10 is two
        // transposed blocks, not one and 2 x NR scalar copies)
        p0 = std::min(next, k - PB);
        T* dst = bp + p0 * NR;
        std::size_t j = 0;
#if defined(__AVX__)
        if constexpr (avx_transpose_v<Arch, T>)
          for (; j + 8 <= cols; j += 8) transpose8(src + j * b.cs + p0, b.cs, dst + j, NR);
#endif
        for (; j < cols; ++j) {
          const T* s = src + j * b.cs + p0;
#pragma GCC unroll 8
          for (std::size_t q = 0; q < PB; ++q) dst[q * NR + j] = s[q];
        }
        for (std::size_t q = 0; q < PB; ++q)
          for (std::size_t j = cols; j < NR; ++j) dst[q * NR + j] = T(0);
        p0 += PB;
      }
    for (std::size_t p = p0; p < k; ++p) {
      for (std::size_t j = 0; j < cols; ++j) bp[p * NR + j] = src[j * b.cs + p * b.rs];
      for (std::size_t j = cols; j < NR; ++j) bp[p * NR + j] = T(0);
    }
  }
}

}  // namespace ctnn::kernels::cpu::simd
