// ctnn/kernels/cpu/conv.hpp — 2D convolution as im2col + the dense GEMMs.
//
// With the geometry G a compile-time constant, conv_forward<G> gathers every
// output position's input patch into a row of `cols` (im2col: rows
// batch*OH*OW, columns KH*KW*C, padding as zeros) and multiplies by the
// kernel [KH*KW*C, F] with dense_forward (gemm.hpp), so the convolution runs
// on whatever GEMM stands behind those entry points. conv_backward<G> takes
// the same `cols` (kept from forward) for dW = cols^T dY and db, then, when dx
// is wanted, reuses `cols` for dcols = dY W^T and scatters it back (col2im).
// reference: kernels/cpu/conv_reference.hpp (direct loops); tests compare.
#pragma once
#include <algorithm>
#include <cstddef>
#include <cstring>

#include "../../kernels/conv_reference.hpp"
#include "gemm.hpp"

namespace ctnn::kernels::cpu {

using kernels::conv_geometry;

template <conv_geometry G, class T>
void im2col(const T* x, T* cols, std::size_t batch) {
  constexpr std::size_t P = G.patch();
  for (std::size_t n = 0; n < batch; ++n) {
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

// dx = 0, then every column value is added back to the input position it came from.
template <conv_geometry G, class T>
void col2im(const T* cols, T* dx, std::size_t batch) {
  constexpr std::size_t P = G.patch();
  std::fill(dx, dx + batch * G.in_size(), T(0));
  for (std::size_t n = 0; n < batch; ++n) {
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

// y[batch*OH*OW, F] = im2col(x) * w + b; cols must hold batch * OH*OW * KH*KW*C values.
template <conv_geometry G, class Arch = default_arch, class T>
void conv_forward(const T* x, const T* w, const T* b, T* y, T* cols, std::size_t batch) {
  im2col<G>(x, cols, batch);
  dense_forward<G.patch(), G.f, fn::identity_fn, Arch>(cols, w, b, y, batch * G.oh * G.ow);
}

// cols: what conv_forward left there (overwritten when dx is wanted).
template <conv_geometry G, class Arch = default_arch, class T>
void conv_backward(const T* dy, const T* w, T* dw, T* db, T* dx, T* cols, std::size_t batch) {
  const std::size_t m = batch * G.oh * G.ow;
  dense_backward_weights<G.patch(), G.f, Arch>(cols, dy, dw, db, m);
  if (!dx) return;
  dense_backward_input<G.patch(), G.f, Arch>(dy, w, cols, m);
  col2im<G>(cols, dx, batch);
}

}  // namespace ctnn::kernels::cpu
