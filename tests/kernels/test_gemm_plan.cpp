// backends/cpu/gemm/plan.hpp: the mode, tiles and scratch slots make_gemm_plan chooses, as
// static_asserts for the MLP's products (784-256-128-10 at batch 1, 16, 64, 256), 1024^2, a
// convolution's forward and dW, transposed operands, the 10-wide layer's C^T products, on fma3<avx2> (8 floats, 16 registers) and avx512bw
// (16 floats, 32 registers); and, over a grid of shapes and strides, that the named slots are
// aligned, disjoint and inside the scratch size, hold what the mode packs, and that the thread
// count changes only whether tasks go to the pool.
#include <doctest/doctest.h>

#include <ctnn/backends/cpu/arch.hpp>
#include <ctnn/backends/cpu/gemm/microkernel.hpp>
#include <ctnn/backends/cpu/gemm/plan.hpp>

#include "kernels/archs.hpp"

#include <string>

using namespace ctnn::kernels::cpu;

namespace {

constexpr gemm_target avx2{8, 16, 4}, avx512{16, 32, 4};

// The three products of a dense layer K -> N at batch m (backends/cpu/gemm.hpp's strides).
template <gemm_target t>
constexpr gemm_plan forward(std::size_t m, std::size_t K, std::size_t N, std::size_t threads = 1) {
  return make_gemm_plan<t>({m, N, K, K, 1, N, 1, threads});  // Y = X W
}
template <gemm_target t>
constexpr gemm_plan weights(std::size_t m, std::size_t K, std::size_t N) {
  return make_gemm_plan<t>({K, N, m, 1, K, N, 1, 1});  // dW = X^T dY
}
template <gemm_target t>
constexpr gemm_plan input(std::size_t m, std::size_t K, std::size_t N) {
  return make_gemm_plan<t>({m, K, N, N, 1, 1, N, 1});  // dX = dY W^T
}

constexpr bool disjoint(scratch_slot x, scratch_slot y) {
  return !x.size || !y.size || x.end() <= y.offset || y.end() <= x.offset;
}
constexpr bool aligned(scratch_slot s, gemm_target t) { return s.offset % (64 / t.bytes) == 0; }

// The slots of g (and of a transposed product's inner plan, placed at g.scratch.inner) are
// 64-byte aligned, pairwise disjoint, inside g.scratch.total, and as large as the mode packs.
template <gemm_target t>
constexpr bool slots_ok(gemm_problem p) {
  const gemm_plan g = make_gemm_plan<t>(p);
  const gemm_scratch& s = g.scratch;
  const scratch_slot all[] = {s.x, s.a, s.b, s.ct};
  for (const scratch_slot& x : all) {
    if (!aligned(x, t) || x.end() > s.total) return false;
    for (const scratch_slot& y : all)
      if (&x != &y && !disjoint(x, y)) return false;
  }
  switch (g.mode) {
    case gemm_mode::gemv:
      return s.x.size == (p.a_cs != 1 ? p.K : 0);
    case gemm_mode::transposed: {
      const gemm_plan in = make_gemm_plan<t>(transposed_problem(p));
      return s.ct.size == p.M * p.N && s.inner >= s.ct.end() && aligned({s.inner, 0}, t) &&
             s.inner + in.scratch.total <= s.total && (in.mode == gemm_mode::gemv || in.mode == gemm_mode::blocked) && slots_ok<t>(transposed_problem(p));
    }
    case gemm_mode::blocked: {
      const std::size_t kb = g.b == b_access::k_outer ? 2 * g.kcb : p.K;  // k_outer: two K blocks
      const bool a_ok = g.a == a_access::packed       ? s.a.size >= g.row_blocks * g.MR * p.K
                        : g.tail == a_tail::packed      ? s.a.size >= g.MR * p.K
                        : g.tail == a_tail::last_column ? s.a.size >= g.MR
                                                        : s.a.size == 0;
      const bool b_ok = g.b == b_access::in_place || g.b == b_access::split_tail ? s.b.size == 0
                        : g.b == b_access::in_place_tail   ? s.b.size >= g.NR * p.K
                                                           : s.b.size >= g.panels * g.NR * kb;
      return a_ok && b_ok && g.MR * g.NV + g.NV + 1 <= t.registers && g.NR == g.NV * t.lanes &&
             (g.kcb <= g.KC || g.kcb == p.K && p.K <= simd::block_k_max(t)) && g.mblocks * g.MC >= p.M && g.nblocks * g.NC >= p.N;
    }
    default:
      return s.total == 0;
  }
}

// Everything but whether tasks go to the pool.
constexpr bool same_but_threads(const gemm_plan& x, const gemm_plan& y) {
  auto same = [](scratch_slot a, scratch_slot b) { return a.offset == b.offset && a.size == b.size; };
  return x.mode == y.mode && x.chunk == y.chunk && x.dot_rows == y.dot_rows && x.MR == y.MR && x.NV == y.NV &&
         x.NR == y.NR && x.KC == y.KC && x.kcb == y.kcb && x.kc_max == y.kc_max && x.MC == y.MC && x.NC == y.NC &&
         x.row_blocks == y.row_blocks && x.full_blocks == y.full_blocks && x.panels == y.panels &&
         x.mblocks == y.mblocks && x.nblocks == y.nblocks && x.rows_run == y.rows_run && x.a == y.a && x.tail == y.tail && x.b == y.b &&
         same(x.scratch.x, y.scratch.x) && same(x.scratch.a, y.scratch.a) && same(x.scratch.b, y.scratch.b) &&
         same(x.scratch.ct, y.scratch.ct) && x.scratch.inner == y.scratch.inner && x.scratch.total == y.scratch.total;
}

// ---- batch 1: gemv forward, dot products for dX
static_assert(forward<avx2>(1, 784, 256).mode == gemm_mode::gemv && forward<avx512>(1, 784, 256).mode == gemm_mode::gemv);
static_assert(forward<avx512>(1, 784, 256).scratch.total == 0);                   // x read in place
static_assert(make_gemm_plan<avx2>({1, 256, 784, 784, 3, 256, 1}).scratch.x.size == 784);  // x gathered
static_assert(!forward<avx512>(1, 784, 256, 1).gemv_parallel && forward<avx512>(1, 784, 256, 2).gemv_parallel);
static_assert(!forward<avx512>(1, 128, 10, 2).gemv_parallel);                       // small weights: one thread
static_assert(input<avx2>(1, 784, 256).mode == gemm_mode::dot_nt && input<avx2>(1, 784, 256).dot_rows == 1);
// batch 2: a gemv per row where B is at most gemv_rows_bytes (256 x 128: 128 KiB), panels for 784 x 256 (784 KiB)
static_assert(forward<avx2>(2, 256, 128).mode == gemm_mode::gemv && forward<avx512>(2, 256, 128).mode == gemm_mode::gemv);
static_assert(forward<avx512>(2, 128, 10).mode == gemm_mode::gemv && forward<avx512>(3, 256, 128).mode == gemm_mode::blocked);
static_assert(forward<avx2>(2, 784, 256).mode == gemm_mode::blocked && forward<avx512>(2, 784, 256).mode == gemm_mode::blocked);
static_assert(make_gemm_plan<avx2>({2, 128, 256, 256, 3, 128, 1}).scratch.x.size == 256);  // a row gathered at a time

// ---- small m: dot products for dX at K >= 256, panels otherwise
static_assert(input<avx512>(16, 784, 256).mode == gemm_mode::dot_nt && input<avx512>(16, 784, 256).dot_rows == 2);
static_assert(input<avx512>(16, 256, 128).mode == gemm_mode::blocked && input<avx512>(16, 256, 128).b == b_access::packed);
static_assert(forward<avx2>(3, 17, 3).mode == gemm_mode::blocked && forward<avx2>(3, 17, 3).NV == 1);
static_assert(forward<avx2>(3, 17, 3).b == b_access::in_place_tail);                // 5 extra lanes > a row of 3
static_assert(forward<avx2>(3, 17, 3).scratch.b.size == 8 * 17);

// ---- the MLP's forward products: register tiles per architecture, B in place at small batch
static_assert(forward<avx2>(16, 784, 256).MR == 6 && forward<avx2>(16, 784, 256).NR == 16);
static_assert(forward<avx512>(16, 784, 256).MR == 12 && forward<avx512>(16, 784, 256).NR == 32);
static_assert(forward<avx2>(16, 784, 256).a == a_access::rows && forward<avx2>(16, 784, 256).b == b_access::in_place);
static_assert(forward<avx2>(16, 784, 256).kcb == 196 && forward<avx2>(16, 784, 256).kc_max == 196);  // 4 equal K blocks
static_assert(forward<avx512>(64, 784, 256).b == b_access::in_place);               // 6 row blocks of 12
static_assert(forward<avx2>(64, 784, 256).b == b_access::in_place);              // 64 rows: 11 row blocks of 6
static_assert(forward<avx2>(65, 784, 256).b == b_access::k_outer && forward<avx512>(65, 784, 256).b == b_access::k_outer);
static_assert(forward<avx2>(256, 784, 256).b == b_access::k_outer && forward<avx512>(256, 784, 256).b == b_access::k_outer);
static_assert(forward<avx512>(256, 256, 128).b == b_access::packed);                // K = 256: one K block
// ... and on the pool the tasks of Y = X W of 784 x 256 above batch 64 (B in K blocks) by columns: on two
// threads each packs and reads its half of W's columns (by_columns); one thread, B in place, packed whole,
// wide_c, a transposed A: by rows
static_assert(forward<avx2>(256, 784, 256, 2).by_columns && forward<avx512>(256, 784, 256, 2).by_columns);
static_assert(forward<avx2>(65, 784, 256, 2).by_columns && !forward<avx512>(64, 784, 256, 2).by_columns);
static_assert(!forward<avx2>(256, 784, 256).by_columns && !forward<avx512>(256, 784, 256, 1).by_columns);
static_assert(!forward<avx512>(256, 256, 128, 2).by_columns && !forward<avx512>(1024, 1024, 1024, 2).by_columns);
static_assert(!make_gemm_plan<avx512>({784, 256, 256, 1, 784, 256, 1, 2}).by_columns);  // dW = X^T dY
static_assert(!make_gemm_plan<avx512>({128, 512, 1728, 1, 128, 512, 1, 2}).by_columns);  // dR of an LSTM(128)
static_assert(forward<avx512>(256, 128, 10).NV == 1 && forward<avx2>(15, 128, 10).NV == 2);
static_assert(forward<avx512>(256, 128, 10).b == b_access::split_tail && forward<avx512>(256, 128, 10).scratch.total == 0);
static_assert(forward<avx2>(15, 128, 10).b == b_access::split_tail && forward<avx2>(15, 128, 10).scratch.total == 0);  // last row masked
// The 10-wide layer's Y = X W with 16 registers, from 16 rows on: C^T = W^T X^T (10 of 12 rows
// used: 6 + 4, instead of 10 of 16 lanes), X^T packed, W^T read in place; not with 32 registers.
static_assert(forward<avx2>(16, 128, 10).mode == gemm_mode::transposed && forward<avx2>(256, 128, 10).mode == gemm_mode::transposed);
static_assert(forward<avx2>(256, 128, 10).scratch.ct.size == 2560 && forward<avx2>(256, 128, 10).scratch.inner == 2560);
static_assert(forward<avx512>(256, 128, 10).mode == gemm_mode::blocked && forward<avx2>(256, 128, 16).mode == gemm_mode::blocked);
static_assert(forward<avx2>(256, 128, 4).mode == gemm_mode::blocked);  // below a vector: one-vector panels
// A's rows in place: the last row task's rows over whole tiles, its last short_tiles of MR - 1 rows
// (33 rows on AVX-512: 3 tiles of 11, 22 is 11 11; on AVX2 a task is 24 rows, so 28 is 4 x 6 and a
// task of 4, unchanged; 22 is 6 6 5 5; an LSTM's input projection, 28 steps x 28 features -> 512, is
// 12 12 4 on AVX-512: 8 short of 36)
static_assert(forward<avx512>(33, 28, 512).short_tiles == 3 && forward<avx2>(28, 28, 512).short_tiles == 0);
static_assert(forward<avx2>(22, 28, 512).short_tiles == 2 && forward<avx512>(22, 28, 512).short_tiles == 2);
static_assert(forward<avx512>(23, 28, 512).short_tiles == 1 && forward<avx512>(92, 28, 512).short_tiles == 4);  // 92 = 48 + 44
static_assert(forward<avx512>(24, 28, 512).short_tiles == 0 && forward<avx512>(17, 28, 512).short_tiles == 0);  // 17: 7 short of 24
static_assert(forward<avx512>(28, 28, 512).short_tiles == 0);
static_assert(forward<avx512>(28, 16, 512).short_tiles == 0 && weights<avx512>(28, 28, 512).short_tiles == 0);  // rows_run; A transposed
constexpr gemm_plan forward_inner = make_gemm_plan<avx2>(transposed_problem({256, 10, 128, 128, 1, 10, 1}));
static_assert(forward_inner.mode == gemm_mode::blocked && forward_inner.row_blocks == 2 && forward_inner.panels == 16);
static_assert(forward_inner.a == a_access::columns && forward_inner.tail == a_tail::last_column);  // W^T in place
static_assert(forward_inner.b == b_access::packed && forward_inner.scratch.b.size == 256 * 128);     // X^T packed
static_assert(slots_ok<avx2>({256, 10, 128, 128, 1, 10, 1}) && slots_ok<avx2>({64, 10, 128, 128, 1, 10, 1}));
static_assert(forward<avx512>(256, 784, 256).scratch.total == 2 * 8 * 32 * 196);    // two packed K blocks of B

// ---- short K (rows of A in place: up to 16, dX of the 10-wide layer; A transposed in place: up to 64, dW at batch 64):
// the full tiles of a panel in one run; tasks of 16 row blocks for rows
static_assert(input<avx2>(64, 128, 10).mode == gemm_mode::blocked && input<avx2>(64, 128, 10).rows_run);
static_assert(input<avx2>(64, 128, 10).b == b_access::packed && input<avx2>(64, 128, 10).MC == 96);
static_assert(input<avx512>(256, 128, 10).rows_run && input<avx512>(256, 128, 10).MC == 192);
static_assert(input<avx2>(16, 128, 10).rows_run && forward<avx2>(7744, 9, 32).rows_run);  // a first convolution: K = 9
static_assert(forward<avx2>(64, 16, 256).rows_run && !forward<avx2>(64, 17, 256).rows_run);  // K up to 16
static_assert(!input<avx2>(64, 256, 128).rows_run && input<avx2>(64, 256, 128).MC == 24);
static_assert(weights<avx2>(64, 256, 128).rows_run && weights<avx512>(64, 784, 256).rows_run);  // A transposed: K up to 64
static_assert(weights<avx2>(64, 256, 128).MC == 24 && !weights<avx2>(65, 256, 128).rows_run);
static_assert(!weights<avx2>(256, 256, 128).rows_run && !make_gemm_plan<avx2>({100, 64, 10, 20, 2, 64, 1}).rows_run);  // A packed

// ---- the MLP's weight gradients: A transposed, read in place
static_assert(weights<avx2>(64, 784, 256).a == a_access::columns && weights<avx2>(64, 784, 256).tail == a_tail::last_column);
static_assert(weights<avx512>(64, 784, 256).a == a_access::columns && weights<avx512>(64, 784, 256).tail == a_tail::last_column);  // 784 = 65 x 12 + 4
static_assert(weights<avx512>(64, 768, 256).tail == a_tail::none);
// A transposed A of 512 rows or more and one K block of 128 rows or more (up to 384 with 16
// registers, 256 with 32) is packed (dW of 784x256 at batch 256, gemm20: read in place, each K
// step of a block of 6 rows read 24 bytes of a line of its own; gemm27: AVX-512 too); fewer rows,
// a shorter or longer K: in place.
static_assert(weights<avx2>(256, 784, 256).a == a_access::packed && weights<avx2>(256, 784, 256).tail == a_tail::none);
static_assert(weights<avx2>(256, 784, 256).scratch.a.size == 131 * 6 * 256 && !weights<avx2>(256, 784, 256).rows_run);
static_assert(weights<avx2>(128, 512, 64).a == a_access::packed && weights<avx2>(384, 784, 256).a == a_access::packed);
static_assert(weights<avx2>(256, 511, 256).a == a_access::columns && weights<avx2>(127, 784, 256).a == a_access::columns);
static_assert(weights<avx2>(385, 784, 256).a == a_access::columns && weights<avx512>(256, 784, 256).a == a_access::packed);
static_assert(weights<avx512>(256, 784, 256).scratch.a.size == 66 * 12 * 256 && weights<avx512>(257, 784, 256).a == a_access::columns);
static_assert(weights<avx512>(127, 784, 256).a == a_access::columns && weights<avx512>(256, 511, 256).a == a_access::columns);
static_assert(slots_ok<avx2>({784, 256, 256, 1, 784, 256, 1}) && slots_ok<avx2>({515, 33, 300, 1, 515, 33, 1}));
static_assert(weights<avx512>(256, 128, 10).mode == gemm_mode::transposed);         // N = 10 below 16 lanes
static_assert(weights<avx512>(256, 128, 10).scratch.ct.size == 1280 && weights<avx512>(256, 128, 10).scratch.inner == 1280);
static_assert(weights<avx2>(256, 128, 10).mode == gemm_mode::transposed);           // 10 in (8, 16): transposed with 16 registers
static_assert(weights<avx2>(256, 128, 16).mode == gemm_mode::blocked && weights<avx512>(256, 128, 20).mode == gemm_mode::blocked);
constexpr gemm_plan narrow_inner = make_gemm_plan<avx2>(transposed_problem({128, 10, 256, 1, 128, 10, 1}));
static_assert(narrow_inner.mode == gemm_mode::blocked && narrow_inner.row_blocks == 2 && narrow_inner.panels == 8);  // 6 + 4 rows
static_assert(narrow_inner.a == a_access::columns && narrow_inner.b == b_access::in_place);  // dY and X read in place
static_assert(!make_gemm_plan<avx2>(transposed_problem({128, 10, 64, 1, 128, 10, 1})).rows_run);  // 10 rows: tile by tile

// ---- 1024^2: C (4 MB) over the budget, A's rows in place: K blocks of 256 rows of B (1 MB) outermost, not all of B
// packed (4 MB, read again from L3 by each row task: wide_c in plan.hpp); a convolution's dW (K = batch x
// positions): K blocks outermost
static_assert(forward<avx2>(1024, 1024, 1024).b == b_access::k_outer && forward<avx2>(1024, 1024, 1024).kcb == 256);
static_assert(forward<avx2>(1024, 1024, 1024).scratch.b.size == 2 * 1024 * 256 && forward<avx2>(1024, 1024, 1024).a == a_access::rows);
static_assert(forward<avx512>(1024, 1024, 1024).b == b_access::k_outer && forward<avx512>(1024, 1024, 1024).kcb == 256);
static_assert(forward<avx512>(1024, 1024, 1024).mblocks == 86 && forward<avx512>(1024, 1024, 1024).NC == 32 &&
              forward<avx512>(1024, 1024, 1024).MC == 12);  // tasks of one 12 x 32 tile (A's rows stay in L1)
static_assert(forward<avx2>(1024, 1024, 1024).MC == 24);  // 4 tiles of 6 rows
// wider B: K blocks of 128 where 256 rows are over twice the budget (2048 columns); K up to two blocks (conv2's
// 288, a layer's 512) or a C within the budget keep their plans; a transposed A is not wide_c's
static_assert(forward<avx2>(2048, 2048, 2048).b == b_access::k_outer && forward<avx2>(2048, 2048, 2048).kcb == 128);
static_assert(forward<avx2>(1024, 512, 1024).b == b_access::packed && forward<avx2>(1024, 4096, 4096).b == b_access::packed);
static_assert(weights<avx2>(1024, 1024, 1024).b == b_access::packed);
static_assert(weights<avx512>(7744, 288, 64).b == b_access::k_outer && weights<avx512>(7744, 288, 64).kcb == 250);
// wider (M + N over the budget at 256 rows): K blocks of at most 128 outermost (dR of an LSTM(128) over 27 steps at
// batch 64: 14 of 124, at 16: 4 of 108); the GRU(128)'s (N 384) fits at 256; beyond 128 rows a block, B packed whole
static_assert(weights<avx512>(1728, 128, 512).b == b_access::k_outer && weights<avx512>(1728, 128, 512).kcb == 124);
static_assert(weights<avx2>(1728, 128, 512).b == b_access::k_outer && weights<avx2>(1728, 128, 512).kc_max == 124);
static_assert(weights<avx512>(432, 128, 512).kcb == 108 && weights<avx512>(432, 128, 512).scratch.b.size == 2 * 16 * 32 * 108);
static_assert(weights<avx512>(1728, 128, 384).b == b_access::k_outer && weights<avx512>(1728, 128, 384).kcb == 247);
static_assert(weights<avx512>(1728, 128, 1024).b == b_access::packed && weights<avx512>(1728, 128, 1024).kcb == 247);
// conv2 forward (im2col rows 7744, K 288, N 64): B packed; K one block with 16 registers, two of 144 with 32
static_assert(forward<avx2>(7744, 288, 64).b == b_access::packed && forward<avx512>(7744, 288, 64).b == b_access::packed);
static_assert(forward<avx2>(7744, 288, 64).kcb == 288 && forward<avx2>(7744, 288, 64).kc_max == 288);
static_assert(forward<avx512>(7744, 288, 64).kcb == 144 && forward<avx512>(7744, 288, 64).kc_max == 144);
static_assert(forward<avx2>(64, 385, 256).kcb == 193 && forward<avx2>(64, 384, 256).kcb == 384);  // above 1.5 KC: equal blocks
static_assert(weights<avx2>(5000, 9, 32).b == b_access::in_place && weights<avx2>(5000, 9, 32).kc_max == 250);
// a transposed A of more than two row blocks and K over 512 (dW of an LSTM(128)'s kernel, 28 x 512 over 28 steps at
// batch 64): B packed in K blocks (of 128: M + N over the budget at 256), not read in place; two row blocks (9 rows of
// a first convolution) or K up to 512 keep it in place
static_assert(weights<avx512>(1792, 28, 512).b == b_access::k_outer && weights<avx512>(1792, 28, 512).kcb == 128);
static_assert(weights<avx2>(1792, 28, 512).b == b_access::k_outer && weights<avx2>(1792, 28, 512).kc_max == 128);
static_assert(weights<avx512>(512, 28, 512).b == b_access::in_place && weights<avx512>(1792, 16, 512).b == b_access::in_place);
static_assert(weights<avx512>(1792, 28, 8192).b == b_access::in_place);  // no K blocks fit (C 896 KB): B in place, not all packed

// ---- A with no unit stride: packed
static_assert(make_gemm_plan<avx2>({100, 64, 30, 60, 2, 64, 1}).a == a_access::packed);
static_assert(make_gemm_plan<avx2>({100, 64, 30, 60, 2, 64, 1}).scratch.a.size == 17 * 6 * 30);

// ---- the slots of representative plans
static_assert(slots_ok<avx2>({1, 256, 784, 784, 3, 256, 1}) && slots_ok<avx512>({256, 10, 128, 1, 256, 10, 1}));
static_assert(slots_ok<avx512>({100, 64, 30, 60, 2, 64, 1}) && slots_ok<avx2>({9, 32, 5000, 1, 9, 32, 1}));

}  // namespace

// Every shape of the grid on target t; returns how many were checked.
template <gemm_target t>
int check_grid() {
  int checked = 0;
  for (std::size_t M : {0, 1, 2, 5, 8, 16, 17, 33, 64, 100, 256, 1024})
    for (std::size_t N : {1, 3, 7, 8, 10, 16, 17, 33, 64, 128, 130, 256, 784})
      for (std::size_t K : {0, 1, 3, 17, 255, 256, 300, 784, 7744})
        for (int var = 0; var < 6; ++var) {
          std::size_t ars = K, acs = 1, brs = N, bcs = 1;
          if (var == 1 || var == 3) ars = 1, acs = M;  // A transposed
          if (var == 2 || var == 3) brs = 1, bcs = K;  // B transposed
          if (var == 4) ars = 2 * K, acs = 2;          // A with no unit stride
          if (var == 5) brs = 2 * N, bcs = 2;          // B with no unit stride
          const gemm_problem p{M, N, K, ars, acs, brs, bcs, 1};
          gemm_problem p8 = p;
          p8.threads = 8;
          INFO("lanes=" << t.lanes << " M=" << M << " N=" << N << " K=" << K << " variant=" << var);
          CHECK(slots_ok<t>(p));
          CHECK(same_but_threads(make_gemm_plan<t>(p), make_gemm_plan<t>(p8)));
          ++checked;
        }
  return checked;
}

TEST_CASE("gemm plans: slots aligned, disjoint and inside the scratch, the thread count changes only the pool's use") {
  const int checked = check_grid<avx2>() + check_grid<avx512>() + check_grid<gemm_target{4, 16, 8}>() +
                      check_grid<gemm_target{8, 32, 8}>();
  CHECK(checked == 4 * 12 * 13 * 9 * 6);
}

TEST_CASE("gemm_target_of: lanes and registers of the architectures this CPU runs") {
  const int ran = ctnn::test::for_each_arch("gemm_target_of", [](auto arch, const char*) {
    using A = decltype(arch);
    constexpr gemm_target t = gemm_target_of<float, A>();
    CHECK(t.lanes == xsimd::batch<float, A>::size);
    CHECK(t.registers == (std::is_base_of_v<xsimd::avx512f, A> ? 32u : 16u));
    CHECK(t.bytes == 4);
  });
  CHECK(ran >= 1);
}
