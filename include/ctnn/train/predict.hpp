// ctnn/train/predict.hpp — predictions over a dataset, and probabilities from logits.
//
// predict(model, dataset) runs the model in inference mode over every batch
// of a batched dataset (its targets are ignored) and returns the outputs,
// row-major: samples x Net::output_type::size values, as Keras'
// model.predict(dataset) does. The dataset's sample shape and value type are
// checked against the network at compile time, as fit's are. Like
// model::predict, it never reallocates the model's memory.
//
// softmax_rows(values, width) turns rows of logits into probabilities (a
// softmax over each row of `width` values: the last axis); predict_proba(m, ds)
// is softmax_rows(predict(m, ds), last axis of the output). It is for a model
// whose outputs are logits: on a model whose last layer already applies softmax
// it does not compile (its predictions already are probabilities).
#pragma once
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <stdexcept>
#include <string>
#include <tuple>
#include <type_traits>
#include <vector>

#include "../core/diagnostics.hpp"
#include "../core/shape.hpp"
#include "../core/type_at.hpp"
#include "../data/dataset.hpp"
#include "../layers/activation.hpp"
#include "model.hpp"

namespace ctnn {

namespace detail {
template <class L>
struct applies_softmax : std::false_type {};
template <class L>
  requires requires { typename L::Act; }
struct applies_softmax<L> : std::is_same<typename L::Act, softmax> {};  // dense, conv2d
template <Shape In, class P, class B>
struct applies_softmax<activation_layer<softmax, In, P, B>> : std::true_type {};

template <class M>
inline constexpr bool ends_in_softmax_v =
    applies_softmax<detail::type_at_t<M::layer_count - 1, typename M::layers>>::value;
// "predict_proba: layer 1, the last, already applies softmax: predict() gives probabilities"
template <std::size_t Last>
constexpr diag::message ends_in_softmax_text() {
  diag::message m;
  m << "predict_proba: layer " << Last << ", the last, already applies softmax: predict() gives probabilities";
  return m;
}
}  // namespace detail

// Outputs of the model for every sample of a batched dataset, row-major.
template <Model M, data::Dataset D>
std::vector<typename std::remove_cvref_t<M>::value_type> predict(M& m, const D& ds) {
  using MM = std::remove_cvref_t<M>;
  static_assert(diag::require<D::sample_shape::size == MM::input_size,
                              &diag::dataset_input_text<typename D::sample_shape, typename MM::network::input_type, 3>>());
  static_assert(D::sample_shape::size == MM::input_size,
                "predict: the dataset's samples do not have the network's input size");
  static_assert(std::is_same_v<typename D::value_type, typename MM::value_type>,
                "predict: the dataset's value type differs from the model's element type");
  std::vector<typename MM::value_type> out;
  data::batch_for<D> b;
  auto cur = ds.open(0);
  while (cur.next(b)) {
    if (b.size == 0) continue;
    // model::predict: a batch above the model's capacity runs in scratch memory, so spans of the
    // variables taken before stay valid (forward() would reallocate the model's memory).
    const auto rows = m.predict(b.x.data(), b.size, b.size);
    out.insert(out.end(), rows.begin(), rows.end());
  }
  return out;
}

// Softmax over each row of `width` values (numerically stable: the row's
// maximum is subtracted first).
template <class T>
std::vector<T> softmax_rows(std::vector<T> v, std::size_t width) {
  if (width == 0 || v.size() % width != 0)
    throw std::invalid_argument("softmax_rows: " + std::to_string(v.size()) + " values are not rows of " +
                                std::to_string(width));
  for (std::size_t r = 0; r < v.size(); r += width) {
    T* row = v.data() + r;
    const T mx = *std::max_element(row, row + width);
    T sum = 0;
    for (std::size_t j = 0; j < width; ++j) sum += row[j] = std::exp(row[j] - mx);
    for (std::size_t j = 0; j < width; ++j) row[j] /= sum;
  }
  return v;
}

// Class probabilities from a logits model: softmax over the output's last axis.
template <Model M, data::Dataset D>
std::vector<typename std::remove_cvref_t<M>::value_type> predict_proba(M& m, const D& ds) {
  using MM = std::remove_cvref_t<M>;
  static_assert(diag::require<!detail::ends_in_softmax_v<MM>, &detail::ends_in_softmax_text<MM::layer_count>>());
  static_assert(!detail::ends_in_softmax_v<MM>,
                "predict_proba: the network's last layer already applies softmax; its predict() gives probabilities");
  return softmax_rows(predict(m, ds), last_dim_v<typename MM::network::output_type>);
}

}  // namespace ctnn
