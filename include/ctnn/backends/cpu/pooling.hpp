// ctnn/kernels/cpu/pooling.hpp — 2D max and average pooling, global average pooling.
//
// Channels-last x[batch, H, W, C] -> y[batch, OH, OW, C] over KHxKW windows
// moved by `stride` (geometry G, f == c). Padding positions never take part:
// a max is taken over the window's positions inside the input, an average
// divides by their count (as TensorFlow's pooling with "same" padding).
// max_pool_forward records, per output, the input offset of the first
// maximal position (row-major window order); max_pool_backward sends the
// output gradient there.
// These loops are direct: they are their own scalar reference, except the
// float max pooling, which runs on xsimd vectors of channels
// (detail::max_pool_forward_simd, and detail::max_pool_backward_simd for
// windows that do not overlap) and is tested bit for bit against the scalar
// loops max_pool_forward_scalar and max_pool_backward_scalar. max_pool_forward
// and max_pool_backward run over the thread pool by samples (batch_split.hpp:
// every output belongs to one sample, so the bits do not depend on the thread count).
// global_average_*: x[batch, P, C] -> y[batch, C], the mean over P positions.
#pragma once
#include <algorithm>
#include <array>
#include <cstdint>
#include <cstring>
#include <cstddef>
#include <limits>
#include <type_traits>

#include <xsimd/xsimd.hpp>

#include "../../config.hpp"
#include "../../core/separate.hpp"
#include "arch.hpp"
#include "batch_split.hpp"
#include "../../kernels/conv_reference.hpp"

namespace ctnn::kernels::cpu {

using kernels::conv_geometry;

namespace detail {
// The window rows [r0, r1) and columns [s0, s1) inside the input, in input coordinates (also the
// int8 pooling's, int8_pool.hpp).
constexpr void window(const conv_geometry& g, std::size_t oh, std::size_t ow, std::size_t& r0, std::size_t& r1,
                      std::size_t& s0, std::size_t& s1) {
  const std::size_t rr = oh * g.stride, ss = ow * g.stride;
  r0 = rr < g.pt ? 0 : rr - g.pt;
  r1 = std::min(g.h, rr + g.kh - g.pt);
  s0 = ss < g.pl ? 0 : ss - g.pl;
  s1 = std::min(g.w, ss + g.kw - g.pl);
}
template <conv_geometry G>
constexpr void window(std::size_t oh, std::size_t ow, std::size_t& r0, std::size_t& r1, std::size_t& s0,
                      std::size_t& s1) {
  window(G, oh, ow, r0, r1, s0, s1);
}

// f(r, s) over the window rows [r0, r1) and columns [s0, s1), row-major. K: the window's side as an
// integral constant, or a size_t (ignored): a whole K x K window then runs with constant trip counts
// (the run-time-geometry entries' common windows, max_pool_forward_n; the same calls in the same order).
template <class Kn, class F>
CTNN_FORCEINLINE void for_window(std::size_t r0, std::size_t r1, std::size_t s0, std::size_t s1, Kn K, F&& f) {
  if constexpr (!std::is_integral_v<Kn>) {
    if (r1 - r0 == K && s1 - s0 == K) {
      for (std::size_t i = 0; i < K; ++i)
        for (std::size_t j = 0; j < K; ++j) f(r0 + i, s0 + j);
      return;
    }
  }
  for (std::size_t r = r0; r < r1; ++r)
    for (std::size_t s = s0; s < s1; ++s) f(r, s);
}

// 0, 1, ..., L-1: the channel offset of each lane (offsets are carried as uint32).
template <class U>
U lane_offsets() {
  alignas(64) std::uint32_t iota[U::size];
  for (std::size_t l = 0; l < U::size; ++l) iota[l] = std::uint32_t(l);
  return U::load_aligned(iota);
}

// c ? a : b on uint32 lanes. xsimd 8.1's select on integer batches for avx512bw calls
// _mm512_mask_blend_epi8 / _epi16 (all sizes instantiated), which GCC 12's headers define as
// macros with C casts when not optimizing: a batch does not convert through them, so g++ -O0
// failed to compile this file for AVX-512 (found by the test programs at -O0). The 32-bit
// blend is a function there.
template <class A>
xsimd::batch<std::uint32_t, A> select_u32(const xsimd::batch_bool<std::uint32_t, A>& c,
                                          const xsimd::batch<std::uint32_t, A>& a,
                                          const xsimd::batch<std::uint32_t, A>& b) {
  if constexpr (std::is_base_of_v<xsimd::avx512f, A>) return _mm512_mask_blend_epi32(c, b, a);
  else return xsimd::select(c, a, b);
}

// The float max pooling, L channels at a time: the running maxima and the
// offsets (uint32 bits carried in float lanes, blended by the same mask) stay
// in registers; the last G.c % L channels run the scalar loop. Ties keep the
// first position, as the scalar loop does. Over a compile-time geometry
// (fixed_geometry<G>, conv_reference.hpp) or a run-time one (max_pool_forward_n); C: G.c, an
// integral constant or a size_t.
template <class Arch, class Geometry, class Cn, class Kn = std::size_t>
void max_pool_forward_simd(const Geometry& geo, Cn C, const float* x, float* y, unsigned char* idx, std::size_t batch,
                           Kn K = 0) {
  const conv_geometry G = geometry(geo);
  using B = xsimd::batch<float, Arch>;
  using U = xsimd::batch<std::uint32_t, Arch>;
  constexpr std::size_t L = B::size;
  const std::size_t CV = C / L * L;
  const U lane = lane_offsets<U>();
  alignas(64) float bits[L];
  for (std::size_t n = 0; n < batch; ++n) {
    const float* xs = x + n * G.in_size();
    for (std::size_t oh = 0; oh < G.oh; ++oh)
      for (std::size_t ow = 0; ow < G.ow; ++ow) {
        const std::size_t o = ((n * G.oh + oh) * G.ow + ow) * C;
        std::size_t r0, r1, s0, s1;
        window(G, oh, ow, r0, r1, s0, s1);
        for (std::size_t c0 = 0; c0 < CV; c0 += L) {
          B mx(std::numeric_limits<float>::lowest());
          B io = xsimd::bitwise_cast<B>(U(std::uint32_t((r0 * G.w + s0) * C + c0)) + lane);
          for_window(r0, r1, s0, s1, K, [&](std::size_t r, std::size_t s) {
            const std::size_t base = (r * G.w + s) * C + c0;
            const B v = B::load_unaligned(xs + base);
            const auto more = v > mx;
            mx = xsimd::select(more, v, mx);
            io = xsimd::select(more, xsimd::bitwise_cast<B>(U(std::uint32_t(base)) + lane), io);
          });
          mx.store_unaligned(y + o + c0);
          io.store_aligned(bits);
          std::memcpy(idx + (o + c0) * sizeof(std::uint32_t), bits, sizeof bits);
        }
        for (std::size_t c = CV; c < C; ++c) {
          float m = std::numeric_limits<float>::lowest();
          std::uint32_t k = std::uint32_t((r0 * G.w + s0) * C + c);
          for (std::size_t r = r0; r < r1; ++r)
            for (std::size_t s = s0; s < s1; ++s) {
              const std::size_t off = (r * G.w + s) * C + c;
              if (xs[off] > m) {
                m = xs[off];
                k = std::uint32_t(off);
              }
            }
          y[o + c] = m;
          std::memcpy(idx + (o + c) * sizeof(std::uint32_t), &k, sizeof k);
        }
      }
  }
}
}  // namespace detail

// y = the window maxima; idx receives, per output o, the offset within its
// sample of the first maximal input (row-major window order), as a 32-bit
// integer at bytes [4o, 4o + 4). idx is raw storage (the layer's cache), so it
// is written and read with memcpy.
// max_pool_forward_scalar is the scalar loop (the reference of the float
// vector path, and the path of other types and of fewer channels than a vector).
template <conv_geometry G, class T>
void max_pool_forward_scalar(const T* x, T* y, unsigned char* idx, std::size_t batch) {
  static_assert(G.in_size() <= 0xFFFFFFFFull, "max_pool2d: a sample is too large for 32-bit indices");
  // The running maxima and their offsets live in local arrays (no aliasing
  // with x), so the channel loops vectorize.
  alignas(64) std::array<std::uint32_t, G.c> io;
  alignas(64) std::array<T, G.c> mx;
  for (std::size_t n = 0; n < batch; ++n) {
    const T* xs = x + n * G.in_size();
    for (std::size_t oh = 0; oh < G.oh; ++oh)
      for (std::size_t ow = 0; ow < G.ow; ++ow) {
        const std::size_t o = ((n * G.oh + oh) * G.ow + ow) * G.c;
        mx.fill(std::numeric_limits<T>::lowest());
        std::size_t r0, r1, s0, s1;
        detail::window<G>(oh, ow, r0, r1, s0, s1);
        // seed with the first position (it stays when every value is -inf or NaN)
        for (std::size_t c = 0; c < G.c; ++c) io[c] = std::uint32_t((r0 * G.w + s0) * G.c + c);
        for (std::size_t r = r0; r < r1; ++r)
          for (std::size_t s = s0; s < s1; ++s) {
            const std::size_t base = (r * G.w + s) * G.c;
            const T* xi = xs + base;
            for (std::size_t c = 0; c < G.c; ++c) {
              const bool more = xi[c] > mx[c];
              mx[c] = more ? xi[c] : mx[c];
              io[c] = more ? std::uint32_t(base + c) : io[c];
            }
          }
        std::memcpy(y + o, mx.data(), G.c * sizeof(T));
        std::memcpy(idx + o * sizeof(std::uint32_t), io.data(), G.c * sizeof(std::uint32_t));
      }
  }
}

template <conv_geometry G, class Arch = default_arch, class T>
void max_pool_forward(const T* x, T* y, unsigned char* idx, std::size_t batch) {
  constexpr std::size_t out = G.oh * G.ow * G.c;
  for_samples(batch, G.in_size(), [&](std::size_t n0, std::size_t n1) {
    const T* xs = x + n0 * G.in_size();
    T* ys = y + n0 * out;
    unsigned char* is = idx + n0 * out * sizeof(std::uint32_t);
    if constexpr (std::is_same_v<T, float> && simd_v<float, Arch> && G.c >= xsimd::batch<float, Arch>::size)
      detail::max_pool_forward_simd<Arch>(fixed_geometry<G>{}, std::integral_constant<std::size_t, G.c>{}, xs, ys, is,
                                          n1 - n0);
    else
      max_pool_forward_scalar<G>(xs, ys, is, n1 - n0);
  });
}

namespace detail {
// max_pool_backward_scalar's body over a compile-time or run-time geometry.
template <class Geometry, class T>
void max_pool_backward_scalar_of(const Geometry& geo, const unsigned char* idx, const T* dy, T* dx,
                                 std::size_t batch) {
  const conv_geometry G = geometry(geo);
  std::fill(dx, dx + batch * G.in_size(), T(0));
  const std::size_t per = G.oh * G.ow * G.c;
  for (std::size_t n = 0; n < batch; ++n) {
    T* dxs = dx + n * G.in_size();
    const unsigned char* is = idx + n * per * sizeof(std::uint32_t);
    const T* d = dy + n * per;
    for (std::size_t o = 0; o < per; ++o) {
      std::uint32_t k;
      std::memcpy(&k, is + o * sizeof(std::uint32_t), sizeof k);
      dxs[k] += d[o];
    }
  }
}
}  // namespace detail

template <conv_geometry G, class T>
void max_pool_backward_scalar(const unsigned char* idx, const T* dy, T* dx, std::size_t batch) {
  detail::max_pool_backward_scalar_of(fixed_geometry<G>{}, idx, dy, dx, batch);
}

namespace detail {
// Float, windows that do not overlap (stride >= window): every input lies in
// at most one window, so each window writes its inputs directly, dy where
// the recorded offset is that input and 0 elsewhere, L channels at a time
// (offsets compared as uint32 vectors). Inputs outside every window (the
// border a valid pooling leaves) are zeroed; when the windows tile the
// input exactly, nothing is written twice and no zero-fill pass is needed.
template <class Arch, class Geometry, class Cn, class Kn = std::size_t>
void max_pool_backward_simd(const Geometry& geo, Cn C, const unsigned char* idx, const float* dy, float* dx,
                            std::size_t batch, Kn K = 0) {
  const conv_geometry G = geometry(geo);
  using B = xsimd::batch<float, Arch>;
  using U = xsimd::batch<std::uint32_t, Arch>;
  constexpr std::size_t L = B::size;
  const std::size_t CV = C / L * L;
  // windows of the stride's size from the origin (no padding before): together they cover [0, RH) x [0, RW)
  // once, and only the border past them (the last row and column of an odd size) is zeroed, not all of dx
  // (nothing when they tile the input exactly)
  const bool from_origin = G.pt == 0 && G.pl == 0 && G.kh == G.stride && G.kw == G.stride;
  const std::size_t RH = std::min(G.h, G.oh * G.stride), RW = std::min(G.w, G.ow * G.stride);
  if (!from_origin) std::fill(dx, dx + batch * G.in_size(), 0.0f);
  const U lane = lane_offsets<U>();
  const std::size_t per = G.oh * G.ow * C;
  for (std::size_t n = 0; n < batch; ++n) {
    float* dxs = dx + n * G.in_size();
    const unsigned char* is = idx + n * per * sizeof(std::uint32_t);
    const float* d = dy + n * per;
    if (from_origin) {
      if (RW < G.w)
        for (std::size_t r = 0; r < RH; ++r) std::fill(dxs + (r * G.w + RW) * C, dxs + (r + 1) * G.w * C, 0.0f);
      if (RH < G.h) std::fill(dxs + RH * G.w * C, dxs + G.in_size(), 0.0f);
    }
    for (std::size_t oh = 0; oh < G.oh; ++oh)
      for (std::size_t ow = 0; ow < G.ow; ++ow) {
        const std::size_t o = (oh * G.ow + ow) * C;
        std::size_t r0, r1, s0, s1;
        window(G, oh, ow, r0, r1, s0, s1);
        for (std::size_t c0 = 0; c0 < CV; c0 += L) {
          alignas(64) std::uint32_t k[L];
          std::memcpy(k, is + (o + c0) * sizeof(std::uint32_t), sizeof k);
          const U kv = U::load_aligned(k);
          const U dbits = xsimd::bitwise_cast<U>(B::load_unaligned(d + o + c0));
          for_window(r0, r1, s0, s1, K, [&](std::size_t r, std::size_t s) {
            const std::size_t base = (r * G.w + s) * C + c0;
            // compared and blended as integers (float compares of the bits would
            // treat the small offsets as denormals, which -ffast-math flushes to 0)
            const auto hit = kv == U(std::uint32_t(base)) + lane;
            xsimd::bitwise_cast<B>(select_u32(hit, dbits, U(0u))).store_unaligned(dxs + base);
          });
        }
        for (std::size_t c = CV; c < C; ++c) {
          std::uint32_t k;
          std::memcpy(&k, is + (o + c) * sizeof(std::uint32_t), sizeof k);
          for (std::size_t r = r0; r < r1; ++r)
            for (std::size_t s = s0; s < s1; ++s) {
              const std::size_t off = (r * G.w + s) * C + c;
              dxs[off] = off == k ? d[o + c] : 0.0f;
            }
        }
      }
  }
}
}  // namespace detail

// dx (overwritten): each dy goes to the input whose offset forward recorded
// in idx. max_pool_backward_scalar is the scalar loop (zero dx, then add each
// dy at its offset), the reference of the float path for non-overlapping
// windows.
template <conv_geometry G, class Arch = default_arch, class T>
void max_pool_backward(const unsigned char* idx, const T* dy, T* dx, std::size_t batch) {
  constexpr std::size_t out = G.oh * G.ow * G.c;
  for_samples(batch, G.in_size(), [&](std::size_t n0, std::size_t n1) {
    const unsigned char* is = idx + n0 * out * sizeof(std::uint32_t);
    const T* ds = dy + n0 * out;
    T* dxs = dx + n0 * G.in_size();
    if constexpr (std::is_same_v<T, float> && simd_v<float, Arch> && G.c >= xsimd::batch<float, Arch>::size &&
                  G.stride >= G.kh && G.stride >= G.kw)
      detail::max_pool_backward_simd<Arch>(fixed_geometry<G>{}, std::integral_constant<std::size_t, G.c>{}, is, ds, dxs,
                                           n1 - n0);
    else
      max_pool_backward_scalar<G>(is, ds, dxs, n1 - n0);
  });
}

// max_pool_forward and max_pool_backward for float over a run-time geometry g (g.f == g.c): the
// same operations in the same order (the same bits), one body for every layer shape, which the
// compiled part holds (CTNN_DETAIL_POOLING_INSTANCES below; ops<cpu<Arch>> calls them in compiled
// mode for the shapes whose compile-time entry takes the vector path: at least one vector of
// channels). Fewer channels than a vector run the vector path's per-channel loop here. Arch names
// the architecture the caller's flags enable, so a program built for another one fails to link
// instead of running the object's code.
template <class Arch>
void max_pool_forward_n(const conv_geometry& g, const float* x, float* y, unsigned char* idx, std::size_t batch) {
  static_assert(simd_v<float, Arch>, "max_pool_forward_n: Arch has no float vectors");
  const std::size_t out = g.oh * g.ow * g.c;
  for_samples(batch, g.in_size(), [&](std::size_t n0, std::size_t n1) {
    ::ctnn::detail::with_common_count(g.c, [&](auto c) {
      const float* xs = x + n0 * g.in_size();
      unsigned char* is = idx + n0 * out * sizeof(std::uint32_t);
      if (g.kh == 2 && g.kw == 2)  // the common 2x2 window: its loops unrolled
        detail::max_pool_forward_simd<Arch>(g, c, xs, y + n0 * out, is, n1 - n0,
                                            std::integral_constant<std::size_t, 2>{});
      else
        detail::max_pool_forward_simd<Arch>(g, c, xs, y + n0 * out, is, n1 - n0);
    });
  });
}
template <class Arch>
void max_pool_backward_n(const conv_geometry& g, const unsigned char* idx, const float* dy, float* dx,
                         std::size_t batch) {
  static_assert(simd_v<float, Arch>, "max_pool_backward_n: Arch has no float vectors");
  const std::size_t out = g.oh * g.ow * g.c;
  const bool apart = g.stride >= g.kh && g.stride >= g.kw;  // windows that do not overlap
  for_samples(batch, g.in_size(), [&](std::size_t n0, std::size_t n1) {
    const unsigned char* is = idx + n0 * out * sizeof(std::uint32_t);
    if (apart)
      ::ctnn::detail::with_common_count(g.c, [&](auto c) {
        float* dxs = dx + n0 * g.in_size();
        if (g.kh == 2 && g.kw == 2)
          detail::max_pool_backward_simd<Arch>(g, c, is, dy + n0 * out, dxs, n1 - n0,
                                               std::integral_constant<std::size_t, 2>{});
        else
          detail::max_pool_backward_simd<Arch>(g, c, is, dy + n0 * out, dxs, n1 - n0);
      });
    else
      detail::max_pool_backward_scalar_of(g, is, dy + n0 * out, dx + n0 * g.in_size(), n1 - n0);
  });
}

template <conv_geometry G, class T>
void average_pool_forward(const T* x, T* y, std::size_t batch) {
  for (std::size_t n = 0; n < batch; ++n) {
    const T* xs = x + n * G.in_size();
    for (std::size_t oh = 0; oh < G.oh; ++oh)
      for (std::size_t ow = 0; ow < G.ow; ++ow) {
        T* yo = y + ((n * G.oh + oh) * G.ow + ow) * G.c;
        std::fill(yo, yo + G.c, T(0));
        std::size_t r0, r1, s0, s1;
        detail::window<G>(oh, ow, r0, r1, s0, s1);
        for (std::size_t r = r0; r < r1; ++r)
          for (std::size_t s = s0; s < s1; ++s) {
            const T* xi = xs + (r * G.w + s) * G.c;
            for (std::size_t c = 0; c < G.c; ++c) yo[c] += xi[c];
          }
        const T inv = T(1) / T((r1 - r0) * (s1 - s0));
        for (std::size_t c = 0; c < G.c; ++c) yo[c] *= inv;
      }
  }
}

template <conv_geometry G, class T>
void average_pool_backward(const T* dy, T* dx, std::size_t batch) {
  std::fill(dx, dx + batch * G.in_size(), T(0));
  for (std::size_t n = 0; n < batch; ++n) {
    T* dxs = dx + n * G.in_size();
    for (std::size_t oh = 0; oh < G.oh; ++oh)
      for (std::size_t ow = 0; ow < G.ow; ++ow) {
        const T* d = dy + ((n * G.oh + oh) * G.ow + ow) * G.c;
        std::size_t r0, r1, s0, s1;
        detail::window<G>(oh, ow, r0, r1, s0, s1);
        const T inv = T(1) / T((r1 - r0) * (s1 - s0));
        for (std::size_t r = r0; r < r1; ++r)
          for (std::size_t s = s0; s < s1; ++s) {
            T* di = dxs + (r * G.w + s) * G.c;
            for (std::size_t c = 0; c < G.c; ++c) di[c] += d[c] * inv;
          }
      }
  }
}

template <std::size_t P, std::size_t C, class T>
void global_average_forward(const T* x, T* y, std::size_t batch) {
  const T inv = T(1) / T(P);
  for (std::size_t n = 0; n < batch; ++n) {
    T* yo = y + n * C;
    std::fill(yo, yo + C, T(0));
    for (std::size_t p = 0; p < P; ++p)
      for (std::size_t c = 0; c < C; ++c) yo[c] += x[(n * P + p) * C + c];
    for (std::size_t c = 0; c < C; ++c) yo[c] *= inv;
  }
}

template <std::size_t P, std::size_t C, class T>
void global_average_backward(const T* dy, T* dx, std::size_t batch) {
  const T inv = T(1) / T(P);
  for (std::size_t n = 0; n < batch; ++n)
    for (std::size_t p = 0; p < P; ++p)
      for (std::size_t c = 0; c < C; ++c) dx[(n * P + p) * C + c] = dy[n * C + c] * inv;
}

}  // namespace ctnn::kernels::cpu

// X: `extern template` (declarations) or `template` (definitions); A: the architecture. Max pooling
// over a run-time geometry for float, compiled once in the compiled part (compiled_kernels.hpp,
// core/separate.hpp) instead of once per layer shape in every program.
#define CTNN_DETAIL_POOLING_INSTANCES(X, A)                                                                  \
  X void max_pool_forward_n<A>(const ::ctnn::kernels::conv_geometry&, const float*, float*, unsigned char*, \
                               std::size_t);                                                                \
  X void max_pool_backward_n<A>(const ::ctnn::kernels::conv_geometry&, const unsigned char*, const float*,  \
                                float*, std::size_t);
