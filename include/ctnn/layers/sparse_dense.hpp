// ctnn/layers/sparse_dense.hpp — sparse_dense<K, N, NNZ, Activation>: a dense layer with NNZ weights.
//
// Computes y = activation(x W + b) for a flat input of K features, where the
// kernel W[K, N] has at most NNZ non-zero weights, stored as the packed
// values [NNZ] (parameters), 16-column bitmaps [chunks, K] and chunk offsets
// [chunks + 1] (metadata: kernels/cpu/sparse.hpp), chunks = ceil(N / 16).
// It is what strip_pruning (pruning/strip.hpp) makes of a pruned dense layer:
// NNZ follows from the pruning schedule's final sparsity, so parameter_count
// (NNZ + N) and the memory plan are compile-time constants. Stored bytes:
// 4 NNZ + 4 N + 2 K chunks + 4 (chunks + 1), against 4 K N + 4 N dense.
// A fresh layer (make_model) spreads its NNZ weights evenly over W, Glorot-
// uniform as dense. Requires an input of K features (rank 1), 0 < NNZ <= K N.
// Output: shape<N>. Forward: xsimd (AVX-512 expand-loads); backward: the
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
#include "../kernels/cpu/sparse.hpp"
#include "../pruning/diagnostics.hpp"
#include "activation.hpp"

namespace ctnn {

template <class Spec, Shape In, class P, class Backend>
struct sparse_dense_layer;

template <std::size_t K, std::size_t N, std::size_t NNZ, Activation Act = identity>
struct sparse_dense {
  static_assert(K > 0 && N > 0 && NNZ > 0, "sparse_dense: K, N and NNZ must be > 0");
  using is_layer_spec = void;
  using activation = Act;
  static constexpr std::size_t inputs = K, units = N, nnz = NNZ;

  static std::string name() {
    std::string s = "sparse_dense<" + std::to_string(K) + ", " + std::to_string(N) + ", " + std::to_string(NNZ);
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
  using bind = sparse_dense_layer<sparse_dense, In, precision::policy_of_t<P>, Backend>;
};

template <class Spec, Shape In, class P, class Backend>
struct sparse_dense_layer {
  static_assert(P::uniform, "sparse_dense: this backend has no mixed-precision specialization of this layer");
  static constexpr std::size_t K = Spec::inputs, N = Spec::units, NNZ = Spec::nnz;
  static constexpr std::size_t chunks = kernels::cpu::sparse::chunks(N);
  using Act = typename Spec::activation;
  using T = typename P::compute_type;
  using O = ops<Backend>;
  using variable_type = typename P::variable_type;
  using compute_type = T;
  using in_shape = In;
  using out_shape = shape<N>;
  static constexpr std::array<buffer, 4> buffers{
      buffer::parameter("values", {NNZ}), buffer::parameter("bias", {N}),
      buffer::make(role::metadata, elem::u32, "offsets", {chunks + 1}),  // first: 4-byte aligned
      buffer::make(role::metadata, elem::u8, "bitmap", {chunks, K, 2})};  // 16 bits per chunk and row
  static constexpr std::size_t parameter_count = count_of(buffers, role::parameter);
  static constexpr std::size_t state_count = 0;
  static constexpr std::size_t cache_per_sample = 0;
  static std::string name() { return Spec::name(); }

  static std::uint32_t* offsets(std::byte* meta) { return reinterpret_cast<std::uint32_t*>(meta); }
  static std::uint16_t* bitmap(std::byte* meta) { return reinterpret_cast<std::uint16_t*>(meta + 4 * (chunks + 1)); }

  static void init(layer_slot<T> s, rng& g) {
    // NNZ positions spread evenly over W (in the packed order), Glorot-uniform values
    std::size_t p = 0, q = 0;
    std::uint32_t* off = offsets(s.metadata);
    std::uint16_t* bm = bitmap(s.metadata);
    const std::size_t total = K * N;
    const double limit = std::sqrt(6.0 / double(K + N));
    for (std::size_t c = 0; c < chunks; ++c) {
      off[c] = std::uint32_t(p);
      for (std::size_t k = 0; k < K; ++k) {
        unsigned m = 0;
        for (std::size_t l = 0; l < kernels::cpu::sparse::chunk_width && c * kernels::cpu::sparse::chunk_width + l < N; ++l, ++q)
          if ((q + 1) * NNZ / total > q * NNZ / total) {
            m |= 1u << l;
            s.params[p++] = T(g.uniform(-limit, limit));
          }
        bm[c * K + k] = std::uint16_t(m);
      }
    }
    off[chunks] = std::uint32_t(p);
    for (std::size_t j = 0; j < N; ++j) s.params[NNZ + j] = T(0);
  }

  static void forward(layer_slot<T> s, const T* x, T* y, run_info r) {
    constexpr bool fuse = std::is_same_v<Act, relu>;
    O::template sparse_dense_forward<K, N>(x, s.params, offsets(s.metadata), bitmap(s.metadata), s.params + NNZ, y,
                                           r.batch, fuse);
    if constexpr (!fuse) Act::template forward<Backend>(y, r.batch, N);
  }

  static void backward(layer_slot<T> s, const T* x, const T* y, T* dy, T* dx, run_info r) {
    Act::template backward<Backend>(y, dy, r.batch, N);
    kernels::cpu::sparse::backward_reference(x, dy, s.params, offsets(s.metadata), bitmap(s.metadata), s.grads,
                                             s.grads + NNZ, dx, r.batch, K, N);
  }
};

}  // namespace ctnn
