// ctnn/backends/cpu/gemm/plan.hpp — which path simd_gemm takes, as a constexpr value.
//
// make_gemm_plan<target>(problem) returns, for C = e(A B + bias) with sizes M,
// N, K, the strides of A and B, the thread count, and a target (vector lanes,
// vector registers, element bytes: gemm_target_of<T, Arch> in
// microkernel.hpp), the mode that runs (gemv, dot_nt, transposed, blocked...),
// the blocked mode's tiles and how it reads A and B, and the per-thread
// scratch it needs as named slots (offsets and sizes in elements, 64-byte
// aligned, disjoint, inside scratch.total). It reads no memory and includes
// no xsimd, so tests check it with static_assert (tests/kernels/test_gemm_plan.cpp).
// The kernels (simd_gemm.hpp) read the plan; results depend on the sizes and
// strides only, never on the thread count. docs/design.md, "SIMD".
#pragma once
#include <algorithm>
#include <cstddef>

namespace ctnn::kernels::cpu {

enum class epilogue { none, relu };

// A strided read-only matrix view: element (i, j) is p[i*rs + j*cs].
template <class T>
struct strided {
  const T* p;
  std::size_t rs, cs;
};

// What the plan needs of an architecture and element type.
struct gemm_target {
  std::size_t lanes;      // values per vector
  std::size_t registers;  // vector registers (16: SSE/AVX2, 32: AVX-512)
  std::size_t bytes;      // sizeof the element
};

// The product's sizes, the strides of A (a_rs, a_cs) and B (b_rs, b_cs), and the pool's thread count.
struct gemm_problem {
  std::size_t M, N, K, a_rs, a_cs, b_rs, b_cs, threads = 1;
};

enum class gemm_mode : unsigned char {
  empty,       // M or N is 0: nothing is written
  bias_only,   // K = 0: C = e(bias)
  gemv,        // one row (two with a small B: simd::gemv_rows_max), row-major B: a matrix-vector product per row (A's row gathered to slot x when not contiguous)
  dot_nt,      // few rows, row-major A, B with contiguous columns: dot products along K
  transposed,  // N below a vector (16 registers: or not a multiple of one below two), A transposed: C^T = B^T A^T into slot ct, then transposed
  blocked      // packed / in-place panels and the MR x NR micro-kernel
};
// blocked: how A is read. rows: in place, row-major; columns: in place, A
// transposed (full MR-row blocks; a_tail says how a last partial block is
// read); packed: neither stride is 1, or A transposed with many rows (16
// registers: simd::pack_columns_m), every block packed to slot a.
enum class a_access : unsigned char { rows, columns, packed };
enum class a_tail : unsigned char { none, last_column, packed };
// blocked: how B is read. in_place: row-major B read where it lies (few row
// blocks or one panel); in_place_tail: the same, the last partial panel packed
// to slot b; split_tail: in place, the last row of the partial panel read
// with masked loads (the micro-kernel's last row of a partial panel); k_outer: one K block at a time packed to slot b, K blocks
// outermost; packed: all of B packed to slot b before the tiles run.
enum class b_access : unsigned char { in_place, in_place_tail, split_tail, k_outer, packed };

struct scratch_slot {
  std::size_t offset = 0, size = 0;  // in elements
  constexpr std::size_t end() const { return offset + size; }
};
// Named slots of one per-thread buffer: x (gemv's gathered row), a and b (packed
// panels), ct (the transposed product); inner: where a transposed product's own
// plan places its slots.
struct gemm_scratch {
  scratch_slot x, a, b, ct;
  std::size_t inner = 0, total = 0;
};

struct gemm_plan {
  gemm_mode mode = gemm_mode::empty;
  bool parallel = false;  // tasks go to the pool (M N K >= parallel_threshold and threads > 1)
  // gemv: columns in chunks of `chunk` on the pool when gemv_parallel
  bool gemv_parallel = false;
  std::size_t chunk = 0;
  std::size_t dot_rows = 0;  // dot_nt: rows per tile (1 or 2)
  // blocked: register tile MR x NR (NV vectors), K blocks of kcb (at most KC, or all of K up to block_k_max),
  // task tiles MC x NC, K rows per tile pass kc_max
  std::size_t MR = 0, NV = 0, NR = 0, KC = 0, kcb = 0, kc_max = 0, MC = 0, NC = 0;
  std::size_t row_blocks = 0, full_blocks = 0, panels = 0, mblocks = 0, nblocks = 0;
  // blocked, A read in place, K up to rows_run_k (rows) or columns_run_k (A
  // transposed): the full tiles of a task's column panel run as one loop
  // (simd::micro_run), not one call each
  bool rows_run = false;
  // blocked, A's rows read in place, B packed in K blocks that fit L2 (k_outer, not wide_c: Y = X W of
  // 784 x 256 above batch 64): tasks in column-major order (task t: column block t / mblocks, row
  // block t % mblocks), and a run's pack tasks of the next block's first half of the panels first,
  // the rest last, so that on two threads (the caller from the front of a run, the worker from the
  // back) each thread packs the panels its tiles read, the same half of B's columns in every run,
  // where the batch split had every thread's tiles read every panel, half of them packed by the
  // other core (docs/design.md, "Threads"). The order of tasks only: every output still in one
  // task, K in order, so the bits do not change. Only on the pool (parallel): on one thread the
  // row order reads each panel's block of W from L2 once a row block, not X's block once a panel.
  bool by_columns = false;
  // blocked, A's rows in place, not rows_run: the last row task's last short_tiles tiles have MR - 1
  // rows (its rows over whole tiles with no short tail: M = 28 on AVX-512 is 4 tiles of 7, not 3 of 8
  // and one of 4 in the 4-row instance, which ran at about 1.6x the cost a row)
  std::size_t short_tiles = 0;
  a_access a = a_access::rows;
  a_tail tail = a_tail::none;
  b_access b = b_access::in_place;
  gemm_scratch scratch;
  constexpr bool b_in_place() const { return b == b_access::in_place || b == b_access::in_place_tail || b == b_access::split_tail; }
};

namespace simd {
// Below this many multiply-adds a product runs on the calling thread alone.
inline constexpr std::size_t parallel_threshold = std::size_t(1) << 20;
// Register blocking: MR rows x NV vectors of output. 12 x 2 vectors with 32
// registers (24 accumulators, 2 vectors of B and A's broadcast: 27 of 32; the
// micro-kernel's K loop unrolled by 2 there): 2 loads of B a step for 24 FMAs
// where 8 x 2 had them for 16, so that a B panel arriving from L2 stalls fewer
// FMAs (the intent). Against 8 x 2 (gemm30, Xeon model 167, one thread, CPU time): at load
// 8 1024^2 1.02-1.05x the GFLOP/s, dW = X^T dY of 256x128 at 256 1.12x, of
// 784x256 at 64 1.05x; at load 11-19, 6 rounds of bench_gemm: 1024^2 0.97-1.02x
// (no gain), dW of 256x128 1.01-1.11x, of 784x256 0.92-1.04x, Y = X W of
// 784x256 at 256 and 256x128 at 64 0.96-0.98x, dX of 128x10 at 64 (K = 10: 5
// tiles of 12 and one of 4) 0.86-0.99x; the MLP step not slower, the CNN step
// within the noise. 14 x 2
// measured no faster at 1024^2 and 0.93-0.95x on 256x128 at 64
// (bench/results/2026-12-07-s30-gemm30-tile12.md). 6 x 2 with 16 registers.
// A KC x NR panel of B stays in L1.
constexpr std::size_t block_rows(gemm_target t) { return t.registers >= 32 ? 12 : 6; }
inline constexpr std::size_t block_vectors = 2, block_k = 256;
// Up to this many rows of a product with a row-major B of at most
// gemv_rows_bytes run as one gemv per row: in the 4-row micro-kernel two rows
// were computed for nothing (Y = X W of 256 x 128 at batch 2: 3.3-3.5 us
// against 2.3-2.5 us as two gemvs, AVX-512 and AVX2, loaded Zen 4). A larger B
// is read from beyond L1/L2 at a gemv's pace, once per row: 784 x 256 (800 KB)
// at batch 2 took 29-32 us as two gemvs, 19-22 us in the micro-kernel.
inline constexpr std::size_t gemv_rows_max = 2, gemv_rows_bytes = std::size_t(256) << 10;
// A transposed A (dW = X^T dY) is packed from this many rows and K on, up to one K block (plan_blocked).
inline constexpr std::size_t pack_columns_m = 512, pack_columns_k = 128;
// The longest K whose full tiles run as one loop (gemm_plan::rows_run): A's
// rows in place, A transposed in place.
inline constexpr std::size_t rows_run_k = 16, columns_run_k = 64;
// The longest K run as one block: with 16 registers (NR = 16 floats, a K x NR
// panel of B 64 bytes a row) up to 1.5 block_k, so that conv2's K = 288 is one
// block of 288 (its C tiles loaded and stored once: 8-10 % faster on AVX2,
// bench_gemm gemm/ctnn/conv/fwd); with 32 registers (128 bytes a row) the
// panel of 288 rows fills most of L1 and measured no faster.
constexpr std::size_t block_k_max(gemm_target t) { return t.registers >= 32 ? block_k : block_k + block_k / 2; }
constexpr std::size_t round_up(std::size_t n, gemm_target t) {
  const std::size_t q = 64 / t.bytes;  // 64-byte aligned slots
  return (n + q - 1) / q * q;
}
}  // namespace simd

// The blocked mode with panels NV vectors wide, into g (filled in place: one
// plan object from make_gemm_plan's start to its return, no copies). Not
// inlined: the callers of simd_gemm inline the cheap mode tests only. t is a
// template argument, so divisions by MR and NR are by constants.
template <gemm_target t>
[[gnu::noinline]] constexpr void plan_blocked(gemm_plan& g, gemm_problem p, std::size_t NV) {
  g.mode = gemm_mode::blocked;
  const std::size_t M = p.M, N = p.N, K = p.K;
  constexpr std::size_t MR = simd::block_rows(t), KC = simd::block_k;
  const std::size_t NR = NV * t.lanes;
  // N / NR and N % NR with constant divisors (NV is 1 or block_vectors)
  const std::size_t n_full = NV == 1 ? N / t.lanes : N / (simd::block_vectors * t.lanes), n_rem = N - n_full * NR;
  g.NV = NV;
  g.NR = NR;
  g.KC = KC;
  g.MR = MR;
  // MC x NC: the output block of one task. Small tasks (about 2^17
  // multiply-adds, 1 to 8 panels of columns), so that a worker the OS
  // deschedules holds back little of the product; the partition depends on
  // the sizes only, never on the thread count.
  g.MC = 4 * MR;
  g.NC = NR * std::clamp<std::size_t>((std::size_t(1) << 17) / (g.MC * NR * K), 1, 8);
  g.row_blocks = (M + MR - 1) / MR;
  g.panels = n_full + (n_rem != 0);
  g.full_blocks = M / MR;
  // Row-major A: the micro-kernel reads A's rows in place (packing them cost
  // as much as the product for one column panel and 6-20 % of the MLP's
  // forward GEMMs). A transposed A (dW = X^T dY) already has the packed
  // layout (MR values of column p contiguous, row stride a_cs): its full row
  // blocks are read in place too; a last partial block is read in place up
  // to column K-2 (its missing rows read the next column, inside A when
  // a_cs >= MR, never stored) with column K-1 copied with zeros, or packed
  // whole when a_cs < MR. A with neither stride 1 is packed; so is a
  // transposed A of many rows and one K block of 128 rows or more (pack_at:
  // dW of 784x256 at batch 256, M 784, K 256, on AVX2 1.12x faster, gemm20:
  // in place, each K step of a block of 6 rows reads 24 of the 64 bytes of a
  // line of its own; dW of 256x128 at batch 256, M 256, measured 0.95x
  // packed: not taken below 512 rows). On AVX-512 (then 8 rows of 32 bytes) it
  // measured 0.97x on a loaded Zen 4 (gemm20) but 1.14-1.17x on the Xeon
  // model 207 (gemm27: 132 -> 150-154 GFLOP/s, loaded; a K block of 32
  // rows in place spans 256 rows of A 3 KB apart, 196 pages): taken on both.
  const bool direct_a = p.a_cs == 1, transposed_a = !direct_a && p.a_rs == 1;
  const bool pack_at = transposed_a && M >= simd::pack_columns_m && K >= simd::pack_columns_k &&
                       K <= simd::block_k_max(t);
  const bool direct_at = transposed_a && !pack_at;
  g.a = direct_a ? a_access::rows : direct_at ? a_access::columns : a_access::packed;
  if (direct_at && M % MR) g.tail = p.a_cs >= MR ? a_tail::last_column : a_tail::packed;
  const std::size_t a_size = g.a == a_access::packed ? g.row_blocks * MR * K
                             : g.tail == a_tail::last_column ? MR
                             : g.tail == a_tail::packed      ? MR * K
                                                             : 0;
  // Small M (up to 64 rows: packing B cost 10-17 % of Y = X W at batch 64,
  // on AVX2's 11 row blocks of 6 as on AVX-512's 8 of 8) or a single panel,
  // and row-major B: B read in place, the last partial panel packed with
  // zeros; when its extra columns fit in one row
  // (NR - n_rem <= b_rs), rows 0..K-2 are read in place too and row K-1
  // with masked loads (split_tail; until gemm10 it was copied to slot b and
  // run as a second micro-kernel call of one row, which loaded and stored C
  // twice: Y = X W of the 10-wide layer on AVX-512).
  // Wider products (M + N above the budget at KC rows) take K blocks of KC / 2 where those fit:
  // dR = H^T dZ of an LSTM(128) over its steps (M 128, N 512, K = steps x batch, 1728 at batch 64)
  // had all of dZ (3.5 MB) packed and read once per task row from L3; in K blocks of 124 rows it
  // ran in 0.75-0.85x the CPU time on AVX-512 and 0.92-0.95x on AVX2 (loaded Xeon, model 207).
  constexpr std::size_t l2_budget = std::size_t(512) << 10;
  const std::size_t kc_outer = (M + N) * KC * t.bytes <= l2_budget         ? KC
                               : (M + N) * (KC / 2) * t.bytes <= l2_budget ? KC / 2
                                                                            : 0;
  const bool fits_k_outer = kc_outer && M * N * t.bytes <= l2_budget;
  // A's rows read in place and a C over the budget with K over two blocks (1024^2: C 4 MB; B, 4
  // MB packed whole, was read again from L3 by each row task of 24 rows): K blocks of B alone
  // (A is not packed), up to twice the budget (256 rows of 1024 columns: 1 MB), outermost, C
  // loaded and stored once a block (wide_c; micro prefetches the next tile's C). 1024^2, one
  // thread, loaded Xeon model 207 (L2 2 MB), CPU time, best of 5 repetitions a round, alternating
  // rounds: AVX2 0.78-1.01x the time in 10 rounds (median 0.84x), AVX-512 0.88-0.95x in 6
  // (bench/results/2026-12-06-s24-gemm24-xeon-loaded.md).
  const std::size_t kc_b = N * KC * t.bytes <= 2 * l2_budget         ? KC
                           : N * (KC / 2) * t.bytes <= 2 * l2_budget ? KC / 2
                                                                      : 0;
  const bool wide_c = direct_a && !fits_k_outer && kc_b && M * N * t.bytes > l2_budget && K > 2 * KC;
  // Not a transposed A of more than two row blocks with a long K, where K blocks fit (dW = X^T dZ
  // of an LSTM(128) over 28 steps: M 28, N 512, K 1792 at batch 64): B's rows 2 KB apart, a
  // panel's K block spans a few of L1's sets and each row block read it again from L2 or L3;
  // packed in K blocks (k_outer below) that product ran in 0.82-0.91x the CPU time (AVX-512,
  // loaded Xeon model 207). A first convolution's dW (9 rows: two row blocks) keeps B in place.
  const bool long_at = transposed_a && M > 2 * MR && K > 2 * KC && fits_k_outer;
  const bool direct = p.b_cs == 1 && ((M <= 64 && !long_at) || N <= NR);
  // K blocks of equal length, at most KC (K = 288 with 32 registers is two
  // blocks of 144, not 256 + 32: a short last block pays the load and store
  // of C for little work), or one block up to block_k_max.
  const std::size_t k_blocks = K <= simd::block_k_max(t) ? 1 : (K + KC - 1) / KC;
  g.kcb = (K + k_blocks - 1) / k_blocks;
  const bool split_tail = direct && n_rem && K >= 2 && NR - n_rem <= p.b_rs;
  // Long K and small blocks of A and B (dW of a convolution: K = batch x
  // positions): K block by K block over every output tile, so that each K
  // block of A and B is read from memory once and stays in L2 while all
  // tiles use it. Every output still sums its K blocks in ascending order.
  // Slot b holds two packed K blocks: the tasks of one block's run also pack
  // the next block into the other half (no serial packing between runs: with
  // 2 threads the first layer's forward at batch 256 ran 1.67x faster than on
  // one, the packing on the caller alone).
  // (kc_outer above: wider products take K blocks of KC / 2 where those fit)
  const bool k_outer = !direct && K > KC && (fits_k_outer || wide_c);
  const std::size_t kc_sel = fits_k_outer ? kc_outer : kc_b;
  if (k_outer && kc_sel < KC) {  // equal blocks of at most kc_sel (1728: 14 of 124)
    const std::size_t blocks = (K + kc_sel - 1) / kc_sel;
    g.kcb = (K + blocks - 1) / blocks;
  }
  g.b = split_tail ? b_access::split_tail
        : direct   ? (n_rem ? b_access::in_place_tail : b_access::in_place)
        : k_outer  ? b_access::k_outer
                   : b_access::packed;
  const std::size_t b_size = g.b == b_access::in_place_tail ? NR * K
                             : g.b == b_access::k_outer       ? 2 * g.panels * NR * g.kcb
                             : g.b == b_access::packed        ? g.panels * NR * K
                                                              : 0;
  // In-place B is K-blocked too when there are several row blocks (dW of a
  // first convolution: 9 rows, K = batch x positions), so that they share
  // each block of B while it is in cache; one row block, or split_tail, runs
  // all of K at once.
  g.kc_max = direct && (split_tail || M <= MR) ? K : g.kcb;
  // Short K (dX = dY W^T of the 10-wide layer: K = 10, rows of A; dW = X^T
  // dY at batch 64, A transposed): a tile is little work (60 cycles of FMAs
  // at K = 10), so the full tiles of a panel run as one loop; rows of A:
  // tasks 4x taller. A transposed: from a task's height of rows on (dW of
  // the 10-wide layer on AVX2, whose C^T has 10 rows, measured 0.9x with it).
  // wide_c with 32 registers: tasks of one tile of rows (MC = MR), so that a task's A rows (12 x 256
  // values, 12 KB) stay in L1 beside one B panel (256 x 32, 32 KB) while the next tasks, the same rows
  // over the next panels, stream B from L2 (and micro's request for the tile below lands in L2 for the
  // next row of tasks). Tasks of 4 tiles reused each B panel 4 times but read A's rows back from L2
  // for every tile: 1024^2 on AVX-512 1.02-1.05x the GFLOP/s with one-tile tasks (bench_gemm, 3
  // interleaved runs; 1.04-1.09x in a driver), 2 tiles about the same, 3 or 8 tiles no faster or slower,
  // K blocks of 128 or 192 slower (loaded Xeon model 167, one thread;
  // bench/results/2026-12-07-s31-gemm31-blocking.md). 16 registers (AVX2) keep 4 tiles (not measured).
  if (k_outer && wide_c && t.registers >= 32) g.MC = MR;
  g.rows_run = ((direct_a && K <= simd::rows_run_k) || (direct_at && K <= simd::columns_run_k && M >= g.MC)) &&
               g.kc_max == K;
  if (g.rows_run && direct_a) g.MC = 16 * MR;
  g.mblocks = (M + g.MC - 1) / g.MC;
  g.nblocks = (N + g.NC - 1) / g.NC;
  g.by_columns = direct_a && k_outer && !wide_c && g.parallel && g.nblocks > 1;
  if (direct_a && !g.rows_run) {  // the last row task's rows (the others are whole tiles: MC % MR == 0)
    const std::size_t rows = M - (g.mblocks - 1) * g.MC, tiles = (rows + MR - 1) / MR, short_rows = tiles * MR - rows;
    if (short_rows <= tiles) g.short_tiles = short_rows;
  }
  g.scratch.a = {0, a_size};
  g.scratch.b = {simd::round_up(a_size, t), b_size};
  g.scratch.total = g.scratch.b.end();
}

// The product C^T = B^T A^T that the transposed mode runs.
constexpr gemm_problem transposed_problem(gemm_problem p) {
  return {p.N, p.M, p.K, p.b_cs, p.b_rs, p.a_cs, p.a_rs, p.threads};
}

template <gemm_target t>
constexpr gemm_plan make_gemm_plan(gemm_problem p) {
  const std::size_t M = p.M, N = p.N, K = p.K, L = t.lanes;
  gemm_plan g;
  if (M == 0 || N == 0) return g;
  g.parallel = M * N * K >= simd::parallel_threshold && p.threads > 1;
  if (K == 0) {
    g.mode = gemm_mode::bias_only;
    return g;
  }
  // One output row (or up to gemv_rows_max with a B of up to gemv_rows_bytes)
  // and a row-major B: a matrix-vector product per row; column chunks of 8 vectors on the pool when the weights
  // are large (each core then streams its own part of B: batch-1 latency is
  // bound by that).
  if (p.b_cs == 1 && (M == 1 || (M <= simd::gemv_rows_max && K * N * t.bytes <= simd::gemv_rows_bytes))) {
    g.mode = gemm_mode::gemv;
    g.chunk = 8 * L;
    g.gemv_parallel = N * K >= (std::size_t(1) << 16) && N >= 2 * g.chunk && p.threads > 1;
    if (p.a_cs != 1) g.scratch.x = {0, K};
    g.scratch.total = g.scratch.x.end();
    return g;
  }
  // One row, or few rows and a long K, with row-major A and B with contiguous
  // columns (dX = dY W^T at small batch): dot products instead of packing the
  // transpose of B. Measured better at batch 1 for every MLP shape and at
  // batch 16 for K = 256; worse at batch 16 for K = 128 and 10.
  if ((M == 1 || (M <= 16 && K >= 256)) && p.a_cs == 1 && p.b_rs == 1 && p.b_cs != 1) {
    g.mode = gemm_mode::dot_nt;
    g.dot_rows = M == 1 ? 1 : 2;
    return g;
  }
  // Fewer columns than a vector and A transposed (dW = X^T dY of a narrow
  // layer): C^T = B^T A^T (its B operand, A's storage, is row-major) into
  // slot ct, then transposed with the bias and the epilogue. With 16
  // registers also between one and two vectors, not a multiple of one (N =
  // 10 on AVX2: 10 of 16 lanes used in panels, 10 of 12 rows transposed;
  // dW of 128 x 10 measured 1.4-1.7x faster). There, row-major A and B (Y =
  // X W of the 10-wide layer) too: the inner product packs X^T by 8 x 8
  // transposes and reads W^T in place (fwd 128 x 10 measured 1.13-1.16x
  // faster on AVX2; on AVX-512, where 10 of 16 lanes is one vector, 0.79x:
  // not taken).
  const bool between = t.registers < 32 && N > L && N < 2 * L && N % L != 0;
  const bool narrow = N < L || between;
  const bool a_transposed = p.a_rs == 1 && p.a_cs != 1, row_major = p.a_cs == 1 && p.b_cs == 1;
  if (narrow && (a_transposed || (between && row_major)) && M >= 2 * L) {
    g.mode = gemm_mode::transposed;
    g.scratch.ct = {0, N * M};
    g.scratch.inner = simd::round_up(N * M, t);
    g.scratch.total = g.scratch.inner + make_gemm_plan<t>(transposed_problem(p)).scratch.total;
    return g;
  }
  // One vector of columns or fewer: panels one vector wide.
  plan_blocked<t>(g, p, N <= L ? 1 : simd::block_vectors);
  return g;
}

// Scratch of simd::narrow_weights_gradient (dW^T = dY^T X, N x K, then
// transposed): ct holds dW^T, b the last partial panel of X (NR x m) when
// K % NR != 0.
constexpr gemm_scratch narrow_gradient_scratch(std::size_t N, std::size_t K, std::size_t m, std::size_t NR,
                                               gemm_target t) {
  gemm_scratch s;
  s.ct = {0, N * K};
  if (K % NR) s.b = {simd::round_up(N * K, t), NR * m};
  s.total = std::max(s.ct.end(), s.b.end());
  return s;
}

}  // namespace ctnn::kernels::cpu
