// ctnn/layers/sparse_dense_csc.hpp — sparse_dense_csc<K, N, NNZ, Activation>: a dense layer with NNZ weights, by columns.
//
// Computes what sparse_dense does (layers/sparse_dense.hpp), y =
// activation(x W + b) with at most NNZ non-zero weights, but stores W by
// columns (CSC: values [NNZ] as parameters; one metadata buffer "index" of
// typed fields: column starts [N + 1] (uint32), then 16-bit input rows [NNZ];
// backends/cpu/sparse_csc.hpp), so inference work falls with NNZ: the layout
// for speed (layout::csc), the bitmap one for size. Stored bytes: 6 NNZ + 4 N
// + 4 (N + 1). Cache: K + N values per sample (transposes). Made by
// strip_pruning<layout::csc> (pruning/strip.hpp). Requires K <= 65536, an
// input of K features, 0 < NNZ <= K N. Output: shape<N>. Products through
// ops<B> with the index view kernels::csc_index.
// Also here: detail::sparse_dense_by_unit_layer, the bound layer this layout
// shares with layout::rows (layers/sparse_dense_rows.hpp). Layout contract,
// kernels and figures: docs/pruning.md.
#pragma once
#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "../core/backend.hpp"
#include "../core/concepts.hpp"
#include "../core/plan.hpp"
#include "../core/shape.hpp"
#include "../backends/cpu/ops.hpp"
#include "../backends/cpu/sparse_csc.hpp"
#include "../backends/cpu/sparse_rows.hpp"  // sparse_kernels<csc_index>
#include "../core/diagnostics.hpp"
#include "../kernels/sparse_index.hpp"
#include "activation.hpp"
#include "sparse_dense.hpp"

namespace ctnn {

namespace detail {
// The bound layer of the layouts that store W by output unit: values [NNZ]
// (parameters), one metadata buffer "index" of unit starts [N + 1] (uint32)
// and 16-bit input indices [NNZ], and a cache of K + N values per sample (the
// transposes). Index says which kernels run it (kernels::csc_index,
// kernels::rows_index: ops<B> dispatches on it); Pack stores a kernel
// (csc_pack here, rows_pack in layers/sparse_dense_rows.hpp):
// Pack::apply(kernel, keep, K, N, values, capacity, starts, inputs).
template <class Spec, Shape In, class P, class Backend, class Index, class Pack>
struct sparse_dense_by_unit_layer : sparse_dense_common<Spec, In, P> {
  using base = sparse_dense_common<Spec, In, P>;
  using base::K, base::N, base::NNZ;
  using typename base::T;
  // The index: unit starts, then input indices.
  using index = kernels::packed_index<kernels::field<std::uint32_t, N + 1>, kernels::field<std::uint16_t, NNZ>>;
  static constexpr std::array<buffer, 6> buffers{
      buffer::parameter("values", {NNZ}), buffer::parameter("bias", {N}),
      buffer::make(role::metadata, elem::u8, "index", {index::bytes}),
      buffer::cache("transposed", kernels::cpu::csc::scratch_per_sample(K, N)),
      base::template decoded_buffer<Index, Backend>,
      base::template decoded_gradient_buffer<Index, Backend>};
  static constexpr std::size_t parameter_count = count_of(buffers, role::parameter);
  static constexpr std::size_t cache_per_sample = count_of(buffers, role::cache);

  static Index view(const std::byte* meta) { return {index::template at<0>(meta), index::template at<1>(meta)}; }

  // The layout contract (docs/pruning.md): stores the weights `keep` marks of a K x N row-major
  // kernel (as dense stores it) and returns how many there are (more than NNZ: as Pack says).
  template <class V>
  static std::size_t pack(const V* kernel, const std::uint8_t* keep, V* values, std::byte* meta) {
    return Pack::apply(kernel, keep, K, N, values, NNZ, index::template at<0>(meta), index::template at<1>(meta));
  }

  static void init(layer_slot<T> s, rng& g) { base::template init_packed<sparse_dense_by_unit_layer>(s, g); }

  // The index as a file holds it (io/weights.hpp checks it before loading): "" when the kernels can
  // run on it (both layouts' kernels read the same: kernels::cpu::csc::validate).
  static std::string check_metadata(std::string_view, const std::byte* meta) {
    return kernels::cpu::csc::validate(index::template read<0>(meta).data(), index::template read<1>(meta).data(), K,
                                       N, NNZ);
  }

  static void forward(layer_slot<T> s, const T* x, T* y, run_info r) {
    base::template forward_as<sparse_dense_by_unit_layer, Backend>(s, x, y, r);
  }
  static void derive(layer_slot<T> s) { base::template derive_as<sparse_dense_by_unit_layer, Backend>(s); }
  static void backward(layer_slot<T> s, const T* x, const T* y, T* dy, T* dx, run_info r) {
    base::template backward_as<sparse_dense_by_unit_layer, Backend>(s, x, y, dy, dx, r);
  }
};

// The column layout's packing (backends/cpu/sparse_csc.hpp): writes at most `capacity` weights.
struct csc_pack {
  template <class V>
  static std::size_t apply(const V* w, const std::uint8_t* keep, std::size_t K, std::size_t N, V* values,
                           std::size_t capacity, std::uint32_t* col, std::uint16_t* rows) {
    return kernels::cpu::csc::pack(w, keep, K, N, values, capacity, col, rows);
  }
};
}  // namespace detail

template <std::size_t K, std::size_t N, std::size_t NNZ, Activation Act = identity>
struct sparse_dense_csc : detail::sparse_dense_spec<sparse_dense_csc<K, N, NNZ, Act>, K, N, NNZ, Act> {
  static_assert(K <= 65536, "sparse_dense_csc: K must be <= 65536 (16-bit row indices)");
  static constexpr const char* spec_name = "sparse_dense_csc";
  template <Shape In, class P, class Backend>
  using bind = detail::sparse_dense_by_unit_layer<sparse_dense_csc, In, precision::float_compute_t<precision::policy_of_t<P>>, Backend,
                                                  kernels::csc_index, detail::csc_pack>;
};

namespace layout {
// csc and rows (the per-weight layouts) are for layers that keep at most 1 weight in
// per_weight_kept_one_in (88.9 % sparsity and above): strip_pruning to them on a denser layer fails
// to compile (pruning/strip.hpp), since their batch-1 kernels, a gather per kept weight, run slower
// than dense by more than 1.5x there (docs/pruning.md, "Why the per-weight layouts cannot reach
// 0.67x"). The layer specs themselves (sparse_dense_csc<K, N, NNZ>) take any NNZ.
inline constexpr std::size_t per_weight_kept_one_in = 9;
// Stripping to sparse_dense_csc: values by column with 16-bit row indices;
// inference work falls with NNZ (the layout for speed at high sparsity).
struct csc {
  static constexpr std::size_t kept_one_in = per_weight_kept_one_in;
  static constexpr const char* spelled = "layout::csc";
  template <long long K, long long N, long long NNZ, class Act>
  using layer = sparse_dense_csc<std::size_t(K), std::size_t(N), std::size_t(NNZ), Act>;
  static std::string name() { return "csc"; }
};
}  // namespace layout

}  // namespace ctnn
