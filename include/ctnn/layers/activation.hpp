// ctnn/layers/activation.hpp — activations: relu, leaky_relu<alpha>, sigmoid,
// tanh, softmax, identity.
//
// Each is both an argument of dense<N, Activation> and a layer of its own.
// As a layer its output shape is its input shape; softmax normalises over the
// last dimension. Gradients are computed from the outputs alone.
// leaky_relu's slope defaults to 0.2, as keras.activations.leaky_relu.
#pragma once
#include <cstddef>
#include <string>

#include "../core/backend.hpp"
#include "../core/concepts.hpp"
#include "../core/format.hpp"
#include "../core/shape.hpp"
#include "../kernels/cpu/activations.hpp"

namespace ctnn {

template <class A, Shape In, class T, class Backend>
struct activation_layer;

namespace detail {
template <class A>
struct activation_spec {
  using is_layer_spec = void;
  static std::string spec() { return A::describe(); }
  template <Shape In, class T, class Backend>
  using bind = activation_layer<A, In, T, Backend>;
};
}  // namespace detail

template <class A>
concept Activation = requires(float* y, const float* yc, std::size_t n) {
  A::forward(y, n, n);
  A::backward(yc, y, n, n);
  { A::describe() } -> std::convertible_to<std::string>;
};

struct identity : detail::activation_spec<identity> {
  static std::string describe() { return "identity"; }
  template <class T>
  static void forward(T*, std::size_t, std::size_t) {}
  template <class T>
  static void backward(const T*, T*, std::size_t, std::size_t) {}
};

struct relu : detail::activation_spec<relu> {
  static std::string describe() { return "relu"; }
  template <class T>
  static void forward(T* y, std::size_t rows, std::size_t cols) {
    kernels::cpu::relu_forward(y, rows * cols);
  }
  template <class T>
  static void backward(const T* y, T* d, std::size_t rows, std::size_t cols) {
    kernels::cpu::relu_backward(y, d, rows * cols);
  }
};

template <float Alpha = 0.2f>
struct leaky_relu : detail::activation_spec<leaky_relu<Alpha>> {
  static_assert(Alpha > 0.0f && Alpha < 1.0f, "leaky_relu: the negative slope must be in (0, 1)");
  static constexpr float alpha = Alpha;
  static std::string describe() { return "leaky_relu<" + detail::format_number(Alpha) + ">"; }
  template <class T>
  static void forward(T* y, std::size_t rows, std::size_t cols) {
    kernels::cpu::leaky_relu_forward(y, rows * cols, T(Alpha));
  }
  template <class T>
  static void backward(const T* y, T* d, std::size_t rows, std::size_t cols) {
    kernels::cpu::leaky_relu_backward(y, d, rows * cols, T(Alpha));
  }
};

struct sigmoid : detail::activation_spec<sigmoid> {
  static std::string describe() { return "sigmoid"; }
  template <class T>
  static void forward(T* y, std::size_t rows, std::size_t cols) {
    kernels::cpu::sigmoid_forward(y, rows * cols);
  }
  template <class T>
  static void backward(const T* y, T* d, std::size_t rows, std::size_t cols) {
    kernels::cpu::sigmoid_backward(y, d, rows * cols);
  }
};

struct tanh : detail::activation_spec<tanh> {
  static std::string describe() { return "tanh"; }
  template <class T>
  static void forward(T* y, std::size_t rows, std::size_t cols) {
    kernels::cpu::tanh_forward(y, rows * cols);
  }
  template <class T>
  static void backward(const T* y, T* d, std::size_t rows, std::size_t cols) {
    kernels::cpu::tanh_backward(y, d, rows * cols);
  }
};

struct softmax : detail::activation_spec<softmax> {
  static std::string describe() { return "softmax"; }
  template <class T>
  static void forward(T* y, std::size_t rows, std::size_t cols) {
    kernels::cpu::softmax_forward(y, rows, cols);
  }
  template <class T>
  static void backward(const T* y, T* d, std::size_t rows, std::size_t cols) {
    kernels::cpu::softmax_backward(y, d, rows, cols);
  }
};

// An activation used as a layer of its own.
template <class A, Shape In, class T, class Backend>
struct activation_layer {
  static_assert(std::is_same_v<Backend, cpu>, "activation: this backend has no specialization of this layer");
  using value_type = T;
  using in_shape = In;
  using out_shape = In;
  static constexpr std::size_t parameter_count = 0;
  static constexpr std::size_t state_count = 0;
  static constexpr std::size_t cache_per_sample = 0;
  static constexpr std::size_t rows_per_sample = In::size / last_dim_v<In>;
  static constexpr std::size_t cols = last_dim_v<In>;
  static std::string name() { return A::describe(); }

  static void init(layer_slot<T>, rng&) {}
  static void forward(layer_slot<T>, const T* x, T* y, run_info r) {
    std::copy(x, x + r.batch * In::size, y);
    A::forward(y, r.batch * rows_per_sample, cols);
  }
  static void backward(layer_slot<T>, const T*, const T* y, T* dy, T* dx, run_info r) {
    if (!dx) return;
    A::backward(y, dy, r.batch * rows_per_sample, cols);
    std::copy(dy, dy + r.batch * In::size, dx);
  }
};

}  // namespace ctnn
