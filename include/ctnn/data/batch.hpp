// ctnn/data/batch.hpp — one mini-batch as the trainer receives it.
//
// x holds size * sample_size values (row-major, one sample per row); y holds
// one int32 label per sample (sparse_labels) or width values per sample
// (dense_targets). The vectors only grow, so a batch object reused across
// steps stops allocating after the first one.
#pragma once
#include <cstddef>
#include <vector>

#include "../core/targets.hpp"

namespace ctnn::data {

template <class T, class TargetKind>
struct minibatch {
  using value_type = T;
  using target_kind = TargetKind;
  using target_type = target_element_t<TargetKind, T>;
  std::vector<T> x;
  std::vector<target_type> y;
  std::size_t size = 0;
};

}  // namespace ctnn::data
