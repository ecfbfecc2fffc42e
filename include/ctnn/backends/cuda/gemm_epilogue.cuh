// ctnn/cuda/gemm_epilogue.cuh — ctnn's own dense GEMM with any rule fused into its epilogue.
//
// gemm_epilogue<T>(x, w, b, y, m, K, N, e): y[m, N] = e.forward(x[m, K] W[K, N] + b[N]),
// row-major as the dense layers store them, for any rule e of kernels/functors.hpp
// or a list of them (fn::chain<F...>), applied to the float32 sums before the
// single store. T: float, __half, __nv_bfloat16 (or the host names float16_t,
// bfloat16_t); float32 accumulation, as cuBLASLt's compute type for them. The
// tile loop (shared-memory tiles, 4 x 4 register blocks, any m, K, N) is
// kernels/tiled_gemm.hpp's, which a CPU test runs thread by thread; this file
// only launches it. b may be null. Queued on cuda_context::get().compute().
// ops<cuda<SM>>::dense_forward runs it for every rule cuBLASLt's epilogues do
// not express (docs/cuda.md, "What fuses where").
#pragma once
#include <cstddef>

#include "../../kernels/tiled_gemm.hpp"
#include "context.cuh"
#include "error.cuh"
#include "types.cuh"

namespace ctnn {

namespace cuda_kernels {

template <class T, class E>
__global__ void __launch_bounds__(kernels::gemm_tile::threads)
    dense_epilogue(const T* x, const T* w, const T* b, T* y, std::size_t m, std::size_t K, std::size_t N, E e) {
  using G = kernels::gemm_tile;
  __shared__ G::a_tile as;
  __shared__ G::b_tile bs;
  const unsigned t = threadIdx.x;
  const std::size_t col0 = std::size_t(blockIdx.x) * G::BN;
  const auto load = [](T v) { return cuda_detail::load(v); };
  const auto store = [](float v) { return cuda_detail::store<T>(v); };
  for (std::size_t rb = blockIdx.y; rb < G::row_blocks(m); rb += gridDim.y) {  // the same count in every thread
    const std::size_t row0 = rb * G::BM;
    G::accumulators acc = {};
    for (std::size_t k0 = 0; k0 < K; k0 += G::BK) {
      G::stage(t, row0, col0, k0, x, w, m, K, N, as, bs, load);
      __syncthreads();
      G::multiply(t, as, bs, acc);
      __syncthreads();
    }
    G::finish(t, row0, col0, acc, b, y, m, N, e, load, store);
  }
}

}  // namespace cuda_kernels

template <cuda_storage T, class E>
void gemm_epilogue(const T* x, const T* w, const T* b, T* y, std::size_t m, std::size_t K, std::size_t N, const E& e) {
  using G = kernels::gemm_tile;
  if (m == 0 || N == 0) return;
  const dim3 grid(unsigned(G::grid_x(N)), unsigned(G::grid_y(m)));
  cuda_kernels::dense_epilogue<T, E><<<grid, G::threads, 0, cuda_context::get().compute()>>>(x, w, b, y, m, K, N, e);
  CTNN_CUDA_CHECK(cudaGetLastError());
}

}  // namespace ctnn
