// ctnn/kernels/cpu/gemm.hpp — the three products of a dense layer, with the
// layer's sizes (K inputs, N outputs) known at compile time, and a run-time GEMM.
//
//   forward:  Y[m,N]  = e(X[m,K] * W[K,N] + b[N])   (e: an activation rule of
//             kernels/functors.hpp, fused into the GEMM's tiles; default identity)
//   weights:  dW[K,N] = X[m,K]^T * dY[m,N],  db[N] = colsum(dY) (column_sum<N, T, Arch>; db null: not summed)
//   input:    dX[m,K] = dY[m,N] * W[K,N]^T
//   gemm:     C[M,N]  = epi(A(M x K) * B(K x N) + bias), A and B strided views
// pack_weights / pack_weights_transposed and dense_forward_packed /
// dense_backward_input_packed: the forward and input products over W packed
// once (a recurrent kernel used at every step), the micro-kernel over its panels;
// dense_forward_packed_sum (b + x W + h R over two packings, an LSTM step's pre-activation)
// and dense_backward_input_packed_add (dx += dy W^T) on the same tiles.
// recurrent_row: one row's recurrent product with a cell's gate rule run on each
// block of units as soon as its products are summed (a recurrent layer at batch 1).
// weights_gradient_in_place: dW = X^T dY (and db) with X and dY read where they lie,
// nothing packed (a recurrent layer's dW: few output rows over every step's rows).
// step_weights_gradient: one step's dW += x^T dz, dR += h^T dz and db (a recurrent layer's weight
// gradients a step at a time, while the step's dz is in cache).
// The *_active forms run the same three products on the first n <= N output
// columns only (dense<up_to<N>>'s active width): W, dW, Y and dY keep their row
// stride N, and their columns n.. (and db's) are neither read nor written.
// m (the batch) is a run-time value. float and double run the xsimd kernels
// of simd_gemm.hpp for the architecture Arch (default xsimd::default_arch, the best architecture the compiler
// flags enable (-march=native: AVX-512 here; no flags: SSE2); the cpu<Arch> backend passes its own), on the shared
// thread pool; results do not depend on the thread count. Without any SIMD
// architecture the scalar reference (reference.hpp) runs; it stays the
// definition the tests compare against.
#pragma once
#include <algorithm>
#include <cstddef>
#include <stdexcept>
#include <string>
#include <type_traits>

#include <xsimd/xsimd.hpp>

#include "../../core/separate.hpp"
#include "arch.hpp"
#include "../../kernels/functors.hpp"
#include "../../kernels/reference.hpp"
#include "map.hpp"
#include "simd_gemm.hpp"

namespace ctnn::kernels::cpu {

// C = epi(A * B + bias) with run-time sizes; C (row stride ldc >= N) is overwritten.
// Throws std::invalid_argument naming the bad argument for null pointers or ldc < N.
template <class T, class Arch = default_arch>
void gemm(std::size_t M, std::size_t N, std::size_t K, strided<T> a, strided<T> b, T* c, std::size_t ldc,
          const T* bias = nullptr, epilogue epi = epilogue::none) {
  if (ldc < N)
    throw std::invalid_argument("kernels::cpu::gemm: ldc (" + std::to_string(ldc) + ") is smaller than N (" +
                                std::to_string(N) + ")");
  if (M && N && (!c || (K && (!a.p || !b.p))))
    throw std::invalid_argument("kernels::cpu::gemm: a null matrix pointer with M=" + std::to_string(M) +
                                ", N=" + std::to_string(N) + ", K=" + std::to_string(K));
  if constexpr (simd_v<T, Arch>) {
    simd_gemm<Arch>(M, N, K, a, b, c, ldc, bias, epi);
  } else {
    for (std::size_t i = 0; i < M; ++i)
      for (std::size_t j = 0; j < N; ++j) {
        T s = bias ? bias[j] : T(0);
        for (std::size_t p = 0; p < K; ++p) s += a.p[i * a.rs + p * a.cs] * b.p[p * b.rs + j * b.cs];
        c[i * ldc + j] = epi == epilogue::relu && s < T(0) ? T(0) : s;
      }
  }
}

template <std::size_t K, std::size_t N, class E = fn::identity_fn, class Arch = default_arch, class T>
void dense_forward(const T* x, const T* w, const T* b, T* y, std::size_t m, const E& e = {}) {
  if constexpr (simd_v<T, Arch>) {
    simd_gemm<Arch>(m, N, K, strided<T>{x, K, 1}, strided<T>{w, N, 1}, y, N, b, e);
  } else {
    reference::gemm_nn(x, w, b, y, m, K, N);
    if constexpr (!std::is_same_v<E, fn::identity_fn>) map<Arch>(fn::forward_of<E>{e}, m * N, y);
  }
}

// db[j] (+)= the rows of dy[m, N] in order, N at run time (the fused backward's one body per
// architecture and type, fused_mlp.hpp); column_sum<N> is this with N known. Columns by groups of
// 8 vectors, each row's 8 read together: 8 independent sums and a row's contiguous values, not one
// dependent chain a vector down a column of N-strided loads (db of an LSTM(128) at batch 64, dz
// [1792, 512]: 2.5 % of its training step, loaded Xeon); each column still adds its rows in order.
// With CTNN_COMPILED_KERNELS float's for the default architecture is the compiled part's (CTNN_OUTLINE,
// core/separate.hpp): every dense and convolution layer's db (column_sum<N>) is then a call, not its
// loops inlined at that layer's N.
template <class Arch, class T>
CTNN_OUTLINE void column_sum_n(std::size_t N, const T* dy, T* db, std::size_t m, bool add) {
  using B = xsimd::batch<T, Arch>;
  constexpr std::size_t L = B::size, V = 8;
  const std::size_t full = N / L * L;
  std::size_t j0 = 0;
  for (; j0 + V * L <= full; j0 += V * L) {
    B s[V];
    for (std::size_t v = 0; v < V; ++v) s[v] = add ? B::load_unaligned(db + j0 + v * L) : B(T(0));
    for (std::size_t i = 0; i < m; ++i)
      for (std::size_t v = 0; v < V; ++v) s[v] += B::load_unaligned(dy + i * N + j0 + v * L);
    for (std::size_t v = 0; v < V; ++v) s[v].store_unaligned(db + j0 + v * L);
  }
  // The vectors left (fewer than V) by groups of 4, 2 and 1, each group's rows read together: N = 64
  // on AVX-512 (conv2's db over 7,744 rows at batch 64) ran as four dependent chains one after
  // another, 127 us on one thread (loaded Xeon); the same sums in the same order.
  auto group = [&]<std::size_t R>(std::integral_constant<std::size_t, R>) {
    B s[R];
    for (std::size_t v = 0; v < R; ++v) s[v] = add ? B::load_unaligned(db + j0 + v * L) : B(T(0));
    for (std::size_t i = 0; i < m; ++i)
      for (std::size_t v = 0; v < R; ++v) s[v] += B::load_unaligned(dy + i * N + j0 + v * L);
    for (std::size_t v = 0; v < R; ++v) s[v].store_unaligned(db + j0 + v * L);
    j0 += R * L;
  };
  if (j0 + 4 * L <= full) group(std::integral_constant<std::size_t, 4>{});
  if (j0 + 2 * L <= full) group(std::integral_constant<std::size_t, 2>{});
  if (j0 + L <= full) group(std::integral_constant<std::size_t, 1>{});
  if (full == N) return;
  if constexpr (simd::masked_any_v<Arch, T>) {
    B s = add ? simd::load_n<Arch>(db + full, N - full) : B(T(0));
    for (std::size_t i = 0; i < m; ++i) s += simd::load_n<Arch>(dy + i * N + full, N - full);
    simd::store_n<Arch>(s, db + full, N - full);
  } else {
    for (std::size_t j = full; j < N; ++j) {
      T s = add ? db[j] : T(0);
      for (std::size_t i = 0; i < m; ++i) s += dy[i * N + j];
      db[j] = s;
    }
  }
}
CTNN_INSTANCE(template void column_sum_n<default_arch, float>(std::size_t, const float*, float*, std::size_t, bool);)

// db[j] = sum over rows of dy[., j]: 0 plus the rows in order, as
// reference::col_sum (so equal to it bit for bit; m = 0 gives zeros), in
// xsimd::batch<T, Arch> columns (the tests pass each Arch the CPU runs).
// add: db[j] plus the rows instead (a sum continued over more rows: the fused backward's tiles,
// fused_mlp.hpp, give column_sum's bits over the whole batch).
template <std::size_t N, class T, class Arch = default_arch>
void column_sum(const T* dy, T* db, std::size_t m, bool add = false) {
  if constexpr (simd_v<T, Arch>) {
    column_sum_n<Arch>(N, dy, db, m, add);
  } else if (add) {
    for (std::size_t j = 0; j < N; ++j)
      for (std::size_t i = 0; i < m; ++i) db[j] += dy[i * N + j];
  } else {
    reference::col_sum(dy, db, m, N);
  }
}

template <std::size_t K, std::size_t N, class Arch = default_arch, class T>
void dense_backward_weights(const T* x, const T* dy, T* dw, T* db, std::size_t m) {
  if constexpr (simd_v<T, Arch>) {
    if constexpr (N < xsimd::batch<T, Arch>::size && ::ctnn::detail::compiled_part && std::is_same_v<T, float> &&
                  std::is_same_v<Arch, default_arch>)
      simd::narrow_weights_gradient_n<Arch>(N, K, m, x, dy, dw);  // the compiled part's body
    else if constexpr (N < xsimd::batch<T, Arch>::size)
      simd::narrow_weights_gradient<Arch, N>(K, m, x, dy, dw);
    else
      simd_gemm<Arch>(K, N, m, strided<T>{x, 1, K}, strided<T>{dy, N, 1}, dw, N, static_cast<const T*>(nullptr),
                      epilogue::none);
    if (db) column_sum<N, T, Arch>(dy, db, m);
  } else {
    reference::gemm_tn(x, dy, dw, m, K, N);
    if (db) reference::col_sum(dy, db, m, N);
  }
}

template <std::size_t K, std::size_t N, class Arch = default_arch, class T>
void dense_backward_input(const T* dy, const T* w, T* dx, std::size_t m) {
  if constexpr (simd_v<T, Arch>) {
    simd_gemm<Arch>(m, K, N, strided<T>{dy, N, 1}, strided<T>{w, 1, N}, dx, K, static_cast<const T*>(nullptr),
                    epilogue::none);
  } else {
    reference::gemm_nt(dy, w, dx, m, K, N);
  }
}

// ---- products over weights packed once (a recurrent kernel used at every step) ----
// pack_weights<K, N>(w, packed, m): W [K, N] as the blocked mode's panels of B (NR columns
// by K rows each, zero columns past N); pack_weights_transposed<K, N>: W^T [N, K] the same
// (the B of dX = dY W^T). dense_forward_packed<K, N>(x, w, packed, b, y, m) and
// dense_backward_input_packed<K, N>(dy, w, packed, dx, m) then run the micro-kernel over
// those panels, nothing packed per call. Below packed_rows rows a packing writes nothing and
// the products read w as dense_forward / dense_backward_input do (gemv at one row); a caller
// that keeps the packing per sample needs packed_size / packed_rows values a sample. 16: at
// 16 rows dz R^T over the panels made the LSTM(128) and GRU(128) training steps 1.10x and
// 1.12x faster than the dot products (bench_rnn, Zen 4, one core). packed_size<K, N, T, Arch>:
// the values a packing of either kind writes (0 without SIMD for T: the products always read w).
inline constexpr std::size_t packed_rows = 16;
template <class T, class Arch>
constexpr std::size_t packed_panel_vectors(std::size_t n) {
  return n <= simd::blocking<T, Arch>::L ? 1 : simd::blocking<T, Arch>::NV;
}
template <class T, class Arch>
constexpr std::size_t packed_panels_size(std::size_t k, std::size_t n) {
  const std::size_t NR = packed_panel_vectors<T, Arch>(n) * simd::blocking<T, Arch>::L;
  return (n + NR - 1) / NR * NR * k;
}
template <std::size_t K, std::size_t N, class T, class Arch = default_arch>
inline constexpr std::size_t packed_size = [] {
  if constexpr (simd_v<T, Arch>)
    return std::max(packed_panels_size<T, Arch>(K, N), packed_panels_size<T, Arch>(N, K));
  else
    return std::size_t(0);
}();

namespace simd {
// Packs every panel of the K x N matrix b (strided) for packed_product. With
// CTNN_COMPILED_KERNELS float's instance is extern (compiled_kernels.hpp): where g++ does not
// inline it, a program calls the compiled part's. Not CTNN_OUTLINE: out of line, g++ 12 warns
// (-Wstringop-overflow, on by default) of pack_b's zero fill of a partial panel for double.
template <class Arch, class T>
void pack_panels(std::size_t K, std::size_t N, strided<T> b, T* bp) {
  const std::size_t NR = packed_panel_vectors<T, Arch>(N) * blocking<T, Arch>::L;
  for (std::size_t j0 = 0; j0 < N; j0 += NR) pack_b<Arch>(NR, b, j0, N, K, bp + j0 * K);
}
// C[M, N] = e(A B + bias), A row-major (row stride lda), B as pack_panels wrote it: the
// blocked mode's tiles, K blocks and summation order (bias, then p = 0, 1, ...), each
// output in one task (results do not depend on the thread count). accumulate: C += A B
// instead (each tile starts from C; no bias).
template <class Arch, std::size_t NV, class T, class E>
void packed_product(std::size_t M, std::size_t N, std::size_t K, const T* a, std::size_t lda, const T* bp, T* c,
                    std::size_t ldc, const T* bias, const E& e, bool act, thread_pool& pool, bool accumulate = false) {
  using blk = blocking<T, Arch>;
  constexpr std::size_t MR = blk::MR, NR = NV * blk::L, MC = 4 * MR;
  const std::size_t k_blocks = K <= block_k_max(blk::target) ? 1 : (K + block_k - 1) / block_k;
  const std::size_t kcb = (K + k_blocks - 1) / k_blocks;
  const std::size_t NC = NR * std::clamp<std::size_t>((std::size_t(1) << 17) / (MC * NR * K), 1, 8);
  const std::size_t nblocks = (N + NC - 1) / NC, tasks = (M + MC - 1) / MC * nblocks;
  auto task = [&](std::size_t t) {
    const std::size_t i_lo = (t / nblocks) * MC, i_hi = std::min(M, i_lo + MC);
    const std::size_t j_lo = (t % nblocks) * NC, j_hi = std::min(N, j_lo + NC);
    for (std::size_t p0 = 0; p0 < K; p0 += kcb) {
      const std::size_t kc = std::min(kcb, K - p0);
      for (std::size_t j0 = j_lo; j0 < j_hi; j0 += NR) {
        const T* panel = bp + j0 * K + p0 * NR;
        const std::size_t nr = std::min(NR, N - j0);
        for (std::size_t i0 = i_lo; i0 < i_hi; i0 += MR)
          micro_rows<Arch, NV, false>(kc, a + i0 * lda + p0, lda, panel, NR, c + i0 * ldc + j0, ldc,
                                      std::min(MR, M - i0), nr, bias ? bias + j0 : nullptr, p0 == 0 && !accumulate, e,
                                      act && p0 + kc == K);
      }
    }
  };
  pool.run(tasks, task, M * N * K >= parallel_threshold && pool.size() > 1);
}
}  // namespace simd

template <std::size_t K, std::size_t N, class Arch = default_arch, class T>
void pack_weights(const T* w, T* packed, std::size_t m) {
  if constexpr (simd_v<T, Arch>)
    if (m >= packed_rows) simd::pack_panels<Arch>(K, N, strided<T>{w, N, 1}, packed);
}
template <std::size_t K, std::size_t N, class Arch = default_arch, class T>
void pack_weights_transposed(const T* w, T* packed, std::size_t m) {
  if constexpr (simd_v<T, Arch>)
    if (m >= packed_rows) simd::pack_panels<Arch>(N, K, strided<T>{w, 1, N}, packed);
}
template <std::size_t K, std::size_t N, class E = fn::identity_fn, class Arch = default_arch, class T>
void dense_forward_packed(const T* x, const T* w, const T* packed, const T* b, T* y, std::size_t m, const E& e = {}) {
  if constexpr (simd_v<T, Arch>) {
    if (m >= packed_rows) {
      constexpr bool ident = std::is_same_v<E, fn::identity_fn>;
      constexpr std::size_t NV = packed_panel_vectors<T, Arch>(N);
      if constexpr (ident)
        return simd::packed_product<Arch, NV>(m, N, K, x, K, packed, y, N, b, fn::relu_fn{}, false,
                                              thread_pool::global());
      else
        return simd::packed_product<Arch, NV>(m, N, K, x, K, packed, y, N, b, e, true, thread_pool::global());
    }
  }
  dense_forward<K, N, E, Arch>(x, w, b, y, m, e);
}
template <std::size_t K, std::size_t N, class Arch = default_arch, class T>
void dense_backward_input_packed(const T* dy, const T* w, const T* packed, T* dx, std::size_t m) {
  if constexpr (simd_v<T, Arch>) {
    if (m >= packed_rows)
      return simd::packed_product<Arch, packed_panel_vectors<T, Arch>(K)>(
          m, K, N, dy, N, packed, dx, K, static_cast<const T*>(nullptr), fn::relu_fn{}, false, thread_pool::global());
  }
  dense_backward_input<K, N, Arch>(dy, w, dx, m);
}

// The K block of packed_product's tiles over a K of k (all of it up to block_k_max, else equal blocks of
// at most block_k).
template <class T, class Arch>
constexpr std::size_t packed_k_block(std::size_t k) {
  using blk = simd::blocking<T, Arch>;
  const std::size_t blocks = k <= simd::block_k_max(blk::target) ? 1 : (k + simd::block_k - 1) / simd::block_k;
  return (k + blocks - 1) / blocks;
}

// dense_backward_input_packed_add<K, N>(dy, w, packed, dx, m): dx [m, K] += dy [m, N] W^T over W packed by
// pack_weights_transposed<K, N> (dense_backward_input_packed's tiles, each starting from dx rather than
// 0): a recurrent layer's dL/dh += dz R^T without a product buffer and a pass adding it. Below
// packed_rows rows or without SIMD: the products of w added in order.
template <std::size_t K, std::size_t N, class Arch = default_arch, class T>
void dense_backward_input_packed_add(const T* dy, const T* w, const T* packed, T* dx, std::size_t m) {
  if constexpr (simd_v<T, Arch>) {
    if (m >= packed_rows)
      return simd::packed_product<Arch, packed_panel_vectors<T, Arch>(K)>(m, K, N, dy, N, packed, dx, K,
                                                                          static_cast<const T*>(nullptr), fn::relu_fn{},
                                                                          false, thread_pool::global(), true);
  }
  for (std::size_t i = 0; i < m; ++i)
    for (std::size_t k = 0; k < K; ++k) {
      T s = dx[i * K + k];
      for (std::size_t j = 0; j < N; ++j) s += dy[i * N + j] * w[k * N + j];
      dx[i * K + k] = s;
    }
}

// ---- a recurrent step's whole pre-activation over two packed weights ----
// dense_forward_packed_sum<KX, KH, N>(x, w, pw, h, r, pr, b, z, m): z [m, N] = b + x W + h R (x [m, KX],
// h [m, KH] row-major; W [KX, N] packed by pack_weights<KX, N> into pw, R [KH, N] by pack_weights<KH, N>
// into pr; h null: z = b + x W), each tile summed in registers over x's KX terms then h's KH terms (b,
// then W's rows in order, then R's): an LSTM step's z = x_t W + b + h R in one pass over z, where the
// input projection of every step was a separate GEMM (K = 28: its 3.7 MB written, then read back a step
// at a time). Each output in one task, the same tiles whatever the thread count. Below packed_rows rows
// (nothing packed) or without SIMD: dense_forward of x, then h R added in order (the scalar reference).
template <std::size_t KX, std::size_t KH, std::size_t N, class Arch = default_arch, class T>
void dense_forward_packed_sum(const T* x, const T* w, const T* pw, const T* h, const T* r, const T* pr, const T* b,
                              T* z, std::size_t m) {
  if constexpr (simd_v<T, Arch>) {
    if (m >= packed_rows) {
      using blk = simd::blocking<T, Arch>;
      constexpr std::size_t NV = packed_panel_vectors<T, Arch>(N), MR = blk::MR, NR = NV * blk::L, MC = 4 * MR;
      // K blocks as packed_product's (one up to block_k_max), x's then h's, all into the same tile
      constexpr std::size_t kbx = packed_k_block<T, Arch>(KX), kbh = packed_k_block<T, Arch>(KH);
      auto task = [&](std::size_t t) {
        const std::size_t i_lo = t * MC, i_hi = std::min(m, i_lo + MC);
        for (std::size_t j0 = 0; j0 < N; j0 += NR) {
          const std::size_t nr = std::min(NR, N - j0);
          for (std::size_t i0 = i_lo; i0 < i_hi; i0 += MR) {
            const std::size_t mr = std::min(MR, i_hi - i0);
            T* c = z + i0 * N + j0;
            for (std::size_t p0 = 0; p0 < KX; p0 += kbx)
              simd::micro_rows<Arch, NV, false>(std::min(kbx, KX - p0), x + i0 * KX + p0, KX, pw + j0 * KX + p0 * NR, NR,
                                                c, N, mr, nr, b ? b + j0 : nullptr, p0 == 0, fn::relu_fn{}, false);
            if (h)
              for (std::size_t p0 = 0; p0 < KH; p0 += kbh)
                simd::micro_rows<Arch, NV, false>(std::min(kbh, KH - p0), h + i0 * KH + p0, KH, pr + j0 * KH + p0 * NR,
                                                  NR, c, N, mr, nr, static_cast<const T*>(nullptr), false,
                                                  fn::relu_fn{}, false);
          }
        }
      };
      thread_pool& pool = thread_pool::global();
      return pool.run((m + MC - 1) / MC, task, m * N * (KX + KH) >= simd::parallel_threshold && pool.size() > 1);
    }
  }
  dense_forward<KX, N, fn::identity_fn, Arch>(x, w, b, z, m);
  if (h)
    for (std::size_t i = 0; i < m; ++i)
      for (std::size_t p = 0; p < KH; ++p)
        for (std::size_t j = 0; j < N; ++j) z[i * N + j] += h[i * KH + p] * r[p * N + j];
}

// ---- one row's recurrent step: the product and the cell's rule by blocks of units ----
// recurrent_row<K, U, G>(f, x, w, b, rec, reverse, a...): rec [G U] = b + x w (x [K], w [K, G U]
// row-major, b null: 0), then the rule f over the U columns of the arrays a... (one row each, [U];
// rec's gate blocks rec + g U among them): dense_forward<K, G U>(x, w, b, rec, 1) then f over [0, U)
// up to rounding (without reverse the same bits where G U is whole chunks of the one-row gemv, as
// for 128 units, and x has no zeros), but block by block of units (simd::gemv_gate_blocks), so that
// f reads each block's products while they are in L1 and nothing is planned or dispatched per call.
// f must touch only the units of its block (an element-wise rule). reverse: the blocks and the rows
// of w last to first (a recurrent layer passes it every other step: the step then starts on the rows
// of w that the step before read last, still in L1; the sums in the other order). V, the vectors a gate in a block:
// the most that fit the registers with G gates (16 or 8 accumulators) and divide the units' vectors.
template <std::size_t U, std::size_t G, class T, class Arch>
inline constexpr std::size_t gate_block_vectors = [] {
  constexpr std::size_t L = xsimd::batch<T, Arch>::size, W = L * sizeof(T) >= 64 ? 16 : 8, vecs = (U + L - 1) / L;
  for (std::size_t v = W / G; v > 1; --v)
    if (vecs % v == 0) return v;
  return std::size_t(1);
}();
template <std::size_t K, std::size_t U, std::size_t G, class Arch = default_arch, class F, class T, class... P>
void recurrent_row(const F& f, const T* x, const T* w, const T* b, T* rec, bool reverse, P*... a) {
  if constexpr (simd_v<T, Arch>) {
    simd::gemv_gate_blocks<Arch, G, gate_block_vectors<U, G, T, Arch>>(
        K, U, x, w, G * U, b, rec, [&](std::size_t lo, std::size_t hi) { map_range<Arch>(f, lo, hi, a...); },
        reverse);
  } else {
    dense_forward<K, G * U, fn::identity_fn, Arch>(x, w, b, rec, 1);
    map_range<Arch>(f, 0, U, a...);
  }
}

// ---- a weight gradient with both operands read where they are ----
// weights_gradient_in_place<K, N>(x, dy, dw, m, db): dW [K, N] = x^T dy over m rows (x [m, K], dy [m, N],
// row-major), the micro-kernel reading x as packed A (element (k, p) at x[p K + k]: K's values of a row
// are a tile's rows) and dy as B in place (row stride N), nothing packed: where dense_backward_weights
// packs dy (m N values read and written) for few output rows (an LSTM's dW: 28 x 512 over 1792 rows,
// dy 3.5 MB packed for 51 MFLOP), and both operands for dR. Each output sums its rows in order (0, then
// p = 0, 1, ...) in one task (column panels over the pool): the same bits whatever the thread count.
// db (null: not summed): the column sums of dy, each block's as it leaves the tiles (in L1), in
// column_sum's order and bits (after the product they read all of dy again: 201 us against the
// product's 506 us, LSTM(128)'s dW at 64, one thread, loaded Xeon 207).
// A tile reads in_place_gradient_rows (8 on AVX-512, the narrow gradient's packed 8 x 2 instance, not
// the blocked mode's 12, which would leave an LSTM(128)'s K = 128 with 8 rows over; MR = 6 on AVX2) or
// 4 of a row's K values, so K % rows is 0 or 4 (none read past a row); the micro-kernel reads whole vectors of dy's rows but the last row of a block (a
// partial panel's lanes past N run into the next row), so N is at least a vector (none read past dy's
// end); in_place_weights_gradient_v says where it runs (float and double with SIMD, such K and N),
// else the caller runs dense_backward_weights.
template <class T, class Arch>
inline constexpr std::size_t in_place_gradient_rows = simd::blocking<T, Arch>::wide ? 8 : simd::blocking<T, Arch>::MR;
template <std::size_t K, std::size_t N, class T, class Arch>
inline constexpr bool in_place_weights_gradient_v = [] {
  if constexpr (simd_v<T, Arch>)
    return K >= 4 && (K % in_place_gradient_rows<T, Arch> == 0 || K % in_place_gradient_rows<T, Arch> == 4) &&
           N >= xsimd::batch<T, Arch>::size;
  else
    return false;
}();
template <std::size_t K, std::size_t N, class Arch = default_arch, class T>
void weights_gradient_in_place(const T* x, const T* dy, T* dw, std::size_t m, T* db = nullptr) {
  static_assert(in_place_weights_gradient_v<K, N, T, Arch>,
                "weights_gradient_in_place: float or double with SIMD, K % MR (the tile's rows) 0 or 4, N >= a vector");
  using blk = simd::blocking<T, Arch>;
  constexpr std::size_t MR = in_place_gradient_rows<T, Arch>, NV = packed_panel_vectors<T, Arch>(N), NR = NV * blk::L;
  constexpr std::size_t panels = (N + NR - 1) / NR;
  // K blocks of kc rows: dy's kc x NR block (16 KB for 128 rows of 32 floats) and the rows of x in L1
  // (LSTM(128)'s dW at batch 64, 28 x 512 over 1792 rows, one thread, CPU time, loaded Xeon 207: kc 32 /
  // 64 / 128 / 256: 0.88x / 0.86x / 0.83x / 0.92x dense_backward_weights' time; its dR, 128 x 512, read so:
  // 1.05-1.16x, slower: each panel reads all of h's rows again, beyond L1, where the packed A is contiguous)
  constexpr std::size_t kc_max = 128;
  if (m == 0) {
    for (std::size_t i = 0; i < K * N; ++i) dw[i] = T(0);
    if (db)
      for (std::size_t j = 0; j < N; ++j) db[j] = T(0);
    return;
  }
  using B = xsimd::batch<T, Arch>;
  constexpr std::size_t L = B::size;
  // db's columns [j0, j0 + nr) plus dy's rows [p0, p0 + kc) in order (0 first: column_sum's bits),
  // while the block is in L1 after its tiles
  auto add_rows = [&](std::size_t p0, std::size_t kc, std::size_t j0, std::size_t nr) {
    std::size_t whole = 0;
    if (nr == NR) {  // a whole panel: its NV vectors' sums side by side
      B acc[NV];
      for (std::size_t v = 0; v < NV; ++v) acc[v] = p0 == 0 ? B(T(0)) : B::load_unaligned(db + j0 + v * L);
      for (std::size_t p = p0; p < p0 + kc; ++p)
        for (std::size_t v = 0; v < NV; ++v) acc[v] += B::load_unaligned(dy + p * N + j0 + v * L);
      for (std::size_t v = 0; v < NV; ++v) acc[v].store_unaligned(db + j0 + v * L);
      whole = NR;
    }
    for (; whole + L <= nr; whole += L) {
      B acc = p0 == 0 ? B(T(0)) : B::load_unaligned(db + j0 + whole);
      for (std::size_t p = p0; p < p0 + kc; ++p) acc += B::load_unaligned(dy + p * N + j0 + whole);
      acc.store_unaligned(db + j0 + whole);
    }
    for (std::size_t j = j0 + whole; j < j0 + nr; ++j) {
      T acc = p0 == 0 ? T(0) : db[j];
      for (std::size_t p = p0; p < p0 + kc; ++p) acc += dy[p * N + j];
      db[j] = acc;
    }
  };
  thread_pool& pool = thread_pool::global();
  // tasks: groups of column panels (each output in one task)
  const std::size_t tasks = std::min<std::size_t>(panels, pool.size() > 1 ? 4 * pool.size() : 1);
  auto task = [&](std::size_t t) {
    const std::size_t j_lo = panels * t / tasks * NR, j_hi = std::min(N, panels * (t + 1) / tasks * NR);
    for (std::size_t p0 = 0; p0 < m; p0 += kc_max) {
      const std::size_t kc = std::min(kc_max, m - p0);
      for (std::size_t j0 = j_lo; j0 < j_hi; j0 += NR) {
        const std::size_t nr = std::min(NR, N - j0);
        for (std::size_t i0 = 0; i0 < K; i0 += MR) {
          const std::size_t mr = std::min(MR, K - i0);
          if (mr <= 4)
            simd::micro<Arch, 4, NV, true>(kc, x + p0 * K + i0, K, dy + p0 * N + j0, N, dw + i0 * N + j0, N, mr, nr,
                                           static_cast<const T*>(nullptr), p0 == 0, fn::relu_fn{}, false);
          else
            simd::micro<Arch, MR, NV, true>(kc, x + p0 * K + i0, K, dy + p0 * N + j0, N, dw + i0 * N + j0, N, mr, nr,
                                            static_cast<const T*>(nullptr), p0 == 0, fn::relu_fn{}, false);
        }
        if (db) add_rows(p0, kc, j0, nr);
      }
    }
  };
  pool.run(tasks, task, tasks > 1 && K * N * m >= simd::parallel_threshold);
}

// ---- one step's weight gradients of a recurrent layer ----
// step_weights_gradient<KX, KH, N>(x, h, dz, dw, dr, db, m, init, parallel): dW [KX, N] (+)= x^T dz,
// dR [KH, N] (+)= h^T dz and db [N] (+)= the rows of dz (x [m, KX], h [m, KH], dz [m, N] row-major;
// h null: dR not touched; db null: not summed); init: each output starts from 0, else from its value.
// A recurrent layer calls it once a step, last step first, right after the step's dz (still in
// cache), where dW, dR and db were three products over every step's rows afterwards (dZ, 3.5 MB for
// an LSTM(128) at 64, read from beyond L2 and packed for dR). Each output sums 0 (or its value), then
// the rows p = 0, 1, ... in order, whatever the thread count (parallel: column panels over the pool,
// each output in one task), so calling it for steps S-1 .. 0 gives the same bits whether it runs
// inside the time loop or after it. Per column panel: dz's NR columns packed (m x NR, in L1), then
// the micro-kernel's tiles of dW's and dR's rows over it (x and h read in place as a transposed
// packed A: a tile's MR values of a row are contiguous; a last partial tile whose instance would
// read past a row reads a zero-padded copy of those columns), then db from the packed panel.
// steps > 1: that many steps of m rows each, s = steps-1 .. 0 (x + s m KX, dz + s m N, and h + s m KH
// for s >= 1: step 0 has no h, a recurrent layer's h_0 = 0), the same sums and bits as steps calls of
// one step, last first, in one pool run (each task's panels through every step).
// Without SIMD for T: the same sums in scalar loops.
template <std::size_t KX, std::size_t KH, std::size_t N, class Arch = default_arch, class T>
void step_weights_gradient(const T* x, const T* h, const T* dz, T* dw, T* dr, T* db, std::size_t m, bool init,
                           bool parallel, std::size_t steps = 1) {
  // step s's h (null: no dR for it)
  auto h_of = [&](std::size_t s) { return !h || (steps > 1 && s == 0) ? nullptr : h + s * m * KH; };
  if constexpr (simd_v<T, Arch>) {
    using blk = simd::blocking<T, Arch>;
    using B = xsimd::batch<T, Arch>;
    constexpr std::size_t MR = blk::MR, L = blk::L, NV = packed_panel_vectors<T, Arch>(N), NR = NV * L;
    constexpr std::size_t panels = (N + NR - 1) / NR;
    // the rows of a last tile that its instance (4 or MR rows) cannot read in place (0: none)
    constexpr auto tail_rows = [](std::size_t k) {
      const std::size_t r = k % MR;
      return r == 0 || r == 4 ? std::size_t(0) : r;
    };
    constexpr std::size_t tx = tail_rows(KX), th = tail_rows(KH);
    // step s's copied rows of x at tails + 2 s m MR, of h m MR further
    T* tails = nullptr;
    if constexpr (tx > 0 || th > 0) {
      tails = simd::scratch<T, 15>(2 * steps * m * MR);
      auto copy_tail = [&](const T* a, std::size_t k, std::size_t rows, T* dst) {
        for (std::size_t p = 0; p < m; ++p)
          for (std::size_t r = 0; r < MR; ++r) dst[p * MR + r] = r < rows ? a[p * k + k - rows + r] : T(0);
      };
      for (std::size_t s = 0; s < steps; ++s) {
        if (tx > 0) copy_tail(x + s * m * KX, KX, tx, tails + 2 * s * m * MR);
        if (th > 0 && h_of(s)) copy_tail(h_of(s), KH, th, tails + (2 * s + 1) * m * MR);
      }
    }
    thread_pool& pool = thread_pool::global();
    const bool split = parallel && pool.size() > 1 && steps * m * (KX + KH) * N >= simd::parallel_threshold;
    const std::size_t tasks = split ? std::min<std::size_t>(panels, 4 * pool.size()) : 1;
    auto task = [&](std::size_t t) {
      T* bp = simd::scratch<T, 14>(m * NR);
      const std::size_t j_lo = panels * t / tasks * NR, j_hi = std::min(N, panels * (t + 1) / tasks * NR);
      // the tiles of K rows of a (x or h) into c, the rows of the last (rows k - tail ..) from tail
      auto tiles = [&](const T* a, std::size_t k, std::size_t tail, const T* tail_a, T* c, std::size_t j0,
                       std::size_t nr, bool first) {
        for (std::size_t i0 = 0; i0 < k; i0 += MR) {
          const bool copied = tail > 0 && i0 + tail == k;
          simd::micro_rows<Arch, NV, true>(m, copied ? tail_a : a + i0, copied ? MR : k, bp, NR, c + i0 * N + j0, N,
                                           std::min(MR, k - i0), nr, static_cast<const T*>(nullptr), first,
                                           fn::relu_fn{}, false);
        }
      };
      for (std::size_t j0 = j_lo; j0 < j_hi; j0 += NR) {
        const std::size_t nr = std::min(NR, N - j0);
        for (std::size_t s = steps; s-- > 0;) {
          const bool first = init && s == steps - 1;
          const T* ts = tails ? tails + 2 * s * m * MR : nullptr;
          simd::pack_b<Arch>(NR, strided<T>{dz + s * m * N, N, 1}, j0, N, m, bp);
          tiles(x + s * m * KX, KX, tx, ts, dw, j0, nr, first);
          if (const T* hs = h_of(s)) tiles(hs, KH, th, ts ? ts + m * MR : nullptr, dr, j0, nr, first);
          if (db) {  // the panel's column sums (its columns past nr are 0, never stored)
            B acc[NV];
            for (std::size_t v = 0; v < NV; ++v) {
              const std::size_t cols = nr > v * L ? std::min(L, nr - v * L) : 0;
              acc[v] = first || cols == 0 ? B(T(0)) : simd::load_n<Arch>(db + j0 + v * L, cols);
            }
            for (std::size_t p = 0; p < m; ++p)
              for (std::size_t v = 0; v < NV; ++v) acc[v] += B::load_aligned(bp + p * NR + v * L);
            for (std::size_t v = 0; v < NV; ++v)
              if (nr > v * L) simd::store_n<Arch>(acc[v], db + j0 + v * L, std::min(L, nr - v * L));
          }
        }
      }
    };
    pool.run(tasks, task, tasks > 1);
  } else {
    for (std::size_t st = steps; st-- > 0;) {
      const bool first = init && st == steps - 1;
      const T* d = dz + st * m * N;
      auto product = [&](const T* a, std::size_t k, T* c) {
        for (std::size_t i = 0; i < k; ++i)
          for (std::size_t j = 0; j < N; ++j) {
            T s = first ? T(0) : c[i * N + j];
            for (std::size_t p = 0; p < m; ++p) s += a[p * k + i] * d[p * N + j];
            c[i * N + j] = s;
          }
      };
      product(x + st * m * KX, KX, dw);
      if (const T* hs = h_of(st)) product(hs, KH, dr);
      if (db)
        for (std::size_t j = 0; j < N; ++j) {
          T s = first ? T(0) : db[j];
          for (std::size_t p = 0; p < m; ++p) s += d[p * N + j];
          db[j] = s;
        }
    }
    (void)parallel;
  }
}

// ---- the products at an active width n <= N (row strides stay N) ----
template <std::size_t K, std::size_t N, class E = fn::identity_fn, class Arch = default_arch, class T>
void dense_forward_active(const T* x, const T* w, const T* b, T* y, std::size_t m, std::size_t n, const E& e = {}) {
  if constexpr (simd_v<T, Arch>) {
    simd_gemm<Arch>(m, n, K, strided<T>{x, K, 1}, strided<T>{w, N, 1}, y, N, b, e);
  } else {
    for (std::size_t i = 0; i < m; ++i)
      for (std::size_t j = 0; j < n; ++j) {
        T s = b[j];
        for (std::size_t p = 0; p < K; ++p) s += x[i * K + p] * w[p * N + j];
        y[i * N + j] = s;
      }
    if constexpr (!std::is_same_v<E, fn::identity_fn>)
      for (std::size_t i = 0; i < m; ++i) map<Arch>(fn::forward_of<E>{e}, n, y + i * N);
  }
}
template <std::size_t K, std::size_t N, class Arch = default_arch, class T>
void dense_backward_weights_active(const T* x, const T* dy, T* dw, T* db, std::size_t m, std::size_t n) {
  if constexpr (simd_v<T, Arch>)
    simd_gemm<Arch>(K, n, m, strided<T>{x, 1, K}, strided<T>{dy, N, 1}, dw, N, static_cast<const T*>(nullptr),
                    epilogue::none);
  else
    for (std::size_t p = 0; p < K; ++p)
      for (std::size_t j = 0; j < n; ++j) {
        T s(0);
        for (std::size_t i = 0; i < m; ++i) s += x[i * K + p] * dy[i * N + j];
        dw[p * N + j] = s;
      }
  for (std::size_t j = 0; j < n; ++j) db[j] = T(0);  // 0 plus the rows in order, as reference::col_sum
  for (std::size_t i = 0; i < m; ++i)
    for (std::size_t j = 0; j < n; ++j) db[j] += dy[i * N + j];
}
template <std::size_t K, std::size_t N, class Arch = default_arch, class T>
void dense_backward_input_active(const T* dy, const T* w, T* dx, std::size_t m, std::size_t n) {
  if constexpr (simd_v<T, Arch>) {
    simd_gemm<Arch>(m, K, n, strided<T>{dy, N, 1}, strided<T>{w, 1, N}, dx, K, static_cast<const T*>(nullptr),
                    epilogue::none);
  } else {
    for (std::size_t i = 0; i < m; ++i)
      for (std::size_t p = 0; p < K; ++p) {
        T s(0);
        for (std::size_t j = 0; j < n; ++j) s += dy[i * N + j] * w[p * N + j];
        dx[i * K + p] = s;
      }
  }
}

}  // namespace ctnn::kernels::cpu

// CTNN_COMPILED_KERNELS: the kernels above for the default architecture come from one compiled object.
#include "compiled_kernels.hpp"
