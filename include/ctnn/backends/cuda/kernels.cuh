// ctnn/cuda/kernels.cuh — ctnn's own CUDA kernels (everything but the GEMMs).
//
// Every kernel is templated on the storage type T (float, __half,
// __nv_bfloat16) and computes in float32 (load/store of types.cuh). Layouts
// and formulas are those of the CPU kernels they mirror (kernels/cpu/*.hpp):
// row-major rows, channels-last images (x[batch, H, W, C]), Keras' kernel
// layouts. Reductions whose result is a parameter gradient or a statistic
// (column sums, batch-norm sums) are deterministic: one thread or one block
// owns each output and sums in a fixed order. Backward passes of im2col and
// pooling gather (each input element sums what its windows send) instead of
// scattering with atomics, for the same reason. The element-wise rules
// (activations, optimizer updates, the options' maps) are not written here:
// map runs a functor of kernels/functors.hpp per thread, the CPU's formulas.
// The non-finite flag of map and the loss sum are the only atomics (a flag
// set to 1; a double sum used for reporting only).
#pragma once
#include <cstddef>
#include <cstdint>
#include <type_traits>
#include <utility>

#include "../../kernels/conv_reference.hpp"
#include "../../core/plan.hpp"
#include "../../kernels/functors.hpp"
#include "../../kernels/loss_functors.hpp"
#include "../../kernels/rows.hpp"
#include "types.cuh"

namespace ctnn::cuda_kernels {

using cuda_detail::load;
using cuda_detail::store;
using kernels::conv_geometry;

#define CTNN_GRID_STRIDE(i, n)                                                             \
  for (std::size_t i = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; i < (n); \
       i += std::size_t(gridDim.x) * blockDim.x)

// ---- element-wise ----
template <class S, class T>
__global__ void convert(const S* x, T* y, std::size_t n) {
  CTNN_GRID_STRIDE(i, n) y[i] = store<T>(load(x[i]));
}
template <class T>
__global__ void widen(const T* x, float* y, std::size_t n) {
  CTNN_GRID_STRIDE(i, n) y[i] = load(x[i]);
}
// y[i] = x[i] * m[i] (dropout's mask, the identity's copy with m == nullptr)
template <class T>
__global__ void multiply(const T* x, const T* m, T* y, std::size_t n) {
  CTNN_GRID_STRIDE(i, n) y[i] = m ? store<T>(load(x[i]) * load(m[i])) : x[i];
}
// ---- map: one rule of kernels/functors.hpp per element, in float32 ----
// Each thread loads element i of every array, runs f on the values (arrays
// behind a const pointer are only read) and stores the others back in T.
// When f returns a value (an update's new w, unscale's gradient), *bad = 1
// where that value, rounded to the first array's type, is not finite.
template <class T>
__device__ inline void store_back(float v, T* p, std::size_t i) {
  p[i] = store<T>(v);
}
template <class T>
__device__ inline void store_back(float, const T*, std::size_t) {}
template <class F, class... P>
inline constexpr bool map_returns =
    !std::is_void_v<decltype(std::declval<const F&>()((void(std::declval<P>()), std::declval<float&>())...))>;

template <class F, std::size_t... I, class P0, class... P>
__device__ inline void map_one(const F& f, std::size_t i, int* bad, std::index_sequence<I...>, P0* p0, P*... p) {
  float v[] = {load(p0[i]), load(p[i])...};
  if constexpr (map_returns<F, P0*, P*...>) {
    const float r = f(v[I]...);
    if (!isfinite(load(store<std::remove_const_t<P0>>(r)))) *bad = 1;
  } else {
    f(v[I]...);
  }
  store_back(v[0], p0, i);
  std::size_t k = 1;
  (store_back(v[k++], p, i), ...);
}
template <class F, class... P>
__global__ void map(F f, std::size_t n, int* bad, P*... p) {
  CTNN_GRID_STRIDE(i, n) map_one(f, i, bad, std::make_index_sequence<sizeof...(P)>{}, p...);
}
// map_rows: the same over rows x cols elements of row-strided arrays (kernels/rows.hpp), one
// thread per element: element (r, c) of array k is a_k.data[r * a_k.stride + c]. The rules
// return nothing (the recurrent cells' and the masks' rules: layers/recurrent.hpp).
template <class F, std::size_t... I, class... P>
__device__ inline void map_element(const F& f, std::index_sequence<I...>, P*... p) {
  float v[] = {load(*p)...};
  f(v[I]...);
  (store_back(v[I], p, 0), ...);
}
template <class F, class... P>
__global__ void map_rows(F f, std::size_t rows, std::size_t cols, kernels::rows<P>... a) {
  CTNN_GRID_STRIDE(i, rows * cols) {
    const std::size_t r = i / cols, c = i - r * cols;
    map_element(f, std::make_index_sequence<sizeof...(P)>{}, (a.data + r * a.stride + c)...);
  }
}

// ---- warp reductions ----
__device__ inline float warp_sum(float v) {
  for (int o = 16; o > 0; o /= 2) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}
__device__ inline float warp_max(float v) {
  for (int o = 16; o > 0; o /= 2) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

// ---- softmax over rows: one warp per row ----
template <class T>
__global__ void softmax_forward(T* y, std::size_t rows, std::size_t cols) {
  const std::size_t r = blockIdx.x * std::size_t(blockDim.x / 32) + threadIdx.x / 32;
  const unsigned lane = threadIdx.x % 32;
  if (r >= rows) return;
  T* row = y + r * cols;
  float mx = -INFINITY;
  for (std::size_t j = lane; j < cols; j += 32) mx = fmaxf(mx, load(row[j]));
  mx = warp_max(mx);
  float sum = 0;
  for (std::size_t j = lane; j < cols; j += 32) sum += expf(load(row[j]) - mx);
  sum = warp_sum(sum);
  const float inv = 1.0f / sum;
  for (std::size_t j = lane; j < cols; j += 32) row[j] = store<T>(expf(load(row[j]) - mx) * inv);
}
template <class T>
__global__ void softmax_backward(const T* y, T* d, std::size_t rows, std::size_t cols) {
  const std::size_t r = blockIdx.x * std::size_t(blockDim.x / 32) + threadIdx.x / 32;
  const unsigned lane = threadIdx.x % 32;
  if (r >= rows) return;
  const T* yr = y + r * cols;
  T* dr = d + r * cols;
  float dot = 0;
  for (std::size_t j = lane; j < cols; j += 32) dot += load(dr[j]) * load(yr[j]);
  dot = warp_sum(dot);
  for (std::size_t j = lane; j < cols; j += 32) dr[j] = store<T>(load(yr[j]) * (load(dr[j]) - dot));
}

// Softmax cross-entropy of rows of logits against class labels, one warp per
// row, in float32 whatever T is: d = (softmax(z) - onehot) * scale, the row's
// loss (log-sum-exp - z[label]) added to *loss. A label outside [0, cols)
// leaves its row's d at zero and records the smallest such row in *bad_row.
// scale_by (may be null): a device float that multiplies scale (the loss
// scale, read when the kernel runs, so a captured graph sees its changes).
template <class T>
__global__ void sparse_crossentropy_logits(const T* z, const std::int32_t* labels, T* d, std::size_t rows,
                                           std::size_t cols, float scale, const float* scale_by, double* loss,
                                           int* bad_row) {
  if (scale_by) scale *= *scale_by;
  const std::size_t r = blockIdx.x * std::size_t(blockDim.x / 32) + threadIdx.x / 32;
  const unsigned lane = threadIdx.x % 32;
  if (r >= rows) return;
  const T* zr = z + r * cols;
  T* dr = d ? d + r * cols : nullptr;
  const std::int32_t l = labels[r];
  if (l < 0 || std::size_t(l) >= cols) {
    if (lane == 0) atomicMin(bad_row, int(r));
    if (dr)
      for (std::size_t j = lane; j < cols; j += 32) dr[j] = store<T>(0.0f);
    return;
  }
  float mx = -INFINITY;
  for (std::size_t j = lane; j < cols; j += 32) mx = fmaxf(mx, load(zr[j]));
  mx = warp_max(mx);
  float sum = 0;
  for (std::size_t j = lane; j < cols; j += 32) sum += expf(load(zr[j]) - mx);
  sum = warp_sum(sum);
  const float lse = mx + logf(sum);
  if (dr)
    for (std::size_t j = lane; j < cols; j += 32)
      dr[j] = store<T>((expf(load(zr[j]) - lse) - (j == std::size_t(l) ? 1.0f : 0.0f)) * scale);
  if (lane == 0) atomicAdd(loss, double(lse) - double(load(zr[l])));
}

// Rows whose largest value (first of equals) is at the label, added to *correct.
template <class T>
__global__ void count_correct(const T* z, const std::int32_t* labels, std::size_t rows, std::size_t cols,
                              unsigned long long* correct) {
  CTNN_GRID_STRIDE(r, rows) {
    const T* zr = z + r * cols;
    std::size_t best = 0;
    float bv = load(zr[0]);
    for (std::size_t j = 1; j < cols; ++j) {
      const float v = load(zr[j]);
      if (v > bv) {
        bv = v;
        best = j;
      }
    }
    if (std::int64_t(best) == std::int64_t(labels[r])) atomicAdd(correct, 1ull);
  }
}

// ---- column reductions: out[j] = sum over rows i of f(i, j), deterministic ----
// Stage 1: a grid of (column tiles of 32) x (row chunks); a 32 x 8 block sums
// its chunk's rows for 32 columns into partial[chunk * cols + j]. Stage 2: one
// thread per column adds the chunks' partials in chunk order. The partition
// depends on the sizes only, so the result does not vary from run to run.
// f is a functor: __device__ float operator()(std::size_t i, std::size_t j) const.
template <class F>
__global__ void column_partial_sums(F f, std::size_t rows, std::size_t cols, std::size_t rows_per_chunk,
                                    float* partial) {
  __shared__ float part[8][33];
  const std::size_t j = blockIdx.x * std::size_t(32) + threadIdx.x;
  const std::size_t r0 = blockIdx.y * rows_per_chunk;
  const std::size_t r1 = r0 + rows_per_chunk < rows ? r0 + rows_per_chunk : rows;
  float s = 0;
  if (j < cols)
    for (std::size_t i = r0 + threadIdx.y; i < r1; i += 8) s += f(i, j);
  part[threadIdx.y][threadIdx.x] = s;
  __syncthreads();
  if (threadIdx.y == 0 && j < cols) {
    float t = 0;
    for (int k = 0; k < 8; ++k) t += part[k][threadIdx.x];
    partial[blockIdx.y * cols + j] = t;
  }
}
template <class Out>
__global__ void column_finish(const float* partial, std::size_t chunks, std::size_t cols, Out* out) {
  const std::size_t j = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x;
  if (j >= cols) return;
  float t = 0;
  for (std::size_t c = 0; c < chunks; ++c) t += partial[c * cols + j];
  out[j] = store<Out>(t);
}

// The functors of the reductions.
template <class T>
struct value_of {  // x[i, j]
  const T* x;
  std::size_t cols;
  __device__ float operator()(std::size_t i, std::size_t j) const { return load(x[i * cols + j]); }
};
template <class T>
struct squared_deviation {  // (x[i, j] - mean[j])^2
  const T* x;
  const float* mean;
  std::size_t cols;
  __device__ float operator()(std::size_t i, std::size_t j) const {
    const float d = load(x[i * cols + j]) - mean[j];
    return d * d;
  }
};
template <class T>
struct times_normalized {  // dy[i, j] * (x[i, j] - mean[j]) * inv[j]
  const T* dy;
  const T* x;
  const T* mean;
  const T* inv;
  std::size_t cols;
  __device__ float operator()(std::size_t i, std::size_t j) const {
    return load(dy[i * cols + j]) * (load(x[i * cols + j]) - load(mean[j])) * load(inv[j]);
  }
};

// Loss scaling and regularizers (ops.cuh: unscale, penalties).
// out[i] = g[i] * *inv (float32; out may be g itself when T is float);
// *bad = 1 when a g[i] is not finite.
template <class T>
__global__ void unscale_gradients(const T* g, float* out, std::size_t n, const float* inv, int* bad) {
  const float k = *inv;
  CTNN_GRID_STRIDE(i, n) {
    const float v = load(g[i]);
    if (!isfinite(v)) *bad = 1;
    out[i] = v * k;
  }
}
// Sum of squares (Abs: of absolute values) of x[0, n) added to *out (one
// atomic per block; for norms and penalties only).
template <bool Abs = false, class T>
__global__ void sum_squares(const T* x, std::size_t n, double* out) {
  __shared__ float part[32];
  float s = 0;
  CTNN_GRID_STRIDE(i, n) {
    const float v = load(x[i]);
    s += Abs ? fabsf(v) : v * v;
  }
  s = warp_sum(s);
  if (threadIdx.x % 32 == 0) part[threadIdx.x / 32] = s;
  __syncthreads();
  if (threadIdx.x < 32) {
    float t = threadIdx.x < blockDim.x / 32 ? part[threadIdx.x] : 0.0f;
    t = warp_sum(t);
    if (threadIdx.x == 0) atomicAdd(out, double(t));
  }
}
// The regularizers' penalty of x[0, n): l1 sum |x| + l2 sum x^2 (a term whose factor is 0 is not
// summed), both times fn::checked_factor(*factor) when factor is not null (read when the kernel
// runs), added to s->penalty (float32 per block, one double atomic per block).
template <class T>
__global__ void add_penalty(const T* x, std::size_t n, float l1, float l2, const float* factor, step_scalars* s) {
  __shared__ float pa[32], pq[32];
  float a = 0, q = 0;
  CTNN_GRID_STRIDE(i, n) {
    const float v = load(x[i]);
    a += fabsf(v);
    q += v * v;
  }
  a = warp_sum(a);
  q = warp_sum(q);
  if (threadIdx.x % 32 == 0) pa[threadIdx.x / 32] = a, pq[threadIdx.x / 32] = q;
  __syncthreads();
  if (threadIdx.x < 32) {
    const bool in = threadIdx.x < blockDim.x / 32;
    float ta = in ? pa[threadIdx.x] : 0.0f, tq = in ? pq[threadIdx.x] : 0.0f;
    ta = warp_sum(ta);
    tq = warp_sum(tq);
    if (threadIdx.x == 0) {
      const float f = factor ? fn::checked_factor(*factor) : 1.0f;
      double p = 0;
      if (l1 != 0.0f) p += double(l1 * f) * double(ta);
      if (l2 != 0.0f) p += double(l2 * f) * double(tq);
      atomicAdd(&s->penalty, p);
    }
  }
}
// ---- dropout: a counter-based hash (no state): uniform u(seed, i) in [0, 1) ----
__device__ inline float hash_uniform(std::uint64_t seed, std::uint64_t i) {
  std::uint64_t z = seed + (i + 1) * 0x9E3779B97F4A7C15ull;  // splitmix64 of (seed, i)
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  z ^= z >> 31;
  return float(z >> 40) * (1.0f / 16777216.0f);
}
// The rate is *rate_at when not null (dynamic_dropout's metadata, read here), else `rate`.
// A rate outside [0, 1) (NaN included) cannot throw here: every mask and output becomes NaN,
// so the step's loss is not finite and fit raises numeric_error instead of training on it.
template <class T>
__global__ void dropout_forward(const T* x, T* y, T* mask, std::size_t n, float rate, const float* rate_at,
                                std::uint64_t seed) {
  if (rate_at) rate = *rate_at;
  const bool valid = rate >= 0.0f && rate < 1.0f;
  const float scale = valid ? 1.0f / (1.0f - rate) : __int_as_float(0x7fc00000);
  CTNN_GRID_STRIDE(i, n) {
    const float m = !valid ? scale : hash_uniform(seed, i) >= rate ? scale : 0.0f;
    mask[i] = store<T>(m);
    y[i] = store<T>(load(x[i]) * m);
  }
}

// ---- batch normalization over the last axis (C channels, rows = batch * positions) ----
// The per-channel sums come from the column reductions above (float32,
// deterministic); this kernel turns sum(x) and sum((x - mean)^2) into the
// cached mean and 1/sqrt(var + eps) and the moving statistics (biased variance;
// S: their storage, float under a mixed policy, else the variables' type).
template <class T, class S>
__global__ void batch_norm_statistics(const float* mean, const float* sq, std::size_t rows, std::size_t C,
                                      S* moving_mean, S* moving_var, T* mean_out, T* inv_out, float momentum,
                                      float epsilon) {
  const std::size_t c = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x;
  if (c >= C) return;
  const float mu = mean[c], var = sq[c] / float(rows);
  mean_out[c] = store<T>(mu);
  moving_mean[c] = store<S>(load(moving_mean[c]) * momentum + mu * (1.0f - momentum));
  moving_var[c] = store<S>(load(moving_var[c]) * momentum + var * (1.0f - momentum));
  inv_out[c] = store<T>(1.0f / sqrtf(var + epsilon));
}
template <class U>
__global__ void divide(U* x, std::size_t n, float d) {
  const std::size_t i = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x;
  if (i < n) x[i] /= d;
}
template <class T, class S>
__global__ void batch_norm_inference_statistics(const S* moving_mean, const S* moving_var, T* mean_out, T* inv_out,
                                                std::size_t C, float epsilon) {
  const std::size_t c = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x;
  if (c >= C) return;
  mean_out[c] = store<T>(load(moving_mean[c]));
  inv_out[c] = store<T>(1.0f / sqrtf(load(moving_var[c]) + epsilon));
}
template <class T, class V>
__global__ void batch_norm_apply(const T* x, T* y, const V* gamma, const V* beta, const T* mean, const T* inv,
                                 std::size_t rows, std::size_t C) {
  CTNN_GRID_STRIDE(i, rows * C) {
    const std::size_t c = i % C;
    y[i] = store<T>(load(gamma[c]) * (load(x[i]) - load(mean[c])) * load(inv[c]) + load(beta[c]));
  }
}
// training: dx = gamma inv / M (M dy - dbeta - xhat dgamma); inference: dx = gamma inv dy
template <class T, class V>
__global__ void batch_norm_input_gradient(const T* x, const T* dy, T* dx, const V* gamma, const T* mean, const T* inv,
                                          const V* dgamma, const V* dbeta, std::size_t rows, std::size_t C,
                                          bool training) {
  CTNN_GRID_STRIDE(i, rows * C) {
    const std::size_t c = i % C;
    const float v = load(inv[c]), gm = load(gamma[c]);
    if (!training) {
      dx[i] = store<T>(gm * v * load(dy[i]));
    } else {
      const float mm = float(rows), xhat = (load(x[i]) - load(mean[c])) * v;
      dx[i] = store<T>(gm * v / mm * (mm * load(dy[i]) - load(dbeta[c]) - xhat * load(dgamma[c])));
    }
  }
}

// ---- pooling (pooling.hpp's windows: clipped to the input, padding never counted) ----
__device__ inline void pool_window(const conv_geometry& G, std::size_t oh, std::size_t ow, std::size_t& r0,
                                   std::size_t& r1, std::size_t& s0, std::size_t& s1) {
  const std::size_t rr = oh * G.stride, ss = ow * G.stride;
  r0 = rr < G.pt ? 0 : rr - G.pt;
  r1 = rr + G.kh - G.pt < G.h ? rr + G.kh - G.pt : G.h;
  s0 = ss < G.pl ? 0 : ss - G.pl;
  s1 = ss + G.kw - G.pl < G.w ? ss + G.kw - G.pl : G.w;
}
// The output rows [o0, o1) whose windows hold input row r (same for columns).
__device__ inline void covering(std::size_t r, std::size_t pad, std::size_t k, std::size_t stride, std::size_t out,
                                std::size_t& o0, std::size_t& o1) {
  const std::size_t p = r + pad;  // padded coordinate
  o0 = p + 1 > k ? (p + 1 - k + stride - 1) / stride : 0;
  o1 = p / stride + 1;
  if (o1 > out) o1 = out;
}
template <class T>
__global__ void max_pool_forward(const conv_geometry G, const T* x, T* y, std::uint32_t* idx, std::size_t batch) {
  CTNN_GRID_STRIDE(o, batch * G.oh * G.ow * G.c) {
    const std::size_t c = o % G.c, ow = o / G.c % G.ow, oh = o / (G.c * G.ow) % G.oh, n = o / (G.c * G.ow * G.oh);
    const T* xs = x + n * G.in_size();
    std::size_t r0, r1, s0, s1;
    pool_window(G, oh, ow, r0, r1, s0, s1);
    float mx = -3.402823466e38f;
    std::uint32_t k = std::uint32_t((r0 * G.w + s0) * G.c + c);
    for (std::size_t r = r0; r < r1; ++r)
      for (std::size_t s = s0; s < s1; ++s) {
        const std::size_t off = (r * G.w + s) * G.c + c;
        const float v = load(xs[off]);
        if (v > mx) {
          mx = v;
          k = std::uint32_t(off);
        }
      }
    y[o] = store<T>(mx);
    idx[o] = k;
  }
}
template <class T>
__global__ void average_pool_forward(const conv_geometry G, const T* x, T* y, std::size_t batch) {
  CTNN_GRID_STRIDE(o, batch * G.oh * G.ow * G.c) {
    const std::size_t c = o % G.c, ow = o / G.c % G.ow, oh = o / (G.c * G.ow) % G.oh, n = o / (G.c * G.ow * G.oh);
    const T* xs = x + n * G.in_size();
    std::size_t r0, r1, s0, s1;
    pool_window(G, oh, ow, r0, r1, s0, s1);
    float acc = 0;
    for (std::size_t r = r0; r < r1; ++r)
      for (std::size_t s = s0; s < s1; ++s) acc += load(xs[(r * G.w + s) * G.c + c]);
    y[o] = store<T>(acc * (1.0f / float((r1 - r0) * (s1 - s0))));
  }
}
// Pooling backward as a gather: dx[e] = the sum of term(G, o, oh, ow, off)
// over the outputs o (at output row oh, column ow) whose windows hold input
// element e (off: e's offset within its sample), in a fixed order (output
// row, then column). The two pooling layers differ only in the term:
// max_pool_term and average_pool_term below.
template <class T, class Term>
__global__ void pool_backward(const conv_geometry G, Term term, T* dx, std::size_t batch) {
  CTNN_GRID_STRIDE(e, batch * G.in_size()) {
    const std::size_t off = e % G.in_size(), n = e / G.in_size();
    const std::size_t c = off % G.c, s = off / G.c % G.w, r = off / (G.c * G.w);
    std::size_t oh0, oh1, ow0, ow1;
    covering(r, G.pt, G.kh, G.stride, G.oh, oh0, oh1);
    covering(s, G.pl, G.kw, G.stride, G.ow, ow0, ow1);
    float acc = 0;
    for (std::size_t oh = oh0; oh < oh1; ++oh)
      for (std::size_t ow = ow0; ow < ow1; ++ow) acc += term(G, ((n * G.oh + oh) * G.ow + ow) * G.c + c, oh, ow, off);
    dx[e] = store<T>(acc);
  }
}
// Max pooling: the output's gradient goes to the input its forward chose (idx).
template <class T>
struct max_pool_term {
  const std::uint32_t* idx;
  const T* dy;
  __device__ float operator()(const conv_geometry&, std::size_t o, std::size_t, std::size_t, std::size_t off) const {
    return idx[o] == off ? load(dy[o]) : 0.0f;
  }
};
// Average pooling: the output's gradient over its (clipped) window's size.
template <class T>
struct average_pool_term {
  const T* dy;
  __device__ float operator()(const conv_geometry& G, std::size_t o, std::size_t oh, std::size_t ow,
                              std::size_t) const {
    std::size_t r0, r1, s0, s1;
    pool_window(G, oh, ow, r0, r1, s0, s1);
    return load(dy[o]) * (1.0f / float((r1 - r0) * (s1 - s0)));
  }
};
template <std::size_t P, std::size_t C, class T>
__global__ void global_average_forward(const T* x, T* y, std::size_t batch) {
  CTNN_GRID_STRIDE(o, batch * C) {
    const std::size_t c = o % C, n = o / C;
    float acc = 0;
    for (std::size_t p = 0; p < P; ++p) acc += load(x[(n * P + p) * C + c]);
    y[o] = store<T>(acc * (1.0f / float(P)));
  }
}
template <std::size_t P, std::size_t C, class T>
__global__ void global_average_backward(const T* dy, T* dx, std::size_t batch) {
  CTNN_GRID_STRIDE(e, batch * P * C) {
    const std::size_t c = e % C, n = e / (P * C);
    dx[e] = store<T>(load(dy[n * C + c]) * (1.0f / float(P)));
  }
}

// ---- layer normalization (backends/cpu/normalization.hpp's rule): one thread per row, one per column ----
template <std::size_t C, class T>
__global__ void layer_norm_forward(const T* x, T* y, const T* gamma, const T* beta, T* mean, T* inv,
                                   std::size_t rows, double eps) {
  CTNN_GRID_STRIDE(i, rows) {
    double m = 0, v = 0;
    for (std::size_t c = 0; c < C; ++c) m += double(load(x[i * C + c]));
    m /= double(C);
    for (std::size_t c = 0; c < C; ++c) v += (double(load(x[i * C + c])) - m) * (double(load(x[i * C + c])) - m);
    const double k = 1.0 / sqrt(v / double(C) + eps);
    mean[i] = store<T>(float(m));
    inv[i] = store<T>(float(k));
    for (std::size_t c = 0; c < C; ++c)
      y[i * C + c] = store<T>(float(double(load(gamma[c])) * (double(load(x[i * C + c])) - m) * k + double(load(beta[c]))));
  }
}
template <std::size_t C, class T>
__global__ void layer_norm_backward_params(const T* x, const T* dy, const T* mean, const T* inv, T* dgamma, T* dbeta,
                                           std::size_t rows) {
  CTNN_GRID_STRIDE(c, C) {
    double dg = 0, db = 0;
    for (std::size_t i = 0; i < rows; ++i) {
      const double d = double(load(dy[i * C + c]));
      db += d;
      dg += d * (double(load(x[i * C + c])) - double(load(mean[i]))) * double(load(inv[i]));
    }
    dgamma[c] = store<T>(float(dg));
    dbeta[c] = store<T>(float(db));
  }
}
template <std::size_t C, class T>
__global__ void layer_norm_backward_input(const T* x, const T* dy, T* dx, const T* gamma, const T* mean, const T* inv,
                                          std::size_t rows) {
  CTNN_GRID_STRIDE(i, rows) {
    const double m = double(load(mean[i])), k = double(load(inv[i]));
    double sg = 0, sgx = 0;
    for (std::size_t c = 0; c < C; ++c) {
      const double g = double(load(gamma[c])) * double(load(dy[i * C + c]));
      sg += g;
      sgx += g * (double(load(x[i * C + c])) - m) * k;
    }
    sg /= double(C);
    sgx /= double(C);
    for (std::size_t c = 0; c < C; ++c) {
      const double g = double(load(gamma[c])) * double(load(dy[i * C + c]));
      dx[i * C + c] = store<T>(float(k * (g - sg - (double(load(x[i * C + c])) - m) * k * sgx)));
    }
  }
}

// ---- zero padding and nearest up-sampling (backends/cpu/resize.hpp's rules), one thread per value ----
template <class T>
__global__ void zero_pad_forward(const conv_geometry G, const T* x, T* y, std::size_t batch) {
  CTNN_GRID_STRIDE(e, batch * G.oh * G.ow * G.c) {
    const std::size_t c = e % G.c, s = e / G.c % G.ow, r = e / (G.c * G.ow) % G.oh, n = e / (G.c * G.ow * G.oh);
    const bool inside = r >= G.pt && r < G.pt + G.h && s >= G.pl && s < G.pl + G.w;
    y[e] = inside ? x[((n * G.h + r - G.pt) * G.w + s - G.pl) * G.c + c] : store<T>(0.0f);
  }
}
template <class T>
__global__ void zero_pad_backward(const conv_geometry G, const T* dy, T* dx, std::size_t batch) {
  CTNN_GRID_STRIDE(e, batch * G.h * G.w * G.c) {
    const std::size_t c = e % G.c, s = e / G.c % G.w, r = e / (G.c * G.w) % G.h, n = e / (G.c * G.w * G.h);
    dx[e] = dy[((n * G.oh + r + G.pt) * G.ow + s + G.pl) * G.c + c];
  }
}
template <class T>
__global__ void up_sample_forward(const conv_geometry G, const T* x, T* y, std::size_t batch) {
  CTNN_GRID_STRIDE(e, batch * G.oh * G.ow * G.c) {
    const std::size_t c = e % G.c, s = e / G.c % G.ow, r = e / (G.c * G.ow) % G.oh, n = e / (G.c * G.ow * G.oh);
    y[e] = x[((n * G.h + r / G.kh) * G.w + s / G.kw) * G.c + c];
  }
}
template <class T>
__global__ void up_sample_backward(const conv_geometry G, const T* dy, T* dx, std::size_t batch) {
  CTNN_GRID_STRIDE(e, batch * G.h * G.w * G.c) {
    const std::size_t c = e % G.c, s = e / G.c % G.w, r = e / (G.c * G.w) % G.h, n = e / (G.c * G.w * G.h);
    float sum = 0;
    for (std::size_t i = 0; i < G.kh; ++i)
      for (std::size_t j = 0; j < G.kw; ++j) sum += load(dy[((n * G.oh + r * G.kh + i) * G.ow + s * G.kw + j) * G.c + c]);
    dx[e] = store<T>(sum);
  }
}

// ---- depthwise convolution (backends/cpu/depthwise.hpp's rule; G.f = G.c M), float sums ----
// one thread per output value
template <std::size_t M, class T>
__global__ void depthwise_forward(const conv_geometry G, const T* x, const T* w, const T* b, T* y, std::size_t batch) {
  CTNN_GRID_STRIDE(e, batch * G.oh * G.ow * G.f) {
    const std::size_t j = e % G.f, ow = e / G.f % G.ow, oh = e / (G.f * G.ow) % G.oh, n = e / (G.f * G.ow * G.oh);
    float acc = b ? load(b[j]) : 0.0f;
    for (std::size_t i = 0; i < G.kh; ++i)
      for (std::size_t k = 0; k < G.kw; ++k) {
        const std::size_t rr = oh * G.stride + i, ss = ow * G.stride + k;
        if (rr < G.pt || ss < G.pl || rr - G.pt >= G.h || ss - G.pl >= G.w) continue;
        acc += load(x[((n * G.h + rr - G.pt) * G.w + ss - G.pl) * G.c + j / M]) * load(w[(i * G.kw + k) * G.f + j]);
      }
    y[e] = store<T>(acc);
  }
}
// one thread per input value: the outputs whose window holds it
template <std::size_t M, class T>
__global__ void depthwise_backward_input(const conv_geometry G, const T* dz, const T* w, T* dx, std::size_t batch) {
  CTNN_GRID_STRIDE(e, batch * G.h * G.w * G.c) {
    const std::size_t c = e % G.c, s = e / G.c % G.w, r = e / (G.c * G.w) % G.h, n = e / (G.c * G.w * G.h);
    float acc = 0;
    for (std::size_t i = 0; i < G.kh; ++i)
      for (std::size_t k = 0; k < G.kw; ++k) {
        const std::size_t rr = r + G.pt, ss = s + G.pl;  // = o * stride + window offset
        if (rr < i || ss < k || (rr - i) % G.stride || (ss - k) % G.stride) continue;
        const std::size_t oh = (rr - i) / G.stride, ow = (ss - k) / G.stride;
        if (oh >= G.oh || ow >= G.ow) continue;
        for (std::size_t m = 0; m < M; ++m)
          acc += load(dz[((n * G.oh + oh) * G.ow + ow) * G.f + c * M + m]) * load(w[(i * G.kw + k) * G.f + c * M + m]);
      }
    dx[e] = store<T>(acc);
  }
}
// one thread per kernel value (and one per bias value): sums over the batch's outputs
template <std::size_t M, class T>
__global__ void depthwise_backward_weights(const conv_geometry G, const T* x, const T* dz, T* dw, T* db,
                                           std::size_t batch) {
  CTNN_GRID_STRIDE(e, G.kh * G.kw * G.f + G.f) {
    const bool bias = e >= G.kh * G.kw * G.f;
    if (bias && !db) continue;
    const std::size_t j = e % G.f, p = e / G.f, i = p / G.kw, k = p % G.kw;
    float acc = 0;
    for (std::size_t n = 0; n < batch; ++n)
      for (std::size_t oh = 0; oh < G.oh; ++oh)
        for (std::size_t ow = 0; ow < G.ow; ++ow) {
          const float d = load(dz[((n * G.oh + oh) * G.ow + ow) * G.f + j]);
          if (bias) {
            acc += d;
            continue;
          }
          const std::size_t rr = oh * G.stride + i, ss = ow * G.stride + k;
          if (rr < G.pt || ss < G.pl || rr - G.pt >= G.h || ss - G.pl >= G.w) continue;
          acc += d * load(x[((n * G.h + rr - G.pt) * G.w + ss - G.pl) * G.c + j / M]);
        }
    if (bias) db[j] = store<T>(acc);
    else dw[e] = store<T>(acc);
  }
}

// ---- embedding: a row gather (one thread per output value) and its scatter-add (atomics) ----
// The row an id names, or vocab when it is not an integer in [0, vocab) (NaN included).
__device__ inline std::size_t id_row(float v, std::size_t vocab) {
  return v >= 0.0f && double(v) < double(vocab) && floorf(v) == v ? std::size_t(v) : vocab;
}
template <class T>
__global__ void gather_rows(const T* ids, const T* table, T* y, std::size_t n, std::size_t d, std::size_t vocab) {
  CTNN_GRID_STRIDE(e, n * d) {
    const std::size_t r = id_row(load(ids[e / d]), vocab);
    y[e] = r == vocab ? store<T>(__int_as_float(0x7fc00000)) : table[r * d + e % d];  // a bad id: a NaN row
  }
}
template <class T>
__device__ inline void atomic_add(T* p, float v) {
  if constexpr (std::is_same_v<T, float>) atomicAdd(p, v);
  else if constexpr (std::is_same_v<T, __half> || std::is_same_v<T, float16_t>)
    atomicAdd(reinterpret_cast<__half*>(p), __float2half_rn(v));
  else atomicAdd(reinterpret_cast<__nv_bfloat16*>(p), __float2bfloat16_rn(v));
}
template <class T>
__global__ void scatter_add_rows(const T* ids, const T* dy, T* dtable, std::size_t n, std::size_t d, std::size_t vocab) {
  CTNN_GRID_STRIDE(e, n * d) {
    const std::size_t r = id_row(load(ids[e / d]), vocab);
    if (r != vocab) atomic_add(dtable + r * d + e % d, load(dy[e]));
  }
}

// ---- convolution: im2col (one thread per column value) and its gather adjoint ----
template <class T>
__global__ void im2col(const conv_geometry G, const T* x, T* cols, std::size_t batch) {
  const std::size_t P = G.patch();
  CTNN_GRID_STRIDE(e, batch * G.oh * G.ow * P) {
    const std::size_t p = e % P, row = e / P;
    const std::size_t c = p % G.c, j = p / G.c % G.kw, i = p / (G.c * G.kw);
    const std::size_t ow = row % G.ow, oh = row / G.ow % G.oh, n = row / (G.ow * G.oh);
    const std::size_t rr = oh * G.stride + i, ss = ow * G.stride + j;
    T v = store<T>(0.0f);
    if (rr >= G.pt && ss >= G.pl && rr - G.pt < G.h && ss - G.pl < G.w)
      v = x[n * G.in_size() + ((rr - G.pt) * G.w + (ss - G.pl)) * G.c + c];
    cols[e] = v;
  }
}
// dx[n, r, s, c] = sum over the windows holding (r, s) of cols[row, (i, j, c)] (overwrites).
template <class T>
__global__ void col2im(const conv_geometry G, const T* cols, T* dx, std::size_t batch) {
  const std::size_t P = G.patch();
  CTNN_GRID_STRIDE(e, batch * G.in_size()) {
    const std::size_t off = e % G.in_size(), n = e / G.in_size();
    const std::size_t c = off % G.c, s = off / G.c % G.w, r = off / (G.c * G.w);
    std::size_t oh0, oh1, ow0, ow1;
    covering(r, G.pt, G.kh, G.stride, G.oh, oh0, oh1);
    covering(s, G.pl, G.kw, G.stride, G.ow, ow0, ow1);
    float acc = 0;
    for (std::size_t oh = oh0; oh < oh1; ++oh)
      for (std::size_t ow = ow0; ow < ow1; ++ow) {
        const std::size_t i = r + G.pt - oh * G.stride, j = s + G.pl - ow * G.stride;
        acc += load(cols[((n * G.oh + oh) * G.ow + ow) * P + (i * G.kw + j) * G.c + c]);
      }
    dx[e] = store<T>(acc);
  }
}

#undef CTNN_GRID_STRIDE


// ---- the batched losses into a step's scalars (ops<cuda<SM>>::*_loss; core/plan.hpp's step_scalars) ----
// The formulas of the CPU kernels (backends/cpu/crossentropy.hpp), one warp per row, the row's sums
// in double. d = gradient * scale, then times s->loss_scale (read when the kernel runs, so a
// captured step sees the scale of each replay); the row's loss is added to s->loss_sum and a
// non-finite one sets s->non_finite. Labels are in [0, cols) (the loss checks them on the host;
// one outside adds nothing but a zero gradient row here).
__device__ inline double warp_sum_double(double v) {
  for (int o = 16; o > 0; o /= 2) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}
__device__ inline void add_loss(step_scalars* s, double loss) {
  atomicAdd(&s->loss_sum, loss);
  if (!isfinite(loss)) atomicOr(&s->non_finite, 1u);
}
// Targets: labels (one class per row) when not null, else target weights t[rows, cols].
template <class T>
__global__ void crossentropy_loss(const T* z, const std::int32_t* labels, const T* targets, T* d, std::size_t rows,
                                  std::size_t cols, double scale, bool from_logits, step_scalars* s) {
  const std::size_t r = blockIdx.x * std::size_t(blockDim.x / 32) + threadIdx.x / 32;
  const unsigned lane = threadIdx.x % 32;
  if (r >= rows) return;
  const T* zr = z + r * cols;
  T* dr = d ? d + r * cols : nullptr;
  const std::int64_t label = labels ? std::int64_t(labels[r]) : -1;
  auto t = [&](std::size_t j) -> double {
    return labels ? (std::int64_t(j) == label ? 1.0 : 0.0) : double(load(targets[r * cols + j]));
  };
  const double ls = s->loss_scale;
  double loss = 0;
  if (from_logits) {
    float mx = -INFINITY;
    for (std::size_t j = lane; j < cols; j += 32) mx = fmaxf(mx, load(zr[j]));
    mx = warp_max(mx);
    double sum = 0, tsum = 0;
    for (std::size_t j = lane; j < cols; j += 32) sum += exp(double(load(zr[j])) - double(mx)), tsum += t(j);
    sum = warp_sum_double(sum);
    tsum = warp_sum_double(tsum);
    const double lse = double(mx) + log(sum);
    for (std::size_t j = lane; j < cols; j += 32) {
      const double zj = double(load(zr[j]));
      loss -= t(j) * (zj - lse);
      if (dr) dr[j] = store<T>(load(store<T>(float((exp(zj - lse) * tsum - t(j)) * scale))) * float(ls));
    }
  } else {
    const double eps = 1e-7;  // keras.config.epsilon()
    double sum = 0;
    for (std::size_t j = lane; j < cols; j += 32) sum += double(load(zr[j]));
    sum = warp_sum_double(sum);
    double dot = 0;
    for (std::size_t j = lane; j < cols; j += 32) {
      const double o = double(load(zr[j])) / sum, c = fmin(fmax(o, eps), 1.0 - eps);
      loss -= t(j) * log(c);
      const double g = (o > eps && o < 1.0 - eps) ? -t(j) / c : 0.0;
      dot += g * o;
    }
    dot = warp_sum_double(dot);
    if (dr)
      for (std::size_t j = lane; j < cols; j += 32) {
        const double o = double(load(zr[j])) / sum, c = fmin(fmax(o, eps), 1.0 - eps);
        const double g = (o > eps && o < 1.0 - eps) ? -t(j) / c : 0.0;
        dr[j] = store<T>(load(store<T>(float((g - dot) / sum * scale))) * float(ls));
      }
  }
  loss = warp_sum_double(loss);
  if (lane == 0) add_loss(s, loss);
}
// sum (y - t)^2 / divisor over count values (each warp's part added), d = scale (y - t) loss_scale.
template <class T>
__global__ void squared_error_loss(const T* y, const T* t, T* d, std::size_t count, double scale, double divisor,
                                   step_scalars* s) {
  const double ls = s->loss_scale;
  double part = 0;
  const std::size_t stride = std::size_t(gridDim.x) * blockDim.x;
  const std::size_t first = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x;
  // every lane of a warp runs the same number of rounds (the warp sum below needs them all)
  const std::size_t warp_first = first - threadIdx.x % 32;
  for (std::size_t base = warp_first; base < count; base += stride) {
    const std::size_t i = base + threadIdx.x % 32;
    if (i < count) {
      const double e = double(load(y[i])) - double(load(t[i]));
      part += e * e;
      if (d) d[i] = store<T>(load(store<T>(float(scale * e))) * float(ls));
    }
  }
  part = warp_sum_double(part);
  if (threadIdx.x % 32 == 0 && warp_first < count) add_loss(s, part / divisor);
}
// A pointwise loss rule (kernels/loss_functors.hpp): sum rule.value(y, t) / divisor over count
// values (each warp's part added), d = scale rule.gradient(y, t) loss_scale.
template <class Rule, class T>
__global__ void pointwise_loss(Rule rule, const T* y, const T* t, T* d, std::size_t count, double scale,
                               double divisor, step_scalars* s) {
  const double ls = s->loss_scale;
  double part = 0;
  const std::size_t stride = std::size_t(gridDim.x) * blockDim.x;
  const std::size_t first = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x;
  const std::size_t warp_first = first - threadIdx.x % 32;  // every lane runs the same rounds (warp sum)
  for (std::size_t base = warp_first; base < count; base += stride) {
    const std::size_t i = base + threadIdx.x % 32;
    if (i < count) {
      const double yi = double(load(y[i])), ti = double(load(t[i]));
      part += rule.value(yi, ti);
      if (d) d[i] = store<T>(load(store<T>(float(scale * rule.gradient(yi, ti)))) * float(ls));
    }
  }
  part = warp_sum_double(part);
  if (threadIdx.x % 32 == 0 && warp_first < count) add_loss(s, part / divisor);
}

}  // namespace ctnn::cuda_kernels
