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

#include "../kernels/cpu/pooling.hpp"
#include "pool2d.hpp"

namespace ctnn {

namespace detail {
struct max_pool_kind {
  static constexpr const char* name = "max_pool2d";
  static constexpr bool keeps_indices = true;  // one index per output value, in the cache
  template <kernels::conv_geometry G, class T>
  static void forward(const T* x, T* y, T* cache, std::size_t batch) {
    static_assert(sizeof(T) >= sizeof(std::uint32_t));
    kernels::cpu::max_pool_forward<G>(x, y, reinterpret_cast<unsigned char*>(cache), batch);
  }
  template <kernels::conv_geometry G, class T>
  static void backward(const T*, const T*, const T* dy, T* dx, T* cache, std::size_t batch) {
    kernels::cpu::max_pool_backward<G>(reinterpret_cast<const unsigned char*>(cache), dy, dx, batch);
  }
};
}  // namespace detail

template <std::size_t Pool = 2, std::size_t Stride = Pool, padding Pad = padding::valid>
struct max_pool2d : detail::pool2d_spec<detail::max_pool_kind, Pool, Stride, Pad> {};

}  // namespace ctnn
