// ctnn/layers/max_pool2d.hpp — max_pool2d<Pool = 2, Stride = Pool, Padding = valid>.
//
// keras.layers.MaxPooling2D with a square window: y[oh, ow, c] is the largest
// x[r, s, c] over the window's positions inside the input (padding never
// wins). Output shape<OH, OW, C> with the Keras formulas (layers/padding.hpp).
// The gradient goes to the first maximal position of each window, whose
// offset forward keeps in the cache (one 32-bit index per output value). No
// parameters.
#pragma once
#include <cstddef>
#include <cstdint>

#include "pool2d.hpp"

namespace ctnn {

namespace detail {
struct max_pool_kind {
  static constexpr const char* name = "max_pool2d";
  static constexpr bool keeps_indices = true;  // one uint32 index per output value, in the cache
  template <class O, kernels::conv_geometry G, class T>
  static void forward(const T* x, T* y, std::uint32_t* idx, std::size_t batch) {
    O::template max_pool_forward<G>(x, y, idx, batch);
  }
  template <class O, kernels::conv_geometry G, class T>
  static void backward(const T* dy, T* dx, const std::uint32_t* idx, std::size_t batch) {
    O::template max_pool_backward<G>(idx, dy, dx, batch);
  }
};
}  // namespace detail

template <std::size_t Pool = 2, std::size_t Stride = Pool, padding Pad = padding::valid>
struct max_pool2d : detail::pool2d_spec<detail::max_pool_kind, Pool, Stride, Pad> {};

}  // namespace ctnn
