// ctnn/kernels/conv_reference.hpp — direct (scalar) 2D convolution.
//
// The definition the fast convolution (conv.hpp) is tested against. Tensors
// are channels-last and row-major: x[batch, H, W, C], y[batch, OH, OW, F],
// kernel w[KH, KW, C, F] (Keras' layout), bias b[F] (may be null). Positions
// outside the input (the padding) read as zero:
//   y[n, oh, ow, f] = b[f] + sum_{i, j, c} x[n, oh*S + i - pt, ow*S + j - pl, c] * w[i, j, c, f]
// conv_backward computes dw, db (overwritten) and, when dx is not null, dx
// (overwritten) from dy.
#pragma once
#include <algorithm>
#include <cstddef>

namespace ctnn::kernels {

// The sizes of one convolution or pooling window sweep (a structural type, so
// it can be a template argument of the fast kernels).
struct conv_geometry {
  std::size_t h = 0, w = 0, c = 0;    // input height, width, channels
  std::size_t f = 0;                  // output channels (filters); pooling: = c
  std::size_t kh = 0, kw = 0;         // window height, width
  std::size_t stride = 1;
  std::size_t oh = 0, ow = 0;         // output height, width
  std::size_t pt = 0, pl = 0;         // padding before the first row / column
  constexpr std::size_t in_size() const { return h * w * c; }
  constexpr std::size_t out_size() const { return oh * ow * f; }
  constexpr std::size_t patch() const { return kh * kw * c; }  // one im2col row
};

// A kernel body written once over a geometry known at compile time (fixed_geometry<G>: its loops'
// bounds are constants) or at run time (a conv_geometry: the compiled part's one body for every layer
// shape); geometry(g) is the conv_geometry (backends/cpu/winograd.hpp, pooling.hpp).
template <conv_geometry G>
struct fixed_geometry {};
template <conv_geometry G>
constexpr conv_geometry geometry(fixed_geometry<G>) noexcept {
  return G;
}
constexpr const conv_geometry& geometry(const conv_geometry& g) noexcept { return g; }

namespace reference {

// Input row and column of window offset (i, j) at output (oh, ow); false when
// that position is padding.
inline bool conv_source(const conv_geometry& g, std::size_t oh, std::size_t ow, std::size_t i, std::size_t j,
                        std::size_t& r, std::size_t& s) {
  const std::size_t rr = oh * g.stride + i, ss = ow * g.stride + j;
  if (rr < g.pt || ss < g.pl) return false;
  r = rr - g.pt;
  s = ss - g.pl;
  return r < g.h && s < g.w;
}

template <class T>
void conv_forward(const conv_geometry& g, const T* x, const T* w, const T* b, T* y, std::size_t batch) {
  for (std::size_t n = 0; n < batch; ++n)
    for (std::size_t oh = 0; oh < g.oh; ++oh)
      for (std::size_t ow = 0; ow < g.ow; ++ow)
        for (std::size_t f = 0; f < g.f; ++f) {
          T acc = b ? b[f] : T(0);
          for (std::size_t i = 0; i < g.kh; ++i)
            for (std::size_t j = 0; j < g.kw; ++j) {
              std::size_t r, s;
              if (!conv_source(g, oh, ow, i, j, r, s)) continue;
              for (std::size_t c = 0; c < g.c; ++c)
                acc += x[((n * g.h + r) * g.w + s) * g.c + c] * w[((i * g.kw + j) * g.c + c) * g.f + f];
            }
          y[((n * g.oh + oh) * g.ow + ow) * g.f + f] = acc;
        }
}

template <class T>
void conv_backward(const conv_geometry& g, const T* x, const T* w, const T* dy, T* dw, T* db, T* dx,
                   std::size_t batch) {
  std::fill(dw, dw + g.patch() * g.f, T(0));
  std::fill(db, db + g.f, T(0));
  if (dx) std::fill(dx, dx + batch * g.in_size(), T(0));
  for (std::size_t n = 0; n < batch; ++n)
    for (std::size_t oh = 0; oh < g.oh; ++oh)
      for (std::size_t ow = 0; ow < g.ow; ++ow)
        for (std::size_t f = 0; f < g.f; ++f) {
          const T d = dy[((n * g.oh + oh) * g.ow + ow) * g.f + f];
          db[f] += d;
          for (std::size_t i = 0; i < g.kh; ++i)
            for (std::size_t j = 0; j < g.kw; ++j) {
              std::size_t r, s;
              if (!conv_source(g, oh, ow, i, j, r, s)) continue;
              for (std::size_t c = 0; c < g.c; ++c) {
                const std::size_t xi = ((n * g.h + r) * g.w + s) * g.c + c, wi = ((i * g.kw + j) * g.c + c) * g.f + f;
                dw[wi] += x[xi] * d;
                if (dx) dx[xi] += w[wi] * d;
              }
            }
        }
}

}  // namespace reference
}  // namespace ctnn::kernels
