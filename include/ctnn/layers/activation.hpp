// ctnn/layers/activation.hpp — activations: relu, leaky_relu<alpha>, sigmoid,
// tanh, softmax, identity.
//
// Each is both an argument of dense<N, Activation> and a layer of its own.
// As a layer its output shape is its input shape; softmax normalises over the
// last dimension. Gradients are computed from the outputs alone.
// leaky_relu's slope defaults to 0.2, as keras.activations.leaky_relu.
// The element-wise ones (identity, relu, leaky_relu, sigmoid, tanh) also
// give their rule of kernels/functors.hpp, rule<T>(), which dense fuses
// into its GEMM.
#pragma once
#include <cstddef>
#include <string>
#include <type_traits>

#include "../core/backend.hpp"
#include "../core/concepts.hpp"
#include "../core/format.hpp"
#include "../core/plan.hpp"
#include "../core/precision.hpp"
#include "../core/shape.hpp"
#include "../core/backend.hpp"
#include "../kernels/functors.hpp"

namespace ctnn {

template <class A, Shape In, class P, class Backend>
struct activation_layer;

namespace detail {
template <class A>
struct activation_spec {
  using is_layer_spec = void;
  using is_activation = void;
  template <Shape In, class P, class Backend>
  using bind = activation_layer<A, In, precision::policy_of_t<P>, Backend>;
};
}  // namespace detail

// An activation: name() and forward<Backend>(y, rows, cols) / backward<Backend>(y, d, rows, cols)
// in place on rows x cols values, computed through ops<Backend>.
template <class A>
concept has_activation_name = requires { { A::name() } -> std::convertible_to<std::string>; };
template <class A>
concept Activation = has_activation_name<A> && requires { typename A::is_activation; };

struct identity : detail::activation_spec<identity> {
  static constexpr std::string name() { return "identity"; }
  static constexpr const char* onnx_op = "";  // its ONNX operator ("": none needed)
  template <class T>
  static constexpr fn::identity_fn rule() { return {}; }
  template <class B, class T>
  static void forward(T*, std::size_t, std::size_t) {}
  template <class B, class T>
  static void backward(const T*, T*, std::size_t, std::size_t) {}
};

struct relu : detail::activation_spec<relu> {
  static constexpr std::string name() { return "relu"; }
  static constexpr const char* onnx_op = "Relu";  // its ONNX operator (onnx/export.hpp, onnx/import.hpp)
  template <class T>
  static constexpr fn::relu_fn rule() { return {}; }
  template <class B, class T>
  static void forward(T* y, std::size_t rows, std::size_t cols) {
    ops<B>::relu_forward(y, rows * cols);
  }
  template <class B, class T>
  static void backward(const T* y, T* d, std::size_t rows, std::size_t cols) {
    ops<B>::relu_backward(y, d, rows * cols);
  }
};

template <auto Alpha = 0.2>
struct leaky_relu : detail::activation_spec<leaky_relu<Alpha>> {
  static_assert(std::is_floating_point_v<decltype(Alpha)>, "leaky_relu: the slope must be a floating-point number");
  static_assert(Alpha > 0 && Alpha < 1, "leaky_relu: the negative slope must be in (0, 1)");
  static constexpr double alpha = double(Alpha);
  static constexpr std::string name() { return "leaky_relu<" + detail::format_number(Alpha) + ">"; }
  static constexpr const char* onnx_op = "LeakyRelu";  // its ONNX operator, with attribute alpha
  template <class T>
  static constexpr fn::leaky_relu_fn<T> rule() { return {T(Alpha)}; }
  template <class B, class T>
  static void forward(T* y, std::size_t rows, std::size_t cols) {
    ops<B>::leaky_relu_forward(y, rows * cols, T(Alpha));
  }
  template <class B, class T>
  static void backward(const T* y, T* d, std::size_t rows, std::size_t cols) {
    ops<B>::leaky_relu_backward(y, d, rows * cols, T(Alpha));
  }
};

struct sigmoid : detail::activation_spec<sigmoid> {
  static constexpr std::string name() { return "sigmoid"; }
  static constexpr const char* onnx_op = "Sigmoid";  // its ONNX operator (onnx/export.hpp, onnx/import.hpp)
  template <class T>
  static constexpr fn::sigmoid_fn rule() { return {}; }
  template <class B, class T>
  static void forward(T* y, std::size_t rows, std::size_t cols) {
    ops<B>::sigmoid_forward(y, rows * cols);
  }
  template <class B, class T>
  static void backward(const T* y, T* d, std::size_t rows, std::size_t cols) {
    ops<B>::sigmoid_backward(y, d, rows * cols);
  }
};

struct tanh : detail::activation_spec<tanh> {
  static constexpr std::string name() { return "tanh"; }
  static constexpr const char* onnx_op = "Tanh";  // its ONNX operator (onnx/export.hpp, onnx/import.hpp)
  template <class T>
  static constexpr fn::tanh_fn rule() { return {}; }
  template <class B, class T>
  static void forward(T* y, std::size_t rows, std::size_t cols) {
    ops<B>::tanh_forward(y, rows * cols);
  }
  template <class B, class T>
  static void backward(const T* y, T* d, std::size_t rows, std::size_t cols) {
    ops<B>::tanh_backward(y, d, rows * cols);
  }
};

struct softmax : detail::activation_spec<softmax> {
  static constexpr std::string name() { return "softmax"; }
  static constexpr const char* onnx_op = "Softmax";  // its ONNX operator (onnx/export.hpp, onnx/import.hpp)
  template <class B, class T>
  static void forward(T* y, std::size_t rows, std::size_t cols) {
    ops<B>::softmax_forward(y, rows, cols);
  }
  template <class B, class T>
  static void backward(const T* y, T* d, std::size_t rows, std::size_t cols) {
    ops<B>::softmax_backward(y, d, rows, cols);
  }
};

namespace layer_kind {
struct activation {};  // the kind tag of activation_layer (its member `kind`)
}  // namespace layer_kind

// An activation used as a layer of its own.
template <class A, Shape In, class P, class Backend>
struct activation_layer {
  using kind = layer_kind::activation;  // what it is, for tools that map layers (onnx/export.hpp, onnx/import.hpp)
  using spec = A;
  using T = typename P::compute_type;
  using O = ops<Backend>;
  using variable_type = typename P::variable_type;
  using compute_type = T;
  using in_shape = In;
  using out_shape = In;
  static constexpr auto buffers = no_buffers;
  static constexpr std::size_t parameter_count = 0;
  static constexpr std::size_t state_count = 0;
  static constexpr std::size_t cache_per_sample = 0;
  static constexpr std::size_t rows_per_sample = In::size / last_dim_v<In>;
  static constexpr std::size_t cols = last_dim_v<In>;
  static constexpr std::string name() { return A::name(); }

  static void init(layer_slot<T>, rng&) {}
  static void forward(layer_slot<T>, const T* x, T* y, run_info r) {
    O::copy(x, y, r.batch * In::size);
    A::template forward<Backend>(y, r.batch * rows_per_sample, cols);
  }
  static void backward(layer_slot<T>, const T*, const T* y, T* dy, T* dx, run_info r) {
    if (!dx) return;
    A::template backward<Backend>(y, dy, r.batch * rows_per_sample, cols);
    O::copy(dy, dx, r.batch * In::size);
  }
};

}  // namespace ctnn
