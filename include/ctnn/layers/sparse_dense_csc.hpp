// ctnn/layers/sparse_dense_csc.hpp — sparse_dense_csc<K, N, NNZ, Activation>: a dense layer with NNZ weights, by columns.
//
// Computes what sparse_dense does (layers/sparse_dense.hpp), y =
// activation(x W + b) with at most NNZ non-zero weights, but stores W by
// columns (CSC: values [NNZ] as parameters; column starts [N + 1] (uint32)
// then 16-bit input rows [NNZ] in one metadata buffer "index";
// backends/cpu/sparse_csc.hpp), so inference work falls with NNZ: it is the
// layout for speed (layout::csc), the bitmap one for size. Stored bytes:
// 6 NNZ + 4 N + 4 (N + 1) (bitmap: 4 NNZ + 2 K ceil(N/16) + ...), so it is
// smaller than dense only below about 2/3 of the weights. Cache: K + N
// values per sample (transposes). Made by strip_pruning<layout::csc>
// (pruning/strip.hpp; also spelled strip_pruning_csc). Requires K <= 65536,
// an input of K features, 0 < NNZ <= K N. Output: shape<N>. Forward:
// AVX-512 gathers (batch < 16) or batch-vectorized FMAs; other
// architectures the scalar reference; backward: the scalar reference.
// Also here: detail::sparse_dense_by_unit_layer, the bound layer this layout
// shares with layout::rows (layers/sparse_dense_rows.hpp), parameterised by
// the kernels.
#pragma once
#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
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
#include "../pruning/diagnostics.hpp"
#include "activation.hpp"
#include "sparse_dense.hpp"

namespace ctnn {

namespace detail {
// The bound layer of the layouts that store W by output unit: values [NNZ]
// (parameters), then one metadata buffer "index" of unit starts [N + 1]
// (uint32) and 16-bit input indices [NNZ] (csc's column starts and rows; the
// rows layout stores the same), and a cache of K + N values per sample (the
// transposes). Kernels says how the product runs and how a kernel is packed
// (csc_kernels, backends/cpu/sparse_csc.hpp; rows_kernels,
// layers/sparse_dense_rows.hpp): Kernels::forward<K, N, Arch>(x, values,
// starts, idx, bias, y, batch, relu, scratch) and Kernels::pack(kernel, keep,
// K, N, values, capacity, starts, idx). Both share the scalar backward and
// the initialisation (sparse_dense_common::init_packed).
template <class Spec, Shape In, class P, class Backend, class Kernels>
struct sparse_dense_by_unit_layer : sparse_dense_common<Spec, In, P> {
  using base = sparse_dense_common<Spec, In, P>;
  using base::K, base::N, base::NNZ;
  using typename base::Act, typename base::T;
  static constexpr std::array<buffer, 4> buffers{
      buffer::parameter("values", {NNZ}), buffer::parameter("bias", {N}),
      buffer::make(role::metadata, elem::u8, "index", {4 * (N + 1) + 2 * NNZ}),  // unit starts, then 16-bit inputs
      buffer::cache("transposed", kernels::cpu::csc::scratch_per_sample(K, N))};
  static constexpr std::size_t parameter_count = count_of(buffers, role::parameter);
  static constexpr std::size_t cache_per_sample = count_of(buffers, role::cache);

  static std::uint32_t* starts(std::byte* meta) { return reinterpret_cast<std::uint32_t*>(meta); }
  static std::uint16_t* inputs(std::byte* meta) { return reinterpret_cast<std::uint16_t*>(meta + 4 * (N + 1)); }

  // The layout contract (pruning/layout.hpp): stores the weights `keep` marks of a K x N row-major
  // kernel (as dense stores it) and returns how many there are (more than NNZ: as Kernels::pack says).
  template <class V>
  static std::size_t pack(const V* kernel, const std::uint8_t* keep, V* values, std::byte* meta) {
    return Kernels::pack(kernel, keep, K, N, values, NNZ, starts(meta), inputs(meta));
  }

  static void init(layer_slot<T> s, rng& g) { base::template init_packed<sparse_dense_by_unit_layer>(s, g); }

  // The index as a file holds it (io/weights.hpp checks it before loading): "" when the kernels can
  // run on it (both layouts' kernels read the same: kernels::cpu::csc::validate).
  static std::string check_metadata(std::string_view, const std::byte* meta) {
    std::vector<std::uint32_t> st(N + 1);
    std::vector<std::uint16_t> in(NNZ);
    std::memcpy(st.data(), meta, st.size() * 4);
    std::memcpy(in.data(), meta + 4 * (N + 1), in.size() * 2);
    return kernels::cpu::csc::validate(st.data(), in.data(), K, N, NNZ);
  }

  static void forward(layer_slot<T> s, const T* x, T* y, run_info r) {
    constexpr bool fuse = std::is_same_v<Act, relu>;
    Kernels::template forward<K, N, typename ops<Backend>::arch>(x, s.params, starts(s.metadata), inputs(s.metadata),
                                                                 s.params + NNZ, y, r.batch, fuse, s.cache);
    if constexpr (!fuse) Act::template forward<Backend>(y, r.batch, N);
  }

  static void backward(layer_slot<T> s, const T* x, const T* y, T* dy, T* dx, run_info r) {
    Act::template backward<Backend>(y, dy, r.batch, N);
    kernels::cpu::csc::backward_reference(x, dy, s.params, starts(s.metadata), inputs(s.metadata), s.grads,
                                          s.grads + NNZ, dx, r.batch, K, N);
  }
};

// The column layout's kernels (backends/cpu/sparse_csc.hpp): pack writes at most `capacity` weights.
struct csc_kernels {
  template <std::size_t K, std::size_t N, class Arch, class T>
  static void forward(const T* x, const T* values, const std::uint32_t* col, const std::uint16_t* rows, const T* b, T* y,
                      std::size_t m, bool relu, T* scratch) {
    kernels::cpu::csc::forward<K, N, Arch>(x, values, col, rows, b, y, m, relu, scratch);
  }
  template <class V>
  static std::size_t pack(const V* w, const std::uint8_t* keep, std::size_t K, std::size_t N, V* values,
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
                                                  detail::csc_kernels>;
};

namespace layout {
// Stripping to sparse_dense_csc: values by column with 16-bit row indices;
// inference work falls with NNZ (the layout for speed at high sparsity).
struct csc {
  template <long long K, long long N, long long NNZ, class Act>
  using layer = sparse_dense_csc<std::size_t(K), std::size_t(N), std::size_t(NNZ), Act>;
  static std::string name() { return "csc"; }
};
}  // namespace layout

}  // namespace ctnn
