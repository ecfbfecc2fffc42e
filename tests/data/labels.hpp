// The labels a dataset delivers in one pass (samples or batches): the data tests' reading helper.
#pragma once
#include <cstddef>
#include <vector>

#include <ctnn/data/pipeline.hpp>

namespace ctnn_test {

template <class E>
std::vector<int> labels(const ctnn::data::dataset<E>& d, std::size_t pass = 0) {
  std::vector<int> out;
  auto c = d.open(pass);
  E e;
  while (c.next(e)) {
    if constexpr (ctnn::data::Batch<E>)
      out.insert(out.end(), e.y.begin(), e.y.begin() + std::ptrdiff_t(e.size));
    else
      out.push_back(e.y[0]);
  }
  return out;
}

}  // namespace ctnn_test
