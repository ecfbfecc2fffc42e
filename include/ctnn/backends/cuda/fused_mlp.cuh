// ctnn/backends/cuda/fused_mlp.cuh — a small MLP as ONE kernel (as tiny-cuda-nn's fully fused MLP).
//
// Fits (fused_mlp_fits<Layers>(), at compile time): dense layers whose
// activation has a rule of kernels/functors.hpp (identity, relu, leaky_relu,
// sigmoid, tanh: every activation the CPU fuses into its GEMM; softmax does
// not fit), at most fused_mlp_width = 128 inputs and outputs each, plus
// flatten/reshape layers, all of one compute type. Each layer's activation
// is a template parameter of the kernel (its functor, the formula the CPU
// runs), never a code. One block owns a tile of fused_mlp_rows rows: inputs,
// one layer's kernel and bias and the outputs in shared memory (float),
// float32 sums in k order, each layer's output rounded to T as the unfused
// path stores it. The training backward (fused_mlp_backward) adds each
// block's tile gradients to its row of partial sums (the cuBLASLt
// workspace), summed in block order by a second kernel (deterministic).
// fused_mlp_ready / fused_mlp_backward_ready ask the device once for the
// shared memory. ops<cuda<SM>> offers both as the optional hook of
// core/fused_mlp_hook.hpp. The tile phases (fused_tile_*) are __host__
// __device__: tests/cuda/test_fused_tile.cu runs them on the host. Details:
// docs/cuda.md.
#pragma once
#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>
#include <tuple>
#include <type_traits>

#include "../../config.hpp"
#include "../../core/fused_mlp_hook.hpp"
#include "../../kernels/functors.hpp"
#include "../../layers/activation.hpp"
#include "../../layers/dense.hpp"
#include "../../layers/reshape.hpp"
#include "context.cuh"
#include "error.cuh"
#include "types.cuh"

namespace ctnn {

inline constexpr std::size_t fused_mlp_width = 128;
inline constexpr std::size_t fused_mlp_rows = 16;

namespace cuda_detail {

// The activation rules of the fused dense layers, one per layer in order
// (kernels/functors.hpp); visit(d, f) calls f(rule of dense layer d). The rules are held
// as fn::chain's indexed links (fn::detail::link<I, A>), flat bases, not a nested tuple.
template <class Seq, class... A>
struct fused_acts_impl;
template <std::size_t... I, class... A>
struct fused_acts_impl<std::index_sequence<I...>, A...> : fn::detail::link<I, A>... {
  static constexpr int size = int(sizeof...(A));
  static constexpr fused_acts_impl make(A... a) {
    fused_acts_impl r{};
    ((void)(static_cast<fn::detail::link<I, A>&>(r).f = a), ...);
    return r;
  }
  template <class F>
  CTNN_HOST_DEVICE void visit(int d, F&& f) const {
    ((void)(d == int(I) ? (f(static_cast<const fn::detail::link<I, A>&>(*this).f), 0) : 0), ...);
  }
};
template <class... A>
using fused_acts = fused_acts_impl<std::index_sequence_for<A...>, A...>;

// How one bound layer takes part in the fused MLP: kind -1 it cannot; 0 a
// reshape (no work); 1 a dense layer, whose rule() is its activation's functor.
template <class L>
struct fused_role {
  static constexpr int kind = -1;
};
template <class Spec, Shape In, class P, class B>
struct fused_role<dense_layer<Spec, In, P, B>> {
  using L = dense_layer<Spec, In, P, B>;
  using Act = typename Spec::activation;
  static constexpr bool has_rule = requires { Act::template rule<float>(); };
  static constexpr bool fits = has_rule && L::K <= fused_mlp_width && L::N <= fused_mlp_width;
  static constexpr int kind = fits ? 1 : -1;
  static constexpr std::size_t k = L::K, n = L::N;
  static constexpr auto rule() { return Act::template rule<float>(); }
};
template <class Spec, Shape In, class P, class B>
struct fused_role<reshape_layer<Spec, In, P, B>> {
  static constexpr int kind = 0;
};

// The rules of Layers' dense layers as a std::tuple, then as fused_acts.
template <class L>
constexpr auto fused_rule_of() {
  if constexpr (fused_role<L>::kind == 1) return std::tuple{fused_role<L>::rule()};
  else return std::tuple<>{};
}
template <class Tuple>
struct fused_acts_of;
template <class... A>
struct fused_acts_of<std::tuple<A...>> {
  using type = fused_acts<A...>;
  static constexpr type make(const std::tuple<A...>& t) {
    return std::apply([](A... a) { return type::make(a...); }, t);
  }
};
template <class Layers>
constexpr auto fused_rules() {
  return []<std::size_t... I>(std::index_sequence<I...>) {
    return std::tuple_cat(fused_rule_of<std::tuple_element_t<I, Layers>>()...);
  }(std::make_index_sequence<std::tuple_size_v<Layers>>{});
}

template <class T, class Acts>
struct fused_mlp_params {
  static constexpr int D = Acts::size;
  const T* w[D];  // layer d's kernel [k, n], then its bias [n]
  int k[D], n[D];
  Acts act;  // layer d's activation rule
};

// ---- the tile logic: shared by the kernels and the host test (tests/cuda/test_fused_tile.cu) ----
// A tile is nr <= R rows of the batch, held as float rows of stride
// fused_mlp_width (W); a layer's kernel w is [K, N] row-major (Keras'
// layout), its bias b [N]. Each function is one phase of a block between two
// __syncthreads(): thread t of nt takes the elements t, t + nt, ... (a host
// loop over t simulates the block). Values stored as the unfused path stores
// them are rounded to T (load(store<T>(v))); sums are float32 in a fixed order.
// act: the layer's activation rule (kernels/functors.hpp), run on float.

// o[r, j] = act.forward(sum_k a[r, k] w[k, j] + b[j]), rounded to T.
template <class T, class Act>
CTNN_HOST_DEVICE void fused_tile_forward(int t, int nt, const float* a, const float* w, const float* b, int K, int N,
                                         Act act, int nr, float* o) {
  constexpr int W = int(fused_mlp_width);
  for (int i = t; i < nr * N; i += nt) {
    const int r = i / N, j = i % N;
    float acc = 0.0f;
    for (int k = 0; k < K; ++k) acc = fmaf(a[r * W + k], w[k * N + j], acc);
    o[r * W + j] = load(store<T>(act.forward(acc + b[j])));
  }
}
// d[r, j] = act.backward(y[r, j], d[r, j]) in place (dL/dz from dL/dy),
// rounded to T; y has row stride ldy (the layer's output rows in global memory: N).
template <class T, class Y, class Act>
CTNN_HOST_DEVICE void fused_tile_activation_backward(int t, int nt, const Y* y, int ldy, float* d, int N, Act act,
                                                     int nr) {
  constexpr int W = int(fused_mlp_width);
  for (int i = t; i < nr * N; i += nt) {
    const int r = i / N, j = i % N;
    d[r * W + j] = load(store<T>(act.backward(float(load(y[r * ldy + j])), d[r * W + j])));
  }
}
// The tile's share of the weight gradients, added to dw [K, N] and db [N]:
// dw[k, j] += sum_r a[r, k] dz[r, j], db[j] += sum_r dz[r, j] (r in order).
CTNN_HOST_DEVICE inline void fused_tile_weight_gradient(int t, int nt, const float* a, const float* dz, int K, int N,
                                                        int nr, float* dw, float* db) {
  constexpr int W = int(fused_mlp_width);
  for (int i = t; i < K * N + N; i += nt) {
    float acc = 0.0f;
    if (i < K * N) {
      const int k = i / N, j = i % N;
      for (int r = 0; r < nr; ++r) acc = fmaf(a[r * W + k], dz[r * W + j], acc);
      dw[i] += acc;
    } else {
      const int j = i - K * N;
      for (int r = 0; r < nr; ++r) acc += dz[r * W + j];
      db[j] += acc;
    }
  }
}
// dx[r, k] = sum_j dz[r, j] w[k, j], rounded to T (the previous layer's dL/dy).
template <class T>
CTNN_HOST_DEVICE void fused_tile_input_gradient(int t, int nt, const float* dz, const float* w, int K, int N, int nr,
                                                float* dx) {
  constexpr int W = int(fused_mlp_width);
  for (int i = t; i < nr * K; i += nt) {
    const int r = i / K, k = i % K;
    float acc = 0.0f;
    for (int j = 0; j < N; ++j) acc = fmaf(dz[r * W + j], w[k * N + j], acc);
    dx[r * W + k] = load(store<T>(acc));
  }
}

// One block per tile of R rows; smem = [max k*n kernel][128 bias][R x 128 in][R x 128 out] floats.
template <class T, class Acts, int R>
__global__ void fused_mlp_forward(const fused_mlp_params<T, Acts> p, int max_kn, const T* x, T* y, std::size_t rows) {
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
  constexpr int D = Acts::size;
  for (int d = 0; d < D; ++d) {
    const int K = p.k[d], N = p.n[d];
    __syncthreads();  // the previous layer is done reading w and writing its output
    for (int i = threadIdx.x; i < K * N; i += blockDim.x) w[i] = load(p.w[d][i]);
    for (int j = threadIdx.x; j < N; j += blockDim.x) b[j] = load(p.w[d][K * N + j]);
    __syncthreads();
    p.act.visit(d, [&](auto act) { fused_tile_forward<T>(int(threadIdx.x), int(blockDim.x), a, w, b, K, N, act, nr, o); });
    float* t = a;  // this layer's output is the next one's input
    a = o;
    o = t;
  }
  __syncthreads();
  const int N = p.n[D - 1];
  for (int i = threadIdx.x; i < nr * N; i += blockDim.x) y[(r0 + i / N) * N + i % N] = store<T>(a[(i / N) * W + i % N]);
}

// The training backward of the fused MLP: per dense layer d, its input and
// output rows (global, from the training forward) and its gradients (kernel,
// then bias); offset[d]: where its gradients start in a block's row of partial sums.
template <class T, int D>
struct fused_mlp_tensors {
  const T* in[D];
  const T* out[D];
  T* grad[D];
  int offset[D + 1];
};

// Grid-stride over tiles of R rows: block b takes tiles b, b + gridDim.x, ...
// and adds their weight gradients to its row of partial sums (partial +
// b * offset[D], zeroed first); dy: the network's output gradient rows.
// smem = [max k*n kernel][R x 128 input][R x 128 dL/dz][R x 128 dL/dx] floats.
template <class T, class Acts, int R>
__global__ void fused_mlp_backward(const fused_mlp_params<T, Acts> p, const fused_mlp_tensors<T, Acts::size> v, int max_kn,
                                   const T* dy, float* partial, std::size_t rows) {
  extern __shared__ float smem[];
  constexpr int W = int(fused_mlp_width), D = Acts::size;
  const int t = int(threadIdx.x), nt = int(blockDim.x);
  float* w = smem;
  float* a = w + max_kn;
  float* d = a + R * W;
  float* e = d + R * W;
  float* mine = partial + std::size_t(blockIdx.x) * v.offset[D];
  for (int i = t; i < v.offset[D]; i += nt) mine[i] = 0.0f;
  const std::size_t tiles = (rows + R - 1) / R;
  for (std::size_t tile = blockIdx.x; tile < tiles; tile += gridDim.x) {
    const std::size_t r0 = tile * R;
    const int nr = rows - r0 < std::size_t(R) ? int(rows - r0) : R;
    const int nl = p.n[D - 1];
    __syncthreads();  // the zeroing, or the previous tile, is done
    for (int i = t; i < nr * nl; i += nt) d[(i / nl) * W + i % nl] = load(dy[(r0 + i / nl) * nl + i % nl]);
    for (int l = D - 1; l >= 0; --l) {
      const int K = p.k[l], N = p.n[l];
      __syncthreads();  // the layer above is done with w, a and e (now d)
      for (int i = t; i < K * N; i += nt) w[i] = load(p.w[l][i]);
      for (int i = t; i < nr * K; i += nt) a[(i / K) * W + i % K] = load(v.in[l][(r0 + i / K) * K + i % K]);
      p.act.visit(l, [&](auto act) { fused_tile_activation_backward<T>(t, nt, v.out[l] + r0 * N, N, d, N, act, nr); });
      __syncthreads();
      fused_tile_weight_gradient(t, nt, a, d, K, N, nr, mine + v.offset[l], mine + v.offset[l] + K * N);
      if (l > 0) fused_tile_input_gradient<T>(t, nt, d, w, K, N, nr, e);
      float* s = d;  // dL/dx of this layer is dL/dy of the one below
      d = e;
      e = s;
    }
  }
}
// grad = the blocks' partial sums added in block order, rounded to T.
template <class T, int D>
__global__ void fused_mlp_gradients(const float* partial, int blocks, const fused_mlp_tensors<T, D> v) {
  const int total = v.offset[D];
  for (int i = int(blockIdx.x * blockDim.x + threadIdx.x); i < total; i += int(gridDim.x * blockDim.x)) {
    float acc = 0.0f;
    for (int b = 0; b < blocks; ++b) acc += partial[std::size_t(b) * total + i];
    int l = 0;
    while (i >= v.offset[l + 1]) ++l;
    v.grad[l][i - v.offset[l]] = store<T>(acc);
  }
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
  template <std::size_t... I>
  static constexpr bool one_type(std::index_sequence<I...>) {
    using T0 = typename std::tuple_element_t<0, Layers>::compute_type;
    return (std::is_same_v<typename std::tuple_element_t<I, Layers>::compute_type, T0> && ...);
  }
  // (one_type only once every layer is a dense or reshape layer, which name their compute type)
  static constexpr bool fits = [] {
    if constexpr (all_fit(std::make_index_sequence<count>{})) return one_type(std::make_index_sequence<count>{});
    else return false;
  }();
  static constexpr int dense = fits ? dense_count(std::make_index_sequence<count>{}) : 0;
  // the dense layers' activation rules (fused_acts<...>)
  using acts_of = fused_acts_of<decltype(fused_rules<Layers>())>;
  using acts = typename acts_of::type;
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
  static constexpr std::size_t backward_shared_bytes = (std::size_t(max_kn) + 3 * fused_mlp_rows * fused_mlp_width) * 4;
  // floats of one block's row of partial weight gradients (every dense layer's K * N + N)
  static constexpr int gradient_count = [] {
    std::size_t m = 0;
    if constexpr (fits)
      [&]<std::size_t... I>(std::index_sequence<I...>) {
        ((void)[&] {
          using F = fused_role<std::tuple_element_t<I, Layers>>;
          if constexpr (F::kind == 1) m += F::k * F::n + F::n;
        }(), ...);
      }(std::make_index_sequence<count>{});
    return int(m);
  }();
};

// Whether the device gives kernel f `bytes` of dynamic shared memory (an opt-in above 48 KiB).
template <class F>
bool fused_shared_memory(F f, std::size_t bytes) {
  int dev = 0, optin = 0;
  if (cudaGetDevice(&dev) != cudaSuccess ||
      cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev) != cudaSuccess) {
    cudaGetLastError();
    return false;
  }
  if (bytes > std::size_t(optin)) return false;
  if (bytes > 48 * 1024 && cudaFuncSetAttribute(f, cudaFuncAttributeMaxDynamicSharedMemorySize, int(bytes)) != cudaSuccess) {
    cudaGetLastError();
    return false;
  }
  return true;
}

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
    static const bool ok =
        cuda_detail::fused_shared_memory(cuda_detail::fused_mlp_forward<T, typename P::acts, int(fused_mlp_rows)>, P::shared_bytes);
    return ok;
  }
}
// The same for the fused backward (its shared memory, and its partial sums fit the workspace).
template <class Layers>
bool fused_mlp_backward_ready() {
  if constexpr (!fused_mlp_fits<Layers>()) {
    return false;
  } else {
    using P = cuda_detail::fused_plan<Layers>;
    using T = typename std::tuple_element_t<0, Layers>::compute_type;
    static const bool ok =
        std::size_t(P::gradient_count) * sizeof(float) <= cuda_context::workspace_bytes &&
        cuda_detail::fused_shared_memory(cuda_detail::fused_mlp_backward<T, typename P::acts, int(fused_mlp_rows)>,
                                         P::backward_shared_bytes);
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
  cuda_detail::fused_mlp_params<T, typename P::acts> p{};
  p.act = P::acts_of::make(cuda_detail::fused_rules<Layers>());
  int d = 0;
  [&]<std::size_t... I>(std::index_sequence<I...>) {
    ((void)[&] {
      using F = cuda_detail::fused_role<std::tuple_element_t<I, Layers>>;
      if constexpr (F::kind == 1) {
        p.w[d] = params.template operator()<I>();
        p.k[d] = int(F::k);
        p.n[d] = int(F::n);
        ++d;
      }
    }(), ...);
  }(std::make_index_sequence<P::count>{});
  const std::size_t blocks = (batch + fused_mlp_rows - 1) / fused_mlp_rows;
  if (blocks > 0x7fffffffu) throw cuda_error("ctnn cuda: fused_mlp_forward: the batch is too large for one grid");
  cuda_detail::fused_mlp_forward<T, typename P::acts, int(fused_mlp_rows)>
      <<<unsigned(blocks), 256, P::shared_bytes, cuda_context::get().compute()>>>(p, P::max_kn, x, y, batch);
  CTNN_CUDA_CHECK(cudaGetLastError());
}

// Training's backward of the network as two kernels: the fused backward
// (tiles of fused_mlp_rows rows, every dense layer's dL/dz, weight gradients
// and dL/dx in shared memory) and the ordered sum of the blocks' partial
// weight gradients into each layer's gradients (T). io.template
// operator()<I>() is layer I's fused_layer_io: its parameters (kernel, then
// bias), gradients, input rows and output rows (from the training forward).
// dy: the output gradient rows. The partial sums live in the cuBLASLt
// workspace. Call only when fused_mlp_backward_ready<Layers>().
template <class Layers, class T, class IO>
void fused_mlp_backward(const T* dy, std::size_t batch, IO&& io) {
  using P = cuda_detail::fused_plan<Layers>;
  static_assert(fused_mlp_fits<Layers>(), "fused_mlp_backward: the network does not fit the fused MLP kernel");
  cuda_detail::fused_mlp_params<T, typename P::acts> p{};
  p.act = P::acts_of::make(cuda_detail::fused_rules<Layers>());
  cuda_detail::fused_mlp_tensors<T, P::dense> v{};
  int d = 0;
  [&]<std::size_t... I>(std::index_sequence<I...>) {
    ((void)[&] {
      using F = cuda_detail::fused_role<std::tuple_element_t<I, Layers>>;
      if constexpr (F::kind == 1) {
        const fused_layer_io<T> l = io.template operator()<I>();
        p.w[d] = l.params;
        p.k[d] = int(F::k);
        p.n[d] = int(F::n);
        v.in[d] = l.in;
        v.out[d] = l.out;
        v.grad[d] = l.grads;
        v.offset[d + 1] = v.offset[d] + int(F::k * F::n + F::n);
        ++d;
      }
    }(), ...);
  }(std::make_index_sequence<P::count>{});
  const std::size_t tiles = (batch + fused_mlp_rows - 1) / fused_mlp_rows;
  const std::size_t fit = cuda_context::workspace_bytes / (sizeof(float) * std::size_t(P::gradient_count));
  const std::size_t blocks = std::min({tiles, fit, std::size_t(1024)});
  cuda_context& cc = cuda_context::get();
  float* partial = static_cast<float*>(cc.workspace());
  cuda_detail::fused_mlp_backward<T, typename P::acts, int(fused_mlp_rows)>
      <<<unsigned(blocks), 256, P::backward_shared_bytes, cc.compute()>>>(p, v, P::max_kn, dy, partial, batch);
  CTNN_CUDA_CHECK(cudaGetLastError());
  cuda_detail::fused_mlp_gradients<T, P::dense>
      <<<unsigned((P::gradient_count + 255) / 256), 256, 0, cc.compute()>>>(partial, int(blocks), v);
  CTNN_CUDA_CHECK(cudaGetLastError());
}

}  // namespace ctnn
