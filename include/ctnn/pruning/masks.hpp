// ctnn/pruning/masks.hpp — which weights a pruning step removes.
//
// compute_mask<Pattern>(w, rows, cols, s, mask) writes mask[i] = 1 for the
// kernel weights w[rows x cols] (row-major) kept at sparsity s, 0 for the
// others:
//   unstructured  the keep_count(n, s) largest |w|
//   n_of_m<N, M>  per column, the N largest |w| of each group of M
//                 consecutive rows (s is not used)
//   block<R, C>   the keep_count(blocks, s) R x C blocks of largest mean |w|
//   units         the keep_count(cols, s) columns of largest L2 norm
// Ties are broken by position (the earlier weight or block stays), so the
// count kept is exact, where TFMOT's `abs(w) >= threshold` keeps every tied
// weight; with real-valued weights ties are rare except among weights that
// are already zero.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <numeric>
#include <type_traits>
#include <vector>

#include "prune.hpp"

namespace ctnn::pruning {

namespace detail {
// Marks the `keep` largest scores (ties: lower index first).
template <class S>
void keep_largest(const std::vector<S>& score, std::size_t keep, std::vector<std::uint8_t>& kept) {
  const std::size_t n = score.size();
  kept.assign(n, 0);
  if (keep >= n) {
    std::fill(kept.begin(), kept.end(), 1);
    return;
  }
  std::vector<std::uint32_t> idx(n);
  std::iota(idx.begin(), idx.end(), 0u);
  auto before = [&](std::uint32_t a, std::uint32_t b) { return score[a] > score[b] || (score[a] == score[b] && a < b); };
  std::nth_element(idx.begin(), idx.begin() + std::ptrdiff_t(keep), idx.end(), before);
  for (std::size_t i = 0; i < keep; ++i) kept[idx[i]] = 1;
}
}  // namespace detail

template <class Pattern, class T>
void compute_mask(const T* w, std::size_t rows, std::size_t cols, double s, std::uint8_t* mask) {
  const std::size_t n = rows * cols;
  if constexpr (is_n_of_m_v<Pattern>) {
    constexpr std::size_t N = Pattern::n, M = Pattern::m;
    for (std::size_t j = 0; j < cols; ++j)
      for (std::size_t g = 0; g < rows; g += M) {
        std::array<std::size_t, M> idx{};
        for (std::size_t t = 0; t < M; ++t) idx[t] = t;
        auto mag = [&](std::size_t t) { return std::abs(double(w[(g + t) * cols + j])); };
        for (std::size_t a = 1; a < M; ++a)  // insertion sort, descending, stable (ties: the earlier row first)
          for (std::size_t b = a; b > 0 && mag(idx[b]) > mag(idx[b - 1]); --b) std::swap(idx[b], idx[b - 1]);
        for (std::size_t t = 0; t < M; ++t) mask[(g + t) * cols + j] = 0;
        for (std::size_t t = 0; t < N; ++t) mask[(g + idx[t]) * cols + j] = 1;
      }
  } else if constexpr (is_block_v<Pattern>) {
    constexpr std::size_t R = Pattern::rows, C = Pattern::cols;
    const std::size_t br = rows / R, bc = cols / C;
    std::vector<double> score(br * bc, 0.0);
    for (std::size_t i = 0; i < rows; ++i)
      for (std::size_t j = 0; j < cols; ++j) score[(i / R) * bc + j / C] += std::abs(double(w[i * cols + j]));
    std::vector<std::uint8_t> kept;
    detail::keep_largest(score, ctnn::detail::keep_count(br * bc, s), kept);
    for (std::size_t i = 0; i < rows; ++i)
      for (std::size_t j = 0; j < cols; ++j) mask[i * cols + j] = kept[(i / R) * bc + j / C];
  } else if constexpr (std::is_same_v<Pattern, units>) {
    std::vector<double> score(cols, 0.0);
    for (std::size_t i = 0; i < rows; ++i)
      for (std::size_t j = 0; j < cols; ++j) score[j] += double(w[i * cols + j]) * double(w[i * cols + j]);
    std::vector<std::uint8_t> kept;
    detail::keep_largest(score, ctnn::detail::keep_count(cols, s), kept);
    for (std::size_t i = 0; i < rows; ++i)
      for (std::size_t j = 0; j < cols; ++j) mask[i * cols + j] = kept[j];
  } else {
    std::vector<double> score(n);
    for (std::size_t i = 0; i < n; ++i) score[i] = std::abs(double(w[i]));
    std::vector<std::uint8_t> kept;
    detail::keep_largest(score, ctnn::detail::keep_count(n, s), kept);
    std::copy(kept.begin(), kept.end(), mask);
  }
}

// Fraction of the mask's entries that are 0.
inline double mask_sparsity(const std::uint8_t* mask, std::size_t n) {
  std::size_t zeros = 0;
  for (std::size_t i = 0; i < n; ++i) zeros += mask[i] == 0;
  return n ? double(zeros) / double(n) : 0.0;
}

}  // namespace ctnn::pruning
