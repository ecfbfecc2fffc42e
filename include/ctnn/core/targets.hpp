// ctnn/core/targets.hpp — the two kinds of training target.
//
// sparse_labels: one class index (int32) per sample, as Keras'
// sparse_categorical_* losses and metrics take.
// dense_targets<S>: a vector of shape S per sample (one-hot rows, regression
// targets), as categorical_crossentropy and mean_squared_error take.
#pragma once
#include <cstdint>
#include <type_traits>

#include "shape.hpp"

namespace ctnn {

struct sparse_labels {
  using element = std::int32_t;
  static constexpr std::size_t width = 1;
};

template <Shape S>
struct dense_targets {
  using element = void;  // the model's element type
  using target_shape = S;
  static constexpr std::size_t width = S::size;
};

template <class K>
inline constexpr bool is_sparse_v = std::is_same_v<K, sparse_labels>;

// The element type a batch stores targets in.
template <class K, class T>
using target_element_t = std::conditional_t<is_sparse_v<K>, std::int32_t, T>;

}  // namespace ctnn
