// ctnn/backends/cpu/gather.hpp — the embedding's row gather and its adjoint, a scatter-add.
//
// ids: n values of the compute type T, each an integer id in [0, vocab) (ids travel as the
// network's input values: docs/sequences.md, "Embedding"). gather_rows<D>: y[i] = table[ids[i]]
// (rows of D values); an id that is not an integer in [0, vocab) throws std::invalid_argument
// naming the id and its position (nothing is written for it or after it).
// scatter_add_rows<D>: dtable[ids[i]] += dy[i] for i in order (repeated ids add up; ids out of
// range are skipped: the forward pass has rejected them). Scalar loops: they move rows.
// The layer: layers/embedding.hpp.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <stdexcept>
#include <string>
#include <type_traits>

#include "../../core/format.hpp"

namespace ctnn::kernels::cpu {

// float32 arithmetic for float and the 16-bit types, double for double
template <class T>
using gather_value_t = std::conditional_t<std::is_same_v<T, double>, double, float>;

// The row an id names, or vocab when it is not an integer in [0, vocab) (NaN included).
template <class T>
std::size_t id_row(T id, std::size_t vocab) {
  const double v = double(static_cast<gather_value_t<T>>(id));
  return v >= 0 && v < double(vocab) && std::floor(v) == v ? std::size_t(v) : vocab;
}

template <std::size_t D, class T>
void gather_rows(const T* ids, const T* table, T* y, std::size_t n, std::size_t vocab) {
  for (std::size_t i = 0; i < n; ++i) {
    const std::size_t r = id_row(ids[i], vocab);
    if (r == vocab)
      throw std::invalid_argument("id " + ctnn::detail::format_number(double(static_cast<gather_value_t<T>>(ids[i]))) +
                                  " at input position " + std::to_string(i) + " is not an integer in [0, " +
                                  std::to_string(vocab) + ")");
    std::copy(table + r * D, table + r * D + D, y + i * D);
  }
}

template <std::size_t D, class T>
void scatter_add_rows(const T* ids, const T* dy, T* dtable, std::size_t n, std::size_t vocab) {
  for (std::size_t i = 0; i < n; ++i) {
    const std::size_t r = id_row(ids[i], vocab);
    if (r == vocab) continue;
    using V = gather_value_t<T>;
    for (std::size_t d = 0; d < D; ++d)
      dtable[r * D + d] = T(static_cast<V>(dtable[r * D + d]) + static_cast<V>(dy[i * D + d]));
  }
}

}  // namespace ctnn::kernels::cpu
