// ctnn/backends/cpu/half_ops.hpp — how the CPU backend runs ops on 16-bit values.
//
// ops<cpu<Arch>> (ops.hpp) hands every op whose element type is float16_t or
// bfloat16_t to half_ops<Arch>: it converts the 16-bit operands to float32 in
// a per-thread workspace (convert.hpp: F16C / AVX-512), runs the float32 op
// (float32 accumulation) and rounds the results to the 16-bit type. A
// bfloat16 dense forward runs on AVX512-BF16 dot products when the CPU has
// them (bf16_gemm.hpp: the same bfloat16 operands, float32 sums in another
// order). convert(src, dst, n) is also ops<cpu<Arch>>::convert between float
// and a 16-bit type. A program using a 16-bit policy includes this header
// (or <ctnn/mixed_precision.hpp>); a float32 program never parses it.
// The workspace is the one allocation outside a model's plan: per thread, a
// few float buffers of at most batch x the widest tensor and one layer's
// parameters; they grow and are reused, never shrink.
#pragma once
#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <new>
#include <type_traits>

#include "../../core/half.hpp"
#include "bf16_gemm.hpp"
#include "convert.hpp"
#include "ops.hpp"

namespace ctnn::kernels::cpu {

namespace detail {
// One growing, 64-byte-aligned float buffer.
class float_scratch {
 public:
  float_scratch() = default;
  float_scratch(const float_scratch&) = delete;
  float_scratch& operator=(const float_scratch&) = delete;
  ~float_scratch() { release(); }
  float* get(std::size_t n) {
    if (n > n_) {
      release();
      p_ = static_cast<float*>(::operator new(n * sizeof(float), std::align_val_t{64}));
      n_ = n;
    }
    return p_;
  }

 private:
  void release() noexcept {
    if (p_) ::operator delete(p_, std::align_val_t{64});
    p_ = nullptr;
    n_ = 0;
  }
  float* p_ = nullptr;
  std::size_t n_ = 0;
};

struct half_workspace {
  std::array<float_scratch, 6> buf;
  static half_workspace& local() {
    thread_local half_workspace ws;
    return ws;
  }
};
}  // namespace detail

template <class Arch>
struct half_ops {
  using F = ctnn::ops<ctnn::cpu<Arch>>;  // the float32 ops

  template <class S, class D>
  static void convert(const S* src, D* dst, std::size_t n) {
    kernels::cpu::convert<Arch>(src, dst, n);
  }

  // ---- dense products ----
  // e: the activation rule of the epilogue (kernels/functors.hpp), on the float32 sums.
  template <std::size_t K, std::size_t N, class T, class E>
  static void dense_forward(const T* x, const T* w, const T* b, T* y, std::size_t m, const E& e) {
    auto& ws = detail::half_workspace::local();
    if constexpr (std::is_same_v<T, bfloat16_t>) {
      if (has_avx512_bf16()) return dense_forward_bf16<K, N>(x, w, b, y, m, ws, e);
    }
    const float* xf = widen(x, m * K, ws.buf[0]);
    const float* wf = widen(w, K * N, ws.buf[1]);
    const float* bf = b ? widen(b, N, ws.buf[2]) : nullptr;  // no bias: the recurrent products
    float* yf = ws.buf[3].get(m * N);
    F::template dense_forward<K, N>(xf, wf, bf, yf, m, e);
    convert(yf, y, m * N);
  }
  template <std::size_t K, std::size_t N, class T>
  static void dense_backward_weights(const T* x, const T* dy, T* dw, T* db, std::size_t m) {
    auto& ws = detail::half_workspace::local();
    const float* xf = widen(x, m * K, ws.buf[0]);
    const float* dyf = widen(dy, m * N, ws.buf[1]);
    float* dwf = ws.buf[2].get(K * N);
    float* dbf = db ? ws.buf[3].get(N) : nullptr;  // no db: no column sums (a recurrent kernel's gradient)
    F::template dense_backward_weights<K, N>(xf, dyf, dwf, dbf, m);
    convert(dwf, dw, K * N);
    if (db) convert(dbf, db, N);
  }
  template <std::size_t K, std::size_t N, class T>
  static void dense_backward_input(const T* dy, const T* w, T* dx, std::size_t m) {
    auto& ws = detail::half_workspace::local();
    const float* dyf = widen(dy, m * N, ws.buf[0]);
    const float* wf = widen(w, K * N, ws.buf[1]);
    float* dxf = ws.buf[2].get(m * K);
    F::template dense_backward_input<K, N>(dyf, wf, dxf, m);
    convert(dxf, dx, m * K);
  }

  // ---- convolution and pooling ----
  // cols (the layer's cache) keeps the im2col matrix in T: the copies of x's
  // 16-bit values, so rounding them loses nothing.
  template <kernels::conv_geometry G, class T, class E = fn::identity_fn>
  static void conv_forward(const T* x, const T* w, const T* b, T* y, T* cols, std::size_t batch, const E& e = {}) {
    auto& ws = detail::half_workspace::local();
    const std::size_t nc = batch * G.oh * G.ow * G.patch();
    const float* xf = widen(x, batch * G.in_size(), ws.buf[0]);
    const float* wf = widen(w, G.patch() * G.f, ws.buf[1]);
    const float* bf = widen(b, G.f, ws.buf[2]);
    float* yf = ws.buf[3].get(batch * G.out_size());
    float* cf = ws.buf[4].get(nc);
    F::template conv_forward<G>(xf, wf, bf, yf, cf, batch, e);  // e in float, before the rounding to T
    convert(yf, y, batch * G.out_size());
    convert(cf, cols, nc);
  }
  template <kernels::conv_geometry G, class T>
  static void conv_backward(const T* dy, const T* w, T* dw, T* db, T* dx, T* cols, std::size_t batch) {
    auto& ws = detail::half_workspace::local();
    const std::size_t nc = batch * G.oh * G.ow * G.patch();
    const float* dyf = widen(dy, batch * G.out_size(), ws.buf[0]);
    const float* wf = widen(w, G.patch() * G.f, ws.buf[1]);
    float* cf = ws.buf[2].get(nc);
    convert(cols, cf, nc);
    float* dwf = ws.buf[3].get(G.patch() * G.f);
    float* dbf = ws.buf[4].get(G.f);
    float* dxf = dx ? ws.buf[5].get(batch * G.in_size()) : nullptr;
    F::template conv_backward<G>(dyf, wf, dwf, dbf, dxf, cf, batch);
    convert(dwf, dw, G.patch() * G.f);
    convert(dbf, db, G.f);
    if (dx) convert(dxf, dx, batch * G.in_size());
  }
  template <kernels::conv_geometry G, class T>
  static void max_pool_forward(const T* x, T* y, std::uint32_t* idx, std::size_t batch) {
    auto& ws = detail::half_workspace::local();
    const float* xf = widen(x, batch * G.in_size(), ws.buf[0]);
    float* yf = ws.buf[1].get(batch * G.out_size());
    F::template max_pool_forward<G>(xf, yf, idx, batch);
    convert(yf, y, batch * G.out_size());
  }
  template <kernels::conv_geometry G, class T>
  static void max_pool_backward(const std::uint32_t* idx, const T* dy, T* dx, std::size_t batch) {
    auto& ws = detail::half_workspace::local();
    const float* dyf = widen(dy, batch * G.out_size(), ws.buf[0]);
    float* dxf = ws.buf[1].get(batch * G.in_size());
    F::template max_pool_backward<G>(idx, dyf, dxf, batch);
    convert(dxf, dx, batch * G.in_size());
  }
  template <kernels::conv_geometry G, class T>
  static void average_pool_forward(const T* x, T* y, std::size_t batch) {
    auto& ws = detail::half_workspace::local();
    const float* xf = widen(x, batch * G.in_size(), ws.buf[0]);
    float* yf = ws.buf[1].get(batch * G.out_size());
    F::template average_pool_forward<G>(xf, yf, batch);
    convert(yf, y, batch * G.out_size());
  }
  template <kernels::conv_geometry G, class T>
  static void average_pool_backward(const T* dy, T* dx, std::size_t batch) {
    auto& ws = detail::half_workspace::local();
    const float* dyf = widen(dy, batch * G.out_size(), ws.buf[0]);
    float* dxf = ws.buf[1].get(batch * G.in_size());
    F::template average_pool_backward<G>(dyf, dxf, batch);
    convert(dxf, dx, batch * G.in_size());
  }
  template <std::size_t P, std::size_t C, class T>
  static void global_average_forward(const T* x, T* y, std::size_t batch) {
    auto& ws = detail::half_workspace::local();
    const float* xf = widen(x, batch * P * C, ws.buf[0]);
    float* yf = ws.buf[1].get(batch * C);
    F::template global_average_forward<P, C>(xf, yf, batch);
    convert(yf, y, batch * C);
  }
  template <std::size_t P, std::size_t C, class T>
  static void global_average_backward(const T* dy, T* dx, std::size_t batch) {
    auto& ws = detail::half_workspace::local();
    const float* dyf = widen(dy, batch * C, ws.buf[0]);
    float* dxf = ws.buf[1].get(batch * P * C);
    F::template global_average_backward<P, C>(dyf, dxf, batch);
    convert(dxf, dx, batch * P * C);
  }

  // ---- element-wise and row-wise: y (and d) converted, the float op, rounded back ----
  template <class T, class Op>
  static void in_place(T* y, std::size_t n, Op op) {
    auto& ws = detail::half_workspace::local();
    float* yf = ws.buf[0].get(n);
    convert(y, yf, n);
    op(yf);
    convert(yf, y, n);
  }
  template <class T, class Op>
  static void delta_in_place(const T* y, T* d, std::size_t n, Op op) {
    auto& ws = detail::half_workspace::local();
    const float* yf = widen(y, n, ws.buf[0]);
    float* df = ws.buf[1].get(n);
    convert(d, df, n);
    op(yf, df);
    convert(df, d, n);
  }

 private:
  template <class T>
  static const float* widen(const T* p, std::size_t n, detail::float_scratch& s) {
    float* f = s.get(n);
    convert(p, f, n);
    return f;
  }

  // y = e.forward(x W + b) with W (K x N) transposed to N x K for the bfloat16 dot products.
  template <std::size_t K, std::size_t N, class E>
  static void dense_forward_bf16(const bfloat16_t* x, const bfloat16_t* w, const bfloat16_t* b, bfloat16_t* y,
                                 std::size_t m, detail::half_workspace& ws, const E& e) {
    bfloat16_t* wt = reinterpret_cast<bfloat16_t*>(ws.buf[1].get(K * N / 2 + 1));
    for (std::size_t k = 0; k < K; ++k)
      for (std::size_t j = 0; j < N; ++j) wt[j * K + k] = w[k * N + j];
    float* yf = ws.buf[3].get(m * N);
    gemm_nt_bf16(x, wt, yf, m, N, K);
    for (std::size_t i = 0; i < m; ++i)
      for (std::size_t j = 0; j < N; ++j) {
        const float v = yf[i * N + j] + (b ? float(b[j]) : 0.0f);  // no bias: the recurrent products
        yf[i * N + j] = e.forward(v);
      }
    convert(yf, y, m * N);
  }
};

}  // namespace ctnn::kernels::cpu
