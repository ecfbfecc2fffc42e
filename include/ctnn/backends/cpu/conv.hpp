// ctnn/kernels/cpu/conv.hpp — 2D convolution: im2col + the dense GEMMs, or direct.
//
// With the geometry G a compile-time constant, conv_forward<G> gathers every
// output position's input patch into a row of `cols` (im2col: rows
// batch*OH*OW, columns KH*KW*C, padding as zeros) and multiplies by the
// kernel [KH*KW*C, F] with dense_forward (gemm.hpp). conv_backward<G> takes
// the same `cols` (kept from forward) for dW = cols^T dY and db, then, when dx
// is wanted, reuses `cols` for dcols = dY W^T and scatters it back (col2im).
// im2col and col2im run over the thread pool by samples (batch_split.hpp).
// From two chunks of about conv_chunk_rows im2col rows on (conv_chunked_v),
// no im2col matrix of the batch is kept: `cols` holds a copy of x, and each
// chunk's rows are built in a per-thread buffer in L2 for its products, in
// forward and again in backward (see "im2col + GEMM in chunks" below).
// A small patch (direct_conv_v<G, Arch, T>: float, KH*KW*C within the
// register budget, F a multiple of the vector length, e.g. the C = 1 first
// layer) runs direct instead: the F filters are vector lanes, forward keeps a
// row of output positions in registers, `cols` keeps a copy of x for dW and
// the partial dW of fixed chunks of samples (summed in order: the same bits
// whatever the thread count).
// A 3x3 stride-1 layer with C and F whole vectors of at least 16 (winograd_v, winograd.hpp)
// computes y, and dx in backward (winograd_dx_v), by Winograd F(4x4, 3x3) or F(2x2, 3x3) (winograd_m) instead: equal to
// the direct sum up to rounding; and dW by F(3x3, 2x2) where one sample's `cols` holds its x and a
// partial dW (winograd_dw_v: `cols` keeps a copy of x), else `cols` is left as the im2col path
// leaves it, for dW.
// reference: kernels/conv_reference.hpp (direct loops); tests compare.
#pragma once
#include <algorithm>
#include <cstddef>
#include <cstring>
#include <type_traits>

#include "../../config.hpp"
#include "../../kernels/conv_reference.hpp"
#include <xsimd/xsimd.hpp>

#include "activations.hpp"
#include "arch.hpp"
#include "batch_split.hpp"
#include "gemm.hpp"
#include "winograd.hpp"

namespace ctnn::kernels::cpu {

using kernels::conv_geometry;

namespace detail {
template <conv_geometry G, class T>
void im2col_samples(const T* x, T* cols, std::size_t n0, std::size_t n1) {
  constexpr std::size_t P = G.patch();
  for (std::size_t n = n0; n < n1; ++n) {
    const T* xs = x + n * G.in_size();
    for (std::size_t oh = 0; oh < G.oh; ++oh)
      for (std::size_t ow = 0; ow < G.ow; ++ow) {
        T* row = cols + ((n * G.oh + oh) * G.ow + ow) * P;
        for (std::size_t i = 0; i < G.kh; ++i) {
          const std::size_t rr = oh * G.stride + i;
          T* dst = row + i * G.kw * G.c;
          if (rr < G.pt || rr - G.pt >= G.h) {
            std::fill(dst, dst + G.kw * G.c, T(0));
            continue;
          }
          const T* src_row = xs + (rr - G.pt) * G.w * G.c;
          const std::size_t s0 = ow * G.stride;  // column of j = 0, in padded coordinates
          if (s0 >= G.pl && s0 - G.pl + G.kw <= G.w) {  // the whole row of the window is inside
            std::memcpy(dst, src_row + (s0 - G.pl) * G.c, G.kw * G.c * sizeof(T));
            continue;
          }
          for (std::size_t j = 0; j < G.kw; ++j) {
            const std::size_t ss = s0 + j;
            if (ss < G.pl || ss - G.pl >= G.w)
              std::fill(dst + j * G.c, dst + (j + 1) * G.c, T(0));
            else
              std::memcpy(dst + j * G.c, src_row + (ss - G.pl) * G.c, G.c * sizeof(T));
          }
        }
      }
  }
}

template <conv_geometry G, class T>
void col2im_samples(const T* cols, T* dx, std::size_t n0, std::size_t n1) {
  constexpr std::size_t P = G.patch();
  std::fill(dx + n0 * G.in_size(), dx + n1 * G.in_size(), T(0));
  for (std::size_t n = n0; n < n1; ++n) {
    T* xs = dx + n * G.in_size();
    for (std::size_t oh = 0; oh < G.oh; ++oh)
      for (std::size_t ow = 0; ow < G.ow; ++ow) {
        const T* row = cols + ((n * G.oh + oh) * G.ow + ow) * P;
        for (std::size_t i = 0; i < G.kh; ++i) {
          const std::size_t rr = oh * G.stride + i;
          if (rr < G.pt || rr - G.pt >= G.h) continue;
          T* dst_row = xs + (rr - G.pt) * G.w * G.c;
          for (std::size_t j = 0; j < G.kw; ++j) {
            const std::size_t ss = ow * G.stride + j;
            if (ss < G.pl || ss - G.pl >= G.w) continue;
            T* d = dst_row + (ss - G.pl) * G.c;
            const T* s = row + (i * G.kw + j) * G.c;
            for (std::size_t c = 0; c < G.c; ++c) d[c] += s[c];
          }
        }
      }
  }
}
}  // namespace detail

// The rows of `cols` (batch*OH*OW of them, KH*KW*C values each), over the thread pool by samples.
template <conv_geometry G, class T>
void im2col(const T* x, T* cols, std::size_t batch) {
  for_samples(batch, G.oh * G.ow * G.patch(),
              [&](std::size_t n0, std::size_t n1) { detail::im2col_samples<G>(x, cols, n0, n1); });
}

// dx = 0, then every column value is added back to the input position it came from
// (each sample's dx within one task: the same bits whatever the thread count).
template <conv_geometry G, class T>
void col2im(const T* cols, T* dx, std::size_t batch) {
  for_samples(batch, G.oh * G.ow * G.patch(),
              [&](std::size_t n0, std::size_t n1) { detail::col2im_samples<G>(cols, dx, n0, n1); });
}

// ---- direct convolution for a small patch, the F filters as vector lanes ----

// The rule that picks the direct kernels (compile time): float, F a multiple of
// the vector length L with at most 4 vectors, a patch that fits the registers
// next to the dW accumulators (KH*KW*C <= registers - 4: 12 on AVX2, 28 on
// AVX-512), and one sample's `cols` large enough for its x and one partial dW, db.
template <conv_geometry G, class Arch, class T>
constexpr bool direct_conv_v = [] {
  if constexpr (!std::is_same_v<T, float> || !simd_v<float, Arch>) return false;
  else {
    constexpr std::size_t L = xsimd::batch<float, Arch>::size;
    return G.f % L == 0 && G.f / L <= 4 && G.patch() + 4 <= gemm_target_of<float, Arch>().registers &&
           G.in_size() + G.patch() * G.f + G.f <= G.oh * G.ow * G.patch();
  }
}();

// Samples per partial dW, db of the direct kernels (fixed, so the sums do not depend on the thread count).
inline constexpr std::size_t direct_dw_chunk = 4;

namespace detail {
// Filter vectors per pass (FG) and output positions per register block (R) of the forward kernel: the R FG
// accumulators, FG weight vectors, the broadcast x and one register to spare (the rule's zero) within the
// registers (AVX2 at FG = 2: R = 5; R = 6 left g++ 12 spilling accumulators to the stack).
template <conv_geometry G, class Arch>
struct direct_plan {
  static constexpr std::size_t L = xsimd::batch<float, Arch>::size, FV = G.f / L;
  static constexpr std::size_t FG = FV % 2 == 0 ? 2 : 1;
  static constexpr std::size_t R = std::min<std::size_t>(12, (gemm_target_of<float, Arch>().registers - FG - 3) / FG);
};

// Outputs ow0 .. ow0+RR-1 of row oh, filter vectors [v0, v0+FG): acc = bias + sum over the window.
// Inside: every column of the block's windows is inside the input (no column checks).
template <conv_geometry G, class Arch, std::size_t RR, bool Inside, class E>
CTNN_FORCEINLINE void direct_block(const float* xs, const float* w, const float* b, float* y, std::size_t oh,
                                   std::size_t ow0, std::size_t v0, const E& e) {
  using B = xsimd::batch<float, Arch>;
  using P = direct_plan<G, Arch>;
  constexpr std::size_t L = P::L, FG = P::FG;
  B acc[RR][FG];
  for (std::size_t v = 0; v < FG; ++v) {
    const B bv = b ? B::load_unaligned(b + (v0 + v) * L) : B(0.0f);
    for (std::size_t r = 0; r < RR; ++r) acc[r][v] = bv;
  }
  for (std::size_t i = 0; i < G.kh; ++i) {
    const std::size_t rr = oh * G.stride + i;
    if (rr < G.pt || rr - G.pt >= G.h) continue;
    const float* xr = xs + (rr - G.pt) * G.w * G.c;
    for (std::size_t j = 0; j < G.kw; ++j)
      for (std::size_t c = 0; c < G.c; ++c) {
        const float* wp = w + ((i * G.kw + j) * G.c + c) * G.f + v0 * L;
        B wv[FG];
        for (std::size_t v = 0; v < FG; ++v) wv[v] = B::load_unaligned(wp + v * L);
        for (std::size_t r = 0; r < RR; ++r) {
          const std::size_t ss = (ow0 + r) * G.stride + j;
          if constexpr (!Inside)
            if (ss < G.pl || ss - G.pl >= G.w) continue;
          const B xv(xr[(ss - G.pl) * G.c + c]);
          for (std::size_t v = 0; v < FG; ++v) acc[r][v] = xsimd::fma(xv, wv[v], acc[r][v]);
        }
      }
  }
  for (std::size_t r = 0; r < RR; ++r)
    for (std::size_t v = 0; v < FG; ++v) e.forward(acc[r][v]).store_unaligned(y + (ow0 + r) * G.f + (v0 + v) * L);
}

template <conv_geometry G, class Arch, std::size_t RR, class E>
CTNN_FORCEINLINE void direct_block_at(const float* xs, const float* w, const float* b, float* y, std::size_t oh,
                                      std::size_t ow0, std::size_t v0, const E& e) {
  const bool inside = ow0 * G.stride >= G.pl && (ow0 + RR - 1) * G.stride + G.kw <= G.w + G.pl;
  if (inside) direct_block<G, Arch, RR, true>(xs, w, b, y, oh, ow0, v0, e);
  else direct_block<G, Arch, RR, false>(xs, w, b, y, oh, ow0, v0, e);
}

// y = e.forward(the window sums + b) of samples [n0, n1): e, a rule of kernels/functors.hpp (the
// layer's activation), on the accumulators before they are stored.
template <conv_geometry G, class Arch, class E = fn::identity_fn>
void direct_forward_samples(const float* x, const float* w, const float* b, float* y, std::size_t n0,
                            std::size_t n1, const E& e = {}) {
  using P = direct_plan<G, Arch>;
  for (std::size_t n = n0; n < n1; ++n) {
    const float* xs = x + n * G.in_size();
    for (std::size_t oh = 0; oh < G.oh; ++oh) {
      float* yr = y + (n * G.oh + oh) * G.ow * G.f;
      for (std::size_t v0 = 0; v0 < P::FV; v0 += P::FG) {
        std::size_t ow = 0;
        for (; ow + P::R <= G.ow; ow += P::R) direct_block_at<G, Arch, P::R>(xs, w, b, yr, oh, ow, v0, e);
        for (; ow < G.ow; ++ow) direct_block_at<G, Arch, 1>(xs, w, b, yr, oh, ow, v0, e);
      }
    }
  }
}

// Filter vectors per pass of the direct dW (VG): two where their 2 (KH*KW*C + 1) accumulators, two dy
// vectors and the broadcast x fit the registers (AVX-512 at the CNN's first layer: 20 of 32), else one.
template <conv_geometry G, class Arch>
constexpr std::size_t direct_dw_vectors() {
  constexpr std::size_t FV = G.f / xsimd::batch<float, Arch>::size;
  return FV % 2 == 0 && 2 * (G.patch() + 1) + 4 <= gemm_target_of<float, Arch>().registers ? 2 : 1;
}

// One output row's positions of the direct dW, filter vectors [v0, v0 + VG): acc, dbv (VG (KH*KW*C + 1)
// accumulators, in registers) plus each position's patch times dy, the row's dy read at d (row stride F;
// with mask: counted where the relu output y (same layout) is above 0 only).
template <conv_geometry G, class Arch, std::size_t VG>
CTNN_FORCEINLINE void direct_dw_row(const float* xs, const float* d, const float* y, std::size_t oh, std::size_t v0,
                                    xsimd::batch<float, Arch> (&acc)[G.patch()][VG],
                                    xsimd::batch<float, Arch> (&dbv)[VG]) {
  using B = xsimd::batch<float, Arch>;
  constexpr std::size_t L = B::size;
  for (std::size_t ow = 0; ow < G.ow; ++ow) {
    B dv[VG];
    for (std::size_t u = 0; u < VG; ++u) {
      dv[u] = B::load_unaligned(d + ow * G.f + (v0 + u) * L);
      if (y) dv[u] = xsimd::select(B::load_unaligned(y + ow * G.f + (v0 + u) * L) > B(0.0f), dv[u], B(0.0f));
      dbv[u] += dv[u];
    }
    const std::size_t r0 = oh * G.stride, s0 = ow * G.stride;
    const bool inside = r0 >= G.pt && r0 + G.kh <= G.h + G.pt && s0 >= G.pl && s0 + G.kw <= G.w + G.pl;
    for (std::size_t i = 0; i < G.kh; ++i)
      for (std::size_t j = 0; j < G.kw; ++j) {
        const std::size_t rr = r0 + i, ss = s0 + j;
        if (!inside && (rr < G.pt || rr - G.pt >= G.h || ss < G.pl || ss - G.pl >= G.w)) continue;
        const float* xp = xs + ((rr - G.pt) * G.w + (ss - G.pl)) * G.c;
        for (std::size_t c = 0; c < G.c; ++c) {
          const std::size_t p = (i * G.kw + j) * G.c + c;
          const B xv(xp[c]);
          for (std::size_t u = 0; u < VG; ++u) acc[p][u] = xsimd::fma(xv, dv[u], acc[p][u]);
        }
      }
  }
}

// dW[p, f] = sum over the positions of samples [n0, n1) of patch value p times dy[f]; db[f] = sum dy[f]
// (overwritten), VG filter vectors at a time: VG (KH*KW*C + 1) accumulators, each x broadcast once for
// them (the same sums in the same order whatever VG).
// y: when not null, the layer's relu output: dy counts where y > 0 only (dy itself is not changed).
// More than one pass (FV / VG > 1: AVX2 at the CNN's first layer, 4 passes of one vector): the passes run
// row by row (each row's dy, y then come from L1 after the first pass, not 4 times from L2 or memory),
// the accumulators kept between rows in `keep`; with y, the row's masked dy is written once to `md` and the
// passes read it (the same values: the same sums in the same order as one pass over the whole chunk).
template <conv_geometry G, class Arch>
void direct_backward_weights_samples(const float* x, const float* dy, float* dw, float* db, std::size_t n0,
                                     std::size_t n1, const float* y = nullptr) {
  using B = xsimd::batch<float, Arch>;
  constexpr std::size_t L = B::size, FV = G.f / L, P = G.patch(), VG = direct_dw_vectors<G, Arch>();
  if constexpr (FV / VG == 1) {
    B acc[P][VG], dbv[VG];
    for (std::size_t u = 0; u < VG; ++u) {
      dbv[u] = B(0.0f);
      for (std::size_t p = 0; p < P; ++p) acc[p][u] = B(0.0f);
    }
    for (std::size_t n = n0; n < n1; ++n)
      for (std::size_t oh = 0; oh < G.oh; ++oh) {
        const std::size_t at = (n * G.oh + oh) * G.ow * G.f;
        direct_dw_row<G, Arch, VG>(x + n * G.in_size(), dy + at, y ? y + at : nullptr, oh, 0, acc, dbv);
      }
    for (std::size_t u = 0; u < VG; ++u) {
      for (std::size_t p = 0; p < P; ++p) acc[p][u].store_unaligned(dw + p * G.f + u * L);
      dbv[u].store_unaligned(db + u * L);
    }
  } else {
    constexpr std::size_t passes = FV / VG;
    alignas(64) float md[G.ow * G.f];
    B keep[passes][P + 1][VG];
    for (auto& k : keep)
      for (auto& r : k)
        for (auto& v : r) v = B(0.0f);
    for (std::size_t n = n0; n < n1; ++n)
      for (std::size_t oh = 0; oh < G.oh; ++oh) {
        const std::size_t at = (n * G.oh + oh) * G.ow * G.f;
        const float* d = dy + at;
        if (y) {
          for (std::size_t i = 0; i < G.ow * G.f; i += L)
            xsimd::select(B::load_unaligned(y + at + i) > B(0.0f), B::load_unaligned(d + i), B(0.0f)).store_aligned(md + i);
          d = md;
        }
        for (std::size_t g = 0; g < passes; ++g) {
          B acc[P][VG], dbv[VG];
          for (std::size_t u = 0; u < VG; ++u) {
            for (std::size_t p = 0; p < P; ++p) acc[p][u] = keep[g][p][u];
            dbv[u] = keep[g][P][u];
          }
          direct_dw_row<G, Arch, VG>(x + n * G.in_size(), d, nullptr, oh, g * VG, acc, dbv);
          for (std::size_t u = 0; u < VG; ++u) {
            for (std::size_t p = 0; p < P; ++p) keep[g][p][u] = acc[p][u];
            keep[g][P][u] = dbv[u];
          }
        }
      }
    for (std::size_t g = 0; g < passes; ++g)
      for (std::size_t u = 0; u < VG; ++u) {
        for (std::size_t p = 0; p < P; ++p) keep[g][p][u].store_unaligned(dw + p * G.f + (g * VG + u) * L);
        keep[g][P][u].store_unaligned(db + (g * VG + u) * L);
      }
  }
}

// dW, db over the batch: one partial per chunk of direct_dw_chunk samples (in `partial`, chunks x
// (KH*KW*C*F + F) floats), the chunks over the thread pool, then summed in chunk order (sum_chunks: by
// blocks of values over the pool too).
template <conv_geometry G, class Arch>
void direct_backward_weights(const float* x, const float* dy, float* dw, float* db, float* partial,
                             std::size_t batch, const float* y = nullptr) {
  constexpr std::size_t PF = G.patch() * G.f, PS = PF + G.f;
  const std::size_t chunks = (batch + direct_dw_chunk - 1) / direct_dw_chunk;
  thread_pool::global().run(
      chunks,
      [&](std::size_t k) {
        float* p = partial + k * PS;
        direct_backward_weights_samples<G, Arch>(x, dy, p, p + PF, k * direct_dw_chunk,
                                                 std::min(batch, (k + 1) * direct_dw_chunk), y);
      },
      chunks > 1 && batch * G.out_size() * G.patch() >= sample_split_min);
  sum_chunks(partial, chunks, PS, dw, PF);
  sum_chunks(partial + PF, chunks, PS, db, G.f);
}

// dx[n, r, s, c] (overwritten) = sum over the outputs whose window holds (r, s) of dy . w[i, j, c, :].
template <conv_geometry G, class Arch>
void direct_backward_input_samples(const float* dy, const float* w, float* dx, std::size_t n0, std::size_t n1) {
  using B = xsimd::batch<float, Arch>;
  constexpr std::size_t L = B::size, FV = G.f / L;
  std::fill(dx + n0 * G.in_size(), dx + n1 * G.in_size(), 0.0f);
  for (std::size_t n = n0; n < n1; ++n) {
    float* xs = dx + n * G.in_size();
    for (std::size_t oh = 0; oh < G.oh; ++oh)
      for (std::size_t ow = 0; ow < G.ow; ++ow) {
        const float* d = dy + ((n * G.oh + oh) * G.ow + ow) * G.f;
        B dv[FV];
        for (std::size_t v = 0; v < FV; ++v) dv[v] = B::load_unaligned(d + v * L);
        for (std::size_t i = 0; i < G.kh; ++i)
          for (std::size_t j = 0; j < G.kw; ++j) {
            const std::size_t rr = oh * G.stride + i, ss = ow * G.stride + j;
            if (rr < G.pt || rr - G.pt >= G.h || ss < G.pl || ss - G.pl >= G.w) continue;
            float* xp = xs + ((rr - G.pt) * G.w + (ss - G.pl)) * G.c;
            for (std::size_t c = 0; c < G.c; ++c) {
              const float* wp = w + ((i * G.kw + j) * G.c + c) * G.f;
              B t = dv[0] * B::load_unaligned(wp);
              for (std::size_t v = 1; v < FV; ++v) t = xsimd::fma(dv[v], B::load_unaligned(wp + v * L), t);
              xp[c] += xsimd::hadd(t);
            }
          }
      }
  }
}
}  // namespace detail

// ---- im2col + GEMM in chunks of samples ----

// The im2col path in chunks of conv_chunk<G> samples (about conv_chunk_rows rows of im2col; float
// or double with SIMD, when one sample's `cols` holds its x and a partial dW): no im2col matrix of
// the whole batch (9 MB at the CNN's conv2, batch 64, written to memory and read back by every
// product). conv_forward copies x to `cols` and, chunk by chunk, builds the chunk's im2col rows in
// a per-thread buffer (conv_scratch_tag, in L2) and multiplies it by W packed once; conv_backward
// builds them again from that copy of x, computes the chunk's partial dW (in `cols` after x) and
// then dcols = dY W^T into the same buffer and col2im. dW = the partials summed in chunk order,
// db = column_sum over the batch: the chunks are fixed, so the bits do not depend on the thread
// count (y and dx are the bits of one product over the batch; dW differs from it in the rounding
// of the chunk sums). One chunk or less (batch <= conv_chunk<G>) runs as one product, `cols`
// holding the im2col matrix.
inline constexpr int conv_scratch_tag = 4;
inline constexpr std::size_t conv_chunk_rows = 512;
template <conv_geometry G>
inline constexpr std::size_t conv_chunk = std::max<std::size_t>(1, conv_chunk_rows / (G.oh * G.ow));
template <conv_geometry G, class Arch, class T>
constexpr bool conv_chunked_v = simd_v<T, Arch> && (std::is_same_v<T, float> || std::is_same_v<T, double>) &&
                                G.oh * G.ow * conv_chunk<G> >= packed_rows &&
                                G.in_size() + G.patch() * G.f <= G.oh * G.ow * G.patch();

// dW by Winograd F(3x3, 2x2) too (winograd_backward_weights): where y and dx run by Winograd and one
// sample's `cols` holds its x and one partial dW (chunks of winograd_dw_chunk<G> >= 1 samples).
template <conv_geometry G, class Arch, class T>
constexpr bool winograd_dw_v =
    winograd_dx_v<G, Arch, T> && G.in_size() + G.patch() * G.f <= G.oh * G.ow * G.patch();

// f(k, n0, n1) for chunk k = samples [n0, n1) of conv_chunk<G> samples covering [0, batch), the chunks
// over the thread pool (a product inside a task runs on that task's thread).
template <conv_geometry G, class F>
void for_chunks(std::size_t batch, F&& f) {
  constexpr std::size_t chunk = conv_chunk<G>;
  const std::size_t chunks = (batch + chunk - 1) / chunk;
  thread_pool::global().run(
      chunks, [&](std::size_t k) { f(k, k * chunk, std::min(batch, (k + 1) * chunk)); },
      chunks > 1 && batch * G.out_size() * G.patch() >= sample_split_min);
}

namespace detail {
template <conv_geometry G, class Arch, class T, class E = fn::identity_fn>
void conv_forward_chunked(const T* x, const T* w, const T* b, T* y, T* cols, std::size_t batch, const E& e = {}) {
  constexpr std::size_t rows = G.oh * G.ow, P = G.patch();
  T* const packed = simd::scratch<T, conv_scratch_tag + 1>(packed_size<P, G.f, T, Arch>);
  pack_weights<P, G.f, Arch>(w, packed, packed_rows);
  std::copy(x, x + batch * G.in_size(), cols);  // conv_backward builds im2col again from it
  for_chunks<G>(batch, [&](std::size_t, std::size_t n0, std::size_t n1) {
    T* const buf = simd::scratch<T, conv_scratch_tag>(conv_chunk<G> * rows * P);
    im2col_samples<G>(x + n0 * G.in_size(), buf, 0, n1 - n0);
    dense_forward_packed<P, G.f, E, Arch>(buf, w, packed, b, y + n0 * rows * G.f, (n1 - n0) * rows, e);
  });
}

template <conv_geometry G, class Arch, class T>
void conv_backward_chunked(const T* dy, const T* w, T* dw, T* db, T* dx, T* cols, std::size_t batch) {
  const std::size_t m = batch * G.oh * G.ow;
  constexpr std::size_t rows = G.oh * G.ow, P = G.patch(), PF = P * G.f;
  T* const packed = simd::scratch<T, conv_scratch_tag + 1>(packed_size<P, G.f, T, Arch>);
  if (dx) pack_weights_transposed<P, G.f, Arch>(w, packed, packed_rows);
  const T* const xc = cols;  // conv_forward's copy of x
  T* const partial = cols + batch * G.in_size();
  for_chunks<G>(batch, [&](std::size_t k, std::size_t n0, std::size_t n1) {
    T* const buf = simd::scratch<T, conv_scratch_tag>(conv_chunk<G> * rows * P);
    const std::size_t mk = (n1 - n0) * rows;
    detail::im2col_samples<G>(xc + n0 * G.in_size(), buf, 0, n1 - n0);
    dense_backward_weights<P, G.f, Arch>(buf, dy + n0 * rows * G.f, partial + k * PF, static_cast<T*>(nullptr), mk);
    if (!dx) return;
    dense_backward_input_packed<P, G.f, Arch>(dy + n0 * rows * G.f, w, packed, buf, mk);
    detail::col2im_samples<G>(buf, dx + n0 * G.in_size(), 0, n1 - n0);
  });
  const std::size_t chunks = (batch + conv_chunk<G> - 1) / conv_chunk<G>;
  sum_chunks(partial, chunks, PF, dw, PF);
  if (db) column_sum<G.f, T, Arch>(dy, db, m);
}
}  // namespace detail

// y[batch*OH*OW, F] = e.forward(im2col(x) * w + b); cols must hold batch * OH*OW * KH*KW*C values.
// e: a rule of kernels/functors.hpp (the layer's activation: identity_fn, relu_fn ...), applied to
// each output before it is stored (the same values as a separate pass of the rule over y).
template <conv_geometry G, class Arch = default_arch, class T, class E = fn::identity_fn>
void conv_forward(const T* x, const T* w, const T* b, T* y, T* cols, std::size_t batch, const E& e = {}) {
  if constexpr (direct_conv_v<G, Arch, T>) {
    for_samples(batch, G.out_size() * G.patch(), [&](std::size_t n0, std::size_t n1) {
      std::copy(x + n0 * G.in_size(), x + n1 * G.in_size(), cols + n0 * G.in_size());  // conv_backward's dW reads it
      detail::direct_forward_samples<G, Arch>(x, w, b, y, n0, n1, e);
    });
    return;
  }
  if constexpr (winograd_v<G, Arch, T>) {
    // y by Winograd (F(4x4, 3x3) or F(2x2, 3x3): winograd_m); cols as conv_backward reads it: a copy of x (Winograd's dW, or the
    // chunked im2col's), else im2col
    if (winograd_dw_v<G, Arch, T> || (conv_chunked_v<G, Arch, T> && batch > conv_chunk<G>))
      for_samples(batch, G.in_size(), [&](std::size_t n0, std::size_t n1) {  // the copy over the pool too
        std::copy(x + n0 * G.in_size(), x + n1 * G.in_size(), cols + n0 * G.in_size());
      });
    else im2col<G>(x, cols, batch);
    return winograd_forward<G, Arch>(x, w, b, y, batch, e);
  }
  if constexpr (conv_chunked_v<G, Arch, T>)
    if (batch > conv_chunk<G>) return detail::conv_forward_chunked<G, Arch>(x, w, b, y, cols, batch, e);
  im2col<G>(x, cols, batch);
  dense_forward<G.patch(), G.f, E, Arch>(cols, w, b, y, batch * G.oh * G.ow, e);
}

// cols: what conv_forward left there (overwritten when dx is wanted).
template <conv_geometry G, class Arch = default_arch, class T>
void conv_backward(const T* dy, const T* w, T* dw, T* db, T* dx, T* cols, std::size_t batch) {
  if constexpr (direct_conv_v<G, Arch, T>) {
    detail::direct_backward_weights<G, Arch>(cols, dy, dw, db, cols + batch * G.in_size(), batch);
    if (dx)
      for_samples(batch, G.out_size() * G.patch(), [&](std::size_t n0, std::size_t n1) {
        detail::direct_backward_input_samples<G, Arch>(dy, w, dx, n0, n1);
      });
    return;
  }
  if constexpr (winograd_dw_v<G, Arch, T>) {  // dW, dx by Winograd (dW from conv_forward's copy of x)
    winograd_backward_weights<G, Arch>(cols, dy, dw, cols + batch * G.in_size(), batch, db);
    if (dx) winograd_backward_input<G, Arch>(dy, w, dx, batch);
    return;
  }
  if constexpr (winograd_dx_v<G, Arch, T>)
    if (dx) {  // dW, db as below, dx by Winograd
      conv_backward<G, Arch>(dy, w, dw, db, static_cast<T*>(nullptr), cols, batch);
      return winograd_backward_input<G, Arch>(dy, w, dx, batch);
    }
  const std::size_t m = batch * G.oh * G.ow;
  if constexpr (conv_chunked_v<G, Arch, T>)
    if (batch > conv_chunk<G>) return detail::conv_backward_chunked<G, Arch>(dy, w, dw, db, dx, cols, batch);
  dense_backward_weights<G.patch(), G.f, Arch>(cols, dy, dw, db, m);
  if (!dx) return;
  dense_backward_input<G.patch(), G.f, Arch>(dy, w, cols, m);
  col2im<G>(cols, dx, batch);
}

// conv_backward of a relu layer from dL/dy: dy becomes dL/dz (dy where y > 0, else 0) first, except
// for the direct kernels without dx (a first layer), whose dW reads the mask with dy (one pass less
// over the layer's output; dy is then left as it was).
template <conv_geometry G, class Arch = default_arch, class T>
void conv_backward_relu(const T* y, T* dy, const T* w, T* dw, T* db, T* dx, T* cols, std::size_t batch) {
  if constexpr (direct_conv_v<G, Arch, T>) {
    if (!dx) return detail::direct_backward_weights<G, Arch>(cols, dy, dw, db, cols + batch * G.in_size(), batch, y);
  }
  relu_backward<T, Arch>(y, dy, batch * G.out_size());
  conv_backward<G, Arch>(dy, w, dw, db, dx, cols, batch);
}

}  // namespace ctnn::kernels::cpu
