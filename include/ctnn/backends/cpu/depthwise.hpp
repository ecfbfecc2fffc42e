// ctnn/backends/cpu/depthwise.hpp — the depthwise convolution on the CPU.
//
// Channels-last x[batch, H, W, C] -> y[batch, OH, OW, C M] (geometry G with
// G.c = C and G.f = C M, M the depth multiplier): output channel j = c M + m
// of position (oh, ow) is b[j] + sum over the window offsets (i, k) inside the
// input of x[oh S + i - pt, ow S + k - pl, c] w[i, k, j], the kernel in Keras'
// layout [KH, KW, C, M] (so w[i, k, c M + m] is its flat index (i KW + k) C M + j).
// b may be null (separable_conv2d's depthwise step has no bias).
// depthwise_backward writes (overwrites) dw = dL/dw, db = dL/db (when not null)
// and dx = dL/dx (when not null) from dz = dL/dy.
//
// The *_scalar functions are the plain loops (accumulating in
// precision::arithmetic_t<T>, so every element type runs them) and the
// reference of the vector path. With M == 1 (MobileNet's depthwise layers) and
// float or double, the vector path runs L = xsimd::batch<T, Arch>::size channels
// at a time, the window's products fused (xsimd::fma); the last C % L channels
// and M > 1 run the scalar loops. Threads: the forward and dx split the batch
// by samples (every output belongs to one sample), dw and db split the channels
// in whole vectors, each channel summed over the batch in sample order on one
// thread: the bits do not depend on the thread count.
#pragma once
#include <algorithm>
#include <cstddef>
#include <type_traits>
#include <utility>
#include <vector>

#include "../../core/precision.hpp"
#include "../../kernels/conv_reference.hpp"
#include <xsimd/xsimd.hpp>

#include "arch.hpp"
#include "batch_split.hpp"
#include "thread_pool.hpp"

namespace ctnn::kernels::cpu {

using kernels::conv_geometry;

namespace detail {
// The input position of window offset (i, k) at output (oh, ow), false when it is padding.
template <conv_geometry G>
constexpr bool depthwise_source(std::size_t oh, std::size_t ow, std::size_t i, std::size_t k, std::size_t& r,
                                std::size_t& s) {
  const std::size_t rr = oh * G.stride + i, ss = ow * G.stride + k;
  if (rr < G.pt || ss < G.pl) return false;
  r = rr - G.pt;
  s = ss - G.pl;
  return r < G.h && s < G.w;
}
}  // namespace detail

// ---- scalar loops (the reference) ----

template <conv_geometry G, std::size_t M, class T>
void depthwise_forward_scalar(const T* x, const T* w, const T* b, T* y, std::size_t n0, std::size_t n1) {
  static_assert(G.f == G.c * M, "depthwise: G.f must be C M");
  using A = precision::arithmetic_t<T>;
  for (std::size_t n = n0; n < n1; ++n) {
    const T* xs = x + n * G.in_size();
    for (std::size_t oh = 0; oh < G.oh; ++oh)
      for (std::size_t ow = 0; ow < G.ow; ++ow) {
        T* yo = y + ((n * G.oh + oh) * G.ow + ow) * G.f;
        for (std::size_t j = 0; j < G.f; ++j) {
          A acc = b ? A(b[j]) : A(0);
          for (std::size_t i = 0; i < G.kh; ++i)
            for (std::size_t k = 0; k < G.kw; ++k) {
              std::size_t r, s;
              if (!detail::depthwise_source<G>(oh, ow, i, k, r, s)) continue;
              acc += A(xs[(r * G.w + s) * G.c + j / M]) * A(w[(i * G.kw + k) * G.f + j]);
            }
          yo[j] = T(acc);
        }
      }
  }
}

// dx for samples [n0, n1) (overwritten), scattered window by window in output order.
template <conv_geometry G, std::size_t M, class T>
void depthwise_backward_input_scalar(const T* dz, const T* w, T* dx, std::size_t n0, std::size_t n1) {
  using A = precision::arithmetic_t<T>;
  std::vector<A> acc(G.in_size());
  for (std::size_t n = n0; n < n1; ++n) {
    std::fill(acc.begin(), acc.end(), A(0));
    for (std::size_t oh = 0; oh < G.oh; ++oh)
      for (std::size_t ow = 0; ow < G.ow; ++ow) {
        const T* d = dz + ((n * G.oh + oh) * G.ow + ow) * G.f;
        for (std::size_t i = 0; i < G.kh; ++i)
          for (std::size_t k = 0; k < G.kw; ++k) {
            std::size_t r, s;
            if (!detail::depthwise_source<G>(oh, ow, i, k, r, s)) continue;
            A* a = acc.data() + (r * G.w + s) * G.c;
            const T* wk = w + (i * G.kw + k) * G.f;
            for (std::size_t j = 0; j < G.f; ++j) a[j / M] += A(d[j]) * A(wk[j]);
          }
      }
    T* dxs = dx + n * G.in_size();
    for (std::size_t q = 0; q < G.in_size(); ++q) dxs[q] = T(acc[q]);
  }
}

// dw, db (when not null) for output channels [j0, j1), summed over the whole batch in sample order.
template <conv_geometry G, std::size_t M, class T>
void depthwise_backward_weights_scalar(const T* x, const T* dz, T* dw, T* db, std::size_t batch, std::size_t j0,
                                       std::size_t j1) {
  using A = precision::arithmetic_t<T>;
  constexpr std::size_t KK = G.kh * G.kw;
  for (std::size_t j = j0; j < j1; ++j) {
    A acc[KK] = {};
    A bias = A(0);
    for (std::size_t n = 0; n < batch; ++n) {
      const T* xs = x + n * G.in_size();
      for (std::size_t oh = 0; oh < G.oh; ++oh)
        for (std::size_t ow = 0; ow < G.ow; ++ow) {
          const A d = A(dz[((n * G.oh + oh) * G.ow + ow) * G.f + j]);
          bias += d;
          for (std::size_t i = 0; i < G.kh; ++i)
            for (std::size_t k = 0; k < G.kw; ++k) {
              std::size_t r, s;
              if (!detail::depthwise_source<G>(oh, ow, i, k, r, s)) continue;
              acc[i * G.kw + k] += d * A(xs[(r * G.w + s) * G.c + j / M]);
            }
        }
    }
    for (std::size_t p = 0; p < KK; ++p) dw[p * G.f + j] = T(acc[p]);
    if (db) db[j] = T(bias);
  }
}

// ---- the vector path (M == 1, float or double) ----
// Each window offset's work is unrolled with a compile-time index (for_taps), so the KH KW
// accumulators of the weight gradient stay in registers.

namespace detail {
template <std::size_t N, class F>
inline void for_taps(F&& f) {
  [&]<std::size_t... P>(std::index_sequence<P...>) {
    (f(std::integral_constant<std::size_t, P>{}), ...);
  }(std::make_index_sequence<N>{});
}
// Whether the whole window of output (oh, ow) lies inside the input (no padding check needed).
template <conv_geometry G>
constexpr bool window_inside(std::size_t oh, std::size_t ow) {
  const std::size_t r0 = oh * G.stride, s0 = ow * G.stride;
  return r0 >= G.pt && r0 + G.kh <= G.h + G.pt && s0 >= G.pl && s0 + G.kw <= G.w + G.pl;
}
}  // namespace detail

template <conv_geometry G, std::size_t M, class Arch, class T>
inline constexpr bool depthwise_simd_v = M == 1 && simd_v<T, Arch> && (G.c >= xsimd::batch<T, Arch>::size);

namespace detail {
template <conv_geometry G, class Arch, class T>
void depthwise_forward_simd(const T* x, const T* w, const T* b, T* y, std::size_t n0, std::size_t n1) {
  using B = xsimd::batch<T, Arch>;
  constexpr std::size_t L = B::size, CV = G.c / L * L, KK = G.kh * G.kw;
  for (std::size_t n = n0; n < n1; ++n) {
    const T* xs = x + n * G.in_size();
    for (std::size_t oh = 0; oh < G.oh; ++oh) {
      T* yr = y + (n * G.oh + oh) * G.ow * G.c;
      // L channels along a whole output row, their KH KW weights held in registers
      for (std::size_t c0 = 0; c0 < CV; c0 += L) {
        B wv[KK];
        for_taps<KK>([&](auto tap) { wv[tap] = B::load_unaligned(w + tap * G.c + c0); });
        const B bias = b ? B::load_unaligned(b + c0) : B(T(0));
        for (std::size_t ow = 0; ow < G.ow; ++ow) {
          B acc = bias;
          if (window_inside<G>(oh, ow)) {
            const T* x0 = xs + ((oh * G.stride - G.pt) * G.w + ow * G.stride - G.pl) * G.c + c0;
            for_taps<KK>([&](auto tap) {
              constexpr std::size_t i = tap / G.kw, k = tap % G.kw;
              acc = xsimd::fma(B::load_unaligned(x0 + (i * G.w + k) * G.c), wv[tap], acc);
            });
          } else {
            for_taps<KK>([&](auto tap) {
              constexpr std::size_t i = tap / G.kw, k = tap % G.kw;
              std::size_t r, s;
              if (depthwise_source<G>(oh, ow, i, k, r, s))
                acc = xsimd::fma(B::load_unaligned(xs + (r * G.w + s) * G.c + c0), wv[tap], acc);
            });
          }
          acc.store_unaligned(yr + ow * G.c + c0);
        }
      }
      for (std::size_t ow = 0; ow < G.ow; ++ow)
        for (std::size_t c = CV; c < G.c; ++c) {
          T acc = b ? b[c] : T(0);
          for (std::size_t i = 0; i < G.kh; ++i)
            for (std::size_t k = 0; k < G.kw; ++k) {
              std::size_t r, s;
              if (!depthwise_source<G>(oh, ow, i, k, r, s)) continue;
              acc += xs[(r * G.w + s) * G.c + c] * w[(i * G.kw + k) * G.c + c];
            }
          yr[ow * G.c + c] = acc;
        }
    }
  }
}

// dx gathered: each input position sums, over the window offsets (i, k) whose output
// (r + pt - i, s + pl - k) / stride exists, dz there times w[i, k] (loads only, one store).
template <conv_geometry G, class Arch, class T>
void depthwise_backward_input_simd(const T* dz, const T* w, T* dx, std::size_t n0, std::size_t n1) {
  using B = xsimd::batch<T, Arch>;
  constexpr std::size_t L = B::size, CV = G.c / L * L, KK = G.kh * G.kw;
  for (std::size_t n = n0; n < n1; ++n) {
    const T* ds = dz + n * G.out_size();
    for (std::size_t r = 0; r < G.h; ++r) {
      T* ar = dx + (n * G.h + r) * G.w * G.c;
      // the output feeding (r, s) through offset (i, k), or false
      auto source = [&](std::size_t s, std::size_t i, std::size_t k, std::size_t& o) {
        const std::size_t rr = r + G.pt, ss = s + G.pl;
        if (rr < i || ss < k || (rr - i) % G.stride || (ss - k) % G.stride) return false;
        const std::size_t oh = (rr - i) / G.stride, ow = (ss - k) / G.stride;
        if (oh >= G.oh || ow >= G.ow) return false;
        o = (oh * G.ow + ow) * G.c;
        return true;
      };
      for (std::size_t c0 = 0; c0 < CV; c0 += L) {
        B wv[KK];
        for_taps<KK>([&](auto tap) { wv[tap] = B::load_unaligned(w + tap * G.c + c0); });
        for (std::size_t s = 0; s < G.w; ++s) {
          B acc(T(0));
          for_taps<KK>([&](auto tap) {
            constexpr std::size_t i = tap / G.kw, k = tap % G.kw;
            std::size_t o;
            if (source(s, i, k, o)) acc = xsimd::fma(B::load_unaligned(ds + o + c0), wv[tap], acc);
          });
          acc.store_unaligned(ar + s * G.c + c0);
        }
      }
      for (std::size_t s = 0; s < G.w; ++s)
        for (std::size_t c = CV; c < G.c; ++c) {
          T acc(0);
          for (std::size_t i = 0; i < G.kh; ++i)
            for (std::size_t k = 0; k < G.kw; ++k) {
              std::size_t o;
              if (source(s, i, k, o)) acc += ds[o + c] * w[(i * G.kw + k) * G.c + c];
            }
          ar[s * G.c + c] = acc;
        }
    }
  }
}

// dw, db for the channels [c0, c1) (c0 a multiple of L; c1 too, or G.c). Row by row: each
// output row's sums for L channels gather in registers (KH KW + 1 vectors), then are added to
// the channels' running sums (in memory, per vector of channels), so every row's data is read
// once, contiguously, for all the range's channels.
template <conv_geometry G, class Arch, class T>
void depthwise_backward_weights_simd(const T* x, const T* dz, T* dw, T* db, std::size_t batch, std::size_t c0,
                                     std::size_t c1) {
  using B = xsimd::batch<T, Arch>;
  constexpr std::size_t L = B::size, CV = G.c / L * L, KK = G.kh * G.kw;
  const std::size_t v1 = std::min(c1, CV), vectors = v1 > c0 ? (v1 - c0) / L : 0;
  std::vector<T> sums(vectors * (KK + 1) * L, T(0));  // per vector of channels: KK taps, then the bias
  for (std::size_t n = 0; n < batch; ++n) {
    const T* xs = x + n * G.in_size();
    for (std::size_t oh = 0; oh < G.oh; ++oh) {
      const T* dr = dz + (n * G.oh + oh) * G.ow * G.c;
      for (std::size_t v = 0; v < vectors; ++v) {
        const std::size_t c = c0 + v * L;
        B acc[KK];
        for_taps<KK>([&](auto tap) { acc[tap] = B(T(0)); });
        B bias(T(0));
        for (std::size_t ow = 0; ow < G.ow; ++ow) {
          const B d = B::load_unaligned(dr + ow * G.c + c);
          bias += d;
          if (window_inside<G>(oh, ow)) {
            const T* x0 = xs + ((oh * G.stride - G.pt) * G.w + ow * G.stride - G.pl) * G.c + c;
            for_taps<KK>([&](auto tap) {
              constexpr std::size_t i = tap / G.kw, k = tap % G.kw;
              acc[tap] = xsimd::fma(d, B::load_unaligned(x0 + (i * G.w + k) * G.c), acc[tap]);
            });
          } else {
            for_taps<KK>([&](auto tap) {
              constexpr std::size_t i = tap / G.kw, k = tap % G.kw;
              std::size_t r, s;
              if (depthwise_source<G>(oh, ow, i, k, r, s))
                acc[tap] = xsimd::fma(d, B::load_unaligned(xs + (r * G.w + s) * G.c + c), acc[tap]);
            });
          }
        }
        T* sv = sums.data() + v * (KK + 1) * L;
        for_taps<KK>([&](auto tap) { (B::load_unaligned(sv + tap * L) + acc[tap]).store_unaligned(sv + tap * L); });
        (B::load_unaligned(sv + KK * L) + bias).store_unaligned(sv + KK * L);
      }
    }
  }
  for (std::size_t v = 0; v < vectors; ++v) {
    const T* sv = sums.data() + v * (KK + 1) * L;
    for (std::size_t p = 0; p < KK; ++p) std::copy(sv + p * L, sv + (p + 1) * L, dw + p * G.c + c0 + v * L);
    if (db) std::copy(sv + KK * L, sv + (KK + 1) * L, db + c0 + v * L);
  }
  if (c1 > CV) depthwise_backward_weights_scalar<G, 1>(x, dz, dw, db, batch, std::max(c0, CV), c1);
}
}  // namespace detail

// ---- the ops ----

template <conv_geometry G, std::size_t M, class Arch = default_arch, class T>
void depthwise_forward(const T* x, const T* w, const T* b, T* y, std::size_t batch) {
  for_samples(batch, G.out_size() * G.kh * G.kw, [&](std::size_t n0, std::size_t n1) {
    if constexpr (depthwise_simd_v<G, M, Arch, T>)
      detail::depthwise_forward_simd<G, Arch>(x, w, b, y, n0, n1);
    else
      depthwise_forward_scalar<G, M>(x, w, b, y, n0, n1);
  });
}

template <conv_geometry G, std::size_t M, class Arch = default_arch, class T>
void depthwise_backward(const T* x, const T* dz, const T* w, T* dw, T* db, T* dx, std::size_t batch) {
  // dw, db: the channels in whole vectors over the pool (one task per block of them).
  constexpr std::size_t L = depthwise_simd_v<G, M, Arch, T> ? xsimd::batch<T, Arch>::size : 1;
  constexpr std::size_t vectors = (G.f + L - 1) / L;
  thread_pool& pool = thread_pool::global();
  const std::size_t tasks = batch * G.out_size() * G.kh * G.kw < sample_split_min ? 1 : std::min(vectors, pool.size());
  auto weights = [&](std::size_t t) {
    const std::size_t j0 = std::min(G.f, vectors * t / tasks * L), j1 = std::min(G.f, vectors * (t + 1) / tasks * L);
    if constexpr (depthwise_simd_v<G, M, Arch, T>)
      detail::depthwise_backward_weights_simd<G, Arch>(x, dz, dw, db, batch, j0, j1);
    else
      depthwise_backward_weights_scalar<G, M>(x, dz, dw, db, batch, j0, j1);
  };
  if (tasks <= 1) weights(0);
  else pool.run(tasks, weights);
  if (!dx) return;
  for_samples(batch, G.out_size() * G.kh * G.kw, [&](std::size_t n0, std::size_t n1) {
    if constexpr (depthwise_simd_v<G, M, Arch, T>)
      detail::depthwise_backward_input_simd<G, Arch>(dz, w, dx, n0, n1);
    else
      depthwise_backward_input_scalar<G, M>(dz, w, dx, n0, n1);
  });
}

}  // namespace ctnn::kernels::cpu
