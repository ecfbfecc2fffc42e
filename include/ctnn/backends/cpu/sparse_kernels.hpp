// ctnn/backends/cpu/sparse_kernels.hpp — which CPU kernels run a sparse layout's products.
//
// sparse_kernels<Index> (Index: a view of kernels/sparse_index.hpp) has
//   template <std::size_t K, std::size_t N, class Arch, class T>
//   static void forward(const Index&, const T* x, const T* values, const T* bias, T* y,
//                       std::size_t batch, bool relu, T* scratch);
//   template <std::size_t K, std::size_t N, class T>
//   static void backward(const Index&, const T* x, const T* dz, const T* values, T* dvalues,
//                        T* dbias, T* dx, std::size_t batch);
// (dz: dL/d(pre-activation); dvalues and dbias overwritten; dx may be null).
// It is specialized beside each layout's kernels (sparse.hpp, sparse_csc.hpp,
// sparse_rows.hpp, sparse_nm.hpp), which the layout's layer includes;
// ops<cpu<Arch>>::sparse_dense_forward / _backward (ops.hpp) call it, so
// ops.hpp parses none of those kernels nor the index views (a float32 dense
// or conv program parses no sparse header).
#pragma once

namespace ctnn::kernels::cpu {

template <class Index>
struct sparse_kernels;

}  // namespace ctnn::kernels::cpu
