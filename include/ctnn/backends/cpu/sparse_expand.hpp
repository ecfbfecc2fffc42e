// ctnn/backends/cpu/sparse_expand.hpp — a sparse layout's forward product at large batches: the weights
// expanded, panel by panel, into the dense GEMM's packed-B format, then the dense micro-kernel.
//
//   forward<K, N, Arch>(x, bias, y, batch, relu, panel_of): y = x W
//       + b (relu optional) for float where Arch has SIMD. panel_of(j0) gives
//       the expander of columns [j0, j0 + NR) of W (NR = panel_width<Arch>(N)),
//       which writes them K block by K block as pack_panels (gemm.hpp) lays
//       out a dense kernel (zero where W keeps no weight and past N). Each
//       block (block_rows: at most 16 kB, so it stays in L1) is expanded into
//       this thread's scratch once and every batch row runs over it with
//       simd::micro_rows; per output: bias, then k = 0, 1, ... (the dense
//       order). Expanding is shared by the whole batch. Panels go to the pool
//       as the dense GEMM's tasks do (each output in one task: results do not
//       depend on the thread count).
//   column_panel<Arch, I>: the expander of csc and rows (a cursor per column).
//   use<Arch, T>(batch) (bitmap) and use_per_weight<Arch, T>(batch, kept,
//       total) (csc, rows): whether this path runs, by the batch, the
//       architecture and the share of weights kept (below, with what they were
//       measured on). The N:M layout keeps its kernels (they measured faster).
// (Since session 25 the stripped layers compute from decoded weights where decode_batches says,
// sparse_kernels.hpp: bitmap at every batch, so its path here runs only where its kernels are
// called directly; csc and rows on AVX2 still reach it from per_weight_min_batch samples.)
// Zero weights are multiplied like any other (as in the dense layer): an
// infinite or NaN input gives NaN in every unit, where the sparse kernels
// skip the weights they do not store.
#pragma once
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <type_traits>

#include <xsimd/xsimd.hpp>

#include "../../kernels/functors.hpp"
#include "arch.hpp"
#include "gemm.hpp"
#include "thread_pool.hpp"

namespace ctnn::kernels::cpu::sparse_expand {

// The scratch buffer of simd::scratch the panels go to (0: the GEMM's; fused_mlp.hpp uses 1-3).
inline constexpr int scratch_tag = 8;
// When (measured on a loaded Zen 4, the 784-256-128-10 MLP, two runs, docs/pruning.md "Which
// layout for which batch size and sparsity"): the bitmap layout from L samples on (L: the
// lanes of Arch; at 64 samples 0.91-0.98x dense on AVX-512 and 0.95-1.07x on AVX2, its kernel
// 0.74-0.92x and 0.38-0.49x; at 8 samples on AVX-512 its kernel of 8 rows was as fast or
// faster). csc and rows: on AVX2 from per_weight_min_batch samples on with more than 1 /
// min_density_inv of the weights kept (50 %: 0.77-0.86x against 0.79-0.80x, a wash; on AVX-512
// their kernels, which transpose blocks of 16 samples, stayed faster there: 0.84-0.86x against
// 0.78-0.80x); strip_pruning gives them only layers with at most 1 weight in 9 kept, where their
// kernels win. (Below L samples they ran expanded from 8 samples on AVX-512; their kernel on a
// block of L padded with zeros is faster there: sparse_rows.hpp, pad_min.)
inline constexpr std::size_t per_weight_min_batch = 64;
// The bitmap layout on AVX2 expanded from 7 samples (below, 2 to 6 samples run the kernel of R
// rows sharing each expanded row, chunk_rows_avx2: at 4 to 6, 0.90-1.15x dense against
// 0.65-0.73x expanded; 7 rows would need 14 accumulators besides the 2 expanded halves, the
// broadcast and the zero, 18 of 16 registers; docs/pruning.md).
inline constexpr std::size_t bitmap_min_batch_narrow = 7;
inline constexpr std::size_t min_density_inv = 4;
// Bytes of one expanded K block of a panel: it stays in L1 while it is written and while
// every batch row reads it (whole panels, 100 kB for K = 784 on AVX-512, measured no slower
// to expand: 18 us for bitmap, 74-83 us for csc at 50 % per 784 x 256 layer, either way).
inline constexpr std::size_t block_bytes = 16384;

template <class Arch>
constexpr std::size_t panel_width(std::size_t n) {
  return packed_panel_vectors<float, Arch>(n) * simd::blocking<float, Arch>::L;
}
// The rows of one expanded block: at most block_bytes (at least one row), equal blocks.
template <class Arch>
constexpr std::size_t block_rows(std::size_t K, std::size_t N) {
  const std::size_t most = std::max<std::size_t>(block_bytes / (4 * panel_width<Arch>(N)), 1);
  const std::size_t blocks = (K + most - 1) / most;
  return (K + blocks - 1) / blocks;
}

template <class Arch, class T>
constexpr bool available_v = std::is_same_v<T, float> && simd_v<float, Arch>;

template <class Arch>
inline constexpr std::size_t lanes_v = xsimd::batch<float, Arch>::size;

// The bitmap layout: from L samples on; with fewer than 32 registers (AVX2) from
// bitmap_min_batch_narrow on.
template <class Arch, class T>
constexpr bool use(std::size_t batch) {
  if constexpr (available_v<Arch, T>)
    return batch >= (simd::blocking<float, Arch>::wide ? lanes_v<Arch> : bitmap_min_batch_narrow);
  else
    return false;
}
// csc and rows (kept of total weights): with fewer than 32 registers (AVX2) from
// per_weight_min_batch samples on above the density.
template <class Arch, class T>
constexpr bool use_per_weight(std::size_t batch, std::size_t kept, std::size_t total) {
  if constexpr (available_v<Arch, T>)
    return !simd::blocking<float, Arch>::wide && batch >= per_weight_min_batch && kept * min_density_inv > total;
  else
    return false;
}

// y = x W + b (relu optional). panel_of(j0) returns the expander of the panel at column j0:
// e(k0, k1, buf) writes rows [k0, k1) of its NR columns as buf[(k - k0) * NR + j], called
// with consecutive ranges from k0 = 0 up to K (block_rows long, the last may be shorter).
template <std::size_t K, std::size_t N, class Arch, class PanelOf>
void forward(const float* x, const float* bias, float* y, std::size_t batch, bool relu, PanelOf&& panel_of) {
  static_assert(available_v<Arch, float>, "sparse_expand::forward: needs float vectors of the architecture");
  using blk = simd::blocking<float, Arch>;
  constexpr std::size_t MR = blk::MR, NV = packed_panel_vectors<float, Arch>(N), NR = NV * blk::L;
  constexpr std::size_t kcb = block_rows<Arch>(K, N), panels = (N + NR - 1) / NR;
  thread_pool& pool = thread_pool::global();
  auto task = [&](std::size_t t) {
    float* buf = simd::scratch<float, scratch_tag>(kcb * NR);
    const std::size_t j0 = t * NR, nr = std::min(NR, N - j0);
    auto expand = panel_of(j0);
    for (std::size_t p0 = 0; p0 < K; p0 += kcb) {
      const std::size_t kc = std::min(kcb, K - p0);
      expand(p0, p0 + kc, buf);
      for (std::size_t i0 = 0; i0 < batch; i0 += MR)
        simd::micro_rows<Arch, NV, false>(kc, x + i0 * K + p0, K, buf, NR, y + i0 * N + j0, N,
                                          std::min(MR, batch - i0), nr, bias + j0, p0 == 0, fn::relu_fn{},
                                          relu && p0 + kc == K);
    }
  };
  pool.run(panels, task, batch * N * K >= simd::parallel_threshold && pool.size() > 1);
}

// The expander of the layouts that list each unit's weights by ascending input (csc, rows):
// unit j's values [starts[j], starts[j + 1]) at inputs idx[...]; a cursor per column.
template <class Arch, class I>
struct column_panel {
  static constexpr std::size_t NR_max = simd::blocking<float, Arch>::NV * simd::blocking<float, Arch>::L;
  const float* values;
  const std::uint32_t* starts;
  const I* idx;
  std::size_t NR, j0, nr;
  std::uint32_t cur[NR_max];
  column_panel(std::size_t N, const float* v, const std::uint32_t* s, const I* i, std::size_t j)
      : values(v), starts(s), idx(i), NR(panel_width<Arch>(N)), j0(j), nr(std::min(NR, N - j)) {
    for (std::size_t c = 0; c < nr; ++c) cur[c] = starts[j0 + c];
  }
  void operator()(std::size_t k0, std::size_t k1, float* buf) {
    std::fill(buf, buf + (k1 - k0) * NR, 0.0f);
    for (std::size_t c = 0; c < nr; ++c) {
      std::uint32_t p = cur[c];
      const std::uint32_t e = starts[j0 + c + 1];
      for (; p < e && idx[p] < k1; ++p) buf[(std::size_t(idx[p]) - k0) * NR + c] = values[p];
      cur[c] = p;
    }
  }
};

}  // namespace ctnn::kernels::cpu::sparse_expand
