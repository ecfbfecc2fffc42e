// ctnn/kernels/cpu/ops.hpp — ops<cpu<Arch>>: what layers, losses, activations
// and optimizers call on the CPU backend.
//
// Every function forwards to the kernel of kernels/cpu with the backend's
// architecture Arch, so a model of cpu<avx2> and one of cpu<sse2> in two
// translation units instantiate different kernels (no ODR violation). A
// backend that runs on the host with another memory (tests' counting
// backend) inherits these ops: struct ops<my_backend> : ops<cpu<>> {}.
// An op on float16_t / bfloat16_t values runs through half_ops<Arch>
// (half_ops.hpp: convert, the float32 kernel, round), which a program using
// a 16-bit policy includes; convert(src, dst, n) converts between element
// types (a copy when they are the same).
#pragma once
#include <algorithm>
#include <cstddef>
#include <type_traits>

#include "../../core/half.hpp"

#include "backend.hpp"
#include "activations.hpp"
#include "conv.hpp"
#include "crossentropy.hpp"
#include "gemm.hpp"
#include "pooling.hpp"
#include "sparse_kernels.hpp"
#include "thread_pool.hpp"
#include "updates.hpp"

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
  using epilogue = kernels::cpu::epilogue;
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

  // ---- executor ----
  template <class F>
  static void for_chunks(std::size_t n, F&& f) { kernels::cpu::for_chunks(n, f); }
  static std::size_t threads() { return kernels::cpu::thread_pool::global().size(); }

  // ---- dense products (K inputs, N outputs, m rows) ----
  template <std::size_t K, std::size_t N, epilogue E = epilogue::none, class T>
  static void dense_forward(const T* x, const T* w, const T* b, T* y, std::size_t m) {
    if constexpr (is_half_v<T>) half<T>::template dense_forward<K, N, E>(x, w, b, y, m);
    else kernels::cpu::dense_forward<K, N, E, Arch>(x, w, b, y, m);
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

  // ---- convolution and pooling (geometry G) ----
  template <kernels::conv_geometry G, class T>
  static void conv_forward(const T* x, const T* w, const T* b, T* y, T* cols, std::size_t batch) {
    if constexpr (is_half_v<T>) half<T>::template conv_forward<G>(x, w, b, y, cols, batch);
    else kernels::cpu::conv_forward<G, Arch>(x, w, b, y, cols, batch);
  }
  template <kernels::conv_geometry G, class T>
  static void conv_backward(const T* dy, const T* w, T* dw, T* db, T* dx, T* cols, std::size_t batch) {
    if constexpr (is_half_v<T>) half<T>::template conv_backward<G>(dy, w, dw, db, dx, cols, batch);
    else kernels::cpu::conv_backward<G, Arch>(dy, w, dw, db, dx, cols, batch);
  }
  template <kernels::conv_geometry G, class T>
  static void max_pool_forward(const T* x, T* y, std::uint32_t* idx, std::size_t batch) {
    if constexpr (is_half_v<T>) half<T>::template max_pool_forward<G>(x, y, idx, batch);
    else kernels::cpu::max_pool_forward<G, Arch>(x, y, reinterpret_cast<unsigned char*>(idx), batch);
  }
  template <kernels::conv_geometry G, class T>
  static void max_pool_backward(const std::uint32_t* idx, const T* dy, T* dx, std::size_t batch) {
    if constexpr (is_half_v<T>) half<T>::template max_pool_backward<G>(idx, dy, dx, batch);
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

  // ---- element-wise and row-wise ----
  template <class T>
  static void copy(const T* x, T* y, std::size_t n) { std::copy(x, x + n, y); }
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

  // ---- optimizer updates (element-wise over n parameters; true when every new w is finite) ----
  template <class T>
  static bool adam_update(T* w, const T* g, T* m, T* v, T* vh, std::size_t n, T alpha, T b1, T b2, T eps, bool ams) {
    return kernels::cpu::adam_update<T, Arch>(w, g, m, v, vh, n, alpha, b1, b2, eps, ams);
  }
  template <class T>
  static bool adagrad_update(T* w, const T* g, T* acc, std::size_t n, T lr, T eps) {
    return kernels::cpu::adagrad_update<T, Arch>(w, g, acc, n, lr, eps);
  }
  template <class T>
  static bool sgd_update(T* w, const T* g, T* m, std::size_t n, T lr, T mom, bool nesterov) {
    return kernels::cpu::sgd_update<T, Arch>(w, g, m, n, lr, mom, nesterov);
  }
  template <class T>
  static bool rmsprop_update(T* w, const T* g, T* vel, T* mb, T* avg, std::size_t n, T lr, T r, T r1, T eps, T mom,
                             bool centered) {
    return kernels::cpu::rmsprop_update<T, Arch>(w, g, vel, mb, avg, n, lr, r, r1, eps, mom, centered);
  }
};

}  // namespace ctnn
