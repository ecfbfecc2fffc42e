// ctnn/layers/max_pool2d.hpp — max_pool2d<Pool = 2, Stride = Pool, Padding = valid>.
//
// keras.layers.MaxPooling2D with a square window: y[oh, ow, c] is the largest
// x[r, s, c] over the window's positions inside the input (padding never
// wins). Output shape<OH, OW, C> with the Keras formulas (layers/padding.hpp).
// The gradient goes to the first maximal position of each window. No
// parameters, no cache (backward finds the maxima again from x and y).
#pragma once
#include <cstddef>

#include "../kernels/cpu/pooling.hpp"
#include "pool2d.hpp"

namespace ctnn {

namespace detail {
struct max_pool_kind {
  static constexpr const char* name = "max_pool2d";
  template <kernels::conv_geometry G, class T>
  static void forward(const T* x, T* y, std::size_t batch) {
    kernels::cpu::max_pool_forward<G>(x, y, batch);
  }
  template <kernels::conv_geometry G, class T>
  static void backward(const T* x, const T* y, const T* dy, T* dx, std::size_t batch) {
    kernels::cpu::max_pool_backward<G>(x, y, dy, dx, batch);
  }
};
}  // namespace detail

template <std::size_t Pool = 2, std::size_t Stride = Pool, padding Pad = padding::valid>
struct max_pool2d : detail::pool2d_spec<detail::max_pool_kind, Pool, Stride, Pad> {};

}  // namespace ctnn
