// ctnn/backends/cpu/simd_gemm.hpp — the xsimd GEMM behind backends/cpu/gemm.hpp.
//
// simd_gemm<Arch>(M, N, K, A, B, C, ldc, bias, epi) computes, for any xsimd
// architecture Arch:  C[i,j] = epi(bias[j] + sum_p A(i,p) * B(p,j))
// where A(i,p) = a.p[i*a.rs + p*a.cs] and B(p,j) = b.p[p*b.rs + j*b.cs] (so
// transposed operands are strides, not copies), bias may be null (0), epi is
// none or relu, or any activation rule of kernels/functors.hpp (its forward
// runs on the accumulators before the store), C is row-major with row stride
// ldc and is overwritten. simd_gemm_epilogue<Arch>(..., e, act, pool) is the
// same with any rule e, applied when act.
// The pieces: gemm/plan.hpp (make_gemm_plan: the mode, tiles and named
// scratch slots, constexpr), gemm/microkernel.hpp (the MR x NR register-
// blocked kernel), gemm/pack.hpp (packing, per-thread scratch), gemm/gemv.hpp
// (one or few rows: gemv, dot_nt). This file runs a plan: the blocked mode
// splits the output into tasks of rows and columns, each output computed by
// one task with the same summation order, so results do not depend on the
// thread count. docs/design.md, "SIMD".
#pragma once
#include <algorithm>
#include <cstddef>
#include <type_traits>
#include <utility>

#include <xsimd/xsimd.hpp>

#include "../../core/separate.hpp"
#include "../../kernels/functors.hpp"
#include "arch.hpp"
#include "gemm/gemv.hpp"
#include "gemm/microkernel.hpp"
#include "gemm/pack.hpp"
#include "gemm/plan.hpp"
#include "thread_pool.hpp"

namespace ctnn::kernels::cpu {
namespace simd {

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
  const gemm_scratch slots = narrow_gradient_scratch(N, K, m, NR, blk::target);
  T* const buf = scratch<T>(slots.total);
  T* ct = buf + slots.ct.offset;
  const std::size_t panels = (K + NR - 1) / NR;
  T* tail = nullptr;
  if (K % NR) {
    tail = buf + slots.b.offset;
    pack_b<Arch>(NR, strided<T>{x, K, 1}, (panels - 1) * NR, K, m, tail);
  }
  auto panel = [&](std::size_t jp) {
    const std::size_t j0 = jp * NR, nr = std::min(NR, K - j0);
    const bool in_place = nr == NR;
    micro<Arch, N, NV, true>(m, dy, N, in_place ? x + j0 : tail, in_place ? K : NR, ct + j0, K, N, nr,
                             static_cast<const T*>(nullptr), true, fn::relu_fn{}, false);
  };
  pool.run(panels, panel, m * N * K >= parallel_threshold && pool.size() > 1);
  transpose_narrow<N, Arch>(K, ct, dw);
}

// narrow_weights_gradient with N at run time (1 <= N < the vector's lanes): one body per
// architecture and type, each N's body called from a comparison chain. With
// CTNN_COMPILED_KERNELS float's is in the compiled part (compiled_kernels.hpp) and
// dense_backward_weights<K, N> calls it, so a program does not instantiate the N-row body.
template <class Arch, class T>
CTNN_OUTLINE void narrow_weights_gradient_n(std::size_t N, std::size_t K, std::size_t m, const T* x, const T* dy,
                                            T* dw, thread_pool& pool = thread_pool::global()) {
  [&]<std::size_t... I>(std::index_sequence<I...>) {
    (void)((N == I + 1 && (narrow_weights_gradient<Arch, I + 1>(K, m, x, dy, dw, pool), true)) || ...);
  }(std::make_index_sequence<blocking<T, Arch>::L - 1>{});
}

// The blocked mode of a plan (make_gemm_plan), with output panels NV vectors
// wide: A and B read in place or packed to the plan's slots a and b of buf,
// the output split into MC x NC tasks, each through all of K (or, k_outer,
// one K block at a time over every task).
template <class Arch, std::size_t NV, class T, class E>
void blocked(const gemm_plan& g, std::size_t M, std::size_t N, std::size_t K, strided<T> a, strided<T> b, T* c,
             std::size_t ldc, const T* bias, const E& e, bool act, T* buf, thread_pool& pool) {
  const bool parallel = g.parallel;
  auto run = [&](std::size_t tasks, auto&& f) { pool.run(tasks, f, parallel); };
  constexpr std::size_t MR = blocking<T, Arch>::MR, NR = NV * blocking<T, Arch>::L;
  constexpr bool columns_by_vector = xsimd::batch<T, Arch>::size >= MR && xsimd::batch<T, Arch>::size <= 2 * MR;
  constexpr std::size_t a_strip = 8;
  const std::size_t MC = g.MC, NC = g.NC, panels = g.panels, full_blocks = g.full_blocks, kcb = g.kcb;
  const bool direct_a = g.a == a_access::rows, direct_at = g.a == a_access::columns;
  const bool partial_in_place = g.tail == a_tail::last_column;
  const bool direct = g.b_in_place(), split_tail = g.b == b_access::split_tail, k_outer = g.b == b_access::k_outer;
  T* ap = g.scratch.a.size ? buf + g.scratch.a.offset : nullptr;
  T* bp = g.scratch.b.size ? buf + g.scratch.b.offset : nullptr;
  if (g.tail == a_tail::last_column)
    pack_a(MR, strided<T>{a.p + (K - 1) * a.cs, a.rs, a.cs}, full_blocks * MR, M, 1, ap);
  else if (g.tail == a_tail::packed)
    pack_a(MR, a, full_blocks * MR, M, K, ap);
  // (the tails above are those of an A read in place: never a packed A)
  bool pack_rows = g.a == a_access::packed;
  if constexpr (columns_by_vector)
    if (pack_rows && a.rs == 1 && a.cs >= xsimd::batch<T, Arch>::size) {
      // A transposed (dW = X^T dY of many rows): tasks of 8 full blocks (48 or 96 values of each
      // of A's storage rows) copied by pack_a_columns, then the last partial block
      const std::size_t strips = (full_blocks + a_strip - 1) / a_strip;
      run(strips + (full_blocks < g.row_blocks), [&](std::size_t s) {
        if (s < strips)
          return pack_a_columns<Arch, MR>(a, s * a_strip, std::min(full_blocks, (s + 1) * a_strip), K, ap);
        pack_a(MR, a, full_blocks * MR, M, K, ap + full_blocks * MR * K);
      });
      pack_rows = false;
    }
  if (pack_rows) run(g.row_blocks, [&](std::size_t ib) { pack_a(MR, a, ib * MR, M, K, ap + ib * MR * K); });
  if (g.b == b_access::in_place_tail)
    pack_b<Arch>(NR, b, (panels - 1) * NR, N, K, bp);
  else if (g.b == b_access::packed)
    run(panels, [&](std::size_t jp) { pack_b<Arch>(NR, b, jp * NR, N, K, bp + jp * NR * K); });
  // k_outer: the half of slot b that holds the packed K block starting at row p0 (blocks alternate halves).
  auto k_block = [&](std::size_t p0) { return bp + ((p0 / kcb) % 2) * panels * NR * kcb; };
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
    if (k_outer) return k_block(p0) + jp * NR * std::min(kcb, K - p0);
    return bp + jp * NR * K + p0 * NR;
  };
  const std::size_t nblocks = g.nblocks;
  // The tile of one task, for K rows [p0, p0 + kc).
  auto tile = [&](std::size_t task, std::size_t p0, std::size_t kc) {
    const std::size_t i_lo = (task / nblocks) * MC, i_hi = std::min(M, i_lo + MC);
    const std::size_t j_lo = (task % nblocks) * NC, j_hi = std::min(N, j_lo + NC);
    const bool first = p0 == 0, last = p0 + kc == K;
    for (std::size_t j0 = j_lo; j0 < j_hi; j0 += NR) {
      std::size_t ldb;
      const T* bpanel = b_panel(j0 / NR, p0, ldb);
      const std::size_t nr = std::min(NR, N - j0);
      std::size_t i_from = i_lo;
      if (g.rows_run && nr == NR) {  // full tiles of a short K in one run (i_lo is a multiple of MR)
        if (direct_a) {
          const std::size_t blocks = (i_hi - i_lo) / MR;
          micro_run<Arch, MR, NV, false>(blocks, K, a.p + i_lo * a.rs, a.rs, bpanel, ldb, c + i_lo * ldc + j0, ldc,
                                         bias ? bias + j0 : nullptr, e, act);
          i_from += blocks * MR;
        } else {
          const std::size_t blocks = std::min(i_hi / MR, full_blocks) - std::min(i_lo / MR, full_blocks);
          micro_run<Arch, MR, NV, true>(blocks, K, a.p + i_lo, a.cs, bpanel, ldb, c + i_lo * ldc + j0, ldc,
                                        bias ? bias + j0 : nullptr, e, act);
          i_from += blocks * MR;
        }
      }
      // the last row task ends in g.short_tiles tiles of MR - 1 rows (A's rows in place; plan_blocked)
      const std::size_t i_short = i_hi - (i_hi == M ? g.short_tiles * (MR - 1) : 0);
      for (std::size_t i0 = i_from, mr; i0 < i_hi; i0 += mr) {
        T* ct = c + i0 * ldc + j0;
        const bool short_tile = i0 >= i_short;
        mr = short_tile ? MR - 1 : std::min(MR, M - i0);
        const T* bj = bias ? bias + j0 : nullptr;
        auto part = [&](std::size_t q0, std::size_t n_k, const T* bq, std::size_t ldq, bool init, bool fin) {
          if (direct_a && short_tile)
            return micro<Arch, MR - 1, NV, false>(n_k, a.p + i0 * a.rs + q0, a.rs, bq, ldq, ct, ldc, mr, nr, bj,
                                                  init, e, act && fin);
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
        part(p0, kc, bpanel, ldb, first, last);  // split_tail: micro reads the last row masked
      }
    }
  };
  // One task body for both modes (tile is compiled once): K rows [lo, hi) in
  // steps of `step`; k_outer runs one K block [lo, lo + step) per run.
  std::size_t lo = 0, hi = K, step = g.kc_max;
  auto task = [&](std::size_t t) {
    for (std::size_t p0 = lo; p0 < hi; p0 += step) tile(t, p0, std::min(step, hi - p0));
  };
  if (!k_outer) return run(g.mblocks * nblocks, task);
  // k_outer: K block q packed to half q % 2 of slot b; the run of block q
  // computes its tiles and packs block q + 1 (tasks past the tiles).
  const std::size_t tiles = g.mblocks * nblocks;
  std::size_t pack_p0 = 0;  // the block the pack tasks of a run write
  auto pack = [&](std::size_t jp) {
    const std::size_t kc = std::min(kcb, K - pack_p0);
    const strided<T> block{b.p + pack_p0 * b.rs, b.rs, b.cs};
    pack_b<Arch>(NR, block, jp * NR, N, kc, k_block(pack_p0) + jp * NR * kc);
  };
  run(panels, pack);
  // by_columns: the pack tasks of panels [0, front) come first, the rest after the tiles, and the
  // tiles in column-major order (the run's t-th tile is row block t % mblocks of column block
  // t / mblocks); else the tiles in row-major order, then the pack tasks.
  const bool by_columns = g.by_columns;
  const std::size_t mblocks = g.mblocks;
  std::size_t front = 0;
  auto task_and_pack = [&](std::size_t t) {
    if (t < front) return pack(t);
    if (t < front + tiles) {
      t -= front;
      return task(by_columns ? (t % mblocks) * nblocks + t / mblocks : t);
    }
    pack(t - tiles);
  };
  for (std::size_t p0 = 0; p0 < K; p0 += kcb) {
    lo = p0;
    hi = p0 + std::min(kcb, K - p0);
    step = hi - lo;
    pack_p0 = hi;
    front = by_columns && hi < K ? panels / 2 : 0;
    run(tiles + (hi < K ? panels : 0), task_and_pack);
  }
}

// The gemv mode of plan g, row by row of the M (<= gemv_rows_max): A's row
// gathered into slot x when not contiguous; column chunks on the pool when
// g.gemv_parallel.
template <class Arch, class T, class E>
void run_gemv(const gemm_plan& g, std::size_t M, std::size_t N, std::size_t K, strided<T> a, strided<T> b, T* c,
              std::size_t ldc, const T* bias, const E& e, bool act, T* buf, thread_pool& pool) {
  for (std::size_t i = 0; i < M; ++i, c += ldc) {
    const T* x = a.p + i * a.rs;
    if (g.scratch.x.size) {
      T* xs = buf + g.scratch.x.offset;
      for (std::size_t p = 0; p < K; ++p) xs[p] = x[p * a.cs];
      x = xs;
    }
    // The rows of B to read (x's nonzeros), chosen once for every column chunk.
    std::uint64_t words[nonzero_words];
    const std::uint64_t* rows = rows_to_read<Arch>(K, x, words);
    if (!g.gemv_parallel) {
      gemv_rows<Arch>(N, K, x, b.p, b.rs, c, bias, e, act, rows);
      continue;
    }
    const std::size_t CH = g.chunk;
    pool.run((N + CH - 1) / CH, [&](std::size_t t) {
      const std::size_t j0 = t * CH, n = std::min(CH, N - j0);
      gemv_rows<Arch>(n, K, x, b.p + j0, b.rs, c + j0, bias ? bias + j0 : nullptr, e, act, rows);
    });
  }
}

// Runs plan g (make_gemm_plan of these sizes and strides) with its scratch
// slots in buf (g.scratch.total values).
template <class Arch, class T, class E>
void run_plan(const gemm_plan& g, std::size_t M, std::size_t N, std::size_t K, strided<T> a, strided<T> b, T* c,
              std::size_t ldc, const T* bias, const E& e, bool act, T* buf, thread_pool& pool) {
  switch (g.mode) {
    case gemm_mode::empty:
      return;
    case gemm_mode::bias_only:
      for (std::size_t i = 0; i < M; ++i)
        for (std::size_t j = 0; j < N; ++j) {
          const T v = bias ? bias[j] : T(0);
          c[i * ldc + j] = act ? e.forward(v) : v;
        }
      return;
    case gemm_mode::gemv:
      return run_gemv<Arch>(g, M, N, K, a, b, c, ldc, bias, e, act, buf, pool);
    case gemm_mode::dot_nt:
      if (g.dot_rows == 1)
        return dot_nt<Arch, 1>(M, N, K, a.p, a.rs, b.p, b.cs, c, ldc, bias, e, act, g.parallel, pool);
      return dot_nt<Arch, 2>(M, N, K, a.p, a.rs, b.p, b.cs, c, ldc, bias, e, act, g.parallel, pool);
    case gemm_mode::transposed: {
      T* ct = buf + g.scratch.ct.offset;
      const gemm_problem tp = transposed_problem({M, N, K, a.rs, a.cs, b.rs, b.cs, pool.size()});
      const gemm_plan in = make_gemm_plan<gemm_target_of<T, Arch>()>(tp);  // gemv or blocked (test_gemm_plan.cpp)
      const strided<T> at{b.p, b.cs, b.rs}, bt{a.p, a.cs, a.rs};
      const T* no_bias = nullptr;
      if (in.mode == gemm_mode::gemv)
        run_gemv<Arch>(in, N, M, K, at, bt, ct, M, no_bias, fn::relu_fn{}, false, buf + g.scratch.inner, pool);
      else if (in.NV == 1)
        blocked<Arch, 1>(in, N, M, K, at, bt, ct, M, no_bias, fn::relu_fn{}, false, buf + g.scratch.inner, pool);
      else
        blocked<Arch, blocking<T, Arch>::NV>(in, N, M, K, at, bt, ct, M, no_bias, fn::relu_fn{}, false,
                                             buf + g.scratch.inner, pool);
      for (std::size_t i = 0; i < M; ++i)
        for (std::size_t j = 0; j < N; ++j) {
          const T v = ct[j * M + i] + (bias ? bias[j] : T(0));
          c[i * ldc + j] = act ? e.forward(v) : v;
        }
      return;
    }
    case gemm_mode::blocked:
      if (g.NV == 1) return blocked<Arch, 1>(g, M, N, K, a, b, c, ldc, bias, e, act, buf, pool);
      return blocked<Arch, blocking<T, Arch>::NV>(g, M, N, K, a, b, c, ldc, bias, e, act, buf, pool);
  }
}

}  // namespace simd

// The product with e.forward applied to every output when act is true (one
// instance for relu and none: both enum epilogues pass fn::relu_fn). `inline`
// (a hint to GCC): header-only it stays small and is inlined into its callers, as before the
// split. With CTNN_COMPILED_KERNELS it is CTNN_OUTLINE (core/separate.hpp) and the compiled part
// holds float's instances for every rule a dense layer fuses and double's for relu_fn
// (compiled_kernels.hpp): a program's dense products, one call site per layer and direction
// (dense_forward / dense_backward_* <K, N>), are then a call each instead of the planner's
// branches and the gemv loop inlined at every one (docs/performance.md, "Compile time and memory").
// make_gemm_plan at run time, out of line: one instance per gemm_target (compiled
// once in the compiled part: compiled_kernels.hpp).
template <gemm_target Target>
gemm_plan plan_gemm(gemm_problem p) {
  return make_gemm_plan<Target>(p);
}

template <class Arch, class T, class E>
CTNN_OUTLINE inline void simd_gemm_epilogue(std::size_t M, std::size_t N, std::size_t K, strided<T> a, strided<T> b,
                                            T* c, std::size_t ldc, const T* bias, const E& e, bool act,
                                            thread_pool& pool) {
  const gemm_plan g = plan_gemm<gemm_target_of<T, Arch>()>({M, N, K, a.rs, a.cs, b.rs, b.cs, pool.size()});
  // The one-row paths are called from here, not through run_plan: at batch 1 the
  // extra call cost 25-40 ns of 55-190 (bench_gemm, 128 x 10, AVX-512).
  if (g.mode == gemm_mode::gemv && !g.gemv_parallel && !g.scratch.x.size) {
    for (std::size_t i = 0; i < M; ++i) simd::gemv<Arch>(N, K, a.p + i * a.rs, b.p, b.rs, c + i * ldc, bias, e, act);
    return;
  }
  if (g.mode == gemm_mode::dot_nt) {
    if (g.dot_rows == 1)
      return simd::dot_nt<Arch, 1>(M, N, K, a.p, a.rs, b.p, b.cs, c, ldc, bias, e, act, g.parallel, pool);
    return simd::dot_nt<Arch, 2>(M, N, K, a.p, a.rs, b.p, b.cs, c, ldc, bias, e, act, g.parallel, pool);
  }
  simd::run_plan<Arch>(g, M, N, K, a, b, c, ldc, bias, e, act,
                       g.scratch.total ? simd::scratch<T>(g.scratch.total) : nullptr, pool);
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

// CTNN_COMPILED_KERNELS: gemm.hpp includes compiled_kernels.hpp, which declares the kernels above extern.
