// ctnn/kernels/cpu/sparse_csc.hpp — products of a sparse kernel stored by columns (CSC).
//
// Layout of a sparse K x N kernel W (layers/sparse_dense_csc.hpp): column j's
// weights are values[col[j] .. col[j + 1]), their input rows in rows[...]
// (16-bit: K <= 65536), rows ascending. The work is proportional to the
// number of weights, unlike the bitmap layout of kernels/cpu/sparse.hpp:
//   forward_reference: y = x W + b (relu optional), the scalar loop that
//                      defines the product;
//   forward<K, N, Arch>: the rows layout's kernels, which read the same storage
//                      (backends/cpu/sparse_rows.hpp, where it is defined);
//   backward_reference: dvalues, dbias and dx (scalar).
#pragma once
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <type_traits>

#include <xsimd/xsimd.hpp>

#include "../../kernels/sparse_index.hpp"
#include "arch.hpp"
#include "sparse_expand.hpp"
#include "sparse_kernels.hpp"

namespace ctnn::kernels::cpu::csc {

template <class T>
void forward_reference(const T* x, const T* values, const std::uint32_t* col, const std::uint16_t* rows, const T* bias,
                       T* y, std::size_t batch, std::size_t K, std::size_t N, bool relu) {
  for (std::size_t b = 0; b < batch; ++b)
    for (std::size_t j = 0; j < N; ++j) {
      T s = bias[j];
      for (std::uint32_t p = col[j]; p < col[j + 1]; ++p) s += x[b * K + rows[p]] * values[p];
      y[b * N + j] = relu ? std::max(s, T(0)) : s;
    }
}

template <class T>
void backward_reference(const T* x, const T* dz, const T* values, const std::uint32_t* col, const std::uint16_t* rows,
                        T* dvalues, T* dbias, T* dx, std::size_t batch, std::size_t K, std::size_t N) {
  if (dx) std::fill(dx, dx + batch * K, T(0));
  for (std::size_t j = 0; j < N; ++j) {
    T sb = 0;
    for (std::size_t b = 0; b < batch; ++b) sb += dz[b * N + j];
    dbias[j] = sb;
    for (std::uint32_t p = col[j]; p < col[j + 1]; ++p) {
      T s = 0;
      for (std::size_t b = 0; b < batch; ++b) {
        s += x[b * K + rows[p]] * dz[b * N + j];
        if (dx) dx[b * K + rows[p]] += values[p] * dz[b * N + j];
      }
      dvalues[p] = s;
    }
  }
}

// Scratch values forward<Arch> needs per sample (x and y transposed).
constexpr std::size_t scratch_per_sample(std::size_t K, std::size_t N) { return K + N; }

// Packs kernel w[K x N] (row-major) where keep[i] != 0, column by column; values
// beyond the count kept (up to capacity) are zero. Returns the count kept.
template <class T, class M>
std::size_t pack(const T* w, const M* keep, std::size_t K, std::size_t N, T* values, std::size_t capacity,
                 std::uint32_t* col, std::uint16_t* rows) {
  std::size_t p = 0;
  for (std::size_t j = 0; j < N; ++j) {
    col[j] = std::uint32_t(std::min(p, capacity));
    for (std::size_t k = 0; k < K; ++k)
      if (keep[k * N + j]) {
        if (p < capacity) {
          values[p] = w[k * N + j];
          rows[p] = std::uint16_t(k);
        }
        ++p;
      }
  }
  col[N] = std::uint32_t(std::min(p, capacity));
  for (std::size_t q = p; q < capacity; ++q) {
    values[q] = T(0);
    rows[q] = 0;
  }
  return p;
}

// Whether forward and backward can run on an index (one read from a file;
// the rows layout, sparse_rows.hpp, stores the same): col[0] = 0, col never
// decreases, col[N] <= capacity (the values stored), and each column's rows
// are < K and strictly ascending. Returns "" when so, else the first fault with
// its column, value and row.
inline std::string validate(const std::uint32_t* col, const std::uint16_t* rows, std::size_t K, std::size_t N,
                            std::size_t capacity) {
  if (col[0] != 0) return "column 0 starts at value " + std::to_string(col[0]) + ", not 0";
  for (std::size_t j = 0; j < N; ++j) {
    const std::string column = "column " + std::to_string(j);
    if (col[j + 1] < col[j])
      return column + " ends at value " + std::to_string(col[j + 1]) + ", before its start " + std::to_string(col[j]);
    if (col[j + 1] > capacity)
      return column + " ends at value " + std::to_string(col[j + 1]) + ", past the " + std::to_string(capacity) +
             " values stored";
    for (std::size_t p = col[j]; p < col[j + 1]; ++p) {
      if (rows[p] >= K)
        return "value " + std::to_string(p) + " (" + column + ") has input row " + std::to_string(rows[p]) +
               ", but the layer has " + std::to_string(K) + " inputs";
      if (p > col[j] && rows[p] <= rows[p - 1])
        return "value " + std::to_string(p) + " (" + column + ") has input row " + std::to_string(rows[p]) +
               ", not above the row before it (" + std::to_string(rows[p - 1]) + "): rows ascend within a column";
    }
  }
  return {};
}

}  // namespace ctnn::kernels::cpu::csc

// csc::forward and sparse_kernels<csc_index> (the layer's dispatch) are in sparse_rows.hpp: they run
// the rows kernels, which read the same storage.
