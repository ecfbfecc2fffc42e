// ctnn/backends/cpu/fused_mlp.hpp — a small MLP's inference and training passes over tiles of
// the batch (the CPU counterpart of backends/cuda/fused_mlp.cuh, tiny-cuda-nn's fully fused MLP).
//
// Fits (fused_mlp_fits<Layers, Arch>(), at compile time): bound layers of
// cpu<Arch> that are dense layers whose activation has a rule of
// kernels/functors.hpp (identity, relu, leaky_relu, sigmoid, tanh; softmax
// and dense<up_to<N>> do not fit) with at most fused_mlp_width = 256 outputs
// each, or flatten/reshape layers, all computing in one SIMD type (float or
// double), at least one dense layer. The first dense layer's inputs are read
// in place from x (any width).
// fused_mlp_forward<Arch, Layers>(x, y, batch, params): y = the network on x.
// Each tile of fused_tile_rows<Layers> rows goes through all the layers with
// its activations in this thread's two tile buffers (2 x rows x the widest
// layer: 32 KiB of float), each product gemm/microkernel.hpp's micro-kernel
// over the kernels packed once per call (from fused_pack_rows rows on; below,
// read in place, only a partial last panel packed): bias first, then k in order, the activation on the accumulators.
// Tiles are the pool's tasks: each output is computed by one task, so the
// bits do not depend on the thread count. Below one tile of rows
// the layers run unfused (dense_forward, the unfused path's kernels); the model
// calls it from one tile on (ops' fused_mlp_min_batch).
// Results equal the unfused path's up to rounding. docs/performance.md
// ("Fused small MLP on the CPU") has the measurement behind fused_mlp_default.
// Training (the model's loss needs the whole batch's outputs, so forward and backward are two
// passes over the tiles): fused_mlp_training_forward writes every dense layer's output rows
// (the activations the backward reads) tile by tile; fused_mlp_backward runs each tile of
// fused_backward_rows rows from the last layer to the first, its deltas in tile buffers, the
// weight gradients summed over the tiles in order (fused_mlp_backward_default: whether a model
// starts with the backward on; fused_mlp_train_batch: the batches they run on).
#pragma once
#include <algorithm>
#include <array>
#include <cstddef>
#include <new>
#include <tuple>
#include <type_traits>
#include <utility>

#include "../../core/fused_mlp_hook.hpp"
#include "../../core/separate.hpp"
#include "../../core/shape.hpp"
#include "../../kernels/functors.hpp"
#include "arch.hpp"
#include "backend.hpp"
#include "gemm.hpp"
#include "map.hpp"
#include "thread_pool.hpp"

namespace ctnn {

template <class Spec, Shape In, class P, class Backend>
struct dense_layer;  // layers/dense.hpp
template <class Spec, Shape In, class P, class Backend>
struct reshape_layer;  // layers/reshape.hpp

namespace kernels::cpu {

inline constexpr std::size_t fused_mlp_width = 256;

namespace fused {

// How one bound layer takes part: kind -1 it cannot; 0 a reshape (no work);
// 1 a dense layer of cpu<Arch>, whose rule() is its activation's functor.
template <class L, class Arch>
struct role {
  static constexpr int kind = -1;
};
template <class Spec, Shape In, class P, class Arch>
struct role<dense_layer<Spec, In, P, ctnn::cpu<Arch>>, Arch> {
  using T = typename P::compute_type;
  using Act = typename Spec::activation;
  static constexpr std::size_t k = In::size, n = Spec::units;
  static constexpr bool fits = requires { Act::template rule<T>(); } && !Spec::is_up_to && n <= fused_mlp_width &&
                               simd_v<T, Arch>;
  static constexpr int kind = fits ? 1 : -1;
  static constexpr auto rule() { return Act::template rule<T>(); }
};
template <class Spec, Shape In, class P, class Arch>
struct role<reshape_layer<Spec, In, P, ctnn::cpu<Arch>>, Arch> {
  static constexpr int kind = 0;
};

// Per-layer numbers of a role (0 for a layer that is not a fitting dense layer), for the folds
// of plan: plain function templates, no generic lambdas (clang 19 crashed on those nested in a
// fold inside the kernel's function template).
template <class R>
constexpr std::size_t outputs_of() {
  if constexpr (R::kind == 1) return R::n;
  else return 0;
}
template <class R>
constexpr std::size_t kernel_of() {
  if constexpr (R::kind == 1) return R::k * R::n;
  else return 0;
}
template <class R, class T, class Arch>
constexpr std::size_t packed_of() {
  if constexpr (R::kind == 1) return packed_panels_size<T, Arch>(R::k, R::n);
  else return 0;
}
template <class Layers, class Arch, std::size_t... I>
constexpr bool all_fit(std::index_sequence<I...>) {
  using R = std::tuple<role<std::tuple_element_t<I, Layers>, Arch>...>;
  if constexpr (((std::tuple_element_t<I, R>::kind >= 0) && ...)) {
    using T0 = typename std::tuple_element_t<0, Layers>::compute_type;
    return (std::is_same_v<typename std::tuple_element_t<I, Layers>::compute_type, T0> && ...) &&
           ((std::tuple_element_t<I, R>::kind == 1) || ...);
  } else {
    return false;
  }
}
template <class Layers, class Arch, std::size_t... I>
constexpr std::size_t widest(std::index_sequence<I...>) {
  return std::max({std::size_t(1), outputs_of<role<std::tuple_element_t<I, Layers>, Arch>>()...});
}
template <class Layers, class Arch, std::size_t... I>
constexpr std::size_t last_dense(std::index_sequence<I...>) {
  return std::max({std::size_t(0), (role<std::tuple_element_t<I, Layers>, Arch>::kind == 1 ? I : 0)...});
}

template <class Layers, class Arch, std::size_t... I>
constexpr std::size_t first_dense(std::index_sequence<I...>) {
  return std::min({sizeof...(I), (role<std::tuple_element_t<I, Layers>, Arch>::kind == 1 ? I : sizeof...(I))...});
}

template <class Layers, class Arch>
struct plan {
  static constexpr std::size_t count = std::tuple_size_v<Layers>;
  using seq = std::make_index_sequence<count>;
  template <std::size_t I>
  using layer = std::tuple_element_t<I, Layers>;
  template <std::size_t I>
  using role_of = role<layer<I>, Arch>;
  static constexpr bool fits = all_fit<Layers, Arch>(seq{});
  static constexpr std::size_t width = widest<Layers, Arch>(seq{});     // the widest dense output
  static constexpr std::size_t last = last_dense<Layers, Arch>(seq{});  // the last dense layer (writes y)
  static constexpr std::size_t first = first_dense<Layers, Arch>(seq{});  // the first (no dX)
  // the first dense layer's kernel, K x N values (where fits)
  static constexpr std::size_t first_kernel = kernel_of<role<std::tuple_element_t<first < count ? first : 0, Layers>, Arch>>();
};

// This thread's buffer of at least n values, 64-byte aligned (Tag keeps the packed kernels and the
// tile buffers apart from each other and from the GEMM's simd::scratch, tag 0).
template <class T, int Tag>
T* buffer(std::size_t n) {
  return simd::scratch<T, Tag + 1>(n);
}

// NR: the output columns of one micro-kernel call (one vector for N up to a vector, else two);
// tail_size: the values of the packed last partial panel of a K x N kernel (0 when N % NR == 0).
template <class T, class Arch, std::size_t N>
inline constexpr std::size_t panel_cols = packed_panel_vectors<T, Arch>(N) * simd::blocking<T, Arch>::L;
template <class T, class Arch, std::size_t K, std::size_t N>
inline constexpr std::size_t tail_size = N % panel_cols<T, Arch, N> ? K * panel_cols<T, Arch, N> : 0;
template <class R, class T, class Arch>
constexpr std::size_t tail_of() {
  if constexpr (R::kind == 1) return tail_size<T, Arch, R::k, R::n>;
  else return 0;
}
template <class R, class T, class Arch>
constexpr std::size_t packed_transposed_of() {
  if constexpr (R::kind == 1) return packed_panels_size<T, Arch>(R::n, R::k);
  else return 0;
}
template <class Layers, class Arch, class T, std::size_t... I>
constexpr std::size_t packed_transposed_total(std::index_sequence<I...>) {
  return (packed_transposed_of<role<std::tuple_element_t<I, Layers>, Arch>, T, Arch>() + ... + 0);
}
// The values of every kernel packed (pack_panels), and of their partial last panels only.
template <class Layers, class Arch, class T, std::size_t... I>
constexpr std::size_t packed_total(std::index_sequence<I...>) {
  return (packed_of<role<std::tuple_element_t<I, Layers>, Arch>, T, Arch>() + ... + 0);
}
template <class Layers, class Arch, class T, std::size_t... I>
constexpr std::size_t tails_total(std::index_sequence<I...>) {
  return (tail_of<role<std::tuple_element_t<I, Layers>, Arch>, T, Arch>() + ... + 0);
}

// y[m, N] = e(a[m, K] w + b) (a: row stride lda; w: [K, N] row-major; b null: 0), by simd::micro_rows
// over MR x NR blocks: K in blocks (as packed_product: bias first, then k in order), for each
// panel of w every row block of the tile, so that the panel stays in L1. packed: w as
// pack_panels wrote it (every panel NR columns by K rows); else w is read in place and tail is
// its last partial panel as pack_b wrote it. K and N at run time: one body per (Arch, T, rule),
// NV (packed_panel_vectors of N) chosen per call, for every layer of every network (the
// compiled part holds float's for the default architecture: fused_layer_instances below).
template <class Arch, std::size_t NV, class T, class E>
void tile_product_nv(std::size_t K, std::size_t N, const T* a, std::size_t lda, const T* w, bool packed,
                     const T* tail, const T* b, T* y, std::size_t m, const E& e) {
  using blk = simd::blocking<T, Arch>;
  constexpr std::size_t NR = NV * blk::L, MR = blk::MR;
  const std::size_t k_blocks = K <= simd::block_k_max(blk::target) ? 1 : (K + simd::block_k - 1) / simd::block_k;
  const std::size_t kcb = (K + k_blocks - 1) / k_blocks;
  constexpr bool ident = std::is_same_v<E, fn::identity_fn>;
  for (std::size_t p0 = 0; p0 < K; p0 += kcb) {
    const std::size_t kc = std::min(kcb, K - p0);
    const bool last_k = p0 + kc == K;
    for (std::size_t j0 = 0; j0 < N; j0 += NR) {
      const bool in_place = !packed && j0 + NR <= N;
      const T* panel = packed ? w + j0 * K + p0 * NR : in_place ? w + p0 * N + j0 : tail + p0 * NR;
      const std::size_t ldb = in_place ? N : NR, nr = std::min(NR, N - j0);
      for (std::size_t i0 = 0; i0 < m; i0 += MR) {
        if constexpr (ident)
          simd::micro_rows<Arch, NV, false>(kc, a + i0 * lda + p0, lda, panel, ldb, y + i0 * N + j0, N,
                                            std::min(MR, m - i0), nr, b ? b + j0 : b, p0 == 0, fn::relu_fn{}, false);
        else
          simd::micro_rows<Arch, NV, false>(kc, a + i0 * lda + p0, lda, panel, ldb, y + i0 * N + j0, N,
                                            std::min(MR, m - i0), nr, b ? b + j0 : b, p0 == 0, e, last_k);
      }
    }
  }
}
template <class Arch, class T, class E>
CTNN_OUTLINE void tile_product(std::size_t K, std::size_t N, const T* a, std::size_t lda, const T* w, bool packed,
                               const T* tail, const T* b, T* y, std::size_t m, const E& e) {
  constexpr std::size_t wide = simd::blocking<T, Arch>::NV;
  if (packed_panel_vectors<T, Arch>(N) == 1) tile_product_nv<Arch, 1>(K, N, a, lda, w, packed, tail, b, y, m, e);
  else tile_product_nv<Arch, wide>(K, N, a, lda, w, packed, tail, b, y, m, e);
}

// With fused_layer_io::rows set (the last tile, where the step updates layer by layer), the row
// blocks of dW that one task computes before handing them to rows: the update then reads their
// gradients from this thread's cache (4 x MR x N values: 24 KB (AVX2) / 48 KB (AVX-512, 12-row blocks since gemm30; 32 KB before) at N = 256;
// one block a call measured no faster on AVX-512 (the optimizer's per-call setup 146 times a step):
// docs/performance.md, "MLP training").
inline constexpr std::size_t fused_rows_group = 4;

// One dense layer (K inputs, N outputs, rule e) of one tile of the fused backward
// (fused_mlp_backward): rows [r0, r0 + nr) of the batch, z holding dL/d(output) for them (the
// last layer: copied from dy first); dZ = f'(y) dZ in place, db (+)= colsum(dZ), dW (+)= x^T dZ
// (split by row blocks of dW over the pool), and with wt (W^T packed; null for the first dense
// layer) dX = dZ W^T into o, which it returns (else z).
// Sizes at run time: one body per (Arch, T, rule), as tile_product.
template <class Arch, class T, class E>
CTNN_OUTLINE T* backward_layer(std::size_t K, std::size_t N, const E& e, const T* dy, const fused_layer_io<T>& io,
                               const T* wt, std::size_t r0, std::size_t nr, bool first_tile, T* z, T* o, T* tail,
                               thread_pool& pool) {
  constexpr std::size_t MR = simd::blocking<T, Arch>::MR, L = simd::blocking<T, Arch>::L;
  const std::size_t NV = packed_panel_vectors<T, Arch>(N), NR = NV * L;
  if (dy) std::copy_n(dy + r0 * N, nr * N, z);
  if constexpr (!std::is_same_v<E, fn::identity_fn>) map_range<Arch>(fn::backward_of<E>{e}, 0, nr * N, io.out + r0 * N, z);
  T* const dw = io.grads;
  column_sum_n<Arch>(N, z, dw + K * N, nr, !first_tile);
  if (N % NR) simd::pack_b<Arch>(NR, strided<T>{z, N, 1}, N / NR * NR, N, nr, tail);
  const T* const x = io.in + r0 * K;
  const std::size_t blocks = (K + MR - 1) / MR;
  const std::size_t G = io.rows ? fused_rows_group : 1, tasks = (blocks + G - 1) / G;
  // dW's rows [i0, i0 + MR) into d (row stride N)
  auto block = [&](std::size_t b, T* d) {
    const std::size_t i0 = b * MR, mr = std::min(MR, K - i0);
    const T* a = x + i0;
    std::size_t ars = K;
    if (i0 + MR > K) {  // the last rows of dW: x's columns copied (read in place, past the row's end)
      T* ex = buffer<T, 6>(nr * MR);
      for (std::size_t p = 0; p < nr; ++p)
        for (std::size_t r = 0; r < MR; ++r) ex[p * MR + r] = r < mr ? x[p * K + i0 + r] : T(0);
      a = ex, ars = MR;
    }
    auto panels = [&]<std::size_t V>() {
      for (std::size_t j0 = 0; j0 < N; j0 += NR) {
        const bool in_place = j0 + NR <= N;
        simd::micro_rows<Arch, V, true>(nr, a, ars, in_place ? z + j0 : tail, in_place ? N : NR, d + j0, N, mr,
                                        std::min(NR, N - j0), static_cast<const T*>(nullptr), first_tile,
                                        fn::relu_fn{}, false);  // no rule (relu_fn's instance, as tile_product's identity)
      }
    };
    if (NV == 1) panels.template operator()<1>();
    else panels.template operator()<simd::blocking<T, Arch>::NV>();
  };
  pool.run(
      tasks,
      [&](std::size_t t) {
        const std::size_t b0 = t * G, b1 = std::min(blocks, b0 + G), lo = b0 * MR * N, hi = std::min(K, b1 * MR) * N;
        for (std::size_t b = b0; b < b1; ++b) block(b, dw + b * MR * N);
        if (io.rows) io.rows(io.rows_context, lo, hi);  // final: the last tile
      },
      tasks > 1 && pool.size() > 1 && nr * K * N >= simd::parallel_threshold);
  if (!wt) return z;
  // rows [i0, i0 + m): on one thread the whole tile in one call (each panel of W^T over every row)
  auto rows = [&](std::size_t i0, std::size_t m) {
    tile_product<Arch>(N, K, z + i0 * N, N, wt, true, static_cast<const T*>(nullptr), static_cast<const T*>(nullptr),
                       o + i0 * K, m, fn::identity_fn{});
  };
  const std::size_t row_blocks = (nr + MR - 1) / MR;
  if (row_blocks > 1 && pool.size() > 1 && nr * K * N >= simd::parallel_threshold)
    pool.run(row_blocks, [&](std::size_t b) { rows(b * MR, std::min(MR, nr - b * MR)); });
  else
    rows(0, nr);
  return o;
}

// The fused passes over a run-time description of the network (forward_n, backward_n below): one
// body per architecture and type for every network (the compiled part holds float's:
// core/separate.hpp), instead of one per network type with its loops over the layers and tiles and
// its packing inlined at each layer's sizes. A dense layer's rule reaches the per-layer bodies
// through rule_fns (its type erased: `rule` points at the rule's value); its sizes are values.
template <class T>
struct layer_fns {
  // tile_product with the rule at `rule`
  void (*product)(const void* rule, std::size_t K, std::size_t N, const T* a, std::size_t lda, const T* w,
                  bool packed, const T* tail, const T* b, T* y, std::size_t m);
  // backward_layer with the rule at `rule`
  T* (*backward)(const void* rule, std::size_t K, std::size_t N, const T* dy, const fused_layer_io<T>& io,
                 const T* wt, std::size_t r0, std::size_t nr, bool first_tile, T* z, T* o, T* tail,
                 thread_pool& pool);
  // y[m, N] = e(x[m, K] w + b) by the unfused product (dense_forward's, below one tile of rows)
  void (*unfused)(const void* rule, std::size_t m, std::size_t K, std::size_t N, const T* x, const T* w, const T* b,
                  T* y);
};
// The three for rule E (defined out of the class: not inline, so the compiled part's instances,
// declared extern below, are the only ones).
template <class Arch, class T, class E>
struct rule_fns {
  static void product(const void* rule, std::size_t K, std::size_t N, const T* a, std::size_t lda, const T* w,
                      bool packed, const T* tail, const T* b, T* y, std::size_t m);
  static T* backward(const void* rule, std::size_t K, std::size_t N, const T* dy, const fused_layer_io<T>& io,
                     const T* wt, std::size_t r0, std::size_t nr, bool first_tile, T* z, T* o, T* tail,
                     thread_pool& pool);
  static void unfused(const void* rule, std::size_t m, std::size_t K, std::size_t N, const T* x, const T* w,
                      const T* b, T* y);
};
template <class Arch, class T, class E>
void rule_fns<Arch, T, E>::product(const void* rule, std::size_t K, std::size_t N, const T* a, std::size_t lda,
                                   const T* w, bool packed, const T* tail, const T* b, T* y, std::size_t m) {
  tile_product<Arch>(K, N, a, lda, w, packed, tail, b, y, m, *static_cast<const E*>(rule));
}
template <class Arch, class T, class E>
T* rule_fns<Arch, T, E>::backward(const void* rule, std::size_t K, std::size_t N, const T* dy,
                                  const fused_layer_io<T>& io, const T* wt, std::size_t r0, std::size_t nr,
                                  bool first_tile, T* z, T* o, T* tail, thread_pool& pool) {
  return backward_layer<Arch>(K, N, *static_cast<const E*>(rule), dy, io, wt, r0, nr, first_tile, z, o, tail, pool);
}
template <class Arch, class T, class E>
void rule_fns<Arch, T, E>::unfused(const void* rule, std::size_t m, std::size_t K, std::size_t N, const T* x,
                                   const T* w, const T* b, T* y) {
  simd_gemm<Arch>(m, N, K, strided<T>{x, K, 1}, strided<T>{w, N, 1}, y, N, b, *static_cast<const E*>(rule));
}
template <class Arch, class T, class E>
inline constexpr layer_fns<T> fns_of{&rule_fns<Arch, T, E>::product, &rule_fns<Arch, T, E>::backward,
                                     &rule_fns<Arch, T, E>::unfused};
// A fitting dense layer's rule, as a value whose address the description holds.
template <class R>
inline constexpr auto rule_value = R::rule();

// One dense layer of the network: its position among the bound layers (params[layer],
// outs[layer], io[layer]), its sizes, its rule and the bodies for it.
template <class T>
struct dense_entry {
  std::size_t layer = 0, k = 0, n = 0;
  const void* rule = nullptr;
  const layer_fns<T>* fns = nullptr;
};
// The network as the passes see it (net_of<Layers, Arch, T>, a constant).
template <class T>
struct net_desc {
  const dense_entry<T>* dense;  // its dense layers, first to last
  std::size_t count;            // how many (at least one)
  std::size_t in_width;         // values of a row of x (the first layer's inputs)
  std::size_t width;            // the widest dense output (plan::width)
  std::size_t tile_rows;        // fused_tile_rows
  std::size_t packed_total;     // values of every kernel packed (also the forward's work per row)
  std::size_t tails_total;      // values of the kernels' partial last panels
  std::size_t transposed_total;  // values of every W^T packed
};
template <class Arch, class T, class R>
constexpr void add_entry(dense_entry<T>* a, std::size_t& j, std::size_t i) {
  if constexpr (R::kind == 1) a[j++] = {i, R::k, R::n, &rule_value<R>, &fns_of<Arch, T, std::remove_cvref_t<decltype(R::rule())>>};
}
template <class Layers, class Arch, class T, std::size_t... I>
constexpr auto dense_entries_of(std::index_sequence<I...>) {
  constexpr std::size_t n = (std::size_t(role<std::tuple_element_t<I, Layers>, Arch>::kind == 1) + ... + 0);
  std::array<dense_entry<T>, n> a{};
  std::size_t j = 0;
  (add_entry<Arch, T, role<std::tuple_element_t<I, Layers>, Arch>>(a.data(), j, I), ...);
  return a;
}
template <class Layers, class Arch, class T>
inline constexpr auto dense_entries = dense_entries_of<Layers, Arch, T>(std::make_index_sequence<std::tuple_size_v<Layers>>{});

}  // namespace fused

// The most bound layers a fused network has: a small MLP. The count is checked before any fold over
// the layers is instantiated, so a deep network costs nothing here (a 300-layer network's plan
// took 1.7 GB in g++'s front end, std::tuple_element_t per position, and clang rejects a fold of
// more than 256 arguments).
inline constexpr std::size_t fused_mlp_max_layers = 32;

// Whether the bound layers Layers (a std::tuple) run as the fused MLP of cpu<Arch>.
template <class Layers, class Arch>
constexpr bool fused_mlp_fits() {
  if constexpr (std::tuple_size_v<Layers> == 0 || std::tuple_size_v<Layers> > fused_mlp_max_layers) return false;
  else return fused::plan<Layers, Arch>::fits;
}

// Whether a model of cpu<Arch> starts with Layers' inference fused (model.fused_mlp().forward):
// where it measured faster than the unfused path (docs/performance.md, "Fused small MLP on
// the CPU": three networks, batch >= one tile, float, cpu<avx512bw> and cpu<fma3<avx2>>), so
// float on the AVX-512 and FMA3 + AVX2 architectures; elsewhere model.fused_mlp().forward = true.
template <class Layers, class Arch>
inline constexpr bool fused_mlp_default =
    std::is_same_v<typename std::tuple_element_t<0, Layers>::compute_type, float> &&
    (std::is_base_of_v<xsimd::avx512f, Arch> || std::is_base_of_v<xsimd::fma3<xsimd::avx2>, Arch>);

// Whether a model of cpu<Arch> starts with Layers' training backward fused (model.fused_mlp()
// .backward) where it measured faster than the layers (docs/performance.md, "Fused small MLP on
// the CPU": 64-64-64-64, 784-128-64-10 and 784-256-128-10, batch 1-1024, 1 thread): float on the
// AVX-512 and FMA3 + AVX2 architectures (as fused_mlp_default), networks whose widest dense layer
// has 64 to 256 outputs (narrower ones were not measured), on the batches of
// fused_mlp_train_batch. The fused training forward (.training_forward) measured within the
// noise of the layers (0.96-1.04x) and starts off.
template <class Layers, class Arch>
inline constexpr bool fused_mlp_backward_default = fused_mlp_default<Layers, Arch> && fused::plan<Layers, Arch>::width >= 64;
// The batches a model runs the fused training passes on: from 4 (64-64-64-64 at batch 1 on
// AVX-512: 0.92x; every network faster from 4 on), and with AVX-512 below 256 (at 256 and 1024
// the 784-input networks measured 0.99-1.01x there: no gain). Without AVX-512, not from
// fused_backward_layers_min to fused_backward_layers_max rows where the first dense layer's kernel
// has at least fused_backward_large_kernel values (784 x 256): there the fused backward sums that
// layer's dW over tiles of 64 rows (its 800 KB read and written once a tile), the layers' product
// runs it as one K block over the batch with A packed (gemm/plan.hpp's pack_at). 784-256-128-10
// on AVX2, one thread, CPU time (Xeon model 167): the layers 0.93-0.99x the fused step's time from
// 128 to 384 rows, 0.98-1.02x at 512, 1.03-1.04x at 1024; 784-128-64-10 (400 KB) and 64-64-64-64
// 0.98-1.03x at 128-512 (bench/results/2026-12-07-s32-a2b32-fit-avx2.md).
inline constexpr std::size_t fused_backward_layers_min = 128, fused_backward_layers_max = 384,
                             fused_backward_large_kernel = std::size_t(784) * 256;
template <class Layers, class Arch>
constexpr bool fused_mlp_train_batch(std::size_t batch) {
  if (batch < 4) return false;
  if constexpr (std::is_base_of_v<xsimd::avx512f, Arch>) return batch < 256;
  else
    return fused::plan<Layers, Arch>::first_kernel < fused_backward_large_kernel ||
           batch < fused_backward_layers_min || batch > fused_backward_layers_max;
}

// From this batch on the kernels are packed once per call (pack_panels: each panel's rows
// contiguous); below it they are read in place (their rows N apart), packing only a partial last
// panel. (AVX2, the 784-input first layer, batch 4096: in place 0.75x the unfused path.)
inline constexpr std::size_t fused_pack_rows = 256;

// Rows of one tile: whole micro-kernel row blocks (MR: 12 with 32 vector registers since gemm30, 6
// with 16) while the two tile buffers hold at most 8192 values (32 KiB of float, an L1 data cache)
// and at most 64 rows, at least gemm.hpp's packed_rows (16) rounded up to MR: the 256-wide MLP's
// tile is 24 rows on AVX-512 (48 KiB of buffers; 16 before gemm30), its smallest fused batch 24.
// Tiles of 16 run as 12 + 4 rows measured 1.05-1.11x the step's CPU time at batch 16 (that batch
// then unfused: within the noise; loaded Xeon model 167, bench/results/2026-12-07-s30-gemm30-tile12.md).
template <class Layers, class Arch>
inline constexpr std::size_t fused_tile_rows = [] {
  using T = typename std::tuple_element_t<0, Layers>::compute_type;
  constexpr std::size_t MR = simd::blocking<T, Arch>::MR;
  const std::size_t fit = std::min<std::size_t>(4096 / fused::plan<Layers, Arch>::width, 64) / MR * MR;
  return std::max(fit, (packed_rows + MR - 1) / MR * MR);
}();

namespace fused {
// The network Layers as the run-time passes see it (fused_mlp_fits<Layers, Arch>() only).
template <class Layers, class Arch, class T>
inline constexpr net_desc<T> net_of{dense_entries<Layers, Arch, T>.data(),
                                    dense_entries<Layers, Arch, T>.size(),
                                    std::tuple_element_t<0, Layers>::in_shape::size,
                                    plan<Layers, Arch>::width,
                                    fused_tile_rows<Layers, Arch>,
                                    packed_total<Layers, Arch, T>(typename plan<Layers, Arch>::seq{}),
                                    tails_total<Layers, Arch, T>(typename plan<Layers, Arch>::seq{}),
                                    packed_transposed_total<Layers, Arch, T>(typename plan<Layers, Arch>::seq{})};

// fused_mlp_forward over the description net: one body per (Arch, T) (never inlined into a
// network's caller, header-only too: its loops would be unrolled there at that network's sizes).
template <class Arch, class T>
[[gnu::noinline]] void forward_n(const net_desc<T>& net, const T* x, T* y, std::size_t batch, const T* const* params,
                                 thread_pool& pool, T* const* outs) {
  const std::size_t R = net.tile_rows, W = net.width, last = net.dense[net.count - 1].layer;
  if (batch == 0) return;
  if (batch < R) {  // one short tile: the unfused kernels, layer by layer
    T* buf = buffer<T, 0>(2 * batch * W);
    const T* a = x;
    std::size_t d = 0;
    for (std::size_t j = 0; j < net.count; ++j) {
      const dense_entry<T>& f = net.dense[j];
      T* o = outs ? outs[f.layer] : f.layer == last ? y : buf + (d++ % 2) * batch * W;
      f.fns->unfused(f.rule, batch, f.k, f.n, a, params[f.layer], params[f.layer] + f.k * f.n, o);
      a = o;
    }
    return;
  }
  // from fused_pack_rows rows on every kernel packed once (pack_panels), else the last partial
  // panel of each (the rest read in place), in this thread's buffer (the tasks read it)
  const bool packed = batch >= fused_pack_rows;
  const std::size_t pack_total = packed ? net.packed_total : net.tails_total;
  T* const pack = pack_total ? buffer<T, 1>(pack_total) : nullptr;
  const T* kernel[fused_mlp_max_layers] = {};  // by dense layer, first to last
  const T* tail[fused_mlp_max_layers] = {};
  {
    std::size_t off = 0;
    for (std::size_t j = 0; j < net.count; ++j) {
      const dense_entry<T>& f = net.dense[j];
      const std::size_t NR = packed_panel_vectors<T, Arch>(f.n) * simd::blocking<T, Arch>::L;  // panel_cols
      kernel[j] = params[f.layer];
      if (packed) {
        simd::pack_panels<Arch>(f.k, f.n, strided<T>{params[f.layer], f.n, 1}, pack + off);
        kernel[j] = pack + off;
        off += packed_panels_size<T, Arch>(f.k, f.n);
      } else if (f.n % NR) {  // tail_size
        simd::pack_b<Arch>(NR, strided<T>{params[f.layer], f.n, 1}, f.n / NR * NR, f.n, f.k, pack + off);
        tail[j] = pack + off;
        off += f.k * NR;
      }
    }
  }
  const std::size_t tiles = (batch + R - 1) / R;
  pool.run(
      tiles,
      [&](std::size_t t) {
        const std::size_t r0 = t * R, nr = std::min(R, batch - r0);
        T* buf = buffer<T, 2>(2 * R * W);
        const T* a = x + r0 * net.in_width;
        std::size_t d = 0;
        for (std::size_t j = 0; j < net.count; ++j) {
          const dense_entry<T>& f = net.dense[j];
          T* o = outs ? outs[f.layer] + r0 * f.n : f.layer == last ? y + r0 * f.n : buf + (d++ % 2) * R * W;
          f.fns->product(f.rule, f.k, f.n, a, f.k, kernel[j], packed, tail[j], params[f.layer] + f.k * f.n, o, nr);
          a = o;
        }
      },
      tiles > 1 && pool.size() > 1 && batch * net.packed_total >= simd::parallel_threshold);  // about K N a row
}
}  // namespace fused

// y[batch, out] = the network Layers on x[batch, in]; params[I]: layer I's
// parameters (kernel [K, N], then bias [N]). Call only where fused_mlp_fits.
// outs (the training forward, fused_mlp_training_forward): where not null, outs[I] is dense
// layer I's output rows [batch, N], written there (and read from there by the next layer)
// instead of a tile buffer; y is then outs[last]. The pass is fused::forward_n over the network's
// description (one body for every network).
template <class Arch, class Layers, class T>
void fused_mlp_forward(const T* x, T* y, std::size_t batch, const T* const* params,
                       thread_pool& pool = thread_pool::global(), T* const* outs = nullptr) {
  static_assert(fused::plan<Layers, Arch>::fits, "fused_mlp_forward: the network does not fit the CPU's fused MLP");
  fused::forward_n<Arch>(fused::net_of<Layers, Arch, T>, x, y, batch, params, pool, outs);
}

// The training forward: every dense layer I's output rows into outs[I] (the layers' activations,
// which the backward reads), tile by tile as fused_mlp_forward.
template <class Arch, class Layers, class T>
void fused_mlp_training_forward(const T* x, std::size_t batch, const T* const* params, T* const* outs,
                                thread_pool& pool = thread_pool::global()) {
  fused_mlp_forward<Arch, Layers>(x, outs[fused::plan<Layers, Arch>::last], batch, params, pool, outs);
}

// Rows of one tile of the fused backward (fused_mlp_backward). Its weight gradients are summed
// tile by tile, each tile's products read and write every dW once: tiles at least as long as the
// forward's keep that traffic small while a tile's deltas (2 x rows x the widest layer: 128 KiB
// of float at 256 wide) and inputs stay in L2 (64, 128 and 256 rows measured within the noise).
inline constexpr std::size_t fused_backward_rows = 64;

namespace fused {
// fused_mlp_backward over the description net: one body per (Arch, T), as forward_n.
template <class Arch, class T>
[[gnu::noinline]] void backward_n(const net_desc<T>& net, const T* dy, std::size_t batch, const fused_layer_io<T>* io,
                                  thread_pool& pool, const fused_layer_done* done) {
  constexpr std::size_t R = fused_backward_rows, L = simd::blocking<T, Arch>::L;
  const std::size_t W = net.width, first = net.dense[0].layer, last = net.dense[net.count - 1].layer;
  if (batch == 0) {
    for (std::size_t j = 0; j < net.count; ++j) {
      const dense_entry<T>& f = net.dense[j];
      std::fill_n(io[f.layer].grads, f.k * f.n + f.n, T(0));
    }
    return;
  }
  // W^T of every dense layer but the first, packed once (the B of dX = dZ W^T)
  T* const pack = buffer<T, 3>(net.transposed_total);
  const T* wt[fused_mlp_max_layers] = {};  // by dense layer
  {
    std::size_t off = 0;
    for (std::size_t j = 0; j < net.count; ++j) {
      const dense_entry<T>& f = net.dense[j];
      if (f.layer != first) {
        simd::pack_panels<Arch>(f.n, f.k, strided<T>{io[f.layer].params, 1, f.n}, pack + off);
        wt[j] = pack + off;
        off += packed_panels_size<T, Arch>(f.n, f.k);
      }
    }
  }
  T* const buf = buffer<T, 4>(2 * R * W);  // a layer's dZ, and its dX (the dY of the layer below)
  T* const tail = buffer<T, 5>(R * 2 * L);  // dZ's last partial panel
  for (std::size_t r0 = 0; r0 < batch; r0 += R) {
    const std::size_t nr = std::min(R, batch - r0);
    const bool first_tile = r0 == 0, last_tile = r0 + nr == batch;
    T* z = buf;
    for (std::size_t j = net.count; j-- > 0;) {
      const dense_entry<T>& f = net.dense[j];
      T* const o = z == buf ? buf + R * W : buf;
      fused_layer_io<T> lio = io[f.layer];
      if (!last_tile) lio.rows = nullptr;  // dW final after the last tile only
      z = f.fns->backward(f.rule, f.k, f.n, f.layer == last ? dy : static_cast<const T*>(nullptr), lio, wt[j],
                          r0, nr, first_tile, z, o, tail, pool);
      if (done && last_tile) done->done(done->context, f.layer);
    }
  }
}
}  // namespace fused

// The training backward of the network Layers over a batch, tile by tile: from dy[batch, out]
// (dL/dy of the last layer) and the training forward's rows (io[I].in, io[I].out, as
// core/fused_mlp_hook.hpp's fused_layer_io), every dense layer's gradients io[I].grads (dW
// [K, N], then db [N]; written, as the layers' backward writes them). For each tile of
// fused_backward_rows rows, from the last dense layer to the first: dZ = f'(y) dY in a tile
// buffer, dW (+)= x^T dZ (simd::micro_rows, x read in place as the packed A; the first tile
// writes), db (+)= colsum(dZ) (column_sum's order over the whole batch: the same bits), and
// but for the first dense layer dX = dZ W^T (tile_product over W^T packed once per call) into
// the other tile buffer, the layer below's dY. The tiles run in order on the calling thread;
// each tile's dW and dX are split by row blocks over the pool, each output in one task, so the
// bits do not depend on the thread count. done (not null): done->done(context, I) right after
// dense layer I's last tile (its gradients final; its parameters no longer read: the step's
// per-layer update may write them; core/fused_mlp_hook.hpp). Call only where fused_mlp_fits.
// The pass is fused::backward_n over the network's description (one body for every network).
template <class Arch, class Layers, class T>
void fused_mlp_backward(const T* dy, std::size_t batch, const fused_layer_io<T>* io,
                        thread_pool& pool = thread_pool::global(), const fused_layer_done* done = nullptr) {
  static_assert(fused::plan<Layers, Arch>::fits, "fused_mlp_backward: the network does not fit the CPU's fused MLP");
  fused::backward_n<Arch>(fused::net_of<Layers, Arch, T>, dy, batch, io, pool, done);
}

// The per-layer bodies of the fused passes for float on the default architecture, for every rule a
// dense layer's activation gives (layers/activation.hpp), their type-erased entries (rule_fns) and
// the passes over a network's description (forward_n, backward_n): with CTNN_COMPILED_KERNELS a
// program calls the compiled part's (core/separate.hpp), so its own fused_mlp_forward /
// fused_mlp_backward are one call each with its constant description.
#define CTNN_DETAIL_FUSED_LAYER(E)                                                                            \
  CTNN_INSTANCE(template void fused::tile_product<default_arch, float, E>(                                    \
      std::size_t, std::size_t, const float*, std::size_t, const float*, bool, const float*, const float*,    \
      float*, std::size_t, const E&);)                                                                        \
  CTNN_INSTANCE(template float* fused::backward_layer<default_arch, float, E>(                                \
      std::size_t, std::size_t, const E&, const float*, const fused_layer_io<float>&, const float*,           \
      std::size_t, std::size_t, bool, float*, float*, float*, thread_pool&);) \
  CTNN_INSTANCE(template struct fused::rule_fns<default_arch, float, E>;)
CTNN_DETAIL_FUSED_LAYER(fn::identity_fn)
CTNN_DETAIL_FUSED_LAYER(fn::relu_fn)
CTNN_DETAIL_FUSED_LAYER(fn::leaky_relu_fn<float>)
CTNN_DETAIL_FUSED_LAYER(fn::sigmoid_fn)
CTNN_DETAIL_FUSED_LAYER(fn::tanh_fn)
#undef CTNN_DETAIL_FUSED_LAYER
CTNN_INSTANCE(template void fused::forward_n<default_arch, float>(const fused::net_desc<float>&, const float*, float*,
                                                                  std::size_t, const float* const*, thread_pool&,
                                                                  float* const*);)
CTNN_INSTANCE(template void fused::backward_n<default_arch, float>(const fused::net_desc<float>&, const float*,
                                                                   std::size_t, const fused_layer_io<float>*,
                                                                   thread_pool&, const fused_layer_done*);)

}  // namespace kernels::cpu
}  // namespace ctnn
