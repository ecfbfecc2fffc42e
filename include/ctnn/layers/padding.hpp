// ctnn/layers/padding.hpp — padding modes and the Keras output-size formulas.
//
// padding::valid: no padding; out = floor((in - window) / stride) + 1, and the
// window must fit (in >= window). padding::same: out = ceil(in / stride); the
// input is padded with pad_total = max((out - 1) * stride + window - in, 0),
// pad_total / 2 before and the rest after (as TensorFlow/Keras). These are
// the formulas of keras.layers.Conv2D and of the 2D pooling layers.
// channels-last helpers: dim_or<S, I>() is S's dimension I, or 1 when S has
// fewer dimensions (so a wrongly-ranked input yields one error, not many).
#pragma once
#include <cstddef>

#include "../core/shape.hpp"
#include "../kernels/conv_reference.hpp"

namespace ctnn {

enum class padding { valid, same };

constexpr const char* padding_name(padding p) { return p == padding::valid ? "valid" : "same"; }

// Output length of one spatial axis. For valid padding with window > in, 1
// (the layer's check() reports the error).
constexpr std::size_t padded_out(std::size_t in, std::size_t window, std::size_t stride, padding p) {
  if (p == padding::same) return (in + stride - 1) / stride;
  return in >= window ? (in - window) / stride + 1 : 1;
}

// Padding placed before the first element of one spatial axis.
constexpr std::size_t pad_before(std::size_t in, std::size_t window, std::size_t stride, padding p) {
  if (p == padding::valid) return 0;
  const std::size_t out = padded_out(in, window, stride, p);
  const std::size_t need = (out - 1) * stride + window;
  return need > in ? (need - in) / 2 : 0;
}

// The geometry of a KH x KW window sliding over an H x W x C input with the
// given stride and padding, producing F output channels (conv2d: F filters;
// pooling: F = C).
constexpr kernels::conv_geometry window_geometry(std::size_t H, std::size_t W, std::size_t C, std::size_t F,
                                                 std::size_t KH, std::size_t KW, std::size_t stride, padding p) {
  return {H, W, C, F, KH, KW, stride, padded_out(H, KH, stride, p), padded_out(W, KW, stride, p),
          pad_before(H, KH, stride, p), pad_before(W, KW, stride, p)};
}

template <Shape S, std::size_t I>
constexpr std::size_t dim_or() {
  if constexpr (I < S::rank) {
    return S::dims[I];
  } else {
    return 1;
  }
}

}  // namespace ctnn
