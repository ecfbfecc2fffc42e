// ctnn/layers/sparse_dense_rows.hpp — sparse_dense_rows<K, N, NNZ, Activation>: a dense layer with NNZ weights, per unit.
//
// Computes y = activation(x W + b) for a flat input of K features, where the
// kernel W[K, N] keeps at most NNZ weights, stored per output unit (CSR over
// W transposed: kernels/cpu/sparse_rows.hpp): the values [NNZ] (parameters)
// and one metadata buffer "index": unit starts [N + 1] (uint32) then the
// kept inputs [NNZ] (uint16). Stored bytes: 6 NNZ + 4 N + 4 (N + 1).
// Inference work falls with NNZ (gathers of x below 16 samples on AVX-512,
// transposed blocks above): the layout for speed at high sparsity (at 90 %,
// as fast as dense at batch 1 and faster at batch 64: docs/pruning.md).
// Cache: K + N values per sample (the transposes). layout::rows is its tag for
// strip_pruning (the layout contract of pruning/layout.hpp: layer<K, N, NNZ,
// Act> and the bound layer's pack). A fresh layer spreads its NNZ weights
// evenly over W, Glorot-uniform. Requires K <= 65536, an input of K features
// (rank 1), 0 < NNZ <= K N. Output: shape<N>. Forward: xsimd; backward: the
// scalar reference.
#pragma once
#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>
#include <type_traits>

#include "../core/backend.hpp"
#include "../core/concepts.hpp"
#include "../core/plan.hpp"
#include "../core/shape.hpp"
#include "../kernels/cpu/ops.hpp"
#include "../kernels/cpu/sparse_rows.hpp"
#include "../pruning/diagnostics.hpp"
#include "activation.hpp"

namespace ctnn {

template <class Spec, Shape In, class P, class Backend>
struct sparse_dense_rows_layer;

template <std::size_t K, std::size_t N, std::size_t NNZ, Activation Act = identity>
struct sparse_dense_rows {
  static_assert(K > 0 && N > 0 && NNZ > 0, "sparse_dense_rows: K, N and NNZ must be > 0");
  static_assert(K <= 65536, "sparse_dense_rows: K must be <= 65536 (16-bit input indices)");
  using is_layer_spec = void;
  using activation = Act;
  static constexpr std::size_t inputs = K, units = N, nnz = NNZ;

  static std::string name() {
    std::string s = "sparse_dense_rows<" + std::to_string(K) + ", " + std::to_string(N) + ", " + std::to_string(NNZ);
    if (!std::is_same_v<Act, identity>) s += ", " + Act::name();
    return s + ">";
  }

  template <Shape In, std::size_t Pos>
  static constexpr bool check() {
    constexpr bool in_ok = diag::sparse_dense_input_mismatch<diag::layer<Pos>, diag::input_elements<In::size>,
                                                             diag::kernel_rows<K>, (In::rank == 1 && In::size == K)>::value;
    constexpr bool nnz_ok = diag::sparse_dense_nnz_too_large<diag::layer<Pos>, (NNZ <= K * N)>::value;
    return in_ok && nnz_ok;
  }

  template <Shape In, class P, class Backend>
  using bind = sparse_dense_rows_layer<sparse_dense_rows, In, precision::policy_of_t<P>, Backend>;
};

namespace layout {
// strip_pruning's tag for sparse_dense_rows (pruning/layout.hpp).
struct rows {
  template <long long K, long long N, long long NNZ, class Act>
  using layer = sparse_dense_rows<std::size_t(K), std::size_t(N), std::size_t(NNZ), Act>;
};
}  // namespace layout

// The rows product for backend B: the CPU kernels of B's architecture.
template <class B>
struct sparse_rows_ops {
  using arch = typename ops<B>::arch;
  template <std::size_t K, std::size_t N, class T>
  static void forward(const T* x, const T* values, const std::uint32_t* starts, const std::uint16_t* idx, const T* b,
                      T* y, std::size_t m, bool relu, T* scratch) {
    kernels::cpu::rows::forward<K, N, arch>(x, values, starts, idx, b, y, m, relu, scratch);
  }
};

template <class Spec, Shape In, class P, class Backend>
struct sparse_dense_rows_layer {
  static_assert(P::uniform, "sparse_dense_rows: this backend has no mixed-precision specialization of this layer");
  static constexpr std::size_t K = Spec::inputs, N = Spec::units, NNZ = Spec::nnz;
  using Act = typename Spec::activation;
  using T = typename P::compute_type;
  using variable_type = typename P::variable_type;
  using compute_type = T;
  using in_shape = In;
  using out_shape = shape<N>;
  static constexpr std::array<buffer, 4> buffers{
      buffer::parameter("values", {NNZ}), buffer::parameter("bias", {N}),
      // starts (uint32, N + 1) then inputs (uint16, NNZ): the block is 64-byte aligned
      buffer::make(role::metadata, elem::u8, "index", {kernels::cpu::rows::meta_bytes(N, NNZ)}),
      buffer::cache("transposed", kernels::cpu::rows::scratch_per_sample(K, N))};
  static constexpr std::size_t parameter_count = count_of(buffers, role::parameter);
  static constexpr std::size_t state_count = 0;
  static constexpr std::size_t cache_per_sample = count_of(buffers, role::cache);
  static std::string name() { return Spec::name(); }

  static std::uint32_t* starts(std::byte* meta) { return reinterpret_cast<std::uint32_t*>(meta); }
  static std::uint16_t* inputs(std::byte* meta) { return reinterpret_cast<std::uint16_t*>(meta + 4 * (N + 1)); }

  // The layout contract: stores the weights keep marks (kernel: K x N row-major,
  // as dense stores it) and returns how many; more than NNZ: nothing is written.
  template <class V>
  static std::size_t pack(const V* kernel, const std::uint8_t* keep, V* values, std::byte* meta) {
    return kernels::cpu::rows::pack(kernel, keep, K, N, values, NNZ, starts(meta), inputs(meta));
  }

  // NNZ positions spread evenly over W (unit by unit), Glorot-uniform values.
  static void init(layer_slot<T> s, rng& g) {
    std::uint32_t* st = starts(s.metadata);
    std::uint16_t* in = inputs(s.metadata);
    const std::size_t total = K * N;
    const double limit = std::sqrt(6.0 / double(K + N));
    std::size_t p = 0, q = 0;
    for (std::size_t j = 0; j < N; ++j) {
      st[j] = std::uint32_t(p);
      for (std::size_t k = 0; k < K; ++k, ++q)
        if ((q + 1) * NNZ / total > q * NNZ / total) {
          in[p] = std::uint16_t(k);
          s.params[p++] = T(g.uniform(-limit, limit));
        }
    }
    st[N] = std::uint32_t(p);
    for (std::size_t j = 0; j < N; ++j) s.params[NNZ + j] = T(0);
  }

  static void forward(layer_slot<T> s, const T* x, T* y, run_info r) {
    constexpr bool fuse = std::is_same_v<Act, relu>;
    sparse_rows_ops<Backend>::template forward<K, N>(x, s.params, starts(s.metadata), inputs(s.metadata),
                                                     s.params + NNZ, y, r.batch, fuse, s.cache);
    if constexpr (!fuse) Act::template forward<Backend>(y, r.batch, N);
  }

  static void backward(layer_slot<T> s, const T* x, const T* y, T* dy, T* dx, run_info r) {
    Act::template backward<Backend>(y, dy, r.batch, N);
    kernels::cpu::rows::backward_reference(x, dy, s.params, starts(s.metadata), inputs(s.metadata), s.grads,
                                           s.grads + NNZ, dx, r.batch, K, N);
  }
};

}  // namespace ctnn
