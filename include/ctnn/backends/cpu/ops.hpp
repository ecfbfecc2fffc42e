// ctnn/backends/cpu/ops.hpp — ops<cpu<Arch>>: what layers, losses, activations
// and optimizers call on the CPU backend; it satisfies BackendOps
// (core/backend_ops.hpp, which lists each op's contract).
//
// Every function forwards to a kernel of backends/cpu with the backend's
// architecture Arch, so a model of cpu<avx2> and one of cpu<sse2> in two
// translation units instantiate different kernels (no ODR violation). The
// element-wise ops run a rule of kernels/functors.hpp through map (map.hpp:
// xsimd batches, a scalar tail, the thread pool above 2^15 elements); map is
// public for a CPU caller with a rule of its own. The thread pool is this
// backend's own business and not part of the op set. A backend that runs on
// the host with another memory (tests' counting backend) inherits these ops:
// struct ops<my_backend> : ops<cpu<>> {}.
// An op on float16_t / bfloat16_t values runs through half_ops<Arch>
// (half_ops.hpp: convert, the float32 kernel, round), which a program using
// a 16-bit policy includes; convert(src, dst, n) converts between element
// types (a copy when they are the same).
#pragma once
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "../../core/fused_mlp_hook.hpp"
#include "../../core/half.hpp"
#include "../../core/plan.hpp"
#include "../../kernels/functors.hpp"
#include "../../kernels/loss_functors.hpp"
#include "../../kernels/rows.hpp"
#include "activations.hpp"
#include "backend.hpp"
#include "batch_split.hpp"
#include "conv.hpp"
#include "crossentropy.hpp"
#include "depthwise.hpp"
#include "fused_mlp.hpp"
#include "gather.hpp"
#include "gemm.hpp"
#include "map.hpp"
#include "normalization.hpp"
#include "pooling.hpp"
#include "reduce.hpp"
#include "resize.hpp"
#include "sparse_kernels.hpp"
#include "thread_pool.hpp"

namespace ctnn {

namespace kernels::cpu {
template <class Arch>
struct half_ops;  // half_ops.hpp
}

namespace detail {
// half_ops<Arch>, named only when an op meets a 16-bit T.
template <class Arch, class T>
struct half_exec {
  static_assert(requires { sizeof(kernels::cpu::half_ops<Arch>); },
                "ops<cpu>: a 16-bit precision policy needs #include <ctnn/mixed_precision.hpp>");
  using type = kernels::cpu::half_ops<Arch>;
};
}  // namespace detail

template <class Arch>
struct ops<cpu<Arch>> {
  using arch = Arch;
  template <class T>
  using half = typename detail::half_exec<Arch, T>::type;

  // ---- conversions: n values of S into D (float <-> float16_t / bfloat16_t; a copy for S == D) ----
  template <class S, class D>
  static void convert(const S* src, D* dst, std::size_t n) {
    if constexpr (std::is_same_v<S, D>) std::copy(src, src + n, dst);
    else if constexpr (is_half_v<S> || is_half_v<D>) half<std::conditional_t<is_half_v<S>, S, D>>::convert(src, dst, n);
    else
      for (std::size_t i = 0; i < n; ++i) dst[i] = D(src[i]);
  }

  using float16 = float16_t;  // the 16-bit storage types of convert / widen
  using bfloat16 = bfloat16_t;
  // The arithmetic type of the element-wise ops on T (16-bit types compute in float).
  template <class T>
  using compute_t = std::conditional_t<std::is_same_v<T, double>, double, float>;

  // ---- map: a rule of kernels/functors.hpp over n elements of each array ----
  // (map.hpp: by-reference arguments are stored back; true when every value the
  // rule returns is finite, true for a rule that returns nothing)
  template <class F, class... P>
  static bool map(const F& f, std::size_t n, P*... p) {
    return kernels::cpu::map<Arch>(f, n, p...);
  }
  // map over rows x cols elements of row-strided arrays (kernels/rows.hpp): row r of
  // array k at a_k.data + r * a_k.stride. Rows are split over the thread pool above
  // 2^15 elements (whole rows per task, so the bits do not depend on the thread count).
  template <class F, class... P>
  static void map_rows(const F& f, std::size_t rows, std::size_t cols, kernels::rows<P>... a) {
    if (rows == 0 || cols == 0) return;
    kernels::cpu::thread_pool& pool = kernels::cpu::thread_pool::global();
    const std::size_t tasks = std::min(rows, kernels::cpu::chunk_tasks(rows * cols, pool));
    pool.run(
        tasks,
        [&](std::size_t c) {
          for (std::size_t r = c * rows / tasks, e = (c + 1) * rows / tasks; r < e; ++r)
            kernels::cpu::map_range<Arch>(f, 0, cols, (a.data + r * a.stride)...);
        },
        tasks > 1);
  }

  // ---- dense products (K inputs, N outputs, m rows) ----
  // y = e.forward(x W + b): e, an activation rule of kernels/functors.hpp or a list
  // of them (fn::chain), runs on the GEMM's accumulators before they are stored.
  template <std::size_t K, std::size_t N, class E = fn::identity_fn, class T>
  static void dense_forward(const T* x, const T* w, const T* b, T* y, std::size_t m, const E& e = {}) {
    static_assert(fn::epilogue_rule<E, std::conditional_t<is_half_v<T>, float, T>>,
                  "ops<cpu>::dense_forward: the epilogue must be a rule of kernels/functors.hpp (V forward(V))");
    if constexpr (is_half_v<T>) half<T>::template dense_forward<K, N>(x, w, b, y, m, e);
    else kernels::cpu::dense_forward<K, N, E, Arch>(x, w, b, y, m, e);
  }
  template <std::size_t K, std::size_t N, class T>
  static void dense_backward_weights(const T* x, const T* dy, T* dw, T* db, std::size_t m) {
    if constexpr (is_half_v<T>) half<T>::template dense_backward_weights<K, N>(x, dy, dw, db, m);
    else kernels::cpu::dense_backward_weights<K, N, Arch>(x, dy, dw, db, m);
  }
  template <std::size_t K, std::size_t N, class T>
  static void dense_backward_input(const T* dy, const T* w, T* dx, std::size_t m) {
    if constexpr (is_half_v<T>) half<T>::template dense_backward_input<K, N>(dy, w, dx, m);
    else kernels::cpu::dense_backward_input<K, N, Arch>(dy, w, dx, m);
  }
  // The products with a weight matrix used many times (a recurrent kernel, at every step):
  // pack_weights<K, N>(w, packed, m) before the products x W of m rows, pack_weights_transposed
  // before dY W^T; packed holds packed_size<K, N, T> values, and a packing for m < packed_rows
  // writes nothing (those products read w: gemv, dot products). dense_forward_packed and
  // dense_backward_input_packed equal dense_forward / dense_backward_input up to rounding
  // (gemm.hpp; 16-bit T: the products of w, nothing packed).
  template <std::size_t K, std::size_t N, class T>
  static constexpr std::size_t packed_size = is_half_v<T> ? 0 : kernels::cpu::packed_size<K, N, T, Arch>;
  static constexpr std::size_t packed_rows = kernels::cpu::packed_rows;
  template <std::size_t K, std::size_t N, class T>
  static void pack_weights(const T* w, T* packed, std::size_t m) {
    if constexpr (!is_half_v<T>) kernels::cpu::pack_weights<K, N, Arch>(w, packed, m);
  }
  template <std::size_t K, std::size_t N, class T>
  static void pack_weights_transposed(const T* w, T* packed, std::size_t m) {
    if constexpr (!is_half_v<T>) kernels::cpu::pack_weights_transposed<K, N, Arch>(w, packed, m);
  }
  template <std::size_t K, std::size_t N, class E = fn::identity_fn, class T>
  static void dense_forward_packed(const T* x, const T* w, const T* packed, const T* b, T* y, std::size_t m,
                                   const E& e = {}) {
    if constexpr (is_half_v<T>) dense_forward<K, N>(x, w, b, y, m, e);
    else kernels::cpu::dense_forward_packed<K, N, E, Arch>(x, w, packed, b, y, m, e);
  }
  template <std::size_t K, std::size_t N, class T>
  static void dense_backward_input_packed(const T* dy, const T* w, const T* packed, T* dx, std::size_t m) {
    if constexpr (is_half_v<T>) dense_backward_input<K, N>(dy, w, dx, m);
    else kernels::cpu::dense_backward_input_packed<K, N, Arch>(dy, w, packed, dx, m);
  }
  // A recurrent step's whole pre-activation, z = b + x W + h R (x [m, KX], h [m, KH], null: z = b + x W),
  // over W and R packed by pack_weights (the KX and KH rows of each tile summed in registers, z written
  // once; gemm.hpp: dense_forward_packed_sum): an LSTM's input projection inside its step product rather
  // than one GEMM over every step. Not part of BackendOps: a layer runs it where the backend's ops say
  // fused_step_projection, and the projection then the step products elsewhere.
  static constexpr bool fused_step_projection = true;
  template <std::size_t KX, std::size_t KH, std::size_t N, class T>
  static void dense_forward_packed_sum(const T* x, const T* w, const T* pw, const T* h, const T* r, const T* pr,
                                       const T* b, T* z, std::size_t m) {
    static_assert(std::is_same_v<T, float> || std::is_same_v<T, double>,
                  "ops<cpu>::dense_forward_packed_sum: float or double");
    kernels::cpu::dense_forward_packed_sum<KX, KH, N, Arch>(x, w, pw, h, r, pr, b, z, m);
  }
  // dx += dy W^T over W packed by pack_weights_transposed (gemm.hpp: dense_backward_input_packed_add), for
  // m >= packed_rows (below: a scalar loop): a recurrent layer's dL/dh += dz R^T with no product buffer.
  // Not part of BackendOps: a layer runs it where the backend's ops say fused_packed_add.
  static constexpr bool fused_packed_add = true;
  template <std::size_t K, std::size_t N, class T>
  static void dense_backward_input_packed_add(const T* dy, const T* w, const T* packed, T* dx, std::size_t m) {
    static_assert(std::is_same_v<T, float> || std::is_same_v<T, double>,
                  "ops<cpu>::dense_backward_input_packed_add: float or double");
    kernels::cpu::dense_backward_input_packed_add<K, N, Arch>(dy, w, packed, dx, m);
  }
  // One row's recurrent step (a recurrent layer at batch 1), the product and the cell's rule
  // together: rec [G U] = b + x w (x [K], w [K, G U], b null: 0), then the rule f over the U
  // columns of a... (one row each, rec's gate blocks among them): dense_forward<K, G U>(x, w, b,
  // rec, 1) then map_rows(f, 1, U, ...) up to rounding (the same bits for 128 units without
  // reverse: gemm.hpp), block by block of units; reverse: the blocks and w's rows last to first
  // (every other step of a layer: L1 reuse). float and double. Not part of BackendOps: a layer runs it where
  // the backend's ops say fused_recurrent_row, and the product then the rule elsewhere.
  static constexpr bool fused_recurrent_row = true;
  template <std::size_t K, std::size_t U, std::size_t G, class F, class T, class... P>
  static void recurrent_row(const F& f, const T* x, const T* w, const T* b, T* rec, bool reverse, P*... a) {
    static_assert(std::is_same_v<T, float> || std::is_same_v<T, double>, "ops<cpu>::recurrent_row: float or double");
    kernels::cpu::recurrent_row<K, U, G, Arch>(f, x, w, b, rec, reverse, a...);
  }
  // dense_backward_weights with x and dy read where they are, nothing packed (gemm.hpp:
  // weights_gradient_in_place, where K and N suit its tiles, else dense_backward_weights): for few output
  // rows over many rows (a recurrent layer's dW over every step, 28 x 512 over 1792 rows: 0.83x the
  // time, the same bits there). Not part of BackendOps: a layer calls it where the ops have it.
  template <std::size_t K, std::size_t N, class T>
  static void dense_backward_weights_in_place(const T* x, const T* dy, T* dw, T* db, std::size_t m) {
    if constexpr (kernels::cpu::in_place_weights_gradient_v<K, N, T, Arch>) {
      kernels::cpu::weights_gradient_in_place<K, N, Arch>(x, dy, dw, m, db);
    } else {
      dense_backward_weights<K, N>(x, dy, dw, db, m);
    }
  }
  // One step's dW += x^T dz, dR += h^T dz (h null: not touched) and db += colsum(dz) (gemm.hpp:
  // step_weights_gradient; init: from 0), each output's rows summed in order: a recurrent layer calls
  // it per step, last step first, while the step's dz is in cache, or once for its steps (steps > 1: step 0
  // without h) after its time loop (the same bits either way). float and double. Not part of BackendOps: a layer runs it where the backend's ops
  // say step_weight_gradients, and the products over every step elsewhere.
  // From step_weights_rows rows (below, the products over every step took less time: an LSTM(128) on 28
  // steps at 24 rows 1.04-1.06x their time on AVX2, at 32 rows 0.95-0.97x on AVX2 and AVX-512, loaded Xeon;
  // docs/performance.md, Recurrent).
  static constexpr bool step_weight_gradients = true;
  static constexpr std::size_t step_weights_rows = 32;
  template <std::size_t KX, std::size_t KH, std::size_t N, class T>
  static void step_weights_gradient(const T* x, const T* h, const T* dz, T* dw, T* dr, T* db, std::size_t m,
                                    bool init, bool parallel, std::size_t steps = 1) {
    static_assert(std::is_same_v<T, float> || std::is_same_v<T, double>,
                  "ops<cpu>::step_weights_gradient: float or double");
    kernels::cpu::step_weights_gradient<KX, KH, N, Arch>(x, h, dz, dw, dr, db, m, init, parallel, steps);
  }
  // A recurrent layer's time loop split by rows of the batch (every row's steps read only that
  // row's states): f(r0, m) over blocks of rows, one per thread of the pool, each block at least
  // packed_rows rows (so each runs the same products over the packing as the whole batch: the same
  // bits whatever the thread count), else f(0, rows); the ops f calls run serially on its thread.
  // One pool run for the whole loop, where splitting each step's product had two per step (28 steps
  // at batch 64: slower on two threads than on one). Not part of BackendOps: a layer splits its
  // loop where the backend's ops say split_recurrent_rows.
  static constexpr bool split_recurrent_rows = true;
  template <class F>
  static void recurrent_row_blocks(std::size_t rows, F&& f) {
    kernels::cpu::for_row_blocks(rows, packed_rows, f);
  }
  // The same on the first n <= N outputs (dense<up_to<N>>; float and double): row strides stay N,
  // columns n.. are not touched.
  template <std::size_t K, std::size_t N, class E = fn::identity_fn, class T>
  static void dense_forward_active(const T* x, const T* w, const T* b, T* y, std::size_t m, std::size_t n,
                                   const E& e = {}) {
    kernels::cpu::dense_forward_active<K, N, E, Arch>(x, w, b, y, m, n, e);
  }
  template <std::size_t K, std::size_t N, class T>
  static void dense_backward_weights_active(const T* x, const T* dy, T* dw, T* db, std::size_t m, std::size_t n) {
    kernels::cpu::dense_backward_weights_active<K, N, Arch>(x, dy, dw, db, m, n);
  }
  template <std::size_t K, std::size_t N, class T>
  static void dense_backward_input_active(const T* dy, const T* w, T* dx, std::size_t m, std::size_t n) {
    kernels::cpu::dense_backward_input_active<K, N, Arch>(dy, w, dx, m, n);
  }

  // ---- sparse dense products: Index (kernels/sparse_index.hpp) names the layout,
  // kernels::cpu::sparse_kernels<Index> (specialized beside its kernels) runs it ----
  template <std::size_t K, std::size_t N, class Index, class T>
  static void sparse_dense_forward(const Index& index, const T* x, const T* values, const T* b, T* y, std::size_t m,
                                   bool relu, T* scratch) {
    kernels::cpu::sparse_kernels<Index>::template forward<K, N, Arch>(index, x, values, b, y, m, relu, scratch);
  }
  template <std::size_t K, std::size_t N, class Index, class T>
  static void sparse_dense_backward(const Index& index, const T* x, const T* dz, const T* values, T* dvalues, T* db,
                                    T* dx, std::size_t m) {
    kernels::cpu::sparse_kernels<Index>::template backward<K, N>(index, x, dz, values, dvalues, db, dx, m);
  }
  // w [K x N] = the layout's weights decoded to dense (0 where none is kept): the stripped layers'
  // derived buffer, for the batches kernels::cpu::decode_batches<Index, Arch> names.
  template <std::size_t K, std::size_t N, class Index, class T>
  static void sparse_dense_decode(const Index& index, const T* values, T* w) {
    kernels::cpu::sparse_kernels<Index>::template decode<K, N, Arch>(index, values, w);
  }
  // decode's inverse: values [capacity] = w [K x N] at the layout's kept positions, 0 past them (a
  // decoding layer's values' gradient gathered from the dense dW = X^T dZ: layers/sparse_dense.hpp).
  template <std::size_t K, std::size_t N, class Index, class T>
  static void sparse_dense_gather(const Index& index, const T* w, T* values, std::size_t capacity) {
    kernels::cpu::sparse_kernels<Index>::template gather<K, N, Arch>(index, w, values, capacity);
  }
  // Where the layout computes it without the dense dW (kernels::cpu::fused_weights_gradient_v):
  // values' gradient [capacity] (0 past the kept ones) and db from x and dz, in place of
  // dense_backward_weights and sparse_dense_gather.
  template <std::size_t K, std::size_t N, class Index, class T>
    requires kernels::cpu::fused_weights_gradient_v<Index, K, N, Arch, T>
  static void sparse_dense_weights_gradient(const Index& index, const T* x, const T* dz, T* dvalues, T* db,
                                            std::size_t capacity, std::size_t m) {
    kernels::cpu::sparse_kernels<Index>::template weights_gradient<K, N, Arch>(index, x, dz, dvalues, db, capacity, m);
  }

  // ---- the optional fused small-MLP hook (core/fused_mlp_hook.hpp): only for networks of
  // this backend's own layers that fit (fused_mlp.hpp): inference from one tile of rows on, and
  // training's forward and backward on the batches of fused_mlp_train_batch; inference and the
  // backward on by default where they measured faster (fused_mlp_default, fused_mlp_backward_default) ----
  template <class Layers>
    requires(kernels::cpu::fused_mlp_fits<Layers, Arch>())
  static constexpr fused_mlp_options fused_mlp_defaults() {
    return {kernels::cpu::fused_mlp_default<Layers, Arch>, kernels::cpu::fused_mlp_backward_default<Layers, Arch>,
            false};
  }
  template <class Layers>
    requires(kernels::cpu::fused_mlp_fits<Layers, Arch>())
  static constexpr std::size_t fused_mlp_min_batch() {
    return kernels::cpu::fused_tile_rows<Layers, Arch>;
  }
  template <class Layers>
    requires(kernels::cpu::fused_mlp_fits<Layers, Arch>())
  static constexpr bool fused_mlp_train_batch(std::size_t batch) {
    return kernels::cpu::fused_mlp_train_batch<Layers, Arch>(batch);
  }
  template <class Layers>
    requires(kernels::cpu::fused_mlp_fits<Layers, Arch>())
  static bool fused_mlp_ready() {
    return true;
  }
  template <class Layers, class T>
    requires(kernels::cpu::fused_mlp_fits<Layers, Arch>())
  static void fused_mlp_forward(const T* x, T* y, std::size_t batch, const T* const* params) {
    kernels::cpu::fused_mlp_forward<Arch, Layers>(x, y, batch, params);
  }
  template <class Layers, class T>
    requires(kernels::cpu::fused_mlp_fits<Layers, Arch>())
  static void fused_mlp_training_forward(const T* x, std::size_t batch, const T* const* params, T* const* outs) {
    kernels::cpu::fused_mlp_training_forward<Arch, Layers>(x, batch, params, outs);
  }
  template <class Layers>
    requires(kernels::cpu::fused_mlp_fits<Layers, Arch>())
  static bool fused_mlp_backward_ready() {
    return true;
  }
  template <class Layers, class T>
    requires(kernels::cpu::fused_mlp_fits<Layers, Arch>())
  static void fused_mlp_backward(const T* dy, std::size_t batch, const fused_layer_io<T>* io,
                                 const fused_layer_done* done = nullptr) {
    kernels::cpu::fused_mlp_backward<Arch, Layers>(dy, batch, io, kernels::cpu::thread_pool::global(), done);
  }

  // ---- convolution and pooling (geometry G) ----
  // Whether max pooling of G over T comes from the compiled part (compiled mode, float, at least one
  // vector of channels: the shapes whose compile-time entry takes the vector path; pooling.hpp).
  template <kernels::conv_geometry G, class T>
  static constexpr bool pool_compiled = ::ctnn::detail::compiled_part && std::is_same_v<T, float> &&
                                        kernels::cpu::simd_v<float, Arch> &&
                                        G.c >= xsimd::batch<float, Arch>::size;
  // y = e.forward(conv(x, w) + b): e, the layer's activation rule (kernels/functors.hpp), on each output
  // before it is stored (no second pass over y).
  template <kernels::conv_geometry G, class T, class E = fn::identity_fn>
  static void conv_forward(const T* x, const T* w, const T* b, T* y, T* cols, std::size_t batch, const E& e = {}) {
    static_assert(fn::epilogue_rule<E, std::conditional_t<is_half_v<T>, float, T>>,
                  "ops<cpu>::conv_forward: the epilogue must be a rule of kernels/functors.hpp (V forward(V))");
    if constexpr (is_half_v<T>) half<T>::template conv_forward<G>(x, w, b, y, cols, batch, e);
    else kernels::cpu::conv_forward<G, Arch>(x, w, b, y, cols, batch, e);
  }
  template <kernels::conv_geometry G, class T>
  static void conv_backward(const T* dy, const T* w, T* dw, T* db, T* dx, T* cols, std::size_t batch) {
    if constexpr (is_half_v<T>) half<T>::template conv_backward<G>(dy, w, dw, db, dx, cols, batch);
    else kernels::cpu::conv_backward<G, Arch>(dy, w, dw, db, dx, cols, batch);
  }
  // conv_backward of a relu layer (y its output, dy turned into dL/dz unless the kernel reads the mask itself).
  template <kernels::conv_geometry G, class T>
  static void conv_backward_relu(const T* y, T* dy, const T* w, T* dw, T* db, T* dx, T* cols, std::size_t batch) {
    if constexpr (is_half_v<T>) {
      relu_backward(y, dy, batch * G.out_size());
      conv_backward<G>(dy, w, dw, db, dx, cols, batch);
    } else {
      kernels::cpu::conv_backward_relu<G, Arch>(y, dy, w, dw, db, dx, cols, batch);
    }
  }
  template <kernels::conv_geometry G, class T>
  static void max_pool_forward(const T* x, T* y, std::uint32_t* idx, std::size_t batch) {
    if constexpr (is_half_v<T>) half<T>::template max_pool_forward<G>(x, y, idx, batch);
    else if constexpr (pool_compiled<G, T>)
      kernels::cpu::max_pool_forward_n<Arch>(G, x, y, reinterpret_cast<unsigned char*>(idx), batch);
    else kernels::cpu::max_pool_forward<G, Arch>(x, y, reinterpret_cast<unsigned char*>(idx), batch);
  }
  template <kernels::conv_geometry G, class T>
  static void max_pool_backward(const std::uint32_t* idx, const T* dy, T* dx, std::size_t batch) {
    if constexpr (is_half_v<T>) half<T>::template max_pool_backward<G>(idx, dy, dx, batch);
    else if constexpr (pool_compiled<G, T>)
      kernels::cpu::max_pool_backward_n<Arch>(G, reinterpret_cast<const unsigned char*>(idx), dy, dx, batch);
    else kernels::cpu::max_pool_backward<G, Arch>(reinterpret_cast<const unsigned char*>(idx), dy, dx, batch);
  }
  template <kernels::conv_geometry G, class T>
  static void average_pool_forward(const T* x, T* y, std::size_t batch) {
    if constexpr (is_half_v<T>) half<T>::template average_pool_forward<G>(x, y, batch);
    else kernels::cpu::average_pool_forward<G>(x, y, batch);
  }
  template <kernels::conv_geometry G, class T>
  static void average_pool_backward(const T* dy, T* dx, std::size_t batch) {
    if constexpr (is_half_v<T>) half<T>::template average_pool_backward<G>(dy, dx, batch);
    else kernels::cpu::average_pool_backward<G>(dy, dx, batch);
  }
  template <std::size_t P, std::size_t C, class T>
  static void global_average_forward(const T* x, T* y, std::size_t batch) {
    if constexpr (is_half_v<T>) half<T>::template global_average_forward<P, C>(x, y, batch);
    else kernels::cpu::global_average_forward<P, C>(x, y, batch);
  }
  template <std::size_t P, std::size_t C, class T>
  static void global_average_backward(const T* dy, T* dx, std::size_t batch) {
    if constexpr (is_half_v<T>) half<T>::template global_average_backward<P, C>(dy, dx, batch);
    else kernels::cpu::global_average_backward<P, C>(dy, dx, batch);
  }
  // layer_normalization (normalization.hpp; double inside, any element type).
  template <std::size_t C, class T>
  static void layer_norm_forward(const T* x, T* y, const T* gamma, const T* beta, T* mean, T* inv, std::size_t rows,
                                 double eps) {
    kernels::cpu::layer_norm_forward<C>(x, y, gamma, beta, mean, inv, rows, eps);
  }
  template <std::size_t C, class T>
  static void layer_norm_backward(const T* x, const T* dy, T* dx, const T* gamma, const T* mean, const T* inv,
                                  T* dgamma, T* dbeta, std::size_t rows) {
    kernels::cpu::layer_norm_backward<C>(x, dy, dx, gamma, mean, inv, dgamma, dbeta, rows);
  }
  // depthwise_conv2d and separable_conv2d's depthwise step (depthwise.hpp; G.f = G.c M; b, db, dx may
  // be null; any element type, float and double vectorized for M == 1).
  template <kernels::conv_geometry G, std::size_t M, class T>
  static void depthwise_forward(const T* x, const T* w, const T* b, T* y, std::size_t batch) {
    kernels::cpu::depthwise_forward<G, M, Arch>(x, w, b, y, batch);
  }
  template <kernels::conv_geometry G, std::size_t M, class T>
  static void depthwise_backward(const T* x, const T* dz, const T* w, T* dw, T* db, T* dx, std::size_t batch) {
    kernels::cpu::depthwise_backward<G, M, Arch>(x, dz, w, dw, db, dx, batch);
  }
  // zero_padding2d and up_sampling2d (resize.hpp; memory moves, any element type).
  template <kernels::conv_geometry G, class T>
  static void zero_pad_forward(const T* x, T* y, std::size_t batch) {
    kernels::cpu::zero_pad_forward<G>(x, y, batch);
  }
  template <kernels::conv_geometry G, class T>
  static void zero_pad_backward(const T* dy, T* dx, std::size_t batch) {
    kernels::cpu::zero_pad_backward<G>(dy, dx, batch);
  }
  template <kernels::conv_geometry G, class T>
  static void up_sample_forward(const T* x, T* y, std::size_t batch) {
    kernels::cpu::up_sample_forward<G>(x, y, batch);
  }
  template <kernels::conv_geometry G, class T>
  static void up_sample_backward(const T* dy, T* dx, std::size_t batch) {
    kernels::cpu::up_sample_backward<G>(dy, dx, batch);
  }
  // the embedding's rows (gather.hpp): y[i] = table[ids[i]] (an id not an integer in [0, vocab)
  // throws std::invalid_argument); its adjoint dtable[ids[i]] += dy[i], in order
  template <std::size_t D, class T>
  static void gather_rows(const T* ids, const T* table, T* y, std::size_t n, std::size_t vocab) {
    kernels::cpu::gather_rows<D>(ids, table, y, n, vocab);
  }
  template <std::size_t D, class T>
  static void scatter_add_rows(const T* ids, const T* dy, T* dtable, std::size_t n, std::size_t vocab) {
    kernels::cpu::scatter_add_rows<D>(ids, dy, dtable, n, vocab);
  }

  // ---- batch normalization and dropout (has_layer_ops; normalization.hpp) ----
  // rows x C values; moving statistics of type S, caches mean and inv = 1 / sqrt(var + eps).
  template <std::size_t C, class T, class S>
  static void batch_norm_forward(const T* x, T* y, const T* gamma, const T* beta, S* moving_mean, S* moving_var,
                                 T* mean, T* inv, std::size_t rows, double momentum, double epsilon, bool training) {
    if constexpr (::ctnn::detail::compiled_part && std::is_same_v<T, float> && std::is_same_v<S, float>)
      kernels::cpu::batch_norm_forward_n<Arch>(C, x, y, gamma, beta, moving_mean, moving_var, mean, inv, rows, momentum,
                                               epsilon, training);  // one body for every C (compiled_kernels.hpp)
    else
      kernels::cpu::batch_norm_forward<C>(x, y, gamma, beta, moving_mean, moving_var, mean, inv, rows, momentum,
                                          epsilon, training);
  }
  template <std::size_t C, class T>
  static void batch_norm_backward(const T* x, const T* dy, T* dx, const T* gamma, const T* mean, const T* inv,
                                  T* dgamma, T* dbeta, std::size_t rows, bool training) {
    if constexpr (::ctnn::detail::compiled_part && std::is_same_v<T, float>)
      kernels::cpu::batch_norm_backward_n<Arch>(C, x, dy, dx, gamma, mean, inv, dgamma, dbeta, rows, training);
    else
      kernels::cpu::batch_norm_backward<C>(x, dy, dx, gamma, mean, inv, dgamma, dbeta, rows, training);
  }
  // The mask drawn from gen (n uniforms, in order); the rate a value or one float in this memory
  // (dynamic_dropout's metadata). A rate outside [0, 1) throws std::invalid_argument.
  template <class T>
  static void dropout_forward(const T* x, T* y, T* mask, std::size_t n, double rate, rng& gen) {
    kernels::cpu::dropout_forward(x, y, mask, n, rate, gen);
  }
  template <class T>
  static void dropout_forward(const T* x, T* y, T* mask, std::size_t n, const float* rate, rng& gen) {
    kernels::cpu::dropout_forward(x, y, mask, n, double(*rate), gen);
  }
  template <class T>
  static void dropout_backward(const T* mask, const T* dy, T* dx, std::size_t n) {
    kernels::cpu::dropout_backward(mask, dy, dx, n);
  }

  // ---- element-wise and row-wise ----
  template <class T>
  static void copy(const T* x, T* y, std::size_t n) { std::copy(x, x + n, y); }
  template <class T, class S>
  static void fill(T* x, std::size_t n, S v) { map(fn::fill<compute_t<T>>{compute_t<T>(v)}, n, x); }
  template <class T>
  static void fill_zero(T* x, std::size_t n) { fill(x, n, 0); }
  template <class T, class S>
  static void scale(T* x, std::size_t n, S k) { map(fn::scale<compute_t<T>>{compute_t<T>(k)}, n, x); }
  // g = clamp(g, -c, c)
  template <class T, class S>
  static void clip_value(T* g, std::size_t n, S c) { map(fn::clip<compute_t<T>>{compute_t<T>(c)}, n, g); }
  // acc += g
  template <class T>
  static void accumulate(T* acc, const T* g, std::size_t n) { map(fn::accumulate{}, n, acc, g); }
  // g = (acc + g) * inv; acc = 0
  template <class T, class S>
  static void accumulated_mean(T* g, T* acc, std::size_t n, S inv) {
    map(fn::accumulated_mean<compute_t<T>>{compute_t<T>(inv)}, n, g, acc);
  }
  // avg = mom avg + (1 - mom) w
  template <class T, class S>
  static void moving_average(T* avg, const T* w, std::size_t n, S mom) {
    using C = compute_t<T>;
    map(fn::moving_average<C>{C(mom), C(1) - C(mom)}, n, avg, w);
  }
  // g += l1 sign(w) + 2 l2 w
  template <class T, class S>
  static void add_penalty_gradient(const T* w, T* g, std::size_t n, S l1, S l2) {
    using C = compute_t<T>;
    map(fn::penalty_gradient<C>{C(l1), C(2) * C(l2)}, n, w, g);
  }
  // The same with l1 and l2 times *factor (a dynamic regularizer's, in B's memory), read as the map runs.
  template <class T, class S>
  static void add_penalty_gradient(const T* w, T* g, std::size_t n, S l1, S l2, const float* factor) {
    using C = compute_t<T>;
    map(fn::penalty_gradient_by<C>{C(l1), C(2) * C(l2), factor}, n, w, g);
  }
  // g *= inv; true when every g was finite before.
  template <class T, class S>
  static bool unscale(T* g, std::size_t n, S inv) { return map(fn::unscale<compute_t<T>>{compute_t<T>(inv)}, n, g); }
  template <class T>
  static bool all_finite(const T* x, std::size_t n) { return map(fn::check_finite{}, n, x); }

  // ---- reductions (double results) ----
  template <class T>
  static double sum_squares(const T* x, std::size_t n) { return kernels::cpu::sum_of<Arch, false>(x, n); }
  template <class T>
  static double sum_abs(const T* x, std::size_t n) { return kernels::cpu::sum_of<Arch, true>(x, n); }
  // Keras' clip_by_norm: g *= limit / max(||g||, limit).
  template <class T>
  static void clip_by_norm(T* g, std::size_t n, double limit) {
    const double norm = std::sqrt(sum_squares(g, n));
    if (norm > limit) scale(g, n, limit / norm);
  }
  // s->penalty += l1 sum |w| + l2 sum w^2 (the sums in double, the products in the compute type;
  // a term whose factor is 0 is not summed). With a factor (a dynamic regularizer's, in B's
  // memory) l1 and l2 times *factor, read here: fn::checked_factor (a bad one gives NaN).
  template <class T, class S>
  static void add_penalty(const T* w, std::size_t n, S l1, S l2, step_scalars* s) {
    add_penalty_times(w, n, l1, l2, compute_t<T>(1), s);
  }
  template <class T, class S>
  static void add_penalty(const T* w, std::size_t n, S l1, S l2, const float* factor, step_scalars* s) {
    add_penalty_times(w, n, l1, l2, compute_t<T>(fn::checked_factor(*factor)), s);
  }
  template <class T, class S>
  static void add_penalty_times(const T* w, std::size_t n, S l1, S l2, compute_t<T> f, step_scalars* s) {
    using C = compute_t<T>;
    C p = 0;
    if (l1 != S(0)) p += C(l1) * f * C(sum_abs(w, n));
    if (l2 != S(0)) p += C(l2) * f * C(sum_squares(w, n));
    s->penalty += double(p);
  }

  // ---- conversions between float32 and a 16-bit storage type ----
  // (convert(src, dst, n) above; widen is convert to float32)
  template <class T>
  static void widen(const T* x, float* y, std::size_t n) { convert(x, y, n); }
  // An in-place op on y (f(y)) or on a delta d given y (f(y, d)); 16-bit values through half_ops.
  template <class T>
  static void relu_forward(T* y, std::size_t n) {
    if constexpr (is_half_v<T>) half<T>::in_place(y, n, [n](float* f) { relu_forward(f, n); });
    else kernels::cpu::relu_forward<T, Arch>(y, n);
  }
  template <class T>
  static void relu_backward(const T* y, T* d, std::size_t n) {
    if constexpr (is_half_v<T>) half<T>::delta_in_place(y, d, n, [n](const float* f, float* g) { relu_backward(f, g, n); });
    else kernels::cpu::relu_backward<T, Arch>(y, d, n);
  }
  template <class T>
  static void leaky_relu_forward(T* y, std::size_t n, T a) {
    if constexpr (is_half_v<T>) half<T>::in_place(y, n, [n, a](float* f) { leaky_relu_forward(f, n, float(a)); });
    else kernels::cpu::leaky_relu_forward<T, Arch>(y, n, a);
  }
  template <class T>
  static void leaky_relu_backward(const T* y, T* d, std::size_t n, T a) {
    if constexpr (is_half_v<T>)
      half<T>::delta_in_place(y, d, n, [n, a](const float* f, float* g) { leaky_relu_backward(f, g, n, float(a)); });
    else kernels::cpu::leaky_relu_backward<T, Arch>(y, d, n, a);
  }
  template <class T>
  static void sigmoid_forward(T* y, std::size_t n) {
    if constexpr (is_half_v<T>) half<T>::in_place(y, n, [n](float* f) { sigmoid_forward(f, n); });
    else kernels::cpu::sigmoid_forward<T, Arch>(y, n);
  }
  template <class T>
  static void sigmoid_backward(const T* y, T* d, std::size_t n) {
    if constexpr (is_half_v<T>) half<T>::delta_in_place(y, d, n, [n](const float* f, float* g) { sigmoid_backward(f, g, n); });
    else kernels::cpu::sigmoid_backward<T, Arch>(y, d, n);
  }
  template <class T>
  static void tanh_forward(T* y, std::size_t n) {
    if constexpr (is_half_v<T>) half<T>::in_place(y, n, [n](float* f) { tanh_forward(f, n); });
    else kernels::cpu::tanh_forward<T, Arch>(y, n);
  }
  template <class T>
  static void tanh_backward(const T* y, T* d, std::size_t n) {
    if constexpr (is_half_v<T>) half<T>::delta_in_place(y, d, n, [n](const float* f, float* g) { tanh_backward(f, g, n); });
    else kernels::cpu::tanh_backward<T, Arch>(y, d, n);
  }
  template <class T>
  static void softmax_forward(T* y, std::size_t rows, std::size_t cols) {
    if constexpr (is_half_v<T>) half<T>::in_place(y, rows * cols, [rows, cols](float* f) { softmax_forward(f, rows, cols); });
    else kernels::cpu::softmax_forward<T, Arch>(y, rows, cols);
  }
  template <class T>
  static void softmax_backward(const T* y, T* d, std::size_t rows, std::size_t cols) {
    if constexpr (is_half_v<T>)
      half<T>::delta_in_place(y, d, rows * cols, [rows, cols](const float* f, float* g) { softmax_backward(f, g, rows, cols); });
    else kernels::cpu::softmax_backward<T, Arch>(y, d, rows, cols);
  }
  template <class T, class Target>
  static double crossentropy_logits_row(const T* z, Target&& t, std::size_t n, T* d, double scale) {
    return kernels::cpu::crossentropy_logits_row<T, Arch>(z, t, n, d, scale);
  }

  // ---- loss kernels (batched; the sum of the per-sample losses, gradient times scale into d if not null) ----
  template <class T>
  static double sparse_crossentropy_logits(const T* z, const std::int32_t* labels, std::size_t rows, std::size_t n,
                                           T* d, double scale) {
    return kernels::cpu::sparse_crossentropy_logits<T, Arch>(z, labels, rows, n, d, scale);
  }
  template <class T>
  static double categorical_crossentropy_logits(const T* z, const T* t, std::size_t rows, std::size_t n, T* d,
                                                double scale) {
    return kernels::cpu::categorical_crossentropy_logits<T, Arch>(z, t, rows, n, d, scale);
  }
  template <class T>
  static double squared_error(const T* y, const T* t, std::size_t count, T* d, double scale) {
    return kernels::cpu::squared_error(y, t, count, d, scale);
  }

  // ---- losses into a step's scalars (has_loss_ops; core/plan.hpp's step_scalars) ----
  // Each adds the sum of its rows' losses to s->loss_sum (s->non_finite set when that sum is NaN
  // or infinite) and, when d is not null, writes the gradient of the batch mean times scale, then
  // multiplied by s->loss_scale (when not 1). Labels are in [0, n) (the loss checks them on the host).
  template <class T>
  static void sparse_crossentropy_loss(const T* y, const std::int32_t* labels, std::size_t rows, std::size_t n, T* d,
                                       double scale, bool from_logits, step_scalars* s) {
    finish_loss(from_logits ? sparse_crossentropy_logits(y, labels, rows, n, d, scale)
                            : kernels::cpu::sparse_crossentropy_probs(y, labels, rows, n, d, scale),
                d, rows * n, s);
  }
  template <class T>
  static void categorical_crossentropy_loss(const T* y, const T* t, std::size_t rows, std::size_t n, T* d,
                                            double scale, bool from_logits, step_scalars* s) {
    finish_loss(from_logits ? categorical_crossentropy_logits(y, t, rows, n, d, scale)
                            : kernels::cpu::categorical_crossentropy_probs(y, t, rows, n, d, scale),
                d, rows * n, s);
  }
  // The sum of (y - t)^2 over count values divided by divisor (MSE: the outputs per sample);
  // d = scale * (y - t).
  template <class T>
  static void squared_error_loss(const T* y, const T* t, std::size_t count, T* d, double scale, double divisor,
                                 step_scalars* s) {
    finish_loss(squared_error(y, t, count, d, scale) / divisor, d, count, s);
  }
  // A pointwise loss rule (kernels/loss_functors.hpp): the sum of rule.value(y, t) over count
  // values divided by divisor; d = scale * rule.gradient(y, t).
  template <class Rule, class T>
  static void pointwise_loss(const Rule& rule, const T* y, const T* t, std::size_t count, T* d, double scale,
                             double divisor, step_scalars* s) {
    finish_loss(kernels::cpu::pointwise_loss(rule, y, t, count, d, scale) / divisor, d, count, s);
  }
  template <class T>
  static void finish_loss(double sum, T* d, std::size_t count, step_scalars* s) {
    s->loss_sum += sum;
    if (!std::isfinite(sum)) s->non_finite = 1;
    if (d && s->loss_scale != 1.0) scale(d, count, T(s->loss_scale));
  }
};

}  // namespace ctnn
