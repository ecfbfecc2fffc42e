// ctnn/backends/cpu/gemm/gemv.hpp — the GEMM paths for one or few output rows, without packing.
//
// simd::gemv<Arch>(n, k, x, B, ldb, y, bias, e, act): y = e(bias + x B) for a
// row-major B, column chunks of vectors held in registers while B streams (on
// 16 registers past 24 vectors: B's rows whole, 8 side by side, y in L1);
// the rows of B where x is 0 are skipped (not read) when at least 1/8 of x is.
// simd::dot_nt<Arch, R>(M, N, K, A, lda, B, ldb, C, ldc, bias, e, act, parallel,
// pool): C = e(bias + A B^T) for a row-major A and B with contiguous columns
// (dX = dY W^T at small batch), dot products along K folded by xsimd::haddp.
// simd::gemv_gate_blocks<Arch, G, V>(k, u, x, B, ldb, bias, y, f, reverse): one row's
// recurrent product for G gates of u units, by blocks of units, each block's
// outputs handed to f (a cell's rule) right after they are computed (reverse:
// blocks and rows of B last to first, for L1 reuse between a layer's steps).
// make_gemm_plan (plan.hpp) chooses them (modes gemv and dot_nt). Each output
// is computed by one task, so results do not depend on the thread count.
// docs/design.md, "SIMD".
#pragma once
#include <algorithm>
#include <array>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include <xsimd/xsimd.hpp>

#include "../thread_pool.hpp"
#include "microkernel.hpp"

namespace ctnn::kernels::cpu::simd {

// Which rows of B a gemv reads: bit p % 64 of word p / 64 is set when x[p] !=
// 0. A row where x is 0 adds exactly nothing to a sum that does not start at
// -0, so gemv skips it when at least 1/8 of x is 0 (ReLU outputs and image
// backgrounds are about half zeros); its weights are then not read (an
// infinite or NaN weight there does not make the output NaN). Up to
// nonzero_words x 64 values of x; a longer x reads every row.
inline constexpr std::size_t nonzero_words = 64;

// x86 targets whose compare gives the lanes' bits in one instruction
// (movemask, AVX-512's mask registers): nonzero_lanes below.
template <class Arch, class T>
inline constexpr bool lane_bits_v =
    (std::is_same_v<T, float> || std::is_same_v<T, double>) &&
    (std::is_base_of_v<xsimd::avx512f, Arch> || std::is_base_of_v<xsimd::avx, Arch> || std::is_base_of_v<xsimd::sse2, Arch>);

// Bit l set where lane l of v is not 0; NaN counts as not 0 (an unordered
// compare), so a NaN in x is read and reaches y. Only where lane_bits_v.
template <class Arch, class T>
CTNN_FORCEINLINE std::uint64_t nonzero_lanes(const xsimd::batch<T, Arch>& v) {
  constexpr bool f = std::is_same_v<T, float>;
#if defined(__AVX512F__)
  if constexpr (std::is_base_of_v<xsimd::avx512f, Arch>) {
    if constexpr (f) return _mm512_cmp_ps_mask(v, _mm512_setzero_ps(), _CMP_NEQ_UQ);
    else return _mm512_cmp_pd_mask(v, _mm512_setzero_pd(), _CMP_NEQ_UQ);
  }
#endif
#if defined(__AVX__)
  if constexpr (std::is_base_of_v<xsimd::avx, Arch>) {
    if constexpr (f) return unsigned(_mm256_movemask_ps(_mm256_cmp_ps(v, _mm256_setzero_ps(), _CMP_NEQ_UQ)));
    else return unsigned(_mm256_movemask_pd(_mm256_cmp_pd(v, _mm256_setzero_pd(), _CMP_NEQ_UQ)));
  }
#endif
#if defined(__SSE2__)
  if constexpr (std::is_base_of_v<xsimd::sse2, Arch>) {
    if constexpr (f) return unsigned(_mm_movemask_ps(_mm_cmpneq_ps(v, _mm_setzero_ps())));  // cmpneq: unordered
    else return unsigned(_mm_movemask_pd(_mm_cmpneq_pd(v, _mm_setzero_pd())));
  }
#endif
  (void)v;
  static_assert(lane_bits_v<Arch, T>, "nonzero_lanes: an x86 target (SSE2, AVX, AVX-512) and float or double");
  return 0;
}

template <class Arch, class T>
void nonzero_rows(std::size_t k, const T* x, std::uint64_t* words) {
  using B = xsimd::batch<T, Arch>;
  constexpr std::size_t L = B::size;
  if constexpr (lane_bits_v<Arch, T>) {
    // One compare and one movemask (or mask register) a vector: 64 / L of them a word
    // (docs/performance.md, "Inference at batch 1").
    const std::size_t kv = k / L * L;
    std::size_t i = 0;
    for (std::size_t w = 0; w * 64 < k; ++w) {
      std::uint64_t m = 0;
      const std::size_t end = std::min(kv, w * 64 + 64);
#pragma GCC unroll 8
      for (; i < end; i += L) m |= nonzero_lanes<Arch>(B::load_unaligned(x + i)) << (i - w * 64);
      if (i == kv && i < k && i < w * 64 + 64) {  // the last k % L values (lanes past k: 0)
        m |= nonzero_lanes<Arch>(load_n<Arch>(x + i, k - i)) << (i - w * 64);
        i = k;
      }
      words[w] = m;
    }
  } else {  // other targets (no movemask): value by value; !(x == 0) holds for NaN
    for (std::size_t w = 0; w * 64 < k; ++w) {
      std::uint64_t m = 0;
      for (std::size_t p = w * 64; p < std::min(k, w * 64 + 64); ++p) m |= std::uint64_t(!(x[p] == T(0))) << (p - w * 64);
      words[w] = m;
    }
  }
}

// Calls f(p) for every row p < k that rows (nonzero_rows of x) selects, in
// ascending order; every row when rows is null.
template <class F>
CTNN_FORCEINLINE void for_each_row(std::size_t k, const std::uint64_t* rows, F&& f) {
  if (!rows) {
    for (std::size_t p = 0; p < k; ++p) f(p);
    return;
  }
  for (std::size_t w = 0; w * 64 < k; ++w)
    for (std::uint64_t m = rows[w]; m; m &= m - 1) f(w * 64 + std::size_t(std::countr_zero(m)));
}

// The positions of the set bits of a byte m, ascending, 16 bits each: at[m][0]
// holds the first four, at[m][1] the next four (4 KiB, for row_list).
struct byte_positions {
  std::uint64_t at[256][2];
  constexpr byte_positions() : at{} {
    for (unsigned m = 0; m < 256; ++m)
      for (unsigned b = 0, c = 0; b < 8; ++b)
        if (m >> b & 1) {
          at[m][c / 4] |= std::uint64_t(b) << (16 * (c % 4));
          ++c;
        }
  }
};
inline constexpr byte_positions byte_positions_table{};

// Writes the rows p < k that rows (nonzero_rows of x) selects to list, in
// ascending order (for_each_row's), and returns their count. A byte of the
// words at a time, without a branch on its bits: the byte's positions from
// byte_positions_table plus its first row, added to the four 16-bit lanes of
// two words at once, stored as 8 values whatever the byte's count (a loop over
// the bits takes a cycle a row and a branch miss a word: docs/performance.md,
// "Inference at batch 1"). list needs room for k + 8 values; k <= nonzero_words
// x 64.
inline std::size_t row_list(std::size_t k, const std::uint64_t* rows, std::uint16_t* list) {
  std::size_t count = 0;
  if constexpr (std::endian::native != std::endian::little) {  // the lanes below are little-endian
    for_each_row(k, rows, [&](std::size_t p) { list[count++] = std::uint16_t(p); });
    return count;
  }
  for (std::size_t w = 0; w * 64 < k; ++w) {
    std::uint64_t m = rows[w];
#pragma GCC unroll 8
    for (std::size_t q = 0; q < 8; ++q, m >>= 8) {
      const unsigned byte = unsigned(m & 0xff);
      const std::uint64_t first = std::uint64_t(w * 64 + q * 8) * 0x0001000100010001ull;  // in each 16-bit lane
      const std::uint64_t lo = byte_positions_table.at[byte][0] + first, hi = byte_positions_table.at[byte][1] + first;
      std::memcpy(list + count, &lo, sizeof lo);
      std::memcpy(list + count + 4, &hi, sizeof hi);
      count += std::size_t(std::popcount(byte));
    }
  }
  return count;
}

// y[0:n] = epi(bias + x[0:k] * B[k x n]) for a row-major B (row stride ldb):
// one output row. Column chunks of V = 16 or 8 vectors (AVX-512; 12, 8 or 4
// with 16 registers: gemv_rows) keep V accumulators in registers while the rows of B that
// `rows` selects stream through contiguously, in ascending order (so each
// output's sum does not depend on the chunking); the last columns go to
// gemv_tail.
template <class Arch, std::size_t V, class T, class E>
void gemv_chunk(std::size_t k, const T* x, const T* b, std::size_t ldb, T* y, const T* bias, const E& e, bool act,
                const std::uint64_t* rows) {
  using B = xsimd::batch<T, Arch>;
  constexpr std::size_t L = B::size;
  B acc[V];
  for (std::size_t v = 0; v < V; ++v) acc[v] = bias ? B::load_unaligned(bias + v * L) : B(T(0));
  for_each_row(k, rows, [&](std::size_t p) {
    const B xv(x[p]);
    const T* row = b + p * ldb;
#pragma GCC unroll 16
    for (std::size_t v = 0; v < V; ++v) acc[v] = xsimd::fma(xv, B::load_unaligned(row + v * L), acc[v]);
  });
  for (std::size_t v = 0; v < V; ++v) (act ? epilogue_forward(e, acc[v]) : acc[v]).store_unaligned(y + v * L);
}

// The rows gemv reads: words (nonzero_words of them) filled by nonzero_rows
// when at least 1/8 of x[0:k] is 0, else null (every row: the plain loop is
// cheaper).
template <class Arch, class T>
const std::uint64_t* rows_to_read(std::size_t k, const T* x, std::uint64_t* words) {
  if (k > nonzero_words * 64) return nullptr;
  nonzero_rows<Arch>(k, x, words);
  std::size_t nz = 0;
  for (std::size_t w = 0; w * 64 < k; ++w) nz += std::size_t(std::popcount(words[w]));
  return 8 * nz <= 7 * k ? words : nullptr;
}

// The last c columns of a gemv, (G-1) L < c <= G L (fewer than a chunk),
// reading rows list[0:count] (ascending; rows 0..count-1 when list is null):
// G vectors, each with two partial sums (alternate rows read, added at the
// end, then the bias), in one pass over the rows (one vector per pass made
// a last layer's 10 outputs on AVX2 two passes of two FMA chains each). A
// full load of the last vector from row p < k-1 ends inside B when L - cnt
// <= ldb (its extra lanes are never stored); only the last row then needs a
// partial load.
template <class Arch, std::size_t G, class T, class E>
void gemv_tail(std::size_t c, std::size_t k, const T* x, const T* b, std::size_t ldb, T* y, const T* bias, const E& e,
               bool act, const std::uint16_t* list, std::size_t count) {
  using B = xsimd::batch<T, Arch>;
  constexpr std::size_t L = B::size;
  const std::size_t cnt = c - (G - 1) * L;  // columns of the last vector, 1 to L
  const std::size_t safe = cnt == L ? k : L - cnt <= ldb ? k - 1 : 0;
  B s0[G], s1[G];
#pragma GCC unroll 4
  for (std::size_t v = 0; v < G; ++v) s0[v] = s1[v] = B(T(0));
  auto step = [&](B(&s)[G], std::size_t p) {
    const B xv(x[p]);
    const T* r = b + p * ldb;
#pragma GCC unroll 4
    for (std::size_t v = 0; v + 1 < G; ++v) s[v] = xsimd::fma(xv, B::load_unaligned(r + v * L), s[v]);
    const B last = p < safe ? B::load_unaligned(r + (G - 1) * L) : load_n<Arch>(r + (G - 1) * L, cnt);
    s[G - 1] = xsimd::fma(xv, last, s[G - 1]);
  };
  auto run = [&](auto at) {  // at(i): the i-th row read
    std::size_t i = 0;
    for (; i + 2 <= count; i += 2) {
      step(s0, at(i));
      step(s1, at(i + 1));
    }
    if (i < count) step(s0, at(i));
  };
  if (list) run([&](std::size_t i) { return std::size_t(list[i]); });
  else run([](std::size_t i) { return i; });
#pragma GCC unroll 4
  for (std::size_t v = 0; v < G; ++v) {
    const std::size_t n = v + 1 < G ? L : cnt;
    B sum = s0[v] + s1[v];
    if (bias) sum += load_n<Arch>(bias + v * L, n);
    if (act) sum = epilogue_forward(e, sum);
    store_n<Arch>(sum, y + v * L, n);
  }
}

// y[0:n] = epi(bias + x B) for n a multiple of NV vectors, reading the rows
// of B that rows selects (every row when null) whole: G rows at a time, each
// walked in blocks of NV vectors (y_block = y_block + x_p B[p, block] for the
// group's rows in order, then stored), so B streams in its storage order, G
// rows side by side, and y (in L1) is loaded and stored once per block per
// group. On 16 registers it replaces passes of 12 vectors (each row read in
// pieces a pass apart) where n takes three or more (docs/performance.md,
// "Inference at batch 1"). The first group starts from the bias (or from 0,
// written to y first), the last stores e(y); the rows past the last full
// group go in groups of 4, 2 and 1. Each output adds the same products in the
// same order as gemv_chunk: the same bits.
template <class Arch, std::size_t G, std::size_t NV, class T, class E>
void gemv_groups(std::size_t n, std::size_t k, const T* x, const T* b, std::size_t ldb, T* y, const T* bias,
                 const E& e, bool act, const std::uint64_t* rows) {
  using B = xsimd::batch<T, Arch>;
  constexpr std::size_t L = B::size;
  std::uint16_t list[nonzero_words * 64 + 8];  // the rows read, when rows selects them (row_list)
  const std::size_t count = rows ? row_list(k, rows, list) : k;
  if (!bias)  // the first group adds to 0
    for (std::size_t j = 0; j < n; j += L) B(T(0)).store_unaligned(y + j);
  if (count == 0) {  // no row read: e(bias), or e(0)
    for (std::size_t j = 0; j < n; j += L) {
      const B v = B::load_unaligned(bias ? bias + j : y + j);
      (act ? epilogue_forward(e, v) : v).store_unaligned(y + j);
    }
    return;
  }
  auto group = [&]<std::size_t g>(std::size_t i0) {
    const T* r[g];
    B xv[g];
#pragma GCC unroll 16
    for (std::size_t q = 0; q < g; ++q) {
      const std::size_t p = rows ? std::size_t(list[i0 + q]) : i0 + q;
      r[q] = b + p * ldb;
      xv[q] = B(x[p]);
    }
    const T* from = i0 == 0 && bias ? bias : y;
    auto walk = [&](bool last) {
      for (std::size_t j = 0; j < n; j += NV * L) {
        B acc[NV];
#pragma GCC unroll 16
        for (std::size_t v = 0; v < NV; ++v) acc[v] = B::load_unaligned(from + j + v * L);
#pragma GCC unroll 16
        for (std::size_t q = 0; q < g; ++q)
#pragma GCC unroll 16
          for (std::size_t v = 0; v < NV; ++v) acc[v] = xsimd::fma(xv[q], B::load_unaligned(r[q] + j + v * L), acc[v]);
#pragma GCC unroll 16
        for (std::size_t v = 0; v < NV; ++v) (last ? epilogue_forward(e, acc[v]) : acc[v]).store_unaligned(y + j + v * L);
      }
    };
    if (act && i0 + g == count) walk(true);
    else walk(false);
  };
  std::size_t i = 0;
  for (; i + G <= count; i += G) group.template operator()<G>(i);
  if constexpr (G > 4) {
    if (i + 4 <= count) {
      group.template operator()<4>(i);
      i += 4;
    }
  }
  if (i + 2 <= count) {
    group.template operator()<2>(i);
    i += 2;
  }
  if (i < count) group.template operator()<1>(i);
}

// gemv reading the rows of B that rows (rows_to_read of x) selects.
template <class Arch, class T, class E>
void gemv_rows(std::size_t n, std::size_t k, const T* x, const T* b, std::size_t ldb, T* y, const T* bias, const E& e,
               bool act, const std::uint64_t* rows) {
  using B = xsimd::batch<T, Arch>;
  constexpr std::size_t L = B::size, W = L * sizeof(T) >= 64 ? 16 : 8;  // 32 or 16 registers
  std::size_t j = 0;
  if constexpr (W == 8) {
    // 16 registers and three passes of 12 vectors or more: rows whole (gemv_groups), in groups of 8
    // and blocks of 2 vectors, up to a multiple of 4 vectors; the last columns (fewer than 4
    // vectors) go to gemv_tail below, as in any chunking, so that the pool's tasks (multiples of
    // 4 vectors) leave gemv_tail the same columns: the same bits whatever the thread count.
    if (n > 24 * L) {
      j = n / (W / 2 * L) * (W / 2 * L);
      gemv_groups<Arch, 8, 2>(j, k, x, b, ldb, y, bias, e, act, rows);
    }
  }
  if constexpr (W == 8) {
    // 16 registers: chunks of 12 vectors while 12 are left, then 8 or 4 (256 x 128 at batch 1
    // reads its rows in 2 passes of 12 + 4 vectors, not 2 of 8; 784 x 256 took 3 of 12 + 12 + 8
    // before gemv_groups, not 4 of 8: 0.8x and 0.95x the time, loaded Xeon 207,
    // bench/results/2026-12-06-s26-gemm26-gemv-passes.md).
    // They cover the same columns as chunks of 8 and one of 4 (the pool's tasks of 8 vectors), and
    // every column sums the same values in the same order in any chunk: the same bits.
    for (; j + 12 * L <= n; j += 12 * L)
      gemv_chunk<Arch, 12>(k, x, b + j, ldb, y + j, bias ? bias + j : nullptr, e, act, rows);
  }
  for (; j + W * L <= n; j += W * L)
    gemv_chunk<Arch, W>(k, x, b + j, ldb, y + j, bias ? bias + j : nullptr, e, act, rows);
  if (j + W / 2 * L <= n) {
    gemv_chunk<Arch, W / 2>(k, x, b + j, ldb, y + j, bias ? bias + j : nullptr, e, act, rows);
    j += W / 2 * L;
  }
  // Fewer than W/2 vectors left: groups of 4, 2 and 1 vectors (3 are 2 + 1).
  // The tail columns are the same whatever the thread count: run_gemv's
  // column chunks are multiples of W/2 vectors.
  if (j == n) return;
  std::uint16_t list[nonzero_words * 64 + 8];  // the rows read, when rows selects them (row_list)
  const std::size_t count = rows ? row_list(k, rows, list) : k;
  while (j < n) {
    const std::size_t c = n - j;
    auto tail = [&]<std::size_t G>(std::size_t cols) {
      gemv_tail<Arch, G>(cols, k, x, b + j, ldb, y + j, bias ? bias + j : nullptr, e, act, rows ? list : nullptr, count);
      j += cols;
    };
    if (c > 3 * L) tail.template operator()<4>(std::min(c, 4 * L));
    else if (c > L) tail.template operator()<2>(std::min(c, 2 * L));
    else tail.template operator()<1>(c);
  }
}

template <class Arch, class T, class E>
void gemv(std::size_t n, std::size_t k, const T* x, const T* b, std::size_t ldb, T* y, const T* bias, const E& e,
          bool act) {
  std::uint64_t words[nonzero_words];
  gemv_rows<Arch>(n, k, x, b, ldb, y, bias, e, act, rows_to_read<Arch>(k, x, words));
}

// One row's gated recurrent product, y[0:G u] = bias + x[0:k] B[k x G u] (B row-major
// with row stride ldb, bias null: 0), the G column blocks of a block of units
// summed together: for units [j, j + c) the V vectors of each block g (columns
// g u + j ..) stay in G V registers while every row of B streams through in
// ascending order (as gemv_chunk sums them without a row list), are stored to
// y, and f(j, j + c) then runs on them while they are in L1
// (ops<cpu>::recurrent_row: a cell's gate rule over those units). Blocks of V L
// units, then of one vector, the last one partial (masked loads).
// reverse (every other step of a recurrent layer): the blocks last to first and
// the rows of B in descending order, so that a step begins with the rows the step
// before read last, which are still in L1 (B, 256 KiB for an LSTM(128), streams
// from L2 otherwise); the sums are then in the other order (other rounding).
// Where the blocks are not all of V L units, reverse reads the rows descending only.
template <class Arch, std::size_t G, std::size_t V, class T, class F>
void gemv_gate_blocks(std::size_t k, std::size_t u, const T* x, const T* b, std::size_t ldb, const T* bias, T* y,
                      const F& f, bool reverse = false) {
  using B = xsimd::batch<T, Arch>;
  constexpr std::size_t L = B::size;
  // NV vectors a gate from unit j; Partial: the last of them has c - (NV - 1) L < L columns
  auto block = [&]<std::size_t NV, bool Partial>(std::size_t j, std::size_t c) {
    const std::size_t last = Partial ? c - (NV - 1) * L : L;
    B acc[G][NV];
#pragma GCC unroll 16
    for (std::size_t g = 0; g < G; ++g)
#pragma GCC unroll 16
      for (std::size_t v = 0; v < NV; ++v) {
        if (!bias) {
          acc[g][v] = B(T(0));
        } else {
          const T* bb = bias + g * u + j + v * L;
          acc[g][v] = Partial && v + 1 == NV ? load_n<Arch>(bb, last) : B::load_unaligned(bb);
        }
      }
    auto row = [&](std::size_t p) {
      const B xv(x[p]);
      const T* r0 = b + p * ldb + j;
#pragma GCC unroll 16
      for (std::size_t g = 0; g < G; ++g)
#pragma GCC unroll 16
        for (std::size_t v = 0; v < NV; ++v) {
          const T* r = r0 + g * u + v * L;
          acc[g][v] = xsimd::fma(xv, Partial && v + 1 == NV ? load_n<Arch>(r, last) : B::load_unaligned(r), acc[g][v]);
        }
    };
    if (reverse)
      for (std::size_t p = k; p-- > 0;) row(p);
    else
      for (std::size_t p = 0; p < k; ++p) row(p);
#pragma GCC unroll 16
    for (std::size_t g = 0; g < G; ++g)
#pragma GCC unroll 16
      for (std::size_t v = 0; v < NV; ++v) {
        T* yy = y + g * u + j + v * L;
        if (Partial && v + 1 == NV) store_n<Arch>(acc[g][v], yy, last);
        else acc[g][v].store_unaligned(yy);
      }
    f(j, j + c);
  };
  if (reverse && u % (V * L) == 0) {
    for (std::size_t j = u; j > 0; j -= V * L) block.template operator()<V, false>(j - V * L, V * L);
    return;
  }
  std::size_t j = 0;
  for (; j + V * L <= u; j += V * L) block.template operator()<V, false>(j, V * L);
  for (; j + L <= u; j += L) block.template operator()<1, false>(j, L);
  if (j < u) block.template operator()<1, true>(j, u - j);
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

}  // namespace ctnn::kernels::cpu::simd
