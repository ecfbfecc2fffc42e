// ctnn/kernels/cpu/simd_gemm.hpp — the xsimd GEMM behind kernels/cpu/gemm.hpp.
//
// simd_gemm<Arch>(M, N, K, A, B, C, ldc, bias, epi) computes, for any xsimd
// architecture Arch:  C[i,j] = epi(bias[j] + sum_p A(i,p) * B(p,j))
// where A(i,p) = a.p[i*a.rs + p*a.cs] and B(p,j) = b.p[p*b.rs + j*b.cs] (so
// transposed operands are strides, not copies), bias may be null (0), epi is
// none or relu, or any activation rule of kernels/functors.hpp (its forward
// runs on the accumulators before the store), C is row-major with row stride
// ldc and is overwritten.
// Method: A is read in place when one of its strides is 1 (else packed into
// MR-row micro-panels), B is packed into NR-column panels (or read in place
// for M <= 8 MR or a single panel when row-major), K is blocked by KC, and an MR x NR
// register-blocked micro-kernel accumulates with FMAs. Work is split into
// tasks by blocks of output rows and columns, each output computed by one task
// with the same summation order, so results do not depend on the thread count.
#pragma once
#include <algorithm>
#include <array>
#include <cstddef>
#include <cstring>
#include <memory>
#include <new>
#include <type_traits>

#include <xsimd/xsimd.hpp>

#include "../../config.hpp"
#include "../../kernels/functors.hpp"
#include "arch.hpp"
#include "thread_pool.hpp"

namespace ctnn::kernels::cpu {

enum class epilogue { none, relu };

// A strided read-only matrix view: element (i, j) is p[i*rs + j*cs].
template <class T>
struct strided {
  const T* p;
  std::size_t rs, cs;
};

namespace simd {

// Register blocking per architecture: MR rows x NV vectors of output.
template <class T, class Arch>
struct blocking {
  static constexpr std::size_t L = xsimd::batch<T, Arch>::size;
  static constexpr bool wide = L * sizeof(T) >= 64;  // 32 vector registers (AVX-512)
  // 8 x 2 vectors: 16 accumulators. 12 x 2 (24) measured no faster on this
  // machine and costs compile time; 16 registers (AVX2, SSE): 6 x 2.
  static constexpr std::size_t MR = wide ? 8 : 6;
  static constexpr std::size_t NV = 2;
  static constexpr std::size_t NR = NV * L;
  static constexpr std::size_t KC = 256;  // a KC x NR panel of B stays in L1
};

// Per-thread scratch, 64-byte aligned, grown on demand, never shrunk.
template <class T, int Slot>
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

// The first n < L lanes of a vector: AVX-512 masked loads and stores (no
// memory past p[n-1] is touched, as the scalar loops below); other ISAs go
// through a stack buffer.
template <class Arch, class T>
inline constexpr bool masked_v = std::is_base_of_v<xsimd::avx512f, Arch> &&
                                 (std::is_same_v<T, float> || std::is_same_v<T, double>);

template <class Arch, class T>
CTNN_FORCEINLINE xsimd::batch<T, Arch> load_n(const T* p, std::size_t n) {
  using B = xsimd::batch<T, Arch>;
  if (n >= B::size) return B::load_unaligned(p);
#if defined(__AVX512F__)
  if constexpr (masked_v<Arch, T>) {
    if constexpr (std::is_same_v<T, float>)
      return B(_mm512_maskz_loadu_ps(__mmask16((1u << n) - 1), p));
    else
      return B(_mm512_maskz_loadu_pd(__mmask8((1u << n) - 1), p));
  }
#endif
  alignas(64) T tmp[B::size] = {};
  for (std::size_t i = 0; i < n; ++i) tmp[i] = p[i];
  return B::load_aligned(tmp);
}
template <class Arch, class T>
CTNN_FORCEINLINE void store_n(xsimd::batch<T, Arch> v, T* p, std::size_t n) {
  using B = xsimd::batch<T, Arch>;
  if (n >= B::size) return v.store_unaligned(p);
#if defined(__AVX512F__)
  if constexpr (masked_v<Arch, T>) {
    if constexpr (std::is_same_v<T, float>)
      _mm512_mask_storeu_ps(p, __mmask16((1u << n) - 1), v);
    else
      _mm512_mask_storeu_pd(p, __mmask8((1u << n) - 1), v);
    return;
  }
#endif
  alignas(64) T tmp[B::size];
  v.store_aligned(tmp);
  for (std::size_t i = 0; i < n; ++i) p[i] = tmp[i];
}

// e.forward on a vector of accumulators. In host code only: nvcc's device
// pass, which reads host code too, must not instantiate a host-device rule
// (kernels/functors.hpp) with an xsimd type (a CUDA test compares with the CPU).
template <class E, class V>
CTNN_FORCEINLINE V epilogue_forward(const E& e, const V& v) {
#if defined(__CUDA_ARCH__)
  (void)e;
  return v;
#else
  return e.forward(v);
#endif
}

// C[0:mr, 0:nr] (=|+=) A_panel[MRt rows] * B_panel[kc x NV*L].
// a: element (r, p) at a[p*ars + r] when packed (PA), else at a[r*ars + p]
// (rows read in place); b: element (p, j) at b[p*ldb + j].
// init: start from bias (or 0) instead of C. act: e.forward applied before the store.
template <class Arch, std::size_t MRt, std::size_t NV, bool PA, class T, class E>
void micro(std::size_t kc, const T* a, std::size_t ars, const T* b, std::size_t ldb, T* c, std::size_t ldc,
           std::size_t mr, std::size_t nr, const T* bias, bool init, const E& e, bool act) {
  using B = xsimd::batch<T, Arch>;
  constexpr std::size_t L = B::size;
  auto cols = [&](std::size_t v) { return nr > v * L ? std::min(L, nr - v * L) : std::size_t(0); };
  B acc[MRt][NV];
  if (init) {
    // C is only written: ask for its lines now (with write intent), so that
    // the misses of a fresh output (an im2col gradient, 9 MB) overlap the
    // FMAs instead of stalling the stores at the end (not worth its
    // instructions for short K, where the tile is little work).
    if (kc >= 32)
      for (std::size_t r = 0; r < mr; ++r)
#pragma GCC unroll 4
        for (std::size_t v = 0; v < NV; ++v)
          if (cols(v)) __builtin_prefetch(c + r * ldc + v * L, 1, 3);
#pragma GCC unroll 4
    for (std::size_t v = 0; v < NV; ++v) {
      const B bv = bias && cols(v) ? load_n<Arch>(bias + v * L, cols(v)) : B(T(0));
#pragma GCC unroll 16
      for (std::size_t r = 0; r < MRt; ++r) acc[r][v] = bv;
    }
  } else {
#pragma GCC unroll 16
    for (std::size_t r = 0; r < MRt; ++r)
#pragma GCC unroll 4
      for (std::size_t v = 0; v < NV; ++v)
        acc[r][v] = r < mr && cols(v) ? load_n<Arch>(c + r * ldc + v * L, cols(v)) : B(T(0));
  }
  // In-place rows past mr repeat row mr-1 (computed, never stored).
  const T* rows[MRt];
  for (std::size_t r = 0; r < MRt; ++r) rows[r] = PA ? a + r : a + std::min(r, mr - 1) * ars;
  for (std::size_t p = 0; p < kc; ++p) {
    B bb[NV];
#pragma GCC unroll 4
    for (std::size_t v = 0; v < NV; ++v) bb[v] = B::load_unaligned(b + p * ldb + v * L);
#pragma GCC unroll 16
    for (std::size_t r = 0; r < MRt; ++r) {
      const B av(PA ? a[p * ars + r] : rows[r][p]);
#pragma GCC unroll 4
      for (std::size_t v = 0; v < NV; ++v) acc[r][v] = xsimd::fma(av, bb[v], acc[r][v]);
    }
  }
  if (act) {
#pragma GCC unroll 16
    for (std::size_t r = 0; r < MRt; ++r)
#pragma GCC unroll 4
      for (std::size_t v = 0; v < NV; ++v) acc[r][v] = epilogue_forward(e, acc[r][v]);
  }
#pragma GCC unroll 16
  for (std::size_t r = 0; r < MRt; ++r) {
    if (r >= mr) break;
#pragma GCC unroll 4
    for (std::size_t v = 0; v < NV; ++v)
      if (cols(v)) store_n<Arch>(acc[r][v], c + r * ldc + v * L, cols(v));
  }
}

// The micro-kernel instance for mr (<= MR) valid rows: 4 or MR rows (packed
// rows past mr are zero; in-place rows past mr repeat row mr-1). Few
// instances keep the compile time down.
template <class Arch, std::size_t NV, bool PA, class T, class E>
void micro_rows(std::size_t kc, const T* a, std::size_t ars, const T* b, std::size_t ldb, T* c, std::size_t ldc,
                std::size_t mr, std::size_t nr, const T* bias, bool init, const E& e, bool act) {
  constexpr std::size_t MR = blocking<T, Arch>::MR;
  if (mr <= 4) return micro<Arch, 4, NV, PA>(kc, a, ars, b, ldb, c, ldc, mr, nr, bias, init, e, act);
  return micro<Arch, MR, NV, PA>(kc, a, ars, b, ldb, c, ldc, mr, nr, bias, init, e, act);
}

// y[0:n] = epi(bias + x[0:k] * B[k x n]) for a row-major B (row stride ldb):
// one output row. Column chunks of V = 16 or 8 vectors (AVX-512; 8 or 4 with
// 16 registers) keep V accumulators in registers while rows of B stream
// through contiguously; the last columns go one vector at a time with two
// partial sums over p.
template <class Arch, std::size_t V, class T, class E>
void gemv_chunk(std::size_t k, const T* x, const T* b, std::size_t ldb, T* y, const T* bias, const E& e, bool act) {
  using B = xsimd::batch<T, Arch>;
  constexpr std::size_t L = B::size;
  B acc[V];
  for (std::size_t v = 0; v < V; ++v) acc[v] = bias ? B::load_unaligned(bias + v * L) : B(T(0));
  for (std::size_t p = 0; p < k; ++p) {
    const B xv(x[p]);
    const T* row = b + p * ldb;
#pragma GCC unroll 16
    for (std::size_t v = 0; v < V; ++v) acc[v] = xsimd::fma(xv, B::load_unaligned(row + v * L), acc[v]);
  }
  for (std::size_t v = 0; v < V; ++v) (act ? epilogue_forward(e, acc[v]) : acc[v]).store_unaligned(y + v * L);
}

template <class Arch, class T, class E>
void gemv(std::size_t n, std::size_t k, const T* x, const T* b, std::size_t ldb, T* y, const T* bias, const E& e,
          bool act) {
  using B = xsimd::batch<T, Arch>;
  constexpr std::size_t L = B::size, W = L * sizeof(T) >= 64 ? 16 : 8;  // 32 or 16 registers
  auto finish = [&](B s, std::size_t j, std::size_t cnt) {
    if (bias) s += load_n<Arch>(bias + j, cnt);
    if (act) s = epilogue_forward(e, s);
    store_n<Arch>(s, y + j, cnt);
  };
  std::size_t j = 0;
  for (; j + W * L <= n; j += W * L) gemv_chunk<Arch, W>(k, x, b + j, ldb, y + j, bias ? bias + j : nullptr, e, act);
  if (j + W / 2 * L <= n) {
    gemv_chunk<Arch, W / 2>(k, x, b + j, ldb, y + j, bias ? bias + j : nullptr, e, act);
    j += W / 2 * L;
  }
  for (; j < n; j += L) {
    const std::size_t cnt = std::min(L, n - j);
    B s0(T(0)), s1(T(0));
    std::size_t p = 0;
    if (cnt == L) {
      for (; p + 2 <= k; p += 2) {
        s0 = xsimd::fma(B(x[p]), B::load_unaligned(b + p * ldb + j), s0);
        s1 = xsimd::fma(B(x[p + 1]), B::load_unaligned(b + (p + 1) * ldb + j), s1);
      }
      if (p < k) s0 = xsimd::fma(B(x[p]), B::load_unaligned(b + p * ldb + j), s0);
    } else {
      // A full vector from row p < k-1 ends inside B when L - cnt <= ldb (its
      // extra lanes are never stored); only the last row needs a partial load.
      const std::size_t safe = L - cnt <= ldb ? k - 1 : 0;
      for (; p + 2 <= safe; p += 2) {
        s0 = xsimd::fma(B(x[p]), B::load_unaligned(b + p * ldb + j), s0);
        s1 = xsimd::fma(B(x[p + 1]), B::load_unaligned(b + (p + 1) * ldb + j), s1);
      }
      for (; p < k; ++p) s0 = xsimd::fma(B(x[p]), load_n<Arch>(b + p * ldb + j, cnt), s0);
    }
    finish(s0 + s1, j, cnt);
  }
}

// Where xsimd::haddp(rows) puts the sum of rows[l]: lane l, as documented,
// except in xsimd 8.1's AVX-512 float version, which swaps lanes 2-3 with
// 4-5 and 10-11 with 12-13. Probed once, so any xsimd version is read right.
template <class Arch, class T>
const std::array<unsigned char, xsimd::batch<T, Arch>::size>& haddp_lanes() {
  using V = xsimd::batch<T, Arch>;
  static constexpr std::size_t L = V::size;  // static: the lambda below uses it without a capture (clang)
  static const std::array<unsigned char, L> lane = [] {
    V probe[L];
    for (std::size_t l = 0; l < L; ++l) probe[l] = V(T(l));
    alignas(64) T out[L];
    xsimd::haddp(probe).store_aligned(out);
    std::array<unsigned char, L> where{};
    for (std::size_t k = 0; k < L; ++k) where[std::size_t(out[k] / T(L) + T(0.5))] = static_cast<unsigned char>(k);
    return where;
  }();
  return lane;
}

// C[i,j] = epi(bias[j] + sum_p A[i*lda + p] * B[j*ldb + p]) for a row-major A
// and a B whose columns are contiguous (dX = dY W^T reads W's rows): dot
// products vectorized along p, with no packing. A tile of R rows x J = L/R
// columns keeps L accumulators, folded by xsimd::haddp into one vector of
// the L sums; the last p % L values are masked loads. Column groups are the
// outer loop, so a group's J rows of B stay in L1 while every row of A
// (few: at most 16) passes; each group is one task of the pool, so results do
// not depend on the thread count. Rows past M and columns past N repeat the
// last one (computed, never stored).
template <class Arch, std::size_t R, class T, class E>
void dot_nt(std::size_t M, std::size_t N, std::size_t K, const T* a, std::size_t lda, const T* b, std::size_t ldb, T* c,
            std::size_t ldc, const T* bias, const E& e, bool act, bool parallel, thread_pool& pool) {
  using V = xsimd::batch<T, Arch>;
  constexpr std::size_t L = V::size, J = L / R;
  static_assert(L % R == 0, "dot_nt: R must divide the vector length");
  const std::size_t kv = K / L * L, kt = K - kv;
  const auto& lane = haddp_lanes<Arch, T>();
  auto group = [&](std::size_t g) {
    const std::size_t j0 = g * J, nj = std::min(J, N - j0);
    const T* bj[J];
    for (std::size_t jj = 0; jj < J; ++jj) bj[jj] = b + std::min(j0 + jj, N - 1) * ldb;
    for (std::size_t i0 = 0; i0 < M; i0 += R) {
      const std::size_t ni = std::min(R, M - i0);
      const T* ai[R];
      for (std::size_t r = 0; r < R; ++r) ai[r] = a + std::min(i0 + r, M - 1) * lda;
      V acc[L];
#pragma GCC unroll 16
      for (std::size_t l = 0; l < L; ++l) acc[l] = V(T(0));
      for (std::size_t p = 0; p < kv; p += L) {
        V av[R];
#pragma GCC unroll 4
        for (std::size_t r = 0; r < R; ++r) av[r] = V::load_unaligned(ai[r] + p);
#pragma GCC unroll 16
        for (std::size_t jj = 0; jj < J; ++jj) {
          const V bv = V::load_unaligned(bj[jj] + p);
#pragma GCC unroll 4
          for (std::size_t r = 0; r < R; ++r) acc[r * J + jj] = xsimd::fma(av[r], bv, acc[r * J + jj]);
        }
      }
      if (kt) {
        V av[R];
        for (std::size_t r = 0; r < R; ++r) av[r] = load_n<Arch>(ai[r] + kv, kt);
        for (std::size_t jj = 0; jj < J; ++jj) {
          const V bv = load_n<Arch>(bj[jj] + kv, kt);
          for (std::size_t r = 0; r < R; ++r) acc[r * J + jj] = xsimd::fma(av[r], bv, acc[r * J + jj]);
        }
      }
      alignas(64) T out[L];
      xsimd::haddp(acc).store_aligned(out);
      for (std::size_t r = 0; r < ni; ++r)
        for (std::size_t jj = 0; jj < nj; ++jj) {
          T v = out[lane[r * J + jj]] + (bias ? bias[j0 + jj] : T(0));
          c[(i0 + r) * ldc + j0 + jj] = act ? e.forward(v) : v;
        }
    }
  };
  pool.run((N + J - 1) / J, group, parallel);
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

// Below this many multiply-adds a product runs on the calling thread alone.
inline constexpr std::size_t parallel_threshold = std::size_t(1) << 20;


// dW = X^T dY (K x N) of a layer with fewer outputs than a vector (N < L, a
// compile-time constant; X is m x K, dY is m x N, both row-major): computed
// as dW^T = dY^T X by one N-row micro-kernel per panel of NR columns of X, so
// that every lane of every FMA is useful, dY and X are read in place (the
// last partial panel of X is packed), then transposed into dW. simd_gemm,
// whose N is a run-time value, has to split those N rows into a full block
// and a partial one. Panels go to the pool; each is one task, so the result
// does not depend on the thread count.
template <class Arch, std::size_t N, class T>
void narrow_weights_gradient(std::size_t K, std::size_t m, const T* x, const T* dy, T* dw,
                             thread_pool& pool = thread_pool::global()) {
  using blk = blocking<T, Arch>;
  constexpr std::size_t NV = blk::wide ? 2 : 1, NR = NV * blk::L;  // N*NV + NV + 1 registers
  static_assert(N >= 1 && N < blk::L, "narrow_weights_gradient: N must be below the vector length");
  if (K == 0) return;
  if (m == 0) {
    std::fill(dw, dw + K * N, T(0));
    return;
  }
  T* ct = scratch<T, 3>(N * K);
  const std::size_t panels = (K + NR - 1) / NR;
  T* tail = nullptr;
  if (K % NR) {
    tail = scratch<T, 2>(NR * m);
    pack_b(NR, strided<T>{x, K, 1}, (panels - 1) * NR, K, m, tail);
  }
  auto panel = [&](std::size_t jp) {
    const std::size_t j0 = jp * NR, nr = std::min(NR, K - j0);
    const bool in_place = nr == NR;
    micro<Arch, N, NV, true>(m, dy, N, in_place ? x + j0 : tail, in_place ? K : NR, ct + j0, K, N, nr,
                             static_cast<const T*>(nullptr), true, fn::relu_fn{}, false);
  };
  pool.run(panels, panel, m * N * K >= parallel_threshold && pool.size() > 1);
  for (std::size_t i = 0; i < K; ++i)
#pragma GCC unroll 16
    for (std::size_t j = 0; j < N; ++j) dw[i * N + j] = ct[j * K + i];
}


// The packed, register-blocked product with output panels NV vectors wide.
template <class Arch, std::size_t NV, class T, class E>
void blocked(std::size_t M, std::size_t N, std::size_t K, strided<T> a, strided<T> b, T* c, std::size_t ldc,
             const T* bias, const E& e, bool act, bool parallel, thread_pool& pool) {
  using blk = blocking<T, Arch>;
  constexpr std::size_t NR = NV * blk::L, KC = blk::KC;
  auto run = [&](std::size_t tasks, auto&& f) { pool.run(tasks, f, parallel); };
  // MC x NC: the output block of one task. Small tasks (about 2^17
  // multiply-adds, 1 to 8 panels of columns), so that a worker the OS
  // deschedules holds back little of the product; the partition depends on
  // the sizes only, never on the thread count.
  constexpr std::size_t MR = blk::MR, MC = 4 * MR;
  const std::size_t NC = NR * std::clamp<std::size_t>((std::size_t(1) << 17) / (MC * NR * K), 1, 8);
  const std::size_t row_blocks = (M + MR - 1) / MR, panels = (N + NR - 1) / NR;
  // Row-major A: the micro-kernel reads A's rows in place (MR streams, each
  // contiguous in k). Packing them cost as much as the product for one column
  // panel and 6-20 % of the forward GEMMs of the MLP (784x256, 256x128 at
  // batch 64 and 256) and about 19 % of a CNN step (im2col rows); only a
  // transposed A (dW = X^T dY) already has the packed layout, MR values of
  // column p contiguous, with a row stride of a.cs instead of MR: its full
  // row blocks are read in place too (packing them cost 12 % of a CNN step),
  // only a last partial block is packed (its missing rows must read zeros,
  // not memory past A). A with neither stride 1 is packed.
  const bool direct_a = a.cs == 1, direct_at = !direct_a && a.rs == 1;
  const std::size_t full_blocks = M / MR;
  const bool partial_in_place = direct_at && a.cs >= MR;
  T* ap = nullptr;
  if (direct_at) {
    // A last partial block is read in place too for columns p < K-1 (the
    // missing rows then read the next column's first values, inside A, and
    // are never stored: they lie within MR - 1 values past the block, inside
    // A when a.cs >= MR); only column K-1, where they would lie past A, is
    // copied, with zeros. With a.cs < MR the whole partial block is packed.
    if (M % MR) {
      ap = scratch<T, 1>(partial_in_place ? MR : MR * K);
      if (partial_in_place)
        pack_a(MR, strided<T>{a.p + (K - 1) * a.cs, a.rs, a.cs}, full_blocks * MR, M, 1, ap);
      else
        pack_a(MR, a, full_blocks * MR, M, K, ap);
    }
  } else if (!direct_a) {
    ap = scratch<T, 1>(row_blocks * MR * K);
    run(row_blocks, [&](std::size_t ib) { pack_a(MR, a, ib * MR, M, K, ap + ib * MR * K); });
  }

  // Small M (up to 8 row blocks: packing B cost 10-17 % of Y = X W at batch
  // 64, where each panel is read by 8 row blocks at most) or a single panel,
  // and row-major B: read B in place, except for the last, partial panel,
  // which is packed with zeros.
  // When the partial panel's extra columns fit in one row (NR - N % NR <=
  // b.rs), rows 0..K-2 are read in place too (the extra lanes read the next
  // row and are never stored) and only row K-1 is copied (split_tail).
  const bool direct = b.cs == 1 && (M <= 8 * blk::MR || N <= NR);
  // K blocks of equal length, at most KC (K = 288 is two blocks of 144, not
  // 256 + 32: a short last block pays the load and store of C for little work).
  const std::size_t kcb = (K + (K + KC - 1) / KC - 1) / ((K + KC - 1) / KC);
  const bool split_tail = direct && N % NR && K >= 2 && NR - N % NR <= b.rs;
  // Long K and small blocks of A and B (dW of a convolution: K = batch x
  // positions): K-block by K-block over every output tile, so that each
  // K block of A and B is read from memory once and stays in L2 while all
  // tiles use it; B is packed one K block at a time. Otherwise (large M or N)
  // each task runs through all of K for its tile. Every output still sums
  // its K blocks in ascending order, so results do not depend on the mode's
  // threads either.
  constexpr std::size_t l2_budget = std::size_t(512) << 10;
  const bool k_outer =
      !direct && K > KC && (M + N) * KC * sizeof(T) <= l2_budget && M * N * sizeof(T) <= l2_budget;
  T* bp = nullptr;
  if (split_tail) {
    bp = scratch<T, 2>(NR);
    strided<T> last{b.p + (K - 1) * b.rs, b.rs, 1};
    pack_b(NR, last, (panels - 1) * NR, N, 1, bp);
  } else if (direct) {
    if (N % NR) {
      bp = scratch<T, 2>(NR * K);
      pack_b(NR, b, (panels - 1) * NR, N, K, bp);
    }
  } else if (k_outer) {
    bp = scratch<T, 2>(panels * NR * kcb);
  } else {
    bp = scratch<T, 2>(panels * NR * K);
    run(panels, [&](std::size_t jp) { pack_b(NR, b, jp * NR, N, K, bp + jp * NR * K); });
  }
  // Panel jp of B from row p0 on (k_outer: of the packed K block) and its row stride.
  auto b_panel = [&](std::size_t jp, std::size_t p0, std::size_t& ldb) -> const T* {
    if (direct) {
      if (jp + 1 < panels || N % NR == 0 || split_tail) {
        ldb = b.rs;
        return b.p + p0 * b.rs + jp * NR;
      }
      ldb = NR;
      return bp + p0 * NR;
    }
    ldb = NR;
    if (k_outer) return bp + jp * NR * std::min(kcb, K - p0);
    return bp + jp * NR * K + p0 * NR;
  };

  // In-place B is K-blocked too when there are several row blocks (dW of a
  // first convolution: 9 rows, K = batch x positions), so that they share
  // each block of B while it is in cache instead of streaming all of B once
  // per row block; one row block, or split_tail, runs all of K at once.
  const std::size_t kc_max = direct && (split_tail || M <= MR) ? K : kcb;
  const std::size_t mblocks = (M + MC - 1) / MC, nblocks = (N + NC - 1) / NC;
  // The tile of one task, for K rows [p0, p0 + kc).
  auto tile = [&](std::size_t task, std::size_t p0, std::size_t kc) {
    const std::size_t i_lo = (task / nblocks) * MC, i_hi = std::min(M, i_lo + MC);
    const std::size_t j_lo = (task % nblocks) * NC, j_hi = std::min(N, j_lo + NC);
    const bool first = p0 == 0, last = p0 + kc == K;
    for (std::size_t j0 = j_lo; j0 < j_hi; j0 += NR) {
      std::size_t ldb;
      const T* bpanel = b_panel(j0 / NR, p0, ldb);
      const std::size_t nr = std::min(NR, N - j0);
      for (std::size_t i0 = i_lo; i0 < i_hi; i0 += MR) {
        T* ct = c + i0 * ldc + j0;
        const std::size_t mr = std::min(MR, M - i0);
        const T* bj = bias ? bias + j0 : nullptr;
        auto part = [&](std::size_t q0, std::size_t n_k, const T* bq, std::size_t ldq, bool init, bool fin) {
          if (direct_a)
            return micro_rows<Arch, NV, false>(n_k, a.p + i0 * a.rs + q0, a.rs, bq, ldq, ct, ldc, mr, nr, bj, init,
                                               e, act && fin);
          if (direct_at) {
            if (i0 / MR < full_blocks)
              return micro_rows<Arch, NV, true>(n_k, a.p + i0 + q0 * a.cs, a.cs, bq, ldq, ct, ldc, mr, nr, bj, init,
                                                e, act && fin);
            if (!partial_in_place)
              return micro_rows<Arch, NV, true>(n_k, ap + q0 * MR, MR, bq, ldq, ct, ldc, mr, nr, bj, init, e, act && fin);
            // the partial block: in place up to column K-2, column K-1 from the copy
            const std::size_t in_place = std::min(n_k, K - 1 - q0);
            if (in_place)
              micro_rows<Arch, NV, true>(in_place, a.p + i0 + q0 * a.cs, a.cs, bq, ldq, ct, ldc, mr, nr, bj, init,
                                         e, act && fin && in_place == n_k);
            if (in_place == n_k) return;
            return micro_rows<Arch, NV, true>(1, ap, MR, bq + (n_k - 1) * ldq, ldq, ct, ldc, mr, nr, bj,
                                              init && !in_place, e, act && fin);
          }
          micro_rows<Arch, NV, true>(n_k, ap + (i0 / MR) * MR * K + q0 * MR, MR, bq, ldq, ct, ldc, mr, nr, bj, init,
                                     e, act && fin);
        };
        if (split_tail && nr < NR) {
          part(0, K - 1, bpanel, ldb, true, false);
          part(K - 1, 1, bp, NR, false, true);
        } else {
          part(p0, kc, bpanel, ldb, first, last);
        }
      }
    }
  };
  // One task body for both modes (tile is compiled once): K rows [lo, hi) in
  // steps of `step`; k_outer runs one K block [lo, lo + step) per run.
  std::size_t lo = 0, hi = K, step = kc_max;
  auto task = [&](std::size_t t) {
    for (std::size_t p0 = lo; p0 < hi; p0 += step) tile(t, p0, std::min(step, hi - p0));
  };
  if (!k_outer) return run(mblocks * nblocks, task);
  for (std::size_t p0 = 0; p0 < K; p0 += kcb) {
    const std::size_t kc = std::min(kcb, K - p0);
    const strided<T> block{b.p + p0 * b.rs, b.rs, b.cs};
    for (std::size_t jp = 0; jp < panels; ++jp) pack_b(NR, block, jp * NR, N, kc, bp + jp * NR * kc);
    lo = p0;
    hi = p0 + kc;
    step = kc;
    run(mblocks * nblocks, task);
  }
}

}  // namespace simd

// The product with e.forward applied to every output when act is true (one
// instance for relu and none: both enum epilogues pass fn::relu_fn).
template <class Arch, class T, class E>
void simd_gemm_epilogue(std::size_t M, std::size_t N, std::size_t K, strided<T> a, strided<T> b, T* c, std::size_t ldc,
                        const T* bias, const E& e, bool act, thread_pool& pool) {
  if (M == 0 || N == 0) return;
  if (K == 0) {
    for (std::size_t i = 0; i < M; ++i)
      for (std::size_t j = 0; j < N; ++j) {
        const T v = bias ? bias[j] : T(0);
        c[i * ldc + j] = act ? e.forward(v) : v;
      }
    return;
  }
  const bool parallel = M * N * K >= simd::parallel_threshold && pool.size() > 1;

  // One output row and a row-major B: a matrix-vector product.
  if (M == 1 && b.cs == 1) {
    const T* x = a.p;
    if (a.cs != 1) {
      T* xs = simd::scratch<T, 0>(K);
      for (std::size_t p = 0; p < K; ++p) xs[p] = a.p[p * a.cs];
      x = xs;
    }
    // Column chunks of 8 vectors on the pool when the weights are large: each
    // core then streams its own part of B (batch-1 latency is bound by that).
    constexpr std::size_t CH = 8 * xsimd::batch<T, Arch>::size;
    if (N * K >= (std::size_t(1) << 16) && N >= 2 * CH && pool.size() > 1) {
      pool.run((N + CH - 1) / CH, [&](std::size_t t) {
        const std::size_t j0 = t * CH, n = std::min(CH, N - j0);
        simd::gemv<Arch>(n, K, x, b.p + j0, b.rs, c + j0, bias ? bias + j0 : nullptr, e, act);
      });
    } else {
      simd::gemv<Arch>(N, K, x, b.p, b.rs, c, bias, e, act);
    }
    return;
  }

  // One row, or few rows and a long K, with row-major A and B with contiguous
  // columns (dX = dY W^T at small batch): dot products, instead of packing
  // the transpose of B (as much memory traffic as the product itself at these
  // sizes). Measured: better than packing at batch 1 for every MLP shape and
  // at batch 16 for K = 256; worse at batch 16 for K = 128 and 10, where the
  // fold of each tile's sums weighs more.
  if ((M == 1 || (M <= 16 && K >= 256)) && a.cs == 1 && b.rs == 1 && b.cs != 1) {
    if (M == 1)
      simd::dot_nt<Arch, 1>(M, N, K, a.p, a.rs, b.p, b.cs, c, ldc, bias, e, act, parallel, pool);
    else
      simd::dot_nt<Arch, 2>(M, N, K, a.p, a.rs, b.p, b.cs, c, ldc, bias, e, act, parallel, pool);
    return;
  }

  // Fewer columns than a vector and A a transposed view (dW = X^T dY of a
  // narrow layer): compute C^T = B^T A^T, whose B operand (A's storage) is
  // row-major, then transpose it, adding the bias and the epilogue.
  constexpr std::size_t L = xsimd::batch<T, Arch>::size;
  if (N < L && a.rs == 1 && a.cs != 1 && M >= 2 * L) {
    T* ct = simd::scratch<T, 3>(N * M);
    simd_gemm_epilogue<Arch>(N, M, K, strided<T>{b.p, b.cs, b.rs}, strided<T>{a.p, a.cs, a.rs}, ct, M,
                             static_cast<const T*>(nullptr), fn::relu_fn{}, false, pool);
    for (std::size_t i = 0; i < M; ++i)
      for (std::size_t j = 0; j < N; ++j) {
        const T v = ct[j * M + i] + (bias ? bias[j] : T(0));
        c[i * ldc + j] = act ? e.forward(v) : v;
      }
    return;
  }

  // One vector of columns or fewer: panels one vector wide.
  if (N <= xsimd::batch<T, Arch>::size)
    simd::blocked<Arch, 1>(M, N, K, a, b, c, ldc, bias, e, act, parallel, pool);
  else
    simd::blocked<Arch, simd::blocking<T, Arch>::NV>(M, N, K, a, b, c, ldc, bias, e, act, parallel, pool);
}

template <class Arch, class T>
void simd_gemm(std::size_t M, std::size_t N, std::size_t K, strided<T> a, strided<T> b, T* c, std::size_t ldc,
               const T* bias, epilogue epi, thread_pool& pool = thread_pool::global()) {
  simd_gemm_epilogue<Arch>(M, N, K, a, b, c, ldc, bias, fn::relu_fn{}, epi == epilogue::relu, pool);
}
// The epilogue an activation rule E (kernels/functors.hpp): relu and identity
// share the enum's instance, any other rule gets its own.
template <class Arch, class T, class E>
  requires(!std::is_same_v<E, epilogue>)
void simd_gemm(std::size_t M, std::size_t N, std::size_t K, strided<T> a, strided<T> b, T* c, std::size_t ldc,
               const T* bias, const E& e, thread_pool& pool = thread_pool::global()) {
  if constexpr (std::is_same_v<E, fn::identity_fn> || std::is_same_v<E, fn::relu_fn>)
    simd_gemm_epilogue<Arch>(M, N, K, a, b, c, ldc, bias, fn::relu_fn{}, std::is_same_v<E, fn::relu_fn>, pool);
  else
    simd_gemm_epilogue<Arch>(M, N, K, a, b, c, ldc, bias, e, true, pool);
}

}  // namespace ctnn::kernels::cpu
