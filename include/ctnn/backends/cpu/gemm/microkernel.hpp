// ctnn/backends/cpu/gemm/microkernel.hpp — the MR x NR register-blocked GEMM micro-kernel.
//
// simd::micro<Arch, MRt, NV, PA>(kc, a, ars, b, ldb, c, ldc, mr, nr, bias, init, e, act)
// computes C[0:mr, 0:nr] (=|+=) A[mr x kc] B[kc x nr] with MRt x NV vector
// accumulators and FMAs, for any xsimd architecture Arch; micro_rows picks
// the 4- or MR-row instance (the blocked mode also runs MR - 1 rows: plan.short_tiles); micro_run runs
// full tiles down a panel (short K). Also here: gemm_target_of<T, Arch> (the plan's view of an architecture), simd::blocking (MR, NV, NR, KC from the plan),
// and load_n / store_n, the first n lanes of a vector (AVX-512 and AVX masked).
// Summation order per output: bias (or C), then p = 0, 1, ... kc-1.
// docs/design.md, "SIMD".
#pragma once
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <type_traits>

#include <xsimd/xsimd.hpp>

#include "../../../config.hpp"
#include "plan.hpp"

namespace ctnn::kernels::cpu {

// The plan's view of an xsimd architecture: lanes, vector registers, element bytes.
template <class T, class Arch>
constexpr gemm_target gemm_target_of() {
  constexpr std::size_t L = xsimd::batch<T, Arch>::size;
  return {L, L * sizeof(T) >= 64 ? 32 : 16, sizeof(T)};  // 32 vector registers: AVX-512
}

namespace simd {

// Register blocking per architecture (make_gemm_plan's blocked tiles): MR rows x NV vectors of output.
template <class T, class Arch>
struct blocking {
  static constexpr gemm_target target = gemm_target_of<T, Arch>();
  static constexpr std::size_t L = target.lanes;
  static constexpr bool wide = target.registers >= 32;
  static constexpr std::size_t MR = block_rows(target);
  static constexpr std::size_t NV = block_vectors;
  static constexpr std::size_t NR = NV * L;
  static constexpr std::size_t KC = block_k;
};

// The first n < L lanes of a vector: AVX-512 and AVX masked loads and
// stores (no memory past p[n-1] is touched, as the scalar loops below;
// masked-out lanes never fault); SSE goes through a stack buffer (a gemv
// with fewer outputs than a vector makes a partial load of every row of B).
template <class Arch, class T>
inline constexpr bool masked_v = std::is_base_of_v<xsimd::avx512f, Arch> &&
                                 (std::is_same_v<T, float> || std::is_same_v<T, double>);
template <class Arch, class T>
inline constexpr bool masked_avx = !masked_v<Arch, T> && std::is_base_of_v<xsimd::avx, Arch> &&
                                   (std::is_same_v<T, float> || std::is_same_v<T, double>);
template <class Arch, class T>
inline constexpr bool masked_any_v = masked_v<Arch, T> || masked_avx<Arch, T>;

#if defined(__AVX__)
// AVX's lane mask for the first n of 8 floats or 4 doubles (n < 8 or 4).
template <class T>
CTNN_FORCEINLINE __m256i avx_lanes(std::size_t n) {
  alignas(32) static constexpr std::int32_t m[16] = {-1, -1, -1, -1, -1, -1, -1, -1, 0, 0, 0, 0, 0, 0, 0, 0};
  return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(m + 8 - n * (sizeof(T) / 4)));
}
#endif

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
#if defined(__AVX__)
  if constexpr (masked_avx<Arch, T>) {
    if constexpr (std::is_same_v<T, float>)
      return B(_mm256_maskload_ps(p, avx_lanes<T>(n)));
    else
      return B(_mm256_maskload_pd(p, avx_lanes<T>(n)));
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
#if defined(__AVX__)
  if constexpr (masked_avx<Arch, T>) {
    if constexpr (std::is_same_v<T, float>)
      _mm256_maskstore_ps(p, avx_lanes<T>(n), v);
    else
      _mm256_maskstore_pd(p, avx_lanes<T>(n), v);
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

// How many rows of B ahead micro asks for with 64-byte vectors (AVX-512).
inline constexpr std::size_t b_ahead = 8;

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
    // instructions for short K, where the tile is little work). From K = 16
    // with 64-byte vectors (a tile row is two lines): the LSTM(128)'s input
    // projection, 1792 x 28 x 512 at batch 64 (3.6 MB out), 0.82-0.99x the CPU
    // time on AVX-512 with it at K = 28 (8 alternating rounds, median 0.96x,
    // loaded Xeon model 207); on AVX2 (a row is one line) no gain: from K = 32 there.
    if (kc >= (L * sizeof(T) >= 64 ? 16 : 32))
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
    // C is read here: ask for the lines of the tile below (the next tile of a task's column
    // panel; past a task's rows unused, never faulting), so that with K blocks outermost over a
    // C beyond L2 (plan: wide_c, 1024^2) its loads find them in cache
    if (kc >= 64)
      for (std::size_t r = 0; r < MRt; ++r)
#pragma GCC unroll 4
        for (std::size_t v = 0; v < NV; ++v) __builtin_prefetch(c + (MRt + r) * ldc + v * L, 1, 3);
#pragma GCC unroll 16
    for (std::size_t r = 0; r < MRt; ++r)
#pragma GCC unroll 4
      for (std::size_t v = 0; v < NV; ++v)
        acc[r][v] = r < mr && cols(v) ? load_n<Arch>(c + r * ldc + v * L, cols(v)) : B(T(0));
  }
  // In-place rows past mr repeat row mr-1 (computed, never stored).
  const T* rows[MRt];
  for (std::size_t r = 0; r < MRt; ++r) rows[r] = PA ? a + r : a + std::min(r, mr - 1) * ars;
  // A partial panel (nr < NV*L): its last row is read with masked loads (its
  // columns past nr are 0), so that a B read in place may end at column nr-1
  // of row kc-1 (a 10-wide W: b_access::split_tail); the rows before read
  // whole vectors, the lanes past nr computed, never stored.
  const std::size_t k_whole = nr < NV * L && kc ? kc - 1 : kc;
  // 64-byte vectors (AVX-512: a row of a panel is NV lines): B's row p + b_ahead is asked for
  // while row p is used. Without it the panel's loads from L2 stalled the FMAs (the inner loop
  // ran at 65 % of its rate with B in L1): 1024^2 went from 0.90-0.96x to 0.97-1.02x OpenBLAS,
  // Y = X W of 784x256 and 256x128 6-12 % faster, dW of 128x10 at 64 (K = 64) and Y = X W of
  // 128x10 2-4 % slower, the loop on a panel already in L1 within 2 % (loaded Xeon model 167, 3 alternating rounds;
  // bench/results/2026-12-06-s29-gemm29-bprefetch.md). With 32-byte vectors (AVX2, a row one
  // line) it measured 0.99-1.01x: not asked for there.
  auto k_step = [&](std::size_t p) CTNN_FORCEINLINE_LAMBDA {
    if constexpr (L * sizeof(T) >= 64)
#pragma GCC unroll 4
      for (std::size_t v = 0; v < NV; ++v) __builtin_prefetch(b + (p + b_ahead) * ldb + v * L, 0, 3);
    B bb[NV];
#pragma GCC unroll 4
    for (std::size_t v = 0; v < NV; ++v) bb[v] = B::load_unaligned(b + p * ldb + v * L);
#pragma GCC unroll 16
    for (std::size_t r = 0; r < MRt; ++r) {
      const B av(PA ? a[p * ars + r] : rows[r][p]);
#pragma GCC unroll 4
      for (std::size_t v = 0; v < NV; ++v) acc[r][v] = xsimd::fma(av, bb[v], acc[r][v]);
    }
  };
  // 16 registers (AVX2): K unrolled by 4 (the loop's counter and B's pointer once per 4 steps).
  // Interleaved runs of the same products in one program, the MLP's shapes at batch 256
  // and 1024^2, 0.93-0.99x the CPU time (loaded Xeon model 207; bench/results/
  // 2026-12-06-s25-gemm25-unroll.md); on AVX-512 0.81-1.08x with 8 x 2 tiles. With 12 x 2
  // tiles (plan.hpp's block_rows) by 2 on AVX-512: 1024^2 1.03-1.05x the GFLOP/s of the loop
  // not unrolled, Y = X W of 784x256 at 64 1.00-1.03x (loaded Xeon model 167; gemm30).
  if constexpr (L * sizeof(T) < 64) {
#pragma GCC unroll 4
    for (std::size_t p = 0; p < k_whole; ++p) k_step(p);
  } else {
#pragma GCC unroll 2
    for (std::size_t p = 0; p < k_whole; ++p) k_step(p);
  }
  if (k_whole < kc) {
    const std::size_t p = k_whole;
    B bb[NV];
#pragma GCC unroll 4
    for (std::size_t v = 0; v < NV; ++v) bb[v] = cols(v) ? load_n<Arch>(b + p * ldb + v * L, cols(v)) : B(T(0));
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

// micro_run: `blocks` full MR x NV*L tiles down one column panel (A as in
// micro, PA: a[p*ars + r], the next block at a + MR; else rows in place,
// a[r*ars + p]; B as in micro), each C = e(bias + A B) over all kc: micro's
// summation order, without its per-tile checks of mr, nr and init (the
// plan's rows_run, short K, where a tile is little work).
template <class Arch, std::size_t MR, std::size_t NV, bool PA, class T, class E>
void micro_run(std::size_t blocks, std::size_t kc, const T* a, std::size_t ars, const T* b, std::size_t ldb, T* c,
               std::size_t ldc, const T* bias, const E& e, bool act) {
  using B = xsimd::batch<T, Arch>;
  constexpr std::size_t L = B::size;
  for (std::size_t blk = 0; blk < blocks; ++blk, a += PA ? MR : MR * ars, c += MR * ldc) {
    B acc[MR][NV];
#pragma GCC unroll 4
    for (std::size_t v = 0; v < NV; ++v) {
      const B bv = bias ? B::load_unaligned(bias + v * L) : B(T(0));
#pragma GCC unroll 16
      for (std::size_t r = 0; r < MR; ++r) acc[r][v] = bv;
    }
    for (std::size_t p = 0; p < kc; ++p) {
      B bb[NV];
#pragma GCC unroll 4
      for (std::size_t v = 0; v < NV; ++v) bb[v] = B::load_unaligned(b + p * ldb + v * L);
#pragma GCC unroll 16
      for (std::size_t r = 0; r < MR; ++r) {
        const B av(PA ? a[p * ars + r] : a[r * ars + p]);
#pragma GCC unroll 4
        for (std::size_t v = 0; v < NV; ++v) acc[r][v] = xsimd::fma(av, bb[v], acc[r][v]);
      }
    }
    if (act) {
#pragma GCC unroll 16
      for (std::size_t r = 0; r < MR; ++r)
#pragma GCC unroll 4
        for (std::size_t v = 0; v < NV; ++v) acc[r][v] = epilogue_forward(e, acc[r][v]);
    }
#pragma GCC unroll 16
    for (std::size_t r = 0; r < MR; ++r)
#pragma GCC unroll 4
      for (std::size_t v = 0; v < NV; ++v) acc[r][v].store_unaligned(c + r * ldc + v * L);
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

}  // namespace simd
}  // namespace ctnn::kernels::cpu
