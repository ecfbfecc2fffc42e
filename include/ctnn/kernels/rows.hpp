// ctnn/kernels/rows.hpp — a row-strided array for ops<B>::map_rows.
//
// rows<T>{data, stride}: row r of the array starts at data + r * stride, and
// map_rows(f, rows, cols, a...) runs the element-wise rule f over rows x cols
// elements of each array a (the gate rules of layers/recurrent.hpp read the
// gates of a [batch, gates * units] block as four such arrays).
#pragma once
#include <cstddef>

namespace ctnn::kernels {

template <class T>
struct rows {
  T* data = nullptr;
  std::size_t stride = 0;
};
template <class T>
rows(T*, std::size_t) -> rows<T>;

}  // namespace ctnn::kernels
