// ctnn/layers/sparse_dense_nm.hpp — sparse_dense_nm<K, N, Nk, M, Activation>: a dense layer keeping Nk of every M inputs.
//
// Computes y = activation(x W + b) for a flat input of K features, where each
// unit of the kernel W[K, N] keeps Nk weights in every group of M consecutive
// inputs (2:4 is sparse_dense_nm<K, N, 2, 4>), packed
// (backends/cpu/sparse_nm.hpp): the values [NNZ = K N Nk / M] (parameters)
// and one metadata buffer "index" (one typed field of bytes) holding each
// value's position in its group in bit_width(M - 1) bits: ceil(NNZ bits / 8)
// bytes. Both sizes are compile-time constants (parameter_count = NNZ + N).
// Stored bytes for 2:4: 2.125 K N + 4 N (dense: 4 K N + 4 N). layout::nm<Nk,
// M> is its tag for strip_pruning (the NNZ the layout contract passes is not
// needed: the pattern fixes it). Cache: K + N values per sample where the
// layer runs the layout's forward (undecoded<...>, no CPU architecture), none
// where it decodes at every batch (every CPU architecture). A fresh
// layer keeps Nk inputs of each group (rotating with unit and group),
// Glorot-uniform. Requires 0 < Nk < M <= 256, M dividing K, an input of K
// features (rank 1). Output: shape<N>. Products through ops<B> with the index
// view kernels::nm_index<Nk, M>. Kernels and figures: docs/pruning.md.
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
#include "../backends/cpu/sparse_nm.hpp"
#include "../core/diagnostics.hpp"
#include "../kernels/sparse_index.hpp"
#include "activation.hpp"
#include "sparse_dense.hpp"

namespace ctnn {

template <class Spec, Shape In, class P, class Backend>
struct sparse_dense_nm_layer;

template <std::size_t K, std::size_t N, std::size_t Nk, std::size_t M, Activation Act = identity>
struct sparse_dense_nm {
  static_assert(K > 0 && N > 0, "sparse_dense_nm: K and N must be > 0");
  static_assert(Nk > 0 && Nk < M && M <= 256, "sparse_dense_nm: Nk of M needs 0 < Nk < M <= 256");
  static_assert(K % M == 0, "sparse_dense_nm: the inputs K must be a multiple of the group size M");
  using is_layer_spec = void;
  using activation = Act;
  static constexpr std::size_t inputs = K, units = N, kept = Nk, group = M;
  static constexpr std::size_t nnz = kernels::cpu::nm::capacity(K, N, Nk, M);

  static std::string name() {
    std::string s = "sparse_dense_nm<" + std::to_string(K) + ", " + std::to_string(N) + ", " + std::to_string(Nk) +
                    ", " + std::to_string(M);
    if (!std::is_same_v<Act, identity>) s += ", " + Act::name();
    return s + ">";
  }

  template <Shape In, std::size_t Pos>
  static constexpr bool check() {
    return diag::sparse_dense_input_mismatch<diag::layer<Pos>, diag::input_elements<In::size>, diag::kernel_rows<K>,
                                             (In::rank == 1 && In::size == K)>::value;
  }

  template <Shape In, class P, class Backend>
  using bind = sparse_dense_nm_layer<sparse_dense_nm, In, precision::float_compute_t<precision::policy_of_t<P>>, Backend>;
};

namespace layout {
// strip_pruning's tag for sparse_dense_nm (pruning/layout.hpp); NNZ is
// implied by the pattern (K N Nk / M), so the one passed is not used.
template <std::size_t Nk, std::size_t M>
struct nm {
  template <long long K, long long N, long long NNZ, class Act>
  using layer = sparse_dense_nm<std::size_t(K), std::size_t(N), Nk, M, Act>;
};
}  // namespace layout

template <class Spec, Shape In, class P, class Backend>
struct sparse_dense_nm_layer : detail::sparse_dense_common<Spec, In, P> {
  using base = detail::sparse_dense_common<Spec, In, P>;
  using base::K, base::N, base::NNZ;
  using typename base::Act, typename base::T;
  static constexpr std::size_t Nk = Spec::kept, M = Spec::group;
  static constexpr std::size_t index_bytes = kernels::cpu::nm::meta_bytes(K, N, Nk, M);
  // The index: the packed positions, bytes.
  using index = kernels::packed_index<kernels::field<std::uint8_t, index_bytes>>;
  // "transposed": the layout forward's blocks of samples (nm::forward, (K + N) values a sample), read
  // only where the layer runs that forward: none where it decodes at every batch (every CPU
  // architecture; the forward is the dense GEMM over "decoded"), K + N where it does not
  // (undecoded<...>, a backend that names no CPU architecture).
  static constexpr std::size_t transposed_per_sample =
      base::template decodes_every_batch<kernels::nm_index<Nk, M>, Backend> ? 0
                                                                           : kernels::cpu::nm::scratch_per_sample(K, N);
  static constexpr std::array<buffer, 6> buffers{
      buffer::parameter("values", {NNZ}), buffer::parameter("bias", {N}),
      buffer::make(role::metadata, elem::u8, "index", {index::bytes}),
      buffer::cache("transposed", transposed_per_sample),
      base::template decoded_buffer<kernels::nm_index<Nk, M>, Backend>,
      base::template decoded_gradient_buffer<kernels::nm_index<Nk, M>, Backend>};
  static constexpr std::size_t parameter_count = count_of(buffers, role::parameter);
  static constexpr std::size_t cache_per_sample = count_of(buffers, role::cache);

  static kernels::nm_index<Nk, M> view(const std::byte* meta) { return {index::template at<0>(meta)}; }

  // The layout contract: stores the weights keep marks (kernel: K x N
  // row-major) and returns how many; more than NNZ: nothing is written. A
  // group keeping more than Nk weights throws std::invalid_argument.
  template <class V>
  static std::size_t pack(const V* kernel, const std::uint8_t* keep, V* values, std::byte* meta) {
    return kernels::cpu::nm::pack<Nk, M>(kernel, keep, K, N, values, index::template at<0>(meta));
  }

  // Nk inputs of each group, rotating with unit and group; Glorot-uniform values.
  static void init(layer_slot<T> s, rng& g) {
    std::vector<T> w(K * N);
    std::vector<std::uint8_t> keep(K * N);
    const double limit = std::sqrt(6.0 / double(K + N));
    for (std::size_t j = 0; j < N; ++j)
      for (std::size_t gr = 0; gr < K / M; ++gr)
        for (std::size_t t = 0; t < Nk; ++t) keep[(gr * M + (t + j + gr) % M) * N + j] = 1;
    for (auto& v : w) v = T(g.uniform(-limit, limit));
    pack<T>(w.data(), keep.data(), s.params, s.metadata);
    for (std::size_t j = 0; j < N; ++j) s.params[NNZ + j] = T(0);
  }

  // The index as a file holds it (io/weights.hpp checks it before loading): "" when the kernels can run on it.
  static std::string check_metadata(std::string_view, const std::byte* meta) {
    return kernels::cpu::nm::validate(index::template read<0>(meta).data(), K, N, Nk, M);
  }

  static void forward(layer_slot<T> s, const T* x, T* y, run_info r) {
    base::template forward_as<sparse_dense_nm_layer, Backend>(s, x, y, r);
  }
  static void derive(layer_slot<T> s) { base::template derive_as<sparse_dense_nm_layer, Backend>(s); }
  static void backward(layer_slot<T> s, const T* x, const T* y, T* dy, T* dx, run_info r) {
    base::template backward_as<sparse_dense_nm_layer, Backend>(s, x, y, dy, dx, r);
  }
};

}  // namespace ctnn
