// ctnn/backends/cpu/sparse_kernels.hpp — which CPU kernels run a sparse layout's products.
//
// sparse_kernels<Index> (Index: a view of kernels/sparse_index.hpp) has
//   template <std::size_t K, std::size_t N, class Arch, class T>
//   static void forward(const Index&, const T* x, const T* values, const T* bias, T* y,
//                       std::size_t batch, bool relu, T* scratch);
//   template <std::size_t K, std::size_t N, class T>
//   static void backward(const Index&, const T* x, const T* dz, const T* values, T* dvalues,
//                        T* dbias, T* dx, std::size_t batch);
// (dz: dL/d(pre-activation); dvalues and dbias overwritten; dx may be null), and, for
// the layouts that decode (decode_batches below not empty),
//   template <std::size_t K, std::size_t N, class Arch, class T>
//   static void decode(const Index&, const T* values, T* w);   // w [K x N] row-major, 0 where not kept
//   template <std::size_t K, std::size_t N, class Arch, class T>
//   static void gather(const Index&, const T* w, T* values, std::size_t capacity);  // decode's inverse
// (gather: values [capacity] = w at the kept positions, 0 past them: a decoding layer's values'
// gradient from the dense dW = X^T dZ, layers/sparse_dense.hpp).
// It is specialized beside each layout's kernels (sparse.hpp, sparse_csc.hpp,
// sparse_rows.hpp, sparse_nm.hpp), which the layout's layer includes;
// ops<cpu<Arch>>::sparse_dense_forward / _backward (ops.hpp) call it, so
// ops.hpp parses none of those kernels nor the index views (a float32 dense
// or conv program parses no sparse header).
// decode_batches<Index, Arch>: the batches [from, below) at which a stripped layer of layout Index
// computes from its weights decoded to dense (the model keeps them in the plan's role::derived
// region, layers/sparse_dense.hpp) instead of running the layout's kernels: where those measured
// slower than dense (docs/pruning.md, "Decoded weights"). Empty (never) unless specialized beside
// the layout's kernels.
#pragma once
#include <cstddef>

namespace ctnn::kernels::cpu {

template <class Index>
struct sparse_kernels;

struct batch_range {
  std::size_t from = 0, below = 0;
  constexpr bool contains(std::size_t batch) const { return batch >= from && batch < below; }
  constexpr bool empty() const { return below <= from; }
};
inline constexpr batch_range every_batch{1, std::size_t(-1)};

template <class Index, class Arch>
inline constexpr batch_range decode_batches{};

// Whether layout Index computes a decoding layer's values' gradient (and the bias') straight from x
// and dz for K x N, Arch and T: sparse_kernels<Index>::weights_gradient<K, N, Arch>(index, x, dz,
// dvalues, db, capacity, batch), where the layer would otherwise write the dense dW into its
// "decoded_gradient" scratch and gather it (layers/sparse_dense.hpp; where it holds, the plan holds no
// such scratch). False unless specialized beside the layout's kernels (nm<Nk, M> on AVX-512 and
// AVX2: sparse_nm.hpp).
template <class Index, std::size_t K, std::size_t N, class Arch, class T>
inline constexpr bool fused_weights_gradient_v = false;

}  // namespace ctnn::kernels::cpu
