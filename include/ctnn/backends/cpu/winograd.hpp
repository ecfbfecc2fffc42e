// ctnn/backends/cpu/winograd.hpp — Winograd F(2x2, 3x3) and F(4x4, 3x3) (Lavin & Gray 2015) for a
// 3x3, stride-1 convolution of float or double, channels-last.
//
// winograd_forward<G, Arch>(x, w, b, y, batch): y [batch, OH, OW, F] = the correlation of x
// [batch, H, W, C] (zero padding G.pt, G.pl) with w [3, 3, C, F], plus b; the same values as the
// direct sum up to rounding. Output tiles of M x M (M = winograd_m<G, T>: 4 where that takes fewer
// multiplies, else 2; the last row / column of tiles partly used when M does not divide OH or OW),
// each read from an (M + 2) x (M + 2) input tile at stride M; N = (M + 2)^2 points:
//   U = G g G^T per (c, f)   (the filters, once per call: N C x F matrices, packed for the GEMM; both
//                            over the pool, by blocks of input channels, then one matrix a task)
//   V = B^T d B per (tile, c) (vectorised across C: additions, and for M = 4 multiplies by 2 and 4)
//   M_e = V_e U_e            (N GEMMs, tiles x C times C x F, the packed micro-kernel of gemm.hpp)
//   y = A^T M A + b          (vectorised across F; outputs past OH, OW are not written)
// in chunks of winograd_chunk<G, M> samples (about winograd_chunk_tiles tiles: V and M stay in L2),
// the chunks over the thread pool; every output is computed within one chunk, so the bits do not
// depend on the thread count. winograd_v<G, Arch, T>: the compile-time rule that picks Winograd.
// The multiplies per output: 16 C F / 4 (M = 2) or 36 C F / 16 (M = 4) against 9 C F direct (2.25x
// and 4x fewer on whole tiles); F(4x4)'s rounding error is about 10x F(2x2)'s (test_winograd.cpp).
// winograd_backward_input: dx, the same over dy with the kernel rotated; winograd_backward_weights:
// dW by F(3x3, M x M) over y's M x M tiles (below), from x and dy. Each transform is one loop over the
// tiles written once for both M (detail::winograd_input_of<Arch, M> and the others); what differs, the
// 1-D transform of one column of a tile, is winograd_tf<M>.
// reference: kernels/conv_reference.hpp (direct loops); tests/kernels/test_winograd.cpp compares.
#pragma once
#include <algorithm>
#include <cstddef>
#include <type_traits>

#include <xsimd/xsimd.hpp>

#include "../../config.hpp"
#include "../../core/separate.hpp"
#include "../../kernels/conv_reference.hpp"
#include "../../kernels/functors.hpp"
#include "arch.hpp"
#include "batch_split.hpp"
#include "gemm.hpp"
#include "thread_pool.hpp"

namespace ctnn::kernels::cpu {

// float or double with SIMD; a 3x3 window at stride 1; C and F whole vectors and each at least 16 (below,
// the 16 products are too short for the micro-kernel to beat im2col + one GEMM); the C = 1 first
// layer keeps its direct kernels (conv.hpp's direct_conv_v, tested first there).
template <kernels::conv_geometry G, class Arch, class T>
constexpr bool winograd_v = [] {
  if constexpr (!(std::is_same_v<T, float> || std::is_same_v<T, double>) || !simd_v<T, Arch>) return false;
  else {
    constexpr std::size_t L = xsimd::batch<T, Arch>::size;
    return G.kh == 3 && G.kw == 3 && G.stride == 1 && G.c % L == 0 && G.f % L == 0 && G.c >= 16 && G.f >= 16 &&
           G.oh >= 2 && G.ow >= 2;
  }
}();

inline constexpr int winograd_scratch_tag = 6;  // V and M of a chunk (per thread); + 1: U and its packing
inline constexpr std::size_t winograd_chunk_tiles = 72;
// tiles of M x M outputs a sample (M = 2: F(2x2, 3x3); M = 4: F(4x4, 3x3))
template <kernels::conv_geometry G, std::size_t M = 2>
inline constexpr std::size_t winograd_tiles = (G.oh + M - 1) / M * ((G.ow + M - 1) / M);
template <kernels::conv_geometry G, std::size_t M = 2>
inline constexpr std::size_t winograd_chunk = std::max<std::size_t>(1, winograd_chunk_tiles / winograd_tiles<G, M>);

// The output tile M of winograd_forward (y, and dx through it): 4, F(4x4, 3x3) (6x6 input tiles, 36 products
// C x F a tile), where that takes fewer multiplies a sample than F(2x2, 3x3) (16 a tile of 2x2) and both
// sides of the output are at least 4; else 2. The CNN's conv2 (11 x 11 outputs): 9 x 36 = 324 products a
// sample against 36 x 16 = 576 (0.56x); its dx (13 x 13): 16 x 36 = 576 against 49 x 16 = 784 (0.73x).
// F(4x4)'s points 0, +-1, +-2 (Lavin & Gray) round about 4x more than F(2x2)'s (tests/kernels/test_winograd.cpp
// measures both against a double-precision direct sum).
template <kernels::conv_geometry G, class T>
inline constexpr std::size_t winograd_m =
    (std::is_same_v<T, float> || std::is_same_v<T, double>) && G.oh >= 4 && G.ow >= 4 &&
            36 * winograd_tiles<G, 4> < 16 * winograd_tiles<G, 2>
        ? 4
        : 2;

namespace detail {
// The transforms below are written once over a geometry known at compile time (fixed_geometry<G>: the
// loops' bounds are constants) or at run time (a conv_geometry: the compiled part's one body for every
// layer shape, winograd_input_n and the others below); geometry(g) is the conv_geometry.
using kernels::fixed_geometry;
using kernels::geometry;

// The 1-D transforms of one column of a tile, per output tile M (N = M + 2 points); a tile's 2-D transform
// applies one to each column, then to each row of the result:
//   bt: B^T (the input tile's, N -> N), at: A^T (the output's, N -> M), g: G (the filter's, 3 -> N), and
//   dW's F(3x3, M x M) (below): dy, M x M tiles of dy (M -> N), and dw, the 3x3 output's (N -> 3).
template <std::size_t M>
struct winograd_tf;

// F(2x2, 3x3): B^T = [1 0 -1 0; 0 1 1 0; 0 -1 1 0; 0 1 0 -1], G = [1 0 0; .5 .5 .5; .5 -.5 .5; 0 0 1],
// A^T = [1 1 1 0; 0 1 -1 -1]; dW's F(3x3, 2x2): dy's [1 0; .5 .5; .5 -.5; 0 1], dw's [1 1 1 0; 0 1 -1 0;
// 0 1 1 -1] (the last column's sign: B^T's row 3).
template <>
struct winograd_tf<2> {
  template <class B>
  static CTNN_FORCEINLINE void bt(const B (&d)[4], B (&t)[4]) {
    t[0] = d[0] - d[2];
    t[1] = d[1] + d[2];
    t[2] = d[2] - d[1];
    t[3] = d[1] - d[3];
  }
  template <class B>
  static CTNN_FORCEINLINE void at(const B (&q)[4], B (&o)[2]) {
    o[0] = q[0] + q[1] + q[2];
    o[1] = q[1] - q[2] - q[3];
  }
  template <class B>
  static CTNN_FORCEINLINE void g(const B (&g)[3], B (&u)[4]) {
    using T = typename B::value_type;
    const B h(T(0.5));
    u[0] = g[0];
    u[1] = h * (g[0] + g[1] + g[2]);
    u[2] = h * (g[0] - g[1] + g[2]);
    u[3] = g[2];
  }
  template <class B>
  static CTNN_FORCEINLINE void dy(const B (&g)[2], B (&u)[4]) {
    using T = typename B::value_type;
    const B h(T(0.5));
    u[0] = g[0];
    u[1] = h * (g[0] + g[1]);
    u[2] = h * (g[0] - g[1]);
    u[3] = g[1];
  }
  template <class B>
  static CTNN_FORCEINLINE void dw(const B (&q)[4], B (&o)[3]) {
    o[0] = q[0] + q[1] + q[2];
    o[1] = q[1] - q[2];
    o[2] = q[1] + q[2] - q[3];
  }
};

// F(4x4, 3x3): points 0, 1, -1, 2, -2 and infinity (Lavin & Gray),
// B^T = [4 0 -5 0 1 0; 0 -4 -4 1 1 0; 0 4 -4 -1 1 0; 0 -2 -1 2 1 0; 0 2 -1 -2 1 0; 0 4 0 -5 0 1],
// G = [1/4 0 0; -1/6 -1/6 -1/6; -1/6 1/6 -1/6; 1/24 1/12 1/6; 1/24 -1/12 1/6; 0 0 1],
// A^T = [1 1 1 1 1 0; 0 1 -1 2 -2 0; 0 1 1 4 4 0; 0 1 -1 8 -8 1]; dW's F(3x3, 4x4) reads the same trilinear
// form for the 3x3 output: dy's A (6x4), dw's G^T (3x6).
template <>
struct winograd_tf<4> {
  template <class B>
  static CTNN_FORCEINLINE void bt(const B (&d)[6], B (&t)[6]) {
    using T = typename B::value_type;
    const B four(T(4)), two(T(2));
    t[0] = xsimd::fma(four, d[0] - d[2], d[4] - d[2]);
    t[1] = xsimd::fnma(four, d[1] + d[2], d[3] + d[4]);
    t[2] = xsimd::fma(four, d[1] - d[2], d[4] - d[3]);
    t[3] = xsimd::fma(two, d[3] - d[1], d[4] - d[2]);
    t[4] = xsimd::fnma(two, d[3] - d[1], d[4] - d[2]);
    t[5] = xsimd::fma(four, d[1] - d[3], d[5] - d[3]);
  }
  template <class B>
  static CTNN_FORCEINLINE void at(const B (&m)[6], B (&o)[4]) {
    using T = typename B::value_type;
    const B a = m[1] + m[2], b = m[1] - m[2], c = m[3] + m[4], d = m[3] - m[4];
    o[0] = m[0] + a + c;
    o[1] = xsimd::fma(B(T(2)), d, b);
    o[2] = xsimd::fma(B(T(4)), c, a);
    o[3] = xsimd::fma(B(T(8)), d, b) + m[5];
  }
  template <class B>
  static CTNN_FORCEINLINE void g(const B (&g)[3], B (&u)[6]) {
    using T = typename B::value_type;
    const B s = g[0] + g[2], p = xsimd::fma(B(T(1) / 24), g[0], B(T(1) / 6) * g[2]);
    u[0] = B(T(0.25)) * g[0];
    u[1] = B(T(-1) / 6) * (s + g[1]);
    u[2] = B(T(-1) / 6) * (s - g[1]);
    u[3] = xsimd::fma(B(T(1) / 12), g[1], p);
    u[4] = xsimd::fnma(B(T(1) / 12), g[1], p);
    u[5] = g[2];
  }
  template <class B>
  static CTNN_FORCEINLINE void dy(const B (&g)[4], B (&u)[6]) {
    using T = typename B::value_type;
    const B a = g[0] + g[2], b = g[1] + g[3], c = xsimd::fma(B(T(4)), g[2], g[0]), d = xsimd::fma(B(T(4)), g[3], g[1]);
    u[0] = g[0];
    u[1] = a + b;
    u[2] = a - b;
    u[3] = xsimd::fma(B(T(2)), d, c);
    u[4] = xsimd::fnma(B(T(2)), d, c);
    u[5] = g[3];
  }
  template <class B>
  static CTNN_FORCEINLINE void dw(const B (&m)[6], B (&o)[3]) {
    using T = typename B::value_type;
    const B s = m[1] + m[2], d = m[1] - m[2], p = m[3] + m[4], q = m[3] - m[4];
    const B sixth(T(1) / 6);
    o[0] = xsimd::fma(B(T(1) / 24), p, xsimd::fnma(sixth, s, B(T(0.25)) * m[0]));
    o[1] = xsimd::fnma(sixth, d, B(T(1) / 12) * q);
    o[2] = xsimd::fma(sixth, p - s, m[5]);
  }
};

// U[e][c][f] = (G g G^T)[e], e = N i + j, of the 3x3 filter g = w[., ., c, f], for the input channels c in
// [c0, c1) (c1 = 0: to G.c).
template <class Arch, std::size_t M = 2, class T, class Geometry>
void winograd_filters_of(const Geometry& geo, const T* w, T* u, std::size_t c0 = 0, std::size_t c1 = 0) {
  const kernels::conv_geometry G = geometry(geo);
  using B = xsimd::batch<T, Arch>;
  using W = winograd_tf<M>;
  constexpr std::size_t L = B::size, N = M + 2;
  const std::size_t C = G.c, F = G.f, CF = C * F;
  if (c1 == 0) c1 = C;
  for (std::size_t c = c0; c < c1; ++c)
    for (std::size_t f = 0; f < F; f += L) {
      B t[3][N];  // t[j] = G g[., j]: column j of G g
      for (std::size_t j = 0; j < 3; ++j) {
        B g[3];
        for (std::size_t i = 0; i < 3; ++i) g[i] = B::load_unaligned(w + ((i * 3 + j) * C + c) * F + f);
        W::g(g, t[j]);
      }
      for (std::size_t i = 0; i < N; ++i) {  // row i of (G g) G^T
        B r[3], o[N];
        for (std::size_t k = 0; k < 3; ++k) r[k] = t[k][i];
        W::g(r, o);
        for (std::size_t j = 0; j < N; ++j) o[j].store_unaligned(u + (i * N + j) * CF + c * F + f);
      }
    }
}

// V[e][t][c] = (B^T d B)[e] for the tiles t of samples [n0, n1) (t counted from n0's first tile; N x N tiles
// of x at stride M, positions outside x read as zeros); es: the distance between the N^2 matrices (0:
// (n1 - n0) tiles x C, packed). (C: G.c, an integral constant or a size_t)
template <class Arch, std::size_t M = 2, class T, class Geometry, class Cn>
void winograd_input_of(const Geometry& geo, Cn C, const T* x, T* v, std::size_t n0, std::size_t n1,
                       std::size_t es = 0) {
  const kernels::conv_geometry G = geometry(geo);
  using B = xsimd::batch<T, Arch>;
  using W = winograd_tf<M>;
  constexpr std::size_t L = B::size, N = M + 2;
  const std::size_t TH = (G.oh + M - 1) / M, TW = (G.ow + M - 1) / M;
  if (!es) es = (n1 - n0) * TH * TW * C;
  for (std::size_t n = n0; n < n1; ++n) {
    const T* xs = x + n * G.in_size();
    for (std::size_t th = 0; th < TH; ++th)
      for (std::size_t tw = 0; tw < TW; ++tw) {
        const T* src[N][N];
        for (std::size_t i = 0; i < N; ++i)
          for (std::size_t j = 0; j < N; ++j) {
            const std::size_t rr = M * th + i, ss = M * tw + j;  // padded coordinates
            const bool in = rr >= G.pt && rr - G.pt < G.h && ss >= G.pl && ss - G.pl < G.w;
            src[i][j] = in ? xs + ((rr - G.pt) * G.w + (ss - G.pl)) * C : nullptr;
          }
        T* o = v + (((n - n0) * TH + th) * TW + tw) * C;
        for (std::size_t c = 0; c < C; c += L) {
          B t[N][N];  // t[j] = B^T d[., j]: column j of B^T d
          for (std::size_t j = 0; j < N; ++j) {
            B d[N];
            for (std::size_t i = 0; i < N; ++i) d[i] = src[i][j] ? B::load_unaligned(src[i][j] + c) : B(T(0));
            W::bt(d, t[j]);
          }
          for (std::size_t i = 0; i < N; ++i) {  // row i of (B^T d) B
            B r[N], q[N];
            for (std::size_t k = 0; k < N; ++k) r[k] = t[k][i];
            W::bt(r, q);
            for (std::size_t j = 0; j < N; ++j) q[j].store_unaligned(o + (i * N + j) * es + c);
          }
        }
      }
  }
}

// y of samples [n0, n1) = ep.forward(A^T M A + b) from M[e][t][f] (ep: a rule of kernels/functors.hpp);
// outputs past OH, OW (the last row / column of tiles partly used) are not written. es: the distance between
// the N^2 matrices (0: (n1 - n0) tiles x F, packed). (F: G.f, an integral constant or a size_t)
template <class Arch, std::size_t M = 2, class T, class E, class Geometry, class Fn>
void winograd_output_of(const Geometry& geo, Fn F, const T* m, const T* b, T* y, std::size_t n0, std::size_t n1,
                        const E& ep, std::size_t es = 0) {
  const kernels::conv_geometry G = geometry(geo);
  using B = xsimd::batch<T, Arch>;
  using W = winograd_tf<M>;
  constexpr std::size_t L = B::size, N = M + 2;
  const std::size_t TH = (G.oh + M - 1) / M, TW = (G.ow + M - 1) / M;
  if (!es) es = (n1 - n0) * TH * TW * F;
  for (std::size_t n = n0; n < n1; ++n)
    for (std::size_t th = 0; th < TH; ++th)
      for (std::size_t tw = 0; tw < TW; ++tw) {
        const T* mt = m + (((n - n0) * TH + th) * TW + tw) * F;
        const std::size_t rows = std::min<std::size_t>(M, G.oh - M * th), cols = std::min<std::size_t>(M, G.ow - M * tw);
        T* y0 = y + ((n * G.oh + M * th) * G.ow + M * tw) * F;
        for (std::size_t f = 0; f < F; f += L) {
          B t[N][M];  // t[j] = A^T q[., j]: column j of A^T q
          for (std::size_t j = 0; j < N; ++j) {
            B q[N];
            for (std::size_t i = 0; i < N; ++i) q[i] = B::load_unaligned(mt + (i * N + j) * es + f);
            W::at(q, t[j]);
          }
          const B bv = b ? B::load_unaligned(b + f) : B(T(0));
          for (std::size_t i = 0; i < rows; ++i) {  // row i of (A^T q) A, + b
            B r[N], o[M];
            for (std::size_t k = 0; k < N; ++k) r[k] = t[k][i];
            W::at(r, o);
            T* yr = y0 + i * G.ow * F + f;
            for (std::size_t j = 0; j < cols; ++j) ep.forward(o[j] + bv).store_unaligned(yr + j * F);
          }
        }
      }
}
}  // namespace detail

// The transforms over a run-time geometry g (the same operations in the same order: the same bits):
// one body for every layer shape, which the compiled part holds for float (compiled_kernels.hpp's
// CTNN_DETAIL_WINOGRAD_INSTANCES, M = 2 and 4; the output's for the identity and relu rules); winograd_forward
// calls them in compiled mode. M: the output tile, 2 (F(2x2, 3x3)) or 4 (F(4x4, 3x3)).
template <class Arch, class T, std::size_t M = 2>
void winograd_filters_n(const kernels::conv_geometry& g, const T* w, T* u, std::size_t c0 = 0, std::size_t c1 = 0) {
  detail::winograd_filters_of<Arch, M>(g, w, u, c0, c1);
}
// (the channel loops of the common counts 16 to 256 at compile time: with_common_count, core/separate.hpp)
template <class Arch, class T, std::size_t M = 2>
void winograd_input_n(const kernels::conv_geometry& g, const T* x, T* v, std::size_t n0, std::size_t n1,
                      std::size_t es = 0) {
  ::ctnn::detail::with_common_count(g.c, [&](auto c) { detail::winograd_input_of<Arch, M>(g, c, x, v, n0, n1, es); });
}
// (es: the distance between the matrices of m, 0: packed)
template <class Arch, class T, std::size_t M = 2, class E>
void winograd_output_n(const kernels::conv_geometry& g, const T* m, const T* b, T* y, std::size_t n0, std::size_t n1,
                       const E& ep, std::size_t es = 0) {
  ::ctnn::detail::with_common_count(
      g.f, [&](auto f) { detail::winograd_output_of<Arch, M>(g, f, m, b, y, n0, n1, ep, es); });
}

namespace detail {
// Whether a transform of T (and rule E) comes from the compiled part (compiled mode, float).
template <class T, class E = fn::identity_fn>
inline constexpr bool winograd_compiled = ::ctnn::detail::compiled_part && std::is_same_v<T, float> &&
                                          (std::is_same_v<E, fn::identity_fn> || std::is_same_v<E, fn::relu_fn>);
template <kernels::conv_geometry G, class Arch, class T, std::size_t M = 2>
void winograd_filters(const T* w, T* u, std::size_t c0 = 0, std::size_t c1 = 0) {
  if constexpr (winograd_compiled<T>) winograd_filters_n<Arch, T, M>(G, w, u, c0, c1);
  else winograd_filters_of<Arch, M>(fixed_geometry<G>{}, w, u, c0, c1);
}
template <kernels::conv_geometry G, class Arch, class T, std::size_t M = 2>
void winograd_input(const T* x, T* v, std::size_t n0, std::size_t n1, std::size_t es = 0) {
  constexpr std::integral_constant<std::size_t, G.c> C{};
  if constexpr (winograd_compiled<T>) winograd_input_n<Arch, T, M>(G, x, v, n0, n1, es);
  else winograd_input_of<Arch, M>(fixed_geometry<G>{}, C, x, v, n0, n1, es);
}
template <kernels::conv_geometry G, class Arch, class T, std::size_t M = 2, class E = fn::identity_fn>
void winograd_output(const T* m, const T* b, T* y, std::size_t n0, std::size_t n1, const E& ep = {},
                     std::size_t es = 0) {
  constexpr std::integral_constant<std::size_t, G.f> F{};
  if constexpr (winograd_compiled<T, E>) winograd_output_n<Arch, T, M>(G, m, b, y, n0, n1, ep, es);
  else winograd_output_of<Arch, M>(fixed_geometry<G>{}, F, m, b, y, n0, n1, ep, es);
}
}  // namespace detail

namespace detail {
// winograd_forward's body; prep(c0, c1), when not null, first makes w's input channels [c0, c1) (every tap)
// ready, in the task that transforms them (winograd_backward_input's rotated kernel). U and its packing
// run on the pool when the tiles do: the filters by blocks of input channels, then the N packs one a task
// (the same operations on each value as on one thread: the same bits).
template <kernels::conv_geometry G, class Arch, class T, class E, std::size_t M, class Prep>
void winograd_forward_prepared(const T* x, const T* w, const T* b, T* y, std::size_t batch, const E& ep,
                               const Prep* prep) {
  constexpr std::size_t C = G.c, F = G.f, CF = C * F, PS = packed_size<C, F, T, Arch>, N = (M + 2) * (M + 2);
  constexpr std::size_t chunk = winograd_chunk<G, M>, tiles = winograd_tiles<G, M>;
  const std::size_t chunks = (batch + chunk - 1) / chunk;
  const bool parallel = chunks > 1 && batch * G.out_size() * G.patch() >= sample_split_min;
  T* const u = simd::scratch<T, winograd_scratch_tag + 1>(N * (CF + PS));
  T* const packed = u + N * CF;
  constexpr std::size_t cblocks = std::max<std::size_t>(1, C / 8);  // 8 input channels a task (or more)
  thread_pool& pool = thread_pool::global();
  pool.run(
      cblocks,
      [&](std::size_t t) {
        const std::size_t c0 = C * t / cblocks, c1 = C * (t + 1) / cblocks;
        if (prep) (*prep)(c0, c1);
        winograd_filters<G, Arch, T, M>(w, u, c0, c1);
      },
      parallel);
  pool.run(N, [&](std::size_t e) { pack_weights<C, F, Arch>(u + e * CF, packed + e * PS, packed_rows); }, parallel);
  // M = 4: the 36 matrices of V and of M a cache line more than apart (packed, dx's 64 tiles x 64 channels
  // put them 16 KiB apart: the 36 stores or loads of a tile in one L1 set)
  constexpr std::size_t pad = M == 4 ? 64 / sizeof(T) : 0;
  pool.run(
      chunks,
      [&](std::size_t k) {
        const std::size_t n0 = k * chunk, n1 = std::min(batch, n0 + chunk), mt = (n1 - n0) * tiles;
        const std::size_t vs = mt * C + pad, ms = mt * F + pad;
        T* const v = simd::scratch<T, winograd_scratch_tag>(N * (chunk * tiles * (C + F) + 2 * pad));
        T* const m = v + N * vs;
        detail::winograd_input<G, Arch, T, M>(x, v, n0, n1, vs);
        for (std::size_t e = 0; e < N; ++e)
          dense_forward_packed<C, F, fn::identity_fn, Arch>(v + e * vs, u + e * CF, packed + e * PS,
                                                            static_cast<const T*>(nullptr), m + e * ms, mt);
        detail::winograd_output<G, Arch, T, M>(m, b, y, n0, n1, ep, ms);
      },
      parallel);
}
struct no_prep {
  void operator()(std::size_t, std::size_t) const noexcept {}
};
}  // namespace detail

// y = e.forward(conv(x, w) + b) (b null: no bias; e a rule of kernels/functors.hpp, applied as each
// output is stored) by Winograd F(M x M, 3x3), M = winograd_m<G, T> unless given (N = (M + 2)^2 products a
// tile); winograd_v<G, Arch, T> must hold.
template <kernels::conv_geometry G, class Arch, class T, class E = fn::identity_fn, std::size_t M = winograd_m<G, T>>
void winograd_forward(const T* x, const T* w, const T* b, T* y, std::size_t batch, const E& ep = {}) {
  static_assert(winograd_v<G, Arch, T>, "winograd_forward: the geometry is not a 3x3 stride-1 conv with "
                                            "C and F whole vectors of at least 16");
  static_assert(M == 2 || M == 4, "winograd_forward: the output tile is 2 (F(2x2, 3x3)) or 4 (F(4x4, 3x3))");
  detail::winograd_forward_prepared<G, Arch, T, E, M>(x, w, b, y, batch, ep,
                                                      static_cast<const detail::no_prep*>(nullptr));
}

// The geometry of dX as a convolution: dx [batch, H, W, C] is the correlation of dy [batch, OH, OW, F],
// padded by 2 - pt before (2 - pl) and what reaches H (W) after, with the kernel rotated by 180 degrees
// and C, F swapped (w_dx[i][j][f][c] = w[2 - i][2 - j][c][f]): again a 3x3 stride-1 convolution.
template <kernels::conv_geometry G>
inline constexpr kernels::conv_geometry winograd_dx_geometry{G.oh, G.ow, G.f, G.c, 3, 3, 1, G.h, G.w, 2 - G.pt,
                                                             2 - G.pl};

// The rule for dX: winograd_v of both the layer's geometry and its dX geometry (padding of at most 2).
template <kernels::conv_geometry G, class Arch, class T>
constexpr bool winograd_dx_v = [] {
  if constexpr (!winograd_v<G, Arch, T> || G.pt > 2 || G.pl > 2) return false;
  else return winograd_v<winograd_dx_geometry<G>, Arch, T>;
}();

inline constexpr int winograd_rotated_tag = 13;  // the rotated, transposed kernel of dX

// dx = dL/dx of y = conv(x, w) from dy (overwritten; 3x3, stride 1, pt, pl <= 2) by Winograd F(M x M, 3x3),
// M = winograd_m of the dX geometry unless given.
template <kernels::conv_geometry G, class Arch, class T, std::size_t M = winograd_m<winograd_dx_geometry<G>, T>>
void winograd_backward_input(const T* dy, const T* w, T* dx, std::size_t batch) {
  constexpr kernels::conv_geometry D = winograd_dx_geometry<G>;
  static_assert(winograd_dx_v<G, Arch, T>, "winograd_backward_input: the layer or its dX is not a Winograd geometry");
  static_assert(M == 2 || M == 4, "winograd_backward_input: the output tile is 2 (F(2x2, 3x3)) or 4 (F(4x4, 3x3))");
  constexpr std::size_t C = G.c, F = G.f;
  T* const wr = simd::scratch<T, winograd_rotated_tag>(9 * C * F);
  // the rotated kernel's input channels [f0, f1) (the layer's filters), in the task that transforms them
  const auto rotate = [&](std::size_t f0, std::size_t f1) {
    for (std::size_t i = 0; i < 3; ++i)
      for (std::size_t j = 0; j < 3; ++j) {
        const T* src = w + ((2 - i) * 3 + (2 - j)) * C * F;
        T* dst = wr + (i * 3 + j) * F * C;
        for (std::size_t f = f0; f < f1; ++f)
          for (std::size_t c = 0; c < C; ++c) dst[f * C + c] = src[c * F + f];
      }
  };
  detail::winograd_forward_prepared<D, Arch, T, fn::identity_fn, M>(dy, wr, static_cast<const T*>(nullptr), dx, batch,
                                                                    fn::identity_fn{}, &rotate);
}

// ---- dW by Winograd F(3x3, 2x2) ----
// dW[i][j][c][f] = sum over the samples and outputs (oh, ow) of x[oh + i, ow + j, c] dy[oh, ow, f]: a correlation
// of x with dy whose output is the 3x3 kernel. dy is cut in tiles of 2x2 (the tiles of winograd_forward's
// y: the last row / column of tiles half used, dy read as zero past OH, OW), each with its 4x4 tile of x:
//   V = B^T d B per (tile, c)   (winograd_input, the same tiles as y's)
//   U = G g G^T per (tile, f)   (g the 2x2 tile of dy; G = [1 0; .5 .5; .5 -.5; 0 1])
//   M_e = sum over tiles of V_e^T U_e (16 products C x tiles times tiles x F: dense_backward_weights)
//   dW = A^T M A, A^T = [1 1 1 0; 0 1 -1 0; 0 1 1 -1] (the last column's sign: winograd_input's B^T row 3)
// 16 C F multiplies a tile (1.18 M a sample at the CNN's conv2, against 9 C F 4 = 2.23 M for im2col's product).
// Where winograd_m<G, T> is 4, dW runs by F(3x3, 4x4) instead, over y's 4x4 tiles of dy with x's 6x6 tiles
// (the same trilinear form as F(4x4, 3x3), read for the 3x3 output: B^T as winograd_input_of's, the 4x4 tile's
// transform by F(4x4, 3x3)'s A, the output's by its G^T): 36 C F multiplies a tile (0.66 M a sample at conv2).
// Both written once over M: winograd_tf<M>'s dy and dw transforms.
// Chunks of winograd_dw_chunk<G, M> samples (about 144 tiles of 2x2 or 72 of 4x4) over the thread pool, each
// chunk's dW in `partial` (chunks x 9 C F), summed in chunk order: the bits do not depend on the thread count.
inline constexpr std::size_t winograd_dw_chunk_tiles = 144;
template <kernels::conv_geometry G, std::size_t M = 2>
inline constexpr std::size_t winograd_dw_chunk =
    std::max<std::size_t>(1, winograd_dw_chunk_tiles / (M == 4 ? 2 : 1) / winograd_tiles<G, M>);

namespace detail {
// U[e][t][f] = (D g D^T)[e], e = N i + j, D: winograd_tf<M>::dy, for the M x M tiles t of dy of samples
// [n0, n1) (t counted from n0's first tile; dy read as zero past OH, OW); es: the distance between the N^2
// matrices. Over a compile-time or run-time geometry (as winograd_input_of; F: G.f, an integral constant or
// a size_t).
template <class Arch, std::size_t M = 2, class T, class Geometry, class Fn>
void winograd_grad_tiles_of(const Geometry& geo, Fn F, const T* dy, T* u, std::size_t n0, std::size_t n1,
                            std::size_t es) {
  const kernels::conv_geometry G = geometry(geo);
  using B = xsimd::batch<T, Arch>;
  using W = winograd_tf<M>;
  constexpr std::size_t L = B::size, N = M + 2;
  const std::size_t TH = (G.oh + M - 1) / M, TW = (G.ow + M - 1) / M;
  for (std::size_t n = n0; n < n1; ++n)
    for (std::size_t th = 0; th < TH; ++th)
      for (std::size_t tw = 0; tw < TW; ++tw) {
        const std::size_t rows = std::min<std::size_t>(M, G.oh - M * th), cols = std::min<std::size_t>(M, G.ow - M * tw);
        const T* d0 = dy + ((n * G.oh + M * th) * G.ow + M * tw) * F;
        T* o = u + (((n - n0) * TH + th) * TW + tw) * F;
        for (std::size_t f = 0; f < F; f += L) {
          B t[M][N];  // t[j] = D g[., j]: column j of D g
          for (std::size_t j = 0; j < M; ++j) {
            B g[M];
            for (std::size_t i = 0; i < M; ++i)
              g[i] = i < rows && j < cols ? B::load_unaligned(d0 + (i * G.ow + j) * F + f) : B(T(0));
            W::dy(g, t[j]);
          }
          for (std::size_t i = 0; i < N; ++i) {  // row i of (D g) D^T
            B r[M], q[N];
            for (std::size_t k = 0; k < M; ++k) r[k] = t[k][i];
            W::dy(r, q);
            for (std::size_t j = 0; j < N; ++j) q[j].store_unaligned(o + (i * N + j) * es + f);
          }
        }
      }
}

// dw[i][j][c][f] (overwritten) = (Q M Q^T)[i][j], Q: winograd_tf<M>::dw, of M[e][c][f], CF = C F values (a
// multiple of the lanes).
template <class Arch, std::size_t M = 2, class T, class CFn>
void winograd_grad_output_of(CFn CF, const T* m, T* dw) {
  using B = xsimd::batch<T, Arch>;
  using W = winograd_tf<M>;
  constexpr std::size_t L = B::size, N = M + 2;
  for (std::size_t cf = 0; cf < CF; cf += L) {
    B t[N][3];  // t[j] = Q q[., j]
    for (std::size_t j = 0; j < N; ++j) {
      B q[N];
      for (std::size_t i = 0; i < N; ++i) q[i] = B::load_unaligned(m + (i * N + j) * CF + cf);
      W::dw(q, t[j]);
    }
    for (std::size_t i = 0; i < 3; ++i) {  // row i of (Q q) Q^T
      B r[N], o[3];
      for (std::size_t k = 0; k < N; ++k) r[k] = t[k][i];
      W::dw(r, o);
      for (std::size_t j = 0; j < 3; ++j) o[j].store_unaligned(dw + (i * 3 + j) * CF + cf);
    }
  }
}
}  // namespace detail

// The dW transforms over a run-time geometry g (the same operations in the same order: the same bits),
// which the compiled part holds for float (CTNN_DETAIL_WINOGRAD_INSTANCES, M = 2 and 4); winograd_backward_weights
// calls them in compiled mode (the filter loop of the common counts 16 to 256 at compile time).
template <class Arch, class T, std::size_t M = 2>
void winograd_grad_tiles_n(const kernels::conv_geometry& g, const T* dy, T* u, std::size_t n0, std::size_t n1,
                           std::size_t es) {
  ::ctnn::detail::with_common_count(
      g.f, [&](auto f) { detail::winograd_grad_tiles_of<Arch, M>(g, f, dy, u, n0, n1, es); });
}
template <class Arch, class T, std::size_t M = 2>
void winograd_grad_output_n(const kernels::conv_geometry& g, const T* m, T* dw) {
  detail::winograd_grad_output_of<Arch, M>(g.c * g.f, m, dw);
}

namespace detail {
template <kernels::conv_geometry G, class Arch, class T, std::size_t M = 2>
void winograd_grad_tiles(const T* dy, T* u, std::size_t n0, std::size_t n1, std::size_t es) {
  constexpr std::integral_constant<std::size_t, G.f> F{};
  if constexpr (winograd_compiled<T>) winograd_grad_tiles_n<Arch, T, M>(G, dy, u, n0, n1, es);
  else winograd_grad_tiles_of<Arch, M>(fixed_geometry<G>{}, F, dy, u, n0, n1, es);
}
template <kernels::conv_geometry G, class Arch, class T, std::size_t M = 2>
void winograd_grad_output(const T* m, T* dw) {
  constexpr std::integral_constant<std::size_t, G.c * G.f> CF{};
  if constexpr (winograd_compiled<T>) winograd_grad_output_n<Arch, T, M>(G, m, dw);
  else winograd_grad_output_of<Arch, M>(CF, m, dw);
}
}  // namespace detail

// dw [3, 3, C, F] (overwritten) = dL/dw of y = conv(x, w) from x and dy by Winograd F(3x3, M x M), M =
// winograd_m<G, T> unless given; partial: room for ceil(batch / winograd_dw_chunk<G, M>) x 9 C F values (one
// a sample is always enough). db (when not null, overwritten): the bias gradient, dy's column sums, each
// chunk's rows summed in its task (column_sum over them, while they are in cache) and the chunks' sums added
// in chunk order (in the caller's scratch, winograd_db_tag). The chunks' dW are added in chunk order over the
// pool too (sum_chunks, batch_split.hpp), so neither waits on one thread and the bits do not depend on the
// thread count. winograd_v<G, Arch, T> must hold.
inline constexpr int winograd_db_tag = 14;  // the chunks' column sums of dy (the caller's)
template <kernels::conv_geometry G, class Arch, class T, std::size_t M = winograd_m<G, T>>
void winograd_backward_weights(const T* x, const T* dy, T* dw, T* partial, std::size_t batch, T* db = nullptr) {
  static_assert(winograd_v<G, Arch, T>, "winograd_backward_weights: the geometry is not a 3x3 stride-1 conv with "
                                        "C and F whole vectors of at least 16");
  static_assert(M == 2 || M == 4, "winograd_backward_weights: the tile of dy is 2 (F(3x3, 2x2)) or 4 (F(3x3, 4x4))");
  constexpr std::size_t C = G.c, F = G.f, CF = C * F, PF = 9 * CF, N = (M + 2) * (M + 2);
  constexpr std::size_t chunk = winograd_dw_chunk<G, M>, tiles = winograd_tiles<G, M>;
  const std::size_t chunks = (batch + chunk - 1) / chunk;
  T* const dbp = db ? simd::scratch<T, winograd_db_tag>(chunks * F) : nullptr;
  thread_pool::global().run(
      chunks,
      [&](std::size_t k) {
        const std::size_t n0 = k * chunk, n1 = std::min(batch, n0 + chunk), mt = (n1 - n0) * tiles;
        // winograd_forward's buffer (the two never run at once on a thread): V, U, M; the N matrices of V
        // and U a cache line more than apart (at 144 tiles their 16 stores would be 4 KiB apart: aliased)
        constexpr std::size_t pad = 64 / sizeof(T), vs = chunk * tiles * C + pad, us = chunk * tiles * F + pad;
        T* const v = simd::scratch<T, winograd_scratch_tag>(N * (vs + us + CF));
        T* const u = v + N * vs;
        T* const m = u + N * us;
        detail::winograd_input<G, Arch, T, M>(x, v, n0, n1, vs);
        detail::winograd_grad_tiles<G, Arch, T, M>(dy, u, n0, n1, us);
        if (dbp) column_sum<F, T, Arch>(dy + n0 * G.out_size(), dbp + k * F, (n1 - n0) * G.oh * G.ow);
        for (std::size_t e = 0; e < N; ++e)
          dense_backward_weights<C, F, Arch>(v + e * vs, u + e * us, m + e * CF, static_cast<T*>(nullptr), mt);
        detail::winograd_grad_output<G, Arch, T, M>(m, partial + k * PF);
      },
      chunks > 1 && batch * G.out_size() * G.patch() >= sample_split_min);
  sum_chunks(partial, chunks, PF, dw, PF);
  if (dbp) sum_chunks(dbp, chunks, F, db, F);
}

}  // namespace ctnn::kernels::cpu

// X: `extern template` (declarations) or `template` (definitions); A: the architecture. The run-time-geometry
// transforms for float (the output's for the identity and relu rules), compiled once in the compiled part
// (compiled_kernels.hpp, core/separate.hpp) instead of once per layer shape in every program.
#define CTNN_DETAIL_WINOGRAD_TRANSFORMS(X, A, M)                                                                    \
  X void winograd_filters_n<A, float, M>(const ::ctnn::kernels::conv_geometry&, const float*, float*, std::size_t,  \
                                       std::size_t);                                                                \
  X void winograd_input_n<A, float, M>(const ::ctnn::kernels::conv_geometry&, const float*, float*, std::size_t,   \
                                       std::size_t, std::size_t);                                                   \
  X void winograd_output_n<A, float, M, ::ctnn::fn::identity_fn>(const ::ctnn::kernels::conv_geometry&,            \
                                                                 const float*, const float*, float*, std::size_t,   \
                                                                 std::size_t, const ::ctnn::fn::identity_fn&,       \
                                                                 std::size_t);                                      \
  X void winograd_output_n<A, float, M, ::ctnn::fn::relu_fn>(const ::ctnn::kernels::conv_geometry&, const float*,  \
                                                             const float*, float*, std::size_t, std::size_t,        \
                                                             const ::ctnn::fn::relu_fn&, std::size_t);              \
  X void winograd_grad_tiles_n<A, float, M>(const ::ctnn::kernels::conv_geometry&, const float*, float*, std::size_t, \
                                            std::size_t, std::size_t);                                              \
  X void winograd_grad_output_n<A, float, M>(const ::ctnn::kernels::conv_geometry&, const float*, float*);
#define CTNN_DETAIL_WINOGRAD_INSTANCES(X, A)                                                                        \
  CTNN_DETAIL_WINOGRAD_TRANSFORMS(X, A, 2)                                                                          \
  CTNN_DETAIL_WINOGRAD_TRANSFORMS(X, A, 4)
#if defined(CTNN_COMPILED_KERNELS_DEFINE)
namespace ctnn::kernels::cpu {
CTNN_DETAIL_WINOGRAD_INSTANCES(template, xsimd::default_arch)
}  // namespace ctnn::kernels::cpu
#elif defined(CTNN_COMPILED_KERNELS)
namespace ctnn::kernels::cpu {
CTNN_DETAIL_WINOGRAD_INSTANCES(extern template, xsimd::default_arch)
}  // namespace ctnn::kernels::cpu
#endif
