// ctnn/layers/sparse_dense_rows.hpp — sparse_dense_rows<K, N, NNZ, Activation>: a dense layer with NNZ weights, per unit.
//
// Computes y = activation(x W + b) for a flat input of K features, where the
// kernel W[K, N] keeps at most NNZ weights, stored per output unit (CSR over
// W transposed: backends/cpu/sparse_rows.hpp): the values [NNZ] (parameters)
// and one metadata buffer "index" of typed fields: unit starts [N + 1]
// (uint32), then the kept inputs [NNZ] (uint16). Stored bytes: 6 NNZ + 4 N +
// 4 (N + 1). Inference work falls with NNZ: the layout for speed at high
// sparsity. Cache: K + N values per sample (the transposes). layout::rows is
// its tag for strip_pruning. The storage is csc's, so the bound layer is
// csc's (detail::sparse_dense_by_unit_layer) with this layout's index view
// (kernels::rows_index: the per-unit kernels) and packing. A fresh layer
// spreads its NNZ weights evenly over W, Glorot-uniform. Requires K <= 65536,
// an input of K features (rank 1), 0 < NNZ <= K N. Output: shape<N>.
// Kernels and figures: docs/pruning.md.
#pragma once
#include <cstddef>
#include <cstdint>

#include "../backends/cpu/sparse_rows.hpp"
#include "../kernels/sparse_index.hpp"
#include "activation.hpp"
#include "sparse_dense.hpp"
#include "sparse_dense_csc.hpp"

namespace ctnn {

namespace detail {
// The per-unit layout's packing (backends/cpu/sparse_rows.hpp): writes nothing when more than
// `capacity` weights are kept.
struct rows_pack {
  template <class V>
  static std::size_t apply(const V* w, const std::uint8_t* keep, std::size_t K, std::size_t N, V* values,
                           std::size_t capacity, std::uint32_t* starts, std::uint16_t* idx) {
    return kernels::cpu::rows::pack(w, keep, K, N, values, capacity, starts, idx);
  }
};
}  // namespace detail

template <std::size_t K, std::size_t N, std::size_t NNZ, Activation Act = identity>
struct sparse_dense_rows : detail::sparse_dense_spec<sparse_dense_rows<K, N, NNZ, Act>, K, N, NNZ, Act> {
  static_assert(K <= 65536, "sparse_dense_rows: K must be <= 65536 (16-bit input indices)");
  static constexpr const char* spec_name = "sparse_dense_rows";
  template <Shape In, class P, class Backend>
  using bind = detail::sparse_dense_by_unit_layer<sparse_dense_rows, In, precision::float_compute_t<precision::policy_of_t<P>>, Backend,
                                                  kernels::rows_index, detail::rows_pack>;
};

namespace layout {
// strip_pruning's tag for sparse_dense_rows (pruning/layout.hpp).
struct rows {
  static constexpr std::size_t kept_one_in = per_weight_kept_one_in;  // layers/sparse_dense_csc.hpp
  static constexpr const char* spelled = "layout::rows";
  template <long long K, long long N, long long NNZ, class Act>
  using layer = sparse_dense_rows<std::size_t(K), std::size_t(N), std::size_t(NNZ), Act>;
};
}  // namespace layout

}  // namespace ctnn
