// ctnn/cuda/fused_mlp.cuh — inference of a small MLP as ONE kernel (as tiny-cuda-nn's fully fused MLP).
//
// A network whose bound layers are dense layers (identity, relu, sigmoid or
// tanh; at most fused_mlp_width = 128 inputs and outputs each) and
// flatten/reshape layers fits: fused_mlp_fits<Layers>() says so at compile
// time, and the device model (cuda/model.cuh) then runs inference
// (forward(x, batch, false), predict, forward_graph) through
// fused_mlp_forward instead of one GEMM and kernel per layer, unless
// options().fused_mlp is false. One block owns a tile of fused_mlp_rows rows
// of the batch: it loads the tile's inputs into shared memory (float), then
// for each dense layer loads that layer's kernel and bias (widened to float)
// into shared memory and computes every output of the tile from them
// (float32 accumulation in k order; the activation applied in float; each
// layer's output rounded to the storage type T, as the unfused path stores
// it), and writes the last layer's rows. Shared memory: the largest K x N
// kernel + 128 bias + two 16 x 128 tiles, in floats (at most 82 432 bytes):
// fused_mlp_ready() asks the device for it once (an opt-in above 48 KiB) and
// is false when the device cannot give it (the model then stays unfused).
// Inference only: training runs the unfused layers (their backward needs
// every layer's output, which the fused kernel keeps in shared memory).
// It runs on CUDA cores, not Tensor Cores: its gain is one launch instead of
// two or three per layer, which is what small batches pay for.
#pragma once
#include <array>
#include <cstddef>
#include <tuple>
#include <type_traits>

#include "../layers/activation.hpp"
#include "../layers/dense.hpp"
#include "../layers/reshape.hpp"
#include "context.cuh"
#include "error.cuh"
#include "types.cuh"

namespace ctnn {

inline constexpr std::size_t fused_mlp_width = 128;
inline constexpr std::size_t fused_mlp_rows = 16;

namespace cuda_detail {

// How one bound layer takes part in the fused MLP: -1 it cannot; 0 it is a
// reshape (no work); 1 a dense layer. act: 0 identity, 1 relu, 2 sigmoid, 3 tanh.
template <class L>
struct fused_role {
  static constexpr int kind = -1;
};
template <class A>
constexpr int fused_act_code() {
  if constexpr (std::is_same_v<A, ctnn::identity>) return 0;
  else if constexpr (std::is_same_v<A, ctnn::relu>) return 1;
  else if constexpr (std::is_same_v<A, ctnn::sigmoid>) return 2;
  else if constexpr (std::is_same_v<A, ctnn::tanh>) return 3;
  else return -1;
}
template <class Spec, Shape In, class P, class B>
struct fused_role<dense_layer<Spec, In, P, B>> {
  using L = dense_layer<Spec, In, P, B>;
  static constexpr int act = fused_act_code<typename Spec::activation>();
  static constexpr bool fits = act >= 0 && L::K <= fused_mlp_width && L::N <= fused_mlp_width;
  static constexpr int kind = fits ? 1 : -1;
  static constexpr std::size_t k = L::K, n = L::N;
};
template <class Spec, Shape In, class P, class B>
struct fused_role<reshape_layer<Spec, In, P, B>> {
  static constexpr int kind = 0;
};

template <class T, int D>
struct fused_mlp_params {
  const T* w[D];  // layer d's kernel [k, n], then its bias [n]
  int k[D], n[D], act[D];
};

__device__ inline float fused_activation(int a, float z) {
  switch (a) {
    case 1: return z > 0.0f ? z : 0.0f;
    case 2: return z >= 0.0f ? 1.0f / (1.0f + expf(-z)) : expf(z) / (1.0f + expf(z));
    case 3: return tanhf(z);
    default: return z;
  }
}

// One block per tile of R rows; smem = [max k*n kernel][128 bias][R x 128 in][R x 128 out] floats.
template <class T, int D, int R>
__global__ void fused_mlp_forward(const fused_mlp_params<T, D> p, int max_kn, const T* x, T* y, std::size_t rows) {
  extern __shared__ float smem[];
  constexpr int W = int(fused_mlp_width);
  float* w = smem;
  float* b = w + max_kn;
  float* a = b + W;
  float* o = a + R * W;
  const std::size_t r0 = std::size_t(blockIdx.x) * R;
  if (r0 >= rows) return;  // the whole block leaves together
  const int nr = rows - r0 < std::size_t(R) ? int(rows - r0) : R;
  const int k0 = p.k[0];
  for (int i = threadIdx.x; i < nr * k0; i += blockDim.x) a[(i / k0) * W + i % k0] = load(x[(r0 + i / k0) * k0 + i % k0]);
  for (int d = 0; d < D; ++d) {
    const int K = p.k[d], N = p.n[d], act = p.act[d];
    __syncthreads();  // the previous layer is done reading w and writing its output
    for (int i = threadIdx.x; i < K * N; i += blockDim.x) w[i] = load(p.w[d][i]);
    for (int j = threadIdx.x; j < N; j += blockDim.x) b[j] = load(p.w[d][K * N + j]);
    __syncthreads();
    for (int i = threadIdx.x; i < nr * N; i += blockDim.x) {
      const int r = i / N, j = i % N;
      float acc = 0.0f;
      for (int k = 0; k < K; ++k) acc = fmaf(a[r * W + k], w[k * N + j], acc);
      o[r * W + j] = load(store<T>(fused_activation(act, acc + b[j])));
    }
    float* t = a;  // this layer's output is the next one's input
    a = o;
    o = t;
  }
  __syncthreads();
  const int N = p.n[D - 1];
  for (int i = threadIdx.x; i < nr * N; i += blockDim.x) y[(r0 + i / N) * N + i % N] = store<T>(a[(i / N) * W + i % N]);
}

template <class Layers>
struct fused_plan {
  static constexpr std::size_t count = std::tuple_size_v<Layers>;
  template <std::size_t... I>
  static constexpr bool all_fit(std::index_sequence<I...>) {
    return ((fused_role<std::tuple_element_t<I, Layers>>::kind >= 0) && ...);
  }
  template <std::size_t... I>
  static constexpr int dense_count(std::index_sequence<I...>) {
    return ((fused_role<std::tuple_element_t<I, Layers>>::kind == 1 ? 1 : 0) + ...);
  }
  static constexpr bool fits = all_fit(std::make_index_sequence<count>{});
  static constexpr int dense = fits ? dense_count(std::make_index_sequence<count>{}) : 0;
  // the largest kernel, in values
  static constexpr int max_kn = [] {
    std::size_t m = 0;
    if constexpr (fits)
      [&]<std::size_t... I>(std::index_sequence<I...>) {
        ((void)[&] {
          using F = fused_role<std::tuple_element_t<I, Layers>>;
          if constexpr (F::kind == 1) m = m > F::k * F::n ? m : F::k * F::n;
        }(), ...);
      }(std::make_index_sequence<count>{});
    return int(m);
  }();
  static constexpr std::size_t shared_bytes = (std::size_t(max_kn) + fused_mlp_width + 2 * fused_mlp_rows * fused_mlp_width) * 4;
};

}  // namespace cuda_detail

// Whether the bound layers Layers (a std::tuple) run as the fused MLP kernel.
template <class Layers>
constexpr bool fused_mlp_fits() {
  return cuda_detail::fused_plan<Layers>::fits && cuda_detail::fused_plan<Layers>::dense > 0;
}

// Whether the current device gives the kernel its shared memory (asked once per process and network).
template <class Layers>
bool fused_mlp_ready() {
  if constexpr (!fused_mlp_fits<Layers>()) {
    return false;
  } else {
    using P = cuda_detail::fused_plan<Layers>;
    using T = typename std::tuple_element_t<0, Layers>::compute_type;
    static const bool ok = [] {
      int dev = 0, optin = 0;
      if (cudaGetDevice(&dev) != cudaSuccess ||
          cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev) != cudaSuccess) {
        cudaGetLastError();
        return false;
      }
      if (P::shared_bytes > std::size_t(optin)) return false;
      if (P::shared_bytes > 48 * 1024 &&
          cudaFuncSetAttribute(cuda_detail::fused_mlp_forward<T, P::dense, int(fused_mlp_rows)>,
                               cudaFuncAttributeMaxDynamicSharedMemorySize, int(P::shared_bytes)) != cudaSuccess) {
        cudaGetLastError();
        return false;
      }
      return true;
    }();
    return ok;
  }
}

// y[batch, out] = the network on x[batch, in] (device rows), queued on the
// compute stream. params.template operator()<I>() is layer I's parameter
// pointer (its kernel, then its bias). Call only when fused_mlp_ready<Layers>().
template <class Layers, class T, class Params>
void fused_mlp_forward(const T* x, T* y, std::size_t batch, Params&& params) {
  using P = cuda_detail::fused_plan<Layers>;
  static_assert(fused_mlp_fits<Layers>(), "fused_mlp_forward: the network does not fit the fused MLP kernel");
  cuda_detail::fused_mlp_params<T, P::dense> p{};
  int d = 0;
  [&]<std::size_t... I>(std::index_sequence<I...>) {
    ((void)[&] {
      using F = cuda_detail::fused_role<std::tuple_element_t<I, Layers>>;
      if constexpr (F::kind == 1) {
        p.w[d] = params.template operator()<I>();
        p.k[d] = int(F::k);
        p.n[d] = int(F::n);
        p.act[d] = F::act;
        ++d;
      }
    }(), ...);
  }(std::make_index_sequence<P::count>{});
  const std::size_t blocks = (batch + fused_mlp_rows - 1) / fused_mlp_rows;
  if (blocks > 0x7fffffffu) throw cuda_error("ctnn cuda: fused_mlp_forward: the batch is too large for one grid");
  cuda_detail::fused_mlp_forward<T, P::dense, int(fused_mlp_rows)>
      <<<unsigned(blocks), 256, P::shared_bytes, cuda_context::get().compute()>>>(p, P::max_kn, x, y, batch);
  CTNN_CUDA_CHECK(cudaGetLastError());
}

}  // namespace ctnn
