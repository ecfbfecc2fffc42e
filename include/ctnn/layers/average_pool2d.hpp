// ctnn/layers/average_pool2d.hpp — average_pool2d<Pool = 2, Stride = Pool, Padding = valid>.
//
// keras.layers.AveragePooling2D with a square window: y[oh, ow, c] is the mean
// of x[r, s, c] over the window's positions inside the input; with same
// padding, windows at the border divide by the number of real positions, as
// TensorFlow does. Output shape<OH, OW, C> with the Keras formulas
// (layers/padding.hpp). No parameters, no cache.
#pragma once
#include <cstddef>
#include <cstdint>

#include "pool2d.hpp"

namespace ctnn {

namespace detail {
struct average_pool_kind {
  static constexpr const char* name = "average_pool2d";
  static constexpr bool keeps_indices = false;
  template <class O, kernels::conv_geometry G, class T>
  static void forward(const T* x, T* y, std::uint32_t*, std::size_t batch) {
    O::template average_pool_forward<G>(x, y, batch);
  }
  template <class O, kernels::conv_geometry G, class T>
  static void backward(const T* dy, T* dx, const std::uint32_t*, std::size_t batch) {
    O::template average_pool_backward<G>(dy, dx, batch);
  }
};
}  // namespace detail

template <std::size_t Pool = 2, std::size_t Stride = Pool, padding Pad = padding::valid>
struct average_pool2d : detail::pool2d_spec<detail::average_pool_kind, Pool, Stride, Pad> {};

}  // namespace ctnn
