// ctnn/cuda/ops.cuh — ops<cuda<SM>>: the op set of kernels/cpu/ops.hpp on a CUDA device.
//
// Same names and signatures as ops<cpu<Arch>>, so the generic bound layers
// (dense, conv2d, pooling, activations, reshape, the recurrent layers, masks and
// wrappers of issue 27) and the optimizers run on
// cuda<SM> unchanged; every pointer is a device pointer. T is the storage
// type: float, __half or __nv_bfloat16 (float32 arithmetic and
// accumulation throughout). Work is queued on cuda_context::get().compute();
// an op returns before its work is done, except those that return a value
// computed on the device (the updates' finite flag, the loss, the norms),
// which wait for the stream.
//   dense_*:  cuBLASLt (gemm.cuh). Row-major Y[m, N] = X[m, K] W[K, N] + b is
//             the column-major Y^T = W^T X^T, so W, X, Y are passed as they
//             lie; bias (+ relu) is the GEMM's fused epilogue; any other
//             rule or list of rules fuses into gemm_epilogue.cuh's tiled GEMM.
//             The bias gradient is column_sums (two stages, deterministic).
//   conv_*:   im2col + the dense GEMMs + col2im (kernels.cuh), as the CPU path.
//   batch_norm_*, dropout_*: has_layer_ops (column sums; a hash of one seed per pass).
//   sparse_dense_*: every sparse layout's index (sparse_products.cuh), deterministic.
//   element-wise: map runs a rule of kernels/functors.hpp per thread
//             (kernels.cuh's map kernel): the activations, the updates and
//             the options' maps are the CPU's formulas, written once. A rule
//             that returns a value (an update's new w) makes map wait and
//             report whether every one is finite (one 4-byte read). map_rows:
//             the same over row-strided arrays (the recurrent cells' gate
//             blocks, the step masks), one thread per element.
// It satisfies BackendOps (core/backend_ops.hpp; tests/cuda/test_ops.cu).
#pragma once
#include <algorithm>
#include <climits>
#include <cmath>
#include <cstring>
#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <type_traits>

#include "../../core/format.hpp"
#include "../../core/rng.hpp"
#include "../../kernels/functors.hpp"
#include "backend.hpp"
#include "context.cuh"
#include "fused_mlp.cuh"
#include "gemm.cuh"
#include "gemm_epilogue.cuh"
#include "kernels.cuh"
#include "memory.cuh"
#include "sparse_products.cuh"

namespace ctnn {

template <int SM>
struct ops<cuda<SM>> {
  static constexpr unsigned block = 256;
  using float16 = __half;  // the 16-bit storage types of convert / widen
  using bfloat16 = __nv_bfloat16;

  static cudaStream_t stream() { return cuda_context::get().compute(); }
  static void synchronize() { cuda_context::get().synchronize(); }
  static unsigned grid(std::size_t n) { return cuda_detail::grid_for(n, block); }
  static void launched() { CTNN_CUDA_CHECK(cudaGetLastError()); }

  // ---- map: rule f of kernels/functors.hpp over n elements of each array, per thread in float32 ----
  // Returns at once (true) for a rule that returns nothing; waits and says
  // whether every returned value is finite for one that does.
  template <class F, class... P>
  static bool map(const F& f, std::size_t n, P*... p) {
    if constexpr (cuda_kernels::map_returns<F, P*...>) {
      int* bad = begin_flag();
      if (n) {
        cuda_kernels::map<<<grid(n), block, 0, stream()>>>(f, n, bad, p...);
        launched();
      }
      return end_flag();
    } else {
      if (n) {
        cuda_kernels::map<<<grid(n), block, 0, stream()>>>(f, n, static_cast<int*>(nullptr), p...);
        launched();
      }
      return true;
    }
  }

  // map over rows x cols elements of row-strided arrays (kernels/rows.hpp): row r of array k
  // at a_k.data + r * a_k.stride (a stride of 0 repeats one row); one thread per element, the
  // rule in float32 (kernels.cuh's map_rows). For the rules that return nothing: the recurrent
  // cells' (layers/lstm.hpp, gru.hpp, simple_rnn.hpp) and the masks' (masking.hpp). Nothing waits.
  template <class F, class... P>
  static void map_rows(const F& f, std::size_t rows, std::size_t cols, kernels::rows<P>... a) {
    static_assert((cuda_storage<std::remove_const_t<P>> && ...),
                  "ops<cuda>::map_rows: the arrays must be of a CUDA storage type (float, float16_t, bfloat16_t)");
    static_assert(!cuda_kernels::map_returns<F, P*...>,
                  "ops<cuda>::map_rows: the rule must return nothing (its results are its by-reference arguments)");
    if (rows == 0 || cols == 0) return;
    cuda_kernels::map_rows<<<grid(rows * cols), block, 0, stream()>>>(f, rows, cols, a...);
    launched();
  }

  // ---- dense products (K inputs, N outputs, m rows) ----
  // y = e.forward(x W + b) in one pass, never a map after it: identity and relu with
  // a bias are cuBLASLt's BIAS / RELU_BIAS epilogues (identity without one its
  // plain GEMM) when it has a fused algorithm for the shape and alignment; any
  // other rule of kernels/functors.hpp, a list of them (fn::chain), and those
  // cases without a fused algorithm run gemm_epilogue.cuh's tiled kernel.
  template <std::size_t K, std::size_t N, class E = fn::identity_fn, cuda_storage T>
  static void dense_forward(const T* x, const T* w, const T* b, T* y, std::size_t m, E e = {}) {
    static_assert(fn::epilogue_rule<E, float>,
                  "ops<cuda>::dense_forward: the epilogue must be a rule of kernels/functors.hpp (V forward(V))");
    if (!m) return;
    constexpr bool relu = std::is_same_v<E, fn::relu_fn> || std::is_same_v<E, fn::chain<fn::relu_fn>>;
    constexpr bool none = std::is_same_v<E, fn::identity_fn> || std::is_same_v<E, fn::chain<>>;
    if constexpr (none || relu) {
      const lt_epilogue le = !b ? lt_epilogue::none : relu ? lt_epilogue::relu_bias : lt_epilogue::bias;
      if ((b || none) && lt_matmul<T>(false, false, int(N), int(m), int(K), w, int(N), x, int(K), y, int(N), b, le,
                                      /*unfused_ok=*/false))
        return;
    }
    gemm_epilogue<T>(x, w, b, y, m, K, N, e);
  }
  // dW[K, N] = X^T dY (column-major dW^T = dY^T X), db = column sums of dY; both overwritten.
  template <std::size_t K, std::size_t N, cuda_storage T>
  static void dense_backward_weights(const T* x, const T* dy, T* dw, T* db, std::size_t m) {
    lt_matmul<T>(false, true, int(N), int(K), int(m), dy, int(N), x, int(K), dw, int(N), nullptr, lt_epilogue::none);
    if (db) column_sums(cuda_kernels::value_of<T>{dy, N}, m, N, db);
  }
  // dX[m, K] = dY W^T (column-major dX^T = W dY^T with W^T stored: transpose A).
  template <std::size_t K, std::size_t N, cuda_storage T>
  static void dense_backward_input(const T* dy, const T* w, T* dx, std::size_t m) {
    lt_matmul<T>(true, false, int(K), int(m), int(N), w, int(N), dy, int(N), dx, int(K), nullptr, lt_epilogue::none);
  }

  // The products with a weight matrix used many times (a recurrent kernel): cuBLASLt reads w
  // as it lies, so nothing is packed (packed_size 0) and the packed products are the plain ones.
  template <std::size_t K, std::size_t N, class T>
  static constexpr std::size_t packed_size = 0;
  static constexpr std::size_t packed_rows = 1;
  template <std::size_t K, std::size_t N, cuda_storage T>
  static void pack_weights(const T*, T*, std::size_t) {}
  template <std::size_t K, std::size_t N, cuda_storage T>
  static void pack_weights_transposed(const T*, T*, std::size_t) {}
  template <std::size_t K, std::size_t N, class E = fn::identity_fn, cuda_storage T>
  static void dense_forward_packed(const T* x, const T* w, const T*, const T* b, T* y, std::size_t m, E e = {}) {
    dense_forward<K, N>(x, w, b, y, m, e);
  }
  template <std::size_t K, std::size_t N, cuda_storage T>
  static void dense_backward_input_packed(const T* dy, const T* w, const T*, T* dx, std::size_t m) {
    dense_backward_input<K, N>(dy, w, dx, m);
  }

  // ---- sparse dense products: Index (kernels/sparse_index.hpp) names the layout (sparse_products.cuh) ----
  // y = bias + x W (relu optional); dz: dL/d(pre-activation); dvalues, db overwritten, dx (may be null) too.
  // scratch (the CPU's transposed blocks) is not used. Nothing waits.
  template <std::size_t K, std::size_t N, class Index, cuda_storage T>
  static void sparse_dense_forward(const Index& index, const T* x, const T* values, const T* b, T* y, std::size_t m,
                                   bool relu, T*) {
    if (!m) return;
    cuda_kernels::sparse_forward<<<grid(m * N), block, 0, stream()>>>(index, x, values, b, y, m, K, N, relu);
    launched();
  }
  template <std::size_t K, std::size_t N, class Index, cuda_storage T>
  static void sparse_dense_backward(const Index& index, const T* x, const T* dz, const T* values, T* dvalues, T* db,
                                    T* dx, std::size_t m) {
    cuda_kernels::sparse_backward_weights<<<grid(N * 32), block, 0, stream()>>>(index, x, dz, dvalues, db, m, K, N);
    launched();
    if (!dx || !m) return;
    cuda_kernels::sparse_backward_input<<<grid(K * ((m + 31) / 32) * 32), block, 0, stream()>>>(index, dz, values, dx,
                                                                                                 m, K, N);
    launched();
  }

  // ---- column reductions ----
  // out[j] = sum over `rows` rows of f(i, j), j < cols (kernels.cuh's two
  // stages; the partial sums live in the cuBLASLt workspace, which only work
  // queued on this stream uses). The last reserve_floats floats of the
  // workspace are left alone (batch_norm_forward keeps its statistics there).
  template <class Out, class F>
  static void column_sums(F f, std::size_t rows, std::size_t cols, Out* out, std::size_t reserve_floats = 0) {
    constexpr std::size_t min_rows = 64, max_chunks = 1024;
    const std::size_t budget = cuda_context::workspace_bytes / sizeof(float) - reserve_floats;
    const std::size_t fit = budget / cols;
    if (fit == 0) throw cuda_error("ctnn cuda: column_sums: " + std::to_string(cols) + " columns exceed the workspace");
    const std::size_t most = std::min(max_chunks, fit);
    const std::size_t per = std::max(min_rows, (rows + most - 1) / most);
    const std::size_t chunks = std::max<std::size_t>(1, (rows + per - 1) / per);
    float* partial = static_cast<float*>(cuda_context::get().workspace());
    cuda_kernels::column_partial_sums<<<dim3(unsigned((cols + 31) / 32), unsigned(chunks)), dim3(32, 8), 0, stream()>>>(
        f, rows, cols, per, partial);
    launched();
    cuda_kernels::column_finish<<<unsigned((cols + 255) / 256), 256, 0, stream()>>>(partial, chunks, cols, out);
    launched();
  }
  // The last n floats of the workspace (see column_sums' reserve_floats).
  static float* workspace_tail(std::size_t n) {
    return static_cast<float*>(cuda_context::get().workspace()) + cuda_context::workspace_bytes / sizeof(float) - n;
  }

  // ---- batch normalization and dropout (has_layer_ops) ----
  // batch_norm: per-channel sums in float32 by column_sums (two stages, deterministic), two passes
  // for the variance as on the CPU; moving statistics of type S (float32 under the mixed policies).
  template <std::size_t C, cuda_storage T, class S>
  static void batch_norm_forward(const T* x, T* y, const T* gamma, const T* beta, S* moving_mean, S* moving_var,
                                 T* mean, T* inv, std::size_t rows, double momentum, double epsilon, bool training) {
    constexpr unsigned channel_blocks = unsigned((C + 255) / 256);
    if (training) {
      // sum(x) -> mean, then sum((x - mean)^2), in float32 at the workspace's end
      float* mean_f = workspace_tail(2 * C);
      float* sq_f = mean_f + C;
      column_sums(cuda_kernels::value_of<T>{x, C}, rows, C, mean_f, 2 * C);
      cuda_kernels::divide<<<channel_blocks, 256, 0, stream()>>>(mean_f, C, float(rows));
      launched();
      column_sums(cuda_kernels::squared_deviation<T>{x, mean_f, C}, rows, C, sq_f, 2 * C);
      cuda_kernels::batch_norm_statistics<<<channel_blocks, 256, 0, stream()>>>(
          static_cast<const float*>(mean_f), static_cast<const float*>(sq_f), rows, C, moving_mean, moving_var, mean,
          inv, float(momentum), float(epsilon));
    } else {
      cuda_kernels::batch_norm_inference_statistics<<<channel_blocks, 256, 0, stream()>>>(
          static_cast<const S*>(moving_mean), static_cast<const S*>(moving_var), mean, inv, C, float(epsilon));
    }
    launched();
    if (!rows) return;
    cuda_kernels::batch_norm_apply<<<grid(rows * C), block, 0, stream()>>>(
        x, y, gamma, beta, static_cast<const T*>(mean), static_cast<const T*>(inv), rows, C);
    launched();
  }
  template <std::size_t C, cuda_storage T>
  static void batch_norm_backward(const T* x, const T* dy, T* dx, const T* gamma, const T* mean, const T* inv,
                                  T* dgamma, T* dbeta, std::size_t rows, bool training) {
    column_sums(cuda_kernels::times_normalized<T>{dy, x, mean, inv, C}, rows, C, dgamma);
    column_sums(cuda_kernels::value_of<T>{dy, C}, rows, C, dbeta);
    if (!dx || !rows) return;
    cuda_kernels::batch_norm_input_gradient<<<grid(rows * C), block, 0, stream()>>>(
        x, dy, dx, gamma, mean, inv, static_cast<const T*>(dgamma), static_cast<const T*>(dbeta), rows, C, training);
    launched();
  }
  // The keep/drop draw is a counter-based hash of (one 64-bit seed drawn from gen, element index):
  // the CPU's rate and scaling, not its masks. A rate value outside [0, 1) throws as on the CPU; a
  // rate in device memory (dynamic_dropout's; set_dropout_rate and the weights loader check it) is
  // read by the kernel, which turns one outside [0, 1) into NaN outputs (a non-finite loss).
  template <cuda_storage T>
  static void dropout_forward(const T* x, T* y, T* mask, std::size_t n, double rate, rng& gen) {
    if (!(rate >= 0 && rate < 1))
      throw std::invalid_argument("the dropout rate must be in [0, 1), got " + ctnn::detail::format_number(rate));
    dropout_draw(x, y, mask, n, float(rate), nullptr, gen);
  }
  template <cuda_storage T>
  static void dropout_forward(const T* x, T* y, T* mask, std::size_t n, const float* rate, rng& gen) {
    dropout_draw(x, y, mask, n, 0.0f, rate, gen);
  }
  template <cuda_storage T>
  static void dropout_backward(const T* mask, const T* dy, T* dx, std::size_t n) {
    if (n) multiply(dy, mask, dx, n);
  }

  // ---- convolution and pooling (geometry G) ----
  template <kernels::conv_geometry G, cuda_storage T>
  static void conv_forward(const T* x, const T* w, const T* b, T* y, T* cols, std::size_t batch) {
    cuda_kernels::im2col<<<grid(batch * G.oh * G.ow * G.patch()), block, 0, stream()>>>(G, x, cols, batch);
    launched();
    dense_forward<G.patch(), G.f>(cols, w, b, y, batch * G.oh * G.ow);
  }
  template <kernels::conv_geometry G, cuda_storage T>
  static void conv_backward(const T* dy, const T* w, T* dw, T* db, T* dx, T* cols, std::size_t batch) {
    const std::size_t m = batch * G.oh * G.ow;
    dense_backward_weights<G.patch(), G.f>(cols, dy, dw, db, m);
    if (!dx) return;
    dense_backward_input<G.patch(), G.f>(dy, w, cols, m);
    cuda_kernels::col2im<<<grid(batch * G.in_size()), block, 0, stream()>>>(G, cols, dx, batch);
    launched();
  }
  template <kernels::conv_geometry G, cuda_storage T>
  static void max_pool_forward(const T* x, T* y, std::uint32_t* idx, std::size_t batch) {
    cuda_kernels::max_pool_forward<<<grid(batch * G.oh * G.ow * G.c), block, 0, stream()>>>(G, x, y, idx, batch);
    launched();
  }
  template <kernels::conv_geometry G, cuda_storage T>
  static void max_pool_backward(const std::uint32_t* idx, const T* dy, T* dx, std::size_t batch) {
    cuda_kernels::pool_backward<<<grid(batch * G.in_size()), block, 0, stream()>>>(
        G, cuda_kernels::max_pool_term<T>{idx, dy}, dx, batch);
    launched();
  }
  template <kernels::conv_geometry G, cuda_storage T>
  static void average_pool_forward(const T* x, T* y, std::size_t batch) {
    cuda_kernels::average_pool_forward<<<grid(batch * G.oh * G.ow * G.c), block, 0, stream()>>>(G, x, y, batch);
    launched();
  }
  template <kernels::conv_geometry G, cuda_storage T>
  static void average_pool_backward(const T* dy, T* dx, std::size_t batch) {
    cuda_kernels::pool_backward<<<grid(batch * G.in_size()), block, 0, stream()>>>(
        G, cuda_kernels::average_pool_term<T>{dy}, dx, batch);
    launched();
  }
  template <std::size_t P, std::size_t C, cuda_storage T>
  static void global_average_forward(const T* x, T* y, std::size_t batch) {
    cuda_kernels::global_average_forward<P, C><<<grid(batch * C), block, 0, stream()>>>(x, y, batch);
    launched();
  }
  template <std::size_t P, std::size_t C, cuda_storage T>
  static void global_average_backward(const T* dy, T* dx, std::size_t batch) {
    cuda_kernels::global_average_backward<P, C><<<grid(batch * P * C), block, 0, stream()>>>(dy, dx, batch);
    launched();
  }
  // layer_normalization (kernels.cuh: one thread per row; the parameters' gradient one thread per column)
  template <std::size_t C, cuda_storage T>
  static void layer_norm_forward(const T* x, T* y, const T* gamma, const T* beta, T* mean, T* inv, std::size_t rows,
                                 double eps) {
    if (!rows) return;
    cuda_kernels::layer_norm_forward<C><<<grid(rows), block, 0, stream()>>>(x, y, gamma, beta, mean, inv, rows, eps);
    launched();
  }
  template <std::size_t C, cuda_storage T>
  static void layer_norm_backward(const T* x, const T* dy, T* dx, const T* gamma, const T* mean, const T* inv,
                                  T* dgamma, T* dbeta, std::size_t rows) {
    cuda_kernels::layer_norm_backward_params<C><<<grid(C), block, 0, stream()>>>(x, dy, mean, inv, dgamma, dbeta, rows);
    launched();
    if (!dx || !rows) return;
    cuda_kernels::layer_norm_backward_input<C><<<grid(rows), block, 0, stream()>>>(x, dy, dx, gamma, mean, inv, rows);
    launched();
  }
  // zero_padding2d and up_sampling2d (kernels.cuh; one thread per value)
  template <kernels::conv_geometry G, cuda_storage T>
  static void zero_pad_forward(const T* x, T* y, std::size_t batch) {
    cuda_kernels::zero_pad_forward<<<grid(batch * G.oh * G.ow * G.c), block, 0, stream()>>>(G, x, y, batch);
    launched();
  }
  template <kernels::conv_geometry G, cuda_storage T>
  static void zero_pad_backward(const T* dy, T* dx, std::size_t batch) {
    cuda_kernels::zero_pad_backward<<<grid(batch * G.in_size()), block, 0, stream()>>>(G, dy, dx, batch);
    launched();
  }
  template <kernels::conv_geometry G, cuda_storage T>
  static void up_sample_forward(const T* x, T* y, std::size_t batch) {
    cuda_kernels::up_sample_forward<<<grid(batch * G.oh * G.ow * G.c), block, 0, stream()>>>(G, x, y, batch);
    launched();
  }
  template <kernels::conv_geometry G, cuda_storage T>
  static void up_sample_backward(const T* dy, T* dx, std::size_t batch) {
    cuda_kernels::up_sample_backward<<<grid(batch * G.in_size()), block, 0, stream()>>>(G, dy, dx, batch);
    launched();
  }
  // depthwise_conv2d and separable_conv2d's depthwise step (kernels.cuh; one thread per output, per
  // input and per kernel value: the kernel's sums run over the batch's outputs)
  template <kernels::conv_geometry G, std::size_t M, cuda_storage T>
  static void depthwise_forward(const T* x, const T* w, const T* b, T* y, std::size_t batch) {
    if (!batch) return;
    cuda_kernels::depthwise_forward<M><<<grid(batch * G.out_size()), block, 0, stream()>>>(G, x, w, b, y, batch);
    launched();
  }
  template <kernels::conv_geometry G, std::size_t M, cuda_storage T>
  static void depthwise_backward(const T* x, const T* dz, const T* w, T* dw, T* db, T* dx, std::size_t batch) {
    cuda_kernels::depthwise_backward_weights<M>
        <<<grid(G.kh * G.kw * G.f + G.f), block, 0, stream()>>>(G, x, dz, dw, db, batch);
    launched();
    if (!dx || !batch) return;
    cuda_kernels::depthwise_backward_input<M><<<grid(batch * G.in_size()), block, 0, stream()>>>(G, dz, w, dx, batch);
    launched();
  }
  // the embedding's rows: y[i] = table[ids[i]]; an id not an integer in [0, vocab) cannot throw
  // from a queued (or captured) pass: its row is NaN, so the outputs and the loss are not finite.
  // The adjoint dtable[ids[i]] += dy[i] by atomics (repeated ids: the order of the sums varies).
  template <std::size_t D, cuda_storage T>
  static void gather_rows(const T* ids, const T* table, T* y, std::size_t n, std::size_t vocab) {
    if (!n) return;
    cuda_kernels::gather_rows<<<grid(n * D), block, 0, stream()>>>(ids, table, y, n, D, vocab);
    launched();
  }
  template <std::size_t D, cuda_storage T>
  static void scatter_add_rows(const T* ids, const T* dy, T* dtable, std::size_t n, std::size_t vocab) {
    if (!n) return;
    cuda_kernels::scatter_add_rows<<<grid(n * D), block, 0, stream()>>>(ids, dy, dtable, n, D, vocab);
    launched();
  }

  // ---- element-wise and row-wise ----
  template <cuda_storage T>
  static void copy(const T* x, T* y, std::size_t n) {
    if (n) CTNN_CUDA_CHECK(cudaMemcpyAsync(y, x, n * sizeof(T), cudaMemcpyDeviceToDevice, stream()));
  }
  template <cuda_storage T>
  static void fill_zero(T* x, std::size_t n) {
    if (n) CTNN_CUDA_CHECK(cudaMemsetAsync(x, 0, n * sizeof(T), stream()));
  }
  template <cuda_storage T, class S>
  static void fill(T* x, std::size_t n, S v) {
    map(fn::fill<float>{float(v)}, n, x);
  }
  template <cuda_storage T, class S>
  static void scale(T* x, std::size_t n, S k) {
    map(fn::scale<float>{float(k)}, n, x);
  }
  template <cuda_storage T>
  static void multiply(const T* x, const T* m, T* y, std::size_t n) {
    cuda_kernels::multiply<<<grid(n), block, 0, stream()>>>(x, m, y, n);
    launched();
  }
  // any storage type to any other (float <-> 16-bit: the plan's compute-type copies, the model's deltas)
  template <cuda_storage S, cuda_storage T>
  static void convert(const S* x, T* y, std::size_t n) {
    cuda_kernels::convert<<<grid(n), block, 0, stream()>>>(x, y, n);
    launched();
  }
  template <cuda_storage T>
  static void widen(const T* x, float* y, std::size_t n) {
    cuda_kernels::widen<<<grid(n), block, 0, stream()>>>(x, y, n);
    launched();
  }

  template <cuda_storage T>
  static void relu_forward(T* y, std::size_t n) { map(fn::forward_of<fn::relu_fn>{}, n, y); }
  template <cuda_storage T>
  static void relu_backward(const T* y, T* d, std::size_t n) { map(fn::backward_of<fn::relu_fn>{}, n, y, d); }
  template <cuda_storage T, class A>
  static void leaky_relu_forward(T* y, std::size_t n, A a) {
    map(fn::forward_of<fn::leaky_relu_fn<float>>{{float(a)}}, n, y);
  }
  template <cuda_storage T, class A>
  static void leaky_relu_backward(const T* y, T* d, std::size_t n, A a) {
    map(fn::backward_of<fn::leaky_relu_fn<float>>{{float(a)}}, n, y, d);
  }
  template <cuda_storage T>
  static void sigmoid_forward(T* y, std::size_t n) { map(fn::forward_of<fn::sigmoid_fn>{}, n, y); }
  template <cuda_storage T>
  static void sigmoid_backward(const T* y, T* d, std::size_t n) { map(fn::backward_of<fn::sigmoid_fn>{}, n, y, d); }
  template <cuda_storage T>
  static void tanh_forward(T* y, std::size_t n) { map(fn::forward_of<fn::tanh_fn>{}, n, y); }
  template <cuda_storage T>
  static void tanh_backward(const T* y, T* d, std::size_t n) { map(fn::backward_of<fn::tanh_fn>{}, n, y, d); }
  template <cuda_storage T>
  static void softmax_forward(T* y, std::size_t rows, std::size_t cols) {
    cuda_kernels::softmax_forward<<<grid(rows * 32), block, 0, stream()>>>(y, rows, cols);
    launched();
  }
  template <cuda_storage T>
  static void softmax_backward(const T* y, T* d, std::size_t rows, std::size_t cols) {
    cuda_kernels::softmax_backward<<<grid(rows * 32), block, 0, stream()>>>(y, d, rows, cols);
    launched();
  }

  // ---- losses ----
  // Queues the sparse softmax cross-entropy of `rows` rows of logits z[rows,
  // cols] (labels on the device): d = (softmax(z) - onehot) * scale (d may be
  // null), the sum of the rows' losses added to *loss_sum (device), the
  // smallest row with a label outside [0, cols) min-ed into *bad_row (device,
  // start it at INT_MAX); scale_by (device, may be null) multiplies scale
  // when the kernel runs (the loss scale of a captured step). Nothing waits.
  template <cuda_storage T>
  static void sparse_crossentropy_logits_async(const T* z, const std::int32_t* labels, T* d, std::size_t rows,
                                               std::size_t cols, float scale, double* loss_sum, int* bad_row,
                                               const float* scale_by = nullptr) {
    cuda_kernels::sparse_crossentropy_logits<<<grid(rows * 32), block, 0, stream()>>>(z, labels, d, rows, cols, scale,
                                                                                       scale_by, loss_sum, bad_row);
    launched();
  }
  // The same, waited for, with ops<cpu>'s arguments: returns the sum of the rows' losses; a label outside
  // [0, cols) throws std::out_of_range naming the first such sample (as the CPU loss).
  template <cuda_storage T>
  static double sparse_crossentropy_logits(const T* z, const std::int32_t* labels, std::size_t rows, std::size_t cols,
                                           T* d, double scale) {
    cuda_context& ctx = cuda_context::get();
    double* acc = ctx.scratch() + 1;
    int* bad = reinterpret_cast<int*>(ctx.scratch() + 2);
    const double zero = 0;
    const int none = INT_MAX;
    CTNN_CUDA_CHECK(cudaMemcpyAsync(acc, &zero, sizeof zero, cudaMemcpyHostToDevice, stream()));
    CTNN_CUDA_CHECK(cudaMemcpyAsync(bad, &none, sizeof none, cudaMemcpyHostToDevice, stream()));
    sparse_crossentropy_logits_async(z, labels, d, rows, cols, float(scale), acc, bad);
    double* h = ctx.host_scratch();
    CTNN_CUDA_CHECK(cudaMemcpyAsync(h, acc, 2 * sizeof(double), cudaMemcpyDeviceToHost, stream()));
    ctx.synchronize();
    int b;
    std::memcpy(&b, h + 1, sizeof b);
    if (b != INT_MAX)
      throw std::out_of_range("sparse_categorical_crossentropy: the label of sample " + std::to_string(b) +
                              " in the batch is outside [0, " + std::to_string(cols) + ")");
    return h[0];
  }

  // ---- losses into a step's scalars (has_loss_ops; s in device memory): nothing waits ----
  template <cuda_storage T>
  static void sparse_crossentropy_loss(const T* y, const std::int32_t* labels, std::size_t rows, std::size_t n, T* d,
                                       double scale, bool from_logits, step_scalars* s) {
    if (!rows) return;
    cuda_kernels::crossentropy_loss<<<grid(rows * 32), block, 0, stream()>>>(y, labels, static_cast<const T*>(nullptr), d,
                                                                             rows, n, scale, from_logits, s);
    launched();
  }
  template <cuda_storage T>
  static void categorical_crossentropy_loss(const T* y, const T* t, std::size_t rows, std::size_t n, T* d,
                                            double scale, bool from_logits, step_scalars* s) {
    if (!rows) return;
    cuda_kernels::crossentropy_loss<<<grid(rows * 32), block, 0, stream()>>>(
        y, static_cast<const std::int32_t*>(nullptr), t, d, rows, n, scale, from_logits, s);
    launched();
  }
  template <cuda_storage T>
  static void squared_error_loss(const T* y, const T* t, std::size_t count, T* d, double scale, double divisor,
                                 step_scalars* s) {
    if (!count) return;
    cuda_kernels::squared_error_loss<<<std::min(grid(count), 1024u), block, 0, stream()>>>(y, t, d, count, scale,
                                                                                           divisor, s);
    launched();
  }
  template <class Rule, cuda_storage T>
  static void pointwise_loss(const Rule& rule, const T* y, const T* t, std::size_t count, T* d, double scale,
                             double divisor, step_scalars* s) {
    if (!count) return;
    cuda_kernels::pointwise_loss<<<std::min(grid(count), 1024u), block, 0, stream()>>>(rule, y, t, d, count, scale,
                                                                                       divisor, s);
    launched();
  }

  // ---- loss scaling and regularizers ----
  // out = g * *inv in float32 (out may be g when T is float); *bad = 1 when a g is not finite. Nothing waits.
  template <cuda_storage T>
  static void unscale_gradients(const T* g, float* out, std::size_t n, const float* inv, int* bad) {
    if (n == 0) return;
    cuda_kernels::unscale_gradients<<<grid(n), block, 0, stream()>>>(g, out, n, inv, bad);
    launched();
  }
  // Sum of |x| over x[0, n), waited for.
  template <cuda_storage T>
  static double sum_abs(const T* x, std::size_t n) {
    return reduce<true>(x, n);
  }
  // g += l1 sign(w) + 2 l2 w over n values.
  template <cuda_storage T, class S>
  static void add_penalty_gradient(const T* w, T* g, std::size_t n, S l1, S l2) {
    map(fn::penalty_gradient<float>{float(l1), 2.0f * float(l2)}, n, w, g);
  }
  // The same with l1 and l2 times *factor (device memory), read by each thread.
  template <cuda_storage T, class S>
  static void add_penalty_gradient(const T* w, T* g, std::size_t n, S l1, S l2, const float* factor) {
    map(fn::penalty_gradient_by<float>{float(l1), 2.0f * float(l2), factor}, n, w, g);
  }
  // s->penalty += l1 sum |w| + l2 sum w^2 (times *factor when not null, read by the kernel:
  // fn::checked_factor); float32 per block, double across blocks. Nothing waits.
  template <cuda_storage T, class S>
  static void add_penalty(const T* w, std::size_t n, S l1, S l2, step_scalars* s) {
    add_penalty(w, n, l1, l2, static_cast<const float*>(nullptr), s);
  }
  template <cuda_storage T, class S>
  static void add_penalty(const T* w, std::size_t n, S l1, S l2, const float* factor, step_scalars* s) {
    if (!n) return;
    cuda_kernels::add_penalty<<<std::min(grid(n), 1024u), block, 0, stream()>>>(w, n, float(l1), float(l2), factor, s);
    launched();
  }
  // g *= inv; waits: true when every g was finite.
  template <cuda_storage T, class S>
  static bool unscale(T* g, std::size_t n, S inv) {
    return map(fn::unscale<float>{float(inv)}, n, g);
  }
  template <cuda_storage T>
  static bool all_finite(const T* x, std::size_t n) {
    return map(fn::check_finite{}, n, x);
  }

  // ---- the optimizer options' phases (optimizers/options.hpp) ----
  // Sum of squares of x[0, n) (float32 per block, double across blocks), waited for.
  template <cuda_storage T>
  static double sum_squares(const T* x, std::size_t n) {
    return reduce<false>(x, n);
  }
  template <bool Abs, cuda_storage T>
  static double reduce(const T* x, std::size_t n) {
    cuda_context& ctx = cuda_context::get();
    double* acc = ctx.scratch() + 3;
    CTNN_CUDA_CHECK(cudaMemsetAsync(acc, 0, sizeof(double), stream()));
    cuda_kernels::sum_squares<Abs><<<std::min(grid(n), 1024u), block, 0, stream()>>>(x, n, acc);
    launched();
    CTNN_CUDA_CHECK(cudaMemcpyAsync(ctx.host_scratch() + 3, acc, sizeof(double), cudaMemcpyDeviceToHost, stream()));
    ctx.synchronize();
    return ctx.host_scratch()[3];
  }
  // Keras' clip_by_norm: g *= limit / max(||g||, limit).
  template <cuda_storage T>
  static void clip_by_norm(T* g, std::size_t n, double limit) {
    const double norm = std::sqrt(sum_squares(g, n));
    if (norm > limit) scale(g, n, float(limit / norm));
  }
  template <cuda_storage T, class S>
  static void clip_value(T* g, std::size_t n, S c) {
    map(fn::clip<float>{float(c)}, n, g);
  }
  template <cuda_storage T>
  static void accumulate(T* acc, const T* g, std::size_t n) {
    map(fn::accumulate{}, n, acc, g);
  }
  template <cuda_storage T, class S>
  static void accumulated_mean(T* g, T* acc, std::size_t n, S inv) {
    map(fn::accumulated_mean<float>{float(inv)}, n, g, acc);
  }
  template <cuda_storage T, class S>
  static void moving_average(T* avg, const T* w, std::size_t n, S mom) {
    map(fn::moving_average<float>{float(mom), 1.0f - float(mom)}, n, avg, w);
  }

  // ---- the optional fused small-MLP hook (core/fused_mlp_hook.hpp): only for networks that fit ----
  template <class Layers>
    requires(fused_mlp_fits<Layers>())
  static bool fused_mlp_ready() {
    return ctnn::fused_mlp_ready<Layers>();
  }
  template <class Layers, cuda_storage T>
    requires(fused_mlp_fits<Layers>())
  static void fused_mlp_forward(const T* x, T* y, std::size_t batch, const T* const* params) {
    ctnn::fused_mlp_forward<Layers>(x, y, batch, [&]<std::size_t I>() { return params[I]; });
  }
  template <class Layers>
    requires(fused_mlp_fits<Layers>())
  static bool fused_mlp_backward_ready() {
    return ctnn::fused_mlp_backward_ready<Layers>();
  }
  template <class Layers, cuda_storage T>
    requires(fused_mlp_fits<Layers>())
  static void fused_mlp_backward(const T* dy, std::size_t batch, const fused_layer_io<T>* io) {
    ctnn::fused_mlp_backward<Layers>(dy, batch, [&]<std::size_t I>() { return io[I]; });
  }

 private:
  template <cuda_storage T>
  static void dropout_draw(const T* x, T* y, T* mask, std::size_t n, float rate, const float* rate_at, rng& gen) {
    const std::uint64_t seed = gen.next();  // one draw per pass, whatever n
    if (!n) return;
    cuda_kernels::dropout_forward<<<grid(n), block, 0, stream()>>>(x, y, mask, n, rate, rate_at, seed);
    launched();
  }
  static int* begin_flag() {
    int* bad = reinterpret_cast<int*>(cuda_context::get().scratch());
    CTNN_CUDA_CHECK(cudaMemsetAsync(bad, 0, sizeof(int), stream()));
    return bad;
  }
  static bool end_flag() {
    cuda_context& ctx = cuda_context::get();
    CTNN_CUDA_CHECK(cudaMemcpyAsync(ctx.host_scratch(), ctx.scratch(), sizeof(int), cudaMemcpyDeviceToHost, stream()));
    ctx.synchronize();
    int b;
    std::memcpy(&b, ctx.host_scratch(), sizeof b);
    return b == 0;
  }
};

}  // namespace ctnn
