// ctnn/layers/sparse_dense_block.hpp — sparse_dense_block<K, N, NNZ, R, C, Activation>: a dense layer keeping R x C blocks.
//
// Computes y = activation(x W + b) for a flat input of K features, where the
// kernel W[K, N] keeps NB = NNZ / (R C) blocks of R inputs by C units, stored
// whole (backends/cpu/sparse_block.hpp): the values [NNZ] (parameters) and
// one metadata buffer "index": block column starts [N / C + 1] (uint32), then
// block rows [NB] (uint16). Stored bytes: 4 NNZ + 4 N + 4 (N / C + 1) + 2 NB.
// Each kept block costs R broadcasts and R C / L vector FMAs, no gather
// (XNNPACK's sparse inference): the layout for speed when the model was
// pruned with the block<R, C> pattern (pruning/masks.hpp); layout::block<R, C>
// is its tag for strip_pruning (pruning/strip.hpp), which passes NNZ = the
// kept blocks' weights. Requires R | K, C | N, R C | NNZ <= K N, K / R <=
// 65536, an input of K features (rank 1). Output: shape<N>. A fresh layer
// keeps NB blocks spread evenly, Glorot-uniform. Products through ops<B> with
// the index view kernels::block_index<R, C>. Figures: docs/pruning.md.
#pragma once
#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "../backends/cpu/ops.hpp"
#include "../backends/cpu/sparse_block.hpp"
#include "../core/backend.hpp"
#include "../core/concepts.hpp"
#include "../core/plan.hpp"
#include "../core/shape.hpp"
#include "../kernels/sparse_index.hpp"
#include "activation.hpp"
#include "sparse_dense.hpp"

namespace ctnn {

template <class Spec, Shape In, class P, class Backend>
struct sparse_dense_block_layer;

template <std::size_t K, std::size_t N, std::size_t NNZ, std::size_t R, std::size_t C, Activation Act = identity>
struct sparse_dense_block : detail::sparse_dense_spec<sparse_dense_block<K, N, NNZ, R, C, Act>, K, N, NNZ, Act> {
  static_assert(R > 0 && C > 0 && K % R == 0 && N % C == 0,
                "sparse_dense_block: the R x C blocks must tile the K x N kernel");
  static_assert(NNZ % (R * C) == 0, "sparse_dense_block: NNZ must be a whole number of R x C blocks");
  static_assert(K / R <= 65536, "sparse_dense_block: K / R must be <= 65536 (16-bit block rows)");
  static constexpr const char* spec_name = "sparse_dense_block";
  static constexpr std::size_t block_rows = R, block_cols = C;
  static std::string name() {
    std::string s = "sparse_dense_block<" + std::to_string(K) + ", " + std::to_string(N) + ", " + std::to_string(NNZ) +
                    ", " + std::to_string(R) + ", " + std::to_string(C);
    if (!std::is_same_v<Act, identity>) s += ", " + Act::name();
    return s + ">";
  }
  template <Shape In, class P, class Backend>
  using bind =
      sparse_dense_block_layer<sparse_dense_block, In, precision::float_compute_t<precision::policy_of_t<P>>, Backend>;
};

namespace layout {
// strip_pruning's tag for sparse_dense_block (pruning/layout.hpp): for models
// pruned with block<R, C>; the NNZ passed is rounded up to whole blocks.
template <std::size_t R, std::size_t C>
struct block {
  template <long long K, long long N, long long NNZ, class Act>
  using layer = sparse_dense_block<std::size_t(K), std::size_t(N), (std::size_t(NNZ) + R * C - 1) / (R * C) * (R * C),
                                   R, C, Act>;
  static std::string name() { return "block<" + std::to_string(R) + ", " + std::to_string(C) + ">"; }
};
}  // namespace layout

template <class Spec, Shape In, class P, class Backend>
struct sparse_dense_block_layer : detail::sparse_dense_common<Spec, In, P> {
  using base = detail::sparse_dense_common<Spec, In, P>;
  using base::K, base::N, base::NNZ;
  using typename base::T;
  static constexpr std::size_t R = Spec::block_rows, C = Spec::block_cols, NB = NNZ / (R * C);
  // The index: block column starts, then block rows.
  using index = kernels::packed_index<kernels::field<std::uint32_t, N / C + 1>, kernels::field<std::uint16_t, NB>>;
  static constexpr std::array<buffer, 3> buffers{buffer::parameter("values", {NNZ}), buffer::parameter("bias", {N}),
                                                 buffer::make(role::metadata, elem::u8, "index", {index::bytes})};
  static constexpr std::size_t parameter_count = count_of(buffers, role::parameter);
  static constexpr std::size_t cache_per_sample = 0;

  static kernels::block_index<R, C> view(const std::byte* meta) {
    return {index::template at<0>(meta), index::template at<1>(meta)};
  }

  // The layout contract (docs/pruning.md): keeps every block holding a weight `keep` marks; returns
  // the count marked, or more than NNZ when those blocks do not fit (nothing written then).
  template <class V>
  static std::size_t pack(const V* kernel, const std::uint8_t* keep, V* values, std::byte* meta) {
    return kernels::cpu::block::pack(kernel, keep, K, N, R, C, values, NB, index::template at<0>(meta),
                                     index::template at<1>(meta));
  }

  // NB blocks spread evenly over the block grid, Glorot-uniform values.
  static void init(layer_slot<T> s, rng& g) {
    const std::size_t blocks = K / R * (N / C);
    const double limit = std::sqrt(6.0 / double(K + N));
    std::vector<T> w(K * N, T(0));
    std::vector<std::uint8_t> keep(K * N, 0);
    for (std::size_t q = 0; q < blocks; ++q)
      if ((q + 1) * NB / blocks > q * NB / blocks) {
        const std::size_t kb = q / (N / C), jb = q % (N / C);
        for (std::size_t r = 0; r < R; ++r)
          for (std::size_t c = 0; c < C; ++c) {
            const std::size_t i = (kb * R + r) * N + jb * C + c;
            keep[i] = 1;
            w[i] = T(g.uniform(-limit, limit));
          }
      }
    pack<T>(w.data(), keep.data(), s.params, s.metadata);
    for (std::size_t j = 0; j < N; ++j) s.params[NNZ + j] = T(0);
  }

  // The index as a file holds it (io/weights.hpp checks it before loading): "" when the kernels can run on it.
  static std::string check_metadata(std::string_view, const std::byte* meta) {
    return kernels::cpu::block::validate(index::template read<0>(meta).data(), index::template read<1>(meta).data(), K,
                                         N, R, C, NB);
  }

  static void forward(layer_slot<T> s, const T* x, T* y, run_info r) {
    base::template forward_as<sparse_dense_block_layer, Backend>(s, x, y, r);
  }
  static void backward(layer_slot<T> s, const T* x, const T* y, T* dy, T* dx, run_info r) {
    base::template backward_as<sparse_dense_block_layer, Backend>(s, x, y, dy, dx, r);
  }
};

}  // namespace ctnn
