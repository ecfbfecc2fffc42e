// ctnn/core/targets.hpp — the two kinds of training target.
//
// sparse_labels: one class index (int32) per sample, as Keras'
// sparse_categorical_* losses and metrics take.
// step_labels<Steps>: one class index (int32) per step, Steps per sample, as
// Keras' sparse_categorical_crossentropy takes for a per-step output <Steps, K>.
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

template <std::size_t Steps>
struct step_labels {
  static_assert(Steps > 0, "step_labels: the number of steps must be > 0");
  using element = std::int32_t;
  static constexpr std::size_t width = Steps;
};

template <Shape S>
struct dense_targets {
  using element = void;  // the model's element type
  using target_shape = S;
  static constexpr std::size_t width = S::size;
};

template <class K>
inline constexpr bool is_sparse_v = std::is_same_v<K, sparse_labels>;
template <class K>
inline constexpr bool is_step_labels_v = false;
template <std::size_t Steps>
inline constexpr bool is_step_labels_v<step_labels<Steps>> = true;

// The element type a batch stores targets in.
template <class K, class T>
using target_element_t = std::conditional_t<is_sparse_v<K> || is_step_labels_v<K>, std::int32_t, T>;

}  // namespace ctnn
