// ctnn/data/dataset.hpp — the Dataset concept the trainer consumes.
//
// A dataset describes one sample (sample_shape, value_type) and its target
// (target_kind), and opens one pass ("epoch") at a time: open(epoch) returns
// a cursor whose next(batch&) fills the next mini-batch and returns false at
// the end of the pass. Opening with the epoch number lets a dataset reshuffle
// deterministically each epoch.
#pragma once
#include <cstddef>

#include "../core/shape.hpp"
#include "element.hpp"

namespace ctnn::data {

template <class D>
concept has_sample_description = requires {
  typename D::sample_shape;
  typename D::value_type;
  typename D::target_kind;
} && Shape<typename D::sample_shape>;

template <class D>
concept has_open = requires(const D& d, std::size_t epoch,
                            batch_of<typename D::sample_shape, typename D::target_kind, typename D::value_type>& b) {
  { d.open(epoch).next(b) } -> std::convertible_to<bool>;
};

template <class D>
concept Dataset = has_sample_description<D> && has_open<D>;

// The batch type a dataset's cursors fill (the one batch type: data/element.hpp).
template <class D>
using batch_for = batch_of<typename D::sample_shape, typename D::target_kind, typename D::value_type>;

}  // namespace ctnn::data
