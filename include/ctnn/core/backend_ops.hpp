// ctnn/core/backend_ops.hpp — BackendOps<B>: the op set every backend's ops<B> provides.
//
// Layers, losses, optimizers, optimizer options, regularizers and the training
// step call kernels only through ops<B>, so this is the whole contract of a
// backend's compute. It is the conjunction of seven named sub-concepts (a
// failed check names the missing one); each is checked with float arrays and
// lists what it requires and who satisfies it. Pointers are B's memory; an op
// that returns a value waits for it, the others may return before the work
// is done (a device queue). Every op is element-wise or row-wise unless said.
// Satisfied by ops<cpu<Arch>> (backends/cpu/ops.hpp; tests/static) and
// ops<cuda<SM>> (backends/cuda/ops.cuh; tests/cuda/test_ops.cu under nvcc).
// docs/design.md ("The op set") has the formulas.
#pragma once
#include <concepts>
#include <cstddef>
#include <cstdint>

#include "../kernels/conv_reference.hpp"
#include "../kernels/functors.hpp"
#include "../kernels/loss_functors.hpp"
#include "../kernels/rows.hpp"
#include "plan.hpp"
#include "rng.hpp"

namespace ctnn {

template <class B>
struct ops;

namespace detail {
// A small convolution / pooling geometry the checks instantiate the products with.
inline constexpr kernels::conv_geometry ops_probe_geometry{4, 4, 2, 2, 2, 2, 1, 3, 3, 0, 0};
}  // namespace detail

// Products: dense_forward<K, N> (y = e.forward(x W + b) for any activation rule e of
// kernels/functors.hpp or list of them, fn::chain, fused; default identity), dense_backward_weights
// (dW = x^T dy and db = the column sums of dy; db null: dW only), dense_backward_input; the
// same forward and input products over weights packed once (pack_weights /
// pack_weights_transposed into packed_size<K, N, T> values, for products of at least
// packed_rows rows; dense_forward_packed, dense_backward_input_packed: a recurrent
// kernel at every step); conv_forward / conv_backward<G> (im2col + the dense products);
// max_pool, average_pool and global_average forward / backward.
// Satisfied by: ops<cpu<A>> (simd_gemm, conv, pooling), ops<cuda<SM>> (cuBLASLt, kernels.cuh).
template <class B>
concept has_product_ops = requires(const float* x, float* y, std::uint32_t* idx, const std::uint32_t* cidx,
                                   std::size_t m) {
  ops<B>::template dense_forward<4, 4>(x, x, x, y, m);
  ops<B>::template dense_forward<4, 4>(x, x, x, y, m, fn::sigmoid_fn{});
  ops<B>::template dense_forward<4, 4>(x, x, x, y, m, fn::chain<fn::tanh_fn, fn::affine_fn<float>>{});
  ops<B>::template dense_backward_weights<4, 4>(x, x, y, y, m);
  ops<B>::template dense_backward_input<4, 4>(x, x, y, m);
  { ops<B>::template packed_size<4, 4, float> } -> std::convertible_to<std::size_t>;
  { ops<B>::packed_rows } -> std::convertible_to<std::size_t>;
  ops<B>::template pack_weights<4, 4>(x, y, m);
  ops<B>::template pack_weights_transposed<4, 4>(x, y, m);
  ops<B>::template dense_forward_packed<4, 4>(x, x, x, x, y, m);
  ops<B>::template dense_backward_input_packed<4, 4>(x, x, x, y, m);
  ops<B>::template conv_forward<detail::ops_probe_geometry>(x, x, x, y, y, m);
  ops<B>::template conv_backward<detail::ops_probe_geometry>(x, x, y, y, y, y, m);
  ops<B>::template max_pool_forward<detail::ops_probe_geometry>(x, y, idx, m);
  ops<B>::template max_pool_backward<detail::ops_probe_geometry>(cidx, x, y, m);
  ops<B>::template average_pool_forward<detail::ops_probe_geometry>(x, y, m);
  ops<B>::template average_pool_backward<detail::ops_probe_geometry>(x, y, m);
  ops<B>::template global_average_forward<4, 2>(x, y, m);
  ops<B>::template global_average_backward<4, 2>(x, y, m);
};

// Element-wise maps: copy, fill, fill_zero, scale (x *= k), clip_value,
// accumulate (a += g), accumulated_mean (g = (acc + g) inv, acc = 0),
// moving_average (avg = mom avg + (1 - mom) w), add_penalty_gradient
// (g += l1 sign(w) + 2 l2 w; with a factor pointer in B's memory, l1 and l2
// times *factor read where it runs) and the activations' forward / backward (relu,
// leaky_relu, sigmoid, tanh): the rules of kernels/functors.hpp; and map_rows(rule, rows,
// cols, kernels::rows{p, stride}...), a rule that returns nothing over rows x cols elements
// of row-strided arrays (row r of array k at p_k + r * stride_k; the recurrent cells' gates).
// Satisfied by: ops<cpu<A>> (map.hpp), ops<cuda<SM>> (one map kernel per rule; kernels.cuh's map_rows).
template <class B>
concept has_elementwise_ops = requires(const float* x, float* y, std::size_t n, float k) {
  ops<B>::map_rows(fn::accumulate{}, n, n, kernels::rows<float>{y, n}, kernels::rows<const float>{x, 0});
  ops<B>::copy(x, y, n);
  ops<B>::fill(y, n, k);
  ops<B>::fill_zero(y, n);
  ops<B>::scale(y, n, k);
  ops<B>::clip_value(y, n, k);
  ops<B>::accumulate(y, x, n);
  ops<B>::accumulated_mean(y, y, n, k);
  ops<B>::moving_average(y, x, n, k);
  ops<B>::add_penalty_gradient(x, y, n, k, k);
  ops<B>::add_penalty_gradient(x, y, n, k, k, x);
  ops<B>::relu_forward(y, n);
  ops<B>::relu_backward(x, y, n);
  ops<B>::leaky_relu_forward(y, n, k);
  ops<B>::leaky_relu_backward(x, y, n, k);
  ops<B>::sigmoid_forward(y, n);
  ops<B>::sigmoid_backward(x, y, n);
  ops<B>::tanh_forward(y, n);
  ops<B>::tanh_backward(x, y, n);
};

// Reductions and checks (waited for): sum_squares, sum_abs (double
// accumulation), clip_by_norm (g *= limit / max(||g||, limit)), all_finite,
// unscale (g *= inv; true when every g was finite). Not waited for: add_penalty
// (s->penalty += l1 sum |w| + l2 sum w^2 in a step's scalars; with a factor pointer
// in B's memory, l1 and l2 times *factor read where it runs; a negative or
// non-finite factor gives NaN).
// Satisfied by: ops<cpu<A>> (reduce.hpp, map.hpp), ops<cuda<SM>> (kernels.cuh's sum_squares, add_penalty).
template <class B>
concept has_reduction_ops = requires(const float* x, float* y, std::size_t n, float k, step_scalars* s) {
  { ops<B>::sum_squares(x, n) } -> std::convertible_to<double>;
  { ops<B>::sum_abs(x, n) } -> std::convertible_to<double>;
  ops<B>::clip_by_norm(y, n, 1.0);
  { ops<B>::all_finite(x, n) } -> std::convertible_to<bool>;
  { ops<B>::unscale(y, n, k) } -> std::convertible_to<bool>;
  ops<B>::add_penalty(x, n, k, k, s);
  ops<B>::add_penalty(x, n, k, k, x, s);
};

// Conversions between float32 and the backend's 16-bit storage types
// ops<B>::float16 and ops<B>::bfloat16: convert (round to nearest even), widen.
// Satisfied by: ops<cpu<A>> (convert.hpp: float16_t, bfloat16_t), ops<cuda<SM>> (__half, __nv_bfloat16).
template <class B>
concept has_conversion_ops = requires(const float* x, float* y, typename ops<B>::float16* h,
                                      typename ops<B>::bfloat16* b, std::size_t n) {
  ops<B>::convert(x, h, n);
  ops<B>::widen(static_cast<const typename ops<B>::float16*>(h), y, n);
  ops<B>::convert(x, b, n);
  ops<B>::widen(static_cast<const typename ops<B>::bfloat16*>(b), y, n);
};

// Optimizer updates: what optimizers/base.hpp's apply calls, ops<B>::map(rule, n, w, g,
// slots...) with an update rule of kernels/functors.hpp (or an optimizer's own, lion.hpp)
// over 0 to 3 slots; the rule returns the new w and map returns true when every one is finite.
// Satisfied by: ops<cpu<A>> (map.hpp), ops<cuda<SM>> (kernels.cuh's map kernel).
template <class B>
concept has_optimizer_update_ops = requires(float* w, const float* g, std::size_t n, float k) {
  { ops<B>::map(fn::sgd_update<float>{k}, n, w, g) } -> std::convertible_to<bool>;
  { ops<B>::map(fn::momentum_update<float>{k, k, true}, n, w, g, w) } -> std::convertible_to<bool>;
  { ops<B>::map(fn::adam_update<float>{k, k, k, k}, n, w, g, w, w) } -> std::convertible_to<bool>;
  { ops<B>::map(fn::amsgrad_update<float>{k, k, k, k}, n, w, g, w, w, w) } -> std::convertible_to<bool>;
};

// Loss kernels: the row-wise softmax forward / backward the probabilistic
// losses and the softmax activation use, and the batched losses into a step's
// scalars (core/plan.hpp's step_scalars, in B's memory): sparse_crossentropy_loss
// (one class index per row), categorical_crossentropy_loss (target weights per
// row), both of logits or probabilities, squared_error_loss (sum (y - t)^2 /
// divisor) and pointwise_loss (sum rule.value(y, t) / divisor, d from rule.gradient,
// a rule of kernels/loss_functors.hpp). Each adds its rows' loss sum to s->loss_sum, sets s->non_finite when
// that sum is not finite, and writes dL/dy times scale times s->loss_scale into d
// (when not null); none waits (the step reads the scalars once, after backward).
// Satisfied by: ops<cpu<A>> (activations.hpp, crossentropy.hpp), ops<cuda<SM>>
// (one warp per row; kernels.cuh's loss kernels).
template <class B>
concept has_loss_ops = requires(const float* x, float* y, const std::int32_t* labels, std::size_t rows,
                                std::size_t cols, step_scalars* s) {
  ops<B>::softmax_forward(y, rows, cols);
  ops<B>::softmax_backward(x, y, rows, cols);
  ops<B>::sparse_crossentropy_loss(x, labels, rows, cols, y, 1.0, true, s);
  ops<B>::categorical_crossentropy_loss(x, x, rows, cols, y, 1.0, true, s);
  ops<B>::squared_error_loss(x, x, rows, y, 1.0, 1.0, s);
  ops<B>::pointwise_loss(fn::huber_rule{1.0}, x, x, rows, y, 1.0, 1.0, s);
};

// Batch normalization and dropout: batch_norm_forward<C> over rows x C values (training:
// the batch's mean and biased variance, moving = moving mom + batch (1 - mom), caches mean
// and inv = 1 / sqrt(var + eps); inference: the moving statistics; y = gamma (x - mean) inv +
// beta; moving statistics of their own type S), batch_norm_backward<C> (dgamma, dbeta; dx
// through the batch statistics in training, gamma inv dy when frozen; none when dx is null),
// dropout_forward (the mask, 1 / (1 - rate) or 0, drawn from the generator; the rate a value
// or one float in B's memory), dropout_backward (dx = dy mask), layer_norm_forward / backward<C>
// (layer_normalization: each row of C values by its own mean and variance), zero_pad_forward / backward
// and up_sample_forward / backward<G> (zero_padding2d, up_sampling2d: G's pt, pl, oh, ow, kh, kw),
// depthwise_forward / backward<G, M> (depthwise_conv2d, separable_conv2d: G.f = G.c M, the kernel
// [KH, KW, C, M]; y = b + the per-channel window sums; b, db and dx may be null; dw, db overwritten),
// gather_rows<D> (embedding: y[i] = table[ids[i]], rows of D values; an id not an integer in
// [0, vocab) is an error: the CPU throws, CUDA writes a NaN row) and scatter_add_rows<D>
// (dtable[ids[i]] += dy[i]; repeated ids add up).
// Satisfied by: ops<cpu<A>> (normalization.hpp: cpu<>'s draws from gen in order),
// ops<cuda<SM>> (kernels.cuh: column sums; a hash of one 64-bit seed drawn from gen).
template <class B>
concept has_layer_ops = requires(const float* x, float* y, std::size_t n, rng& gen) {
  ops<B>::template batch_norm_forward<4>(x, y, x, x, y, y, y, y, n, 0.99, 1e-3, true);
  ops<B>::template batch_norm_backward<4>(x, x, y, x, x, x, y, y, n, true);
  ops<B>::dropout_forward(x, y, y, n, 0.25, gen);
  ops<B>::dropout_forward(x, y, y, n, x, gen);
  ops<B>::dropout_backward(x, x, y, n);
  ops<B>::template layer_norm_forward<4>(x, y, x, x, y, y, n, 1e-3);
  ops<B>::template layer_norm_backward<4>(x, x, y, x, x, x, y, y, n);
  ops<B>::template zero_pad_forward<detail::ops_probe_geometry>(x, y, n);
  ops<B>::template zero_pad_backward<detail::ops_probe_geometry>(x, y, n);
  ops<B>::template up_sample_forward<detail::ops_probe_geometry>(x, y, n);
  ops<B>::template up_sample_backward<detail::ops_probe_geometry>(x, y, n);
  ops<B>::template depthwise_forward<detail::ops_probe_geometry, 1>(x, x, x, y, n);
  ops<B>::template depthwise_backward<detail::ops_probe_geometry, 1>(x, x, x, y, y, y, n);
  ops<B>::template gather_rows<4>(x, x, y, n, n);
  ops<B>::template scatter_add_rows<4>(x, x, y, n, n);
};

// ops<B> is complete (a backend specializes it) ...
template <class B>
concept has_backend_ops = requires { sizeof(ops<B>); };

// ... and provides the whole op set.
template <class B>
concept BackendOps = has_backend_ops<B> && has_product_ops<B> && has_elementwise_ops<B> && has_reduction_ops<B> &&
                     has_conversion_ops<B> && has_optimizer_update_ops<B> && has_loss_ops<B> &&
                     has_layer_ops<B>;

}  // namespace ctnn
