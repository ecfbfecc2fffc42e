// ctnn/backends/cpu/resize.hpp — zero padding and nearest up-sampling of
// channels-last images, x[batch, h, w, c] (kernels::conv_geometry: pt, pl the
// rows / columns added before; oh, ow the output size; kh, kw the up-sampling
// factors). zero_pad_*: y is x placed at (pt, pl) in zeros; its gradient reads
// dy there. up_sample_*: y[r, s] = x[r / kh, s / kw]; its gradient sums the
// kh x kw block (float32 accumulation, double for double). Scalar loops: they
// move memory. The layers: layers/zero_padding2d.hpp, layers/up_sampling2d.hpp.
#pragma once
#include <algorithm>
#include <cstddef>
#include <type_traits>

#include "../../kernels/conv_reference.hpp"

namespace ctnn::kernels::cpu {

template <conv_geometry G, class T>
void zero_pad_forward(const T* x, T* y, std::size_t batch) {
  std::fill(y, y + batch * G.oh * G.ow * G.c, T(0.0f));
  for (std::size_t n = 0; n < batch; ++n)
    for (std::size_t r = 0; r < G.h; ++r)
      std::copy(x + ((n * G.h + r) * G.w) * G.c, x + ((n * G.h + r) * G.w + G.w) * G.c,
                y + ((n * G.oh + r + G.pt) * G.ow + G.pl) * G.c);
}

template <conv_geometry G, class T>
void zero_pad_backward(const T* dy, T* dx, std::size_t batch) {
  for (std::size_t n = 0; n < batch; ++n)
    for (std::size_t r = 0; r < G.h; ++r) {
      const T* from = dy + ((n * G.oh + r + G.pt) * G.ow + G.pl) * G.c;
      std::copy(from, from + G.w * G.c, dx + ((n * G.h + r) * G.w) * G.c);
    }
}

template <conv_geometry G, class T>
void up_sample_forward(const T* x, T* y, std::size_t batch) {
  for (std::size_t n = 0; n < batch; ++n)
    for (std::size_t r = 0; r < G.oh; ++r)
      for (std::size_t s = 0; s < G.ow; ++s) {
        const T* from = x + ((n * G.h + r / G.kh) * G.w + s / G.kw) * G.c;
        std::copy(from, from + G.c, y + ((n * G.oh + r) * G.ow + s) * G.c);
      }
}

template <conv_geometry G, class T>
void up_sample_backward(const T* dy, T* dx, std::size_t batch) {
  for (std::size_t n = 0; n < batch; ++n)
    for (std::size_t r = 0; r < G.h; ++r)
      for (std::size_t s = 0; s < G.w; ++s)
        for (std::size_t c = 0; c < G.c; ++c) {
          using acc = std::conditional_t<std::is_same_v<T, double>, double, float>;
          acc sum = 0;
          for (std::size_t i = 0; i < G.kh; ++i)
            for (std::size_t j = 0; j < G.kw; ++j)
              sum += acc(dy[((n * G.oh + r * G.kh + i) * G.ow + s * G.kw + j) * G.c + c]);
          dx[((n * G.h + r) * G.w + s) * G.c + c] = T(sum);
        }
}

}  // namespace ctnn::kernels::cpu
