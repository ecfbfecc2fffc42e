// ctnn/layers/sparse_dense_csc.hpp — sparse_dense_csc<K, N, NNZ, Activation>: a dense layer with NNZ weights, by columns.
//
// Computes what sparse_dense does (layers/sparse_dense.hpp), y =
// activation(x W + b) with at most NNZ non-zero weights, but stores W by
// columns (CSC: values [NNZ], 16-bit input rows [NNZ], column starts
// [N + 1]; kernels/cpu/sparse_csc.hpp), so inference work falls with NNZ:
// it is the layout for speed, the bitmap one for size. Stored bytes:
// 6 NNZ + 4 N + 4 (N + 1) (bitmap: 4 NNZ + 2 K ceil(N/16) + ...), so it is
// smaller than dense only below about 2/3 of the weights. Cache: K + N
// values per sample (transposes). Made by strip_pruning_csc
// (pruning/strip_csc.hpp). Requires K <= 65536, an input of K features, 0 <
// NNZ <= K N. Output: shape<N>. Forward: AVX-512 gathers (batch < 16) or
// batch-vectorized FMAs; other architectures the scalar reference;
// backward: the scalar reference.
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
#include "../kernels/cpu/sparse_csc.hpp"
#include "../pruning/diagnostics.hpp"
#include "activation.hpp"

namespace ctnn {

// The CSC product for backend B: the CPU kernels of B's architecture (any
// backend whose ops<B> names an `arch`, as ops<cpu<Arch>> and those built on it).
template <class B>
struct sparse_csc_ops {
  using arch = typename ops<B>::arch;
  template <std::size_t K, std::size_t N, class T>
  static void forward(const T* x, const T* values, const std::uint32_t* col, const std::uint16_t* rows, const T* b, T* y,
                      std::size_t m, bool relu, T* scratch) {
    kernels::cpu::csc::forward<K, N, arch>(x, values, col, rows, b, y, m, relu, scratch);
  }
};

template <class Spec, Shape In, class P, class Backend>
struct sparse_dense_csc_layer;

template <std::size_t K, std::size_t N, std::size_t NNZ, Activation Act = identity>
struct sparse_dense_csc {
  static_assert(K > 0 && N > 0 && NNZ > 0, "sparse_dense_csc: K, N and NNZ must be > 0");
  static_assert(K <= 65536, "sparse_dense_csc: K must be <= 65536 (16-bit row indices)");
  using is_layer_spec = void;
  using activation = Act;
  static constexpr std::size_t inputs = K, units = N, nnz = NNZ;

  static std::string name() {
    std::string s = "sparse_dense_csc<" + std::to_string(K) + ", " + std::to_string(N) + ", " + std::to_string(NNZ);
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
  using bind = sparse_dense_csc_layer<sparse_dense_csc, In, precision::policy_of_t<P>, Backend>;
};

template <class Spec, Shape In, class P, class Backend>
struct sparse_dense_csc_layer {
  static_assert(P::uniform, "sparse_dense_csc: this backend has no mixed-precision specialization of this layer");
  static constexpr std::size_t K = Spec::inputs, N = Spec::units, NNZ = Spec::nnz;
  using Act = typename Spec::activation;
  using T = typename P::compute_type;
  using variable_type = typename P::variable_type;
  using compute_type = T;
  using in_shape = In;
  using out_shape = shape<N>;
  static constexpr std::array<buffer, 5> buffers{
      buffer::parameter("values", {NNZ}), buffer::parameter("bias", {N}),
      buffer::make(role::metadata, elem::u32, "columns", {N + 1}),  // first: 4-byte aligned
      buffer::make(role::metadata, elem::u8, "rows", {NNZ, 2}),     // 16-bit input rows
      buffer::cache("transposed", kernels::cpu::csc::scratch_per_sample(K, N))};
  static constexpr std::size_t parameter_count = count_of(buffers, role::parameter);
  static constexpr std::size_t state_count = 0;
  static constexpr std::size_t cache_per_sample = count_of(buffers, role::cache);
  static std::string name() { return Spec::name(); }

  static std::uint32_t* columns(std::byte* meta) { return reinterpret_cast<std::uint32_t*>(meta); }
  static std::uint16_t* rows(std::byte* meta) { return reinterpret_cast<std::uint16_t*>(meta + 4 * (N + 1)); }

  // NNZ positions spread evenly over W (column by column), Glorot-uniform values.
  static void init(layer_slot<T> s, rng& g) {
    std::uint32_t* col = columns(s.metadata);
    std::uint16_t* row = rows(s.metadata);
    const std::size_t total = K * N;
    const double limit = std::sqrt(6.0 / double(K + N));
    std::size_t p = 0, q = 0;
    for (std::size_t j = 0; j < N; ++j) {
      col[j] = std::uint32_t(p);
      for (std::size_t k = 0; k < K; ++k, ++q)
        if ((q + 1) * NNZ / total > q * NNZ / total) {
          row[p] = std::uint16_t(k);
          s.params[p++] = T(g.uniform(-limit, limit));
        }
    }
    col[N] = std::uint32_t(p);
    for (std::size_t j = 0; j < N; ++j) s.params[NNZ + j] = T(0);
  }

  static void forward(layer_slot<T> s, const T* x, T* y, run_info r) {
    constexpr bool fuse = std::is_same_v<Act, relu>;
    sparse_csc_ops<Backend>::template forward<K, N>(x, s.params, columns(s.metadata), rows(s.metadata), s.params + NNZ,
                                                    y, r.batch, fuse, s.cache);
    if constexpr (!fuse) Act::template forward<Backend>(y, r.batch, N);
  }

  static void backward(layer_slot<T> s, const T* x, const T* y, T* dy, T* dx, run_info r) {
    Act::template backward<Backend>(y, dy, r.batch, N);
    kernels::cpu::csc::backward_reference(x, dy, s.params, columns(s.metadata), rows(s.metadata), s.grads,
                                          s.grads + NNZ, dx, r.batch, K, N);
  }
};

}  // namespace ctnn
