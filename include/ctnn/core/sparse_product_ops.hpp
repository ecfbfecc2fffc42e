// ctnn/core/sparse_product_ops.hpp — has_sparse_product_ops<B>: the sparse products of ops<B>.
//
// Beside BackendOps (core/backend_ops.hpp), not part of it: a float32 dense or
// convolutional program parses no sparse index view. Checked where the sparse
// layers are: tests/device/test_parity_sparse.cpp, tests/cuda/test_ops.cu.
#pragma once
#include <cstddef>

#include "../kernels/sparse_index.hpp"

namespace ctnn {

template <class B>
struct ops;

// Sparse products: sparse_dense_forward / _backward<K, N>(index, ...) for every sparse layout's
// index view (kernels/sparse_index.hpp: bitmap, csc, rows, N:M). Not part of BackendOps: the CPU's
// kernels for a view are parsed only with its layer (ctnn/pruning.hpp includes them all), so it is
// checked where they are: tests/device/test_parity_sparse.cpp (cpu<>, the simulated device),
// tests/cuda/test_ops.cu (cuda<90>). Satisfied by: ops<cpu<A>> (sparse*.hpp), ops<cuda<SM>>
// (sparse_products.cuh).
template <class B>
concept has_sparse_product_ops = requires(const float* x, float* y, std::size_t m) {
  ops<B>::template sparse_dense_forward<4, 4>(kernels::bitmap_index{}, x, x, x, y, m, true, y);
  ops<B>::template sparse_dense_forward<4, 4>(kernels::csc_index{}, x, x, x, y, m, true, y);
  ops<B>::template sparse_dense_forward<4, 4>(kernels::rows_index{}, x, x, x, y, m, true, y);
  ops<B>::template sparse_dense_forward<4, 4>(kernels::nm_index<2, 4>{}, x, x, x, y, m, true, y);
  ops<B>::template sparse_dense_backward<4, 4>(kernels::bitmap_index{}, x, x, x, y, y, y, m);
  ops<B>::template sparse_dense_backward<4, 4>(kernels::csc_index{}, x, x, x, y, y, y, m);
  ops<B>::template sparse_dense_backward<4, 4>(kernels::rows_index{}, x, x, x, y, y, y, m);
  ops<B>::template sparse_dense_backward<4, 4>(kernels::nm_index<2, 4>{}, x, x, x, y, y, y, m);
};

}  // namespace ctnn
