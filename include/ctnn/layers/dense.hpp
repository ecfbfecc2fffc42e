// ctnn/layers/dense.hpp — dense<N, Activation, Regularizer>: a fully connected layer.
//
// Computes y = activation(x * W + b) for a flat input x of K features.
// Parameters: the kernel W[K, N] (row-major, Keras' layout), then the bias
// b[N]: K*N + N values. Init as Keras: Glorot-uniform kernel
// (limit sqrt(6 / (K + N))), zero bias; relu is fused into the forward GEMM.
// The regularizer (default none) applies to the kernel. Requires: N > 0 and a
// rank-1 input (else a compile error naming the layer's position and the
// input's rank). Output: shape<N>.
#pragma once
#include <array>
#include <cmath>
#include <cstddef>
#include <string>
#include <type_traits>

#include "../core/backend.hpp"
#include "../core/concepts.hpp"
#include "../core/diagnostics.hpp"
#include "../core/shape.hpp"
#include "../kernels/cpu/gemm.hpp"
#include "../regularizers/regularizers.hpp"
#include "activation.hpp"

namespace ctnn {

template <class Spec, Shape In, class T, class Backend>
struct dense_layer;

template <std::size_t N, Activation Act = identity, Regularizer Reg = no_regularizer>
struct dense {
  static_assert(N > 0, "dense: the number of units must be > 0");
  using is_layer_spec = void;
  using activation = Act;
  using regularizer = Reg;
  static constexpr std::size_t units = N;

  static std::string spec() {
    std::string s = "dense<" + std::to_string(N);
    if (!std::is_same_v<Act, identity>) s += ", " + Act::describe();
    if (Reg::active) s += ", " + Reg::describe();
    return s + ">";
  }

  template <Shape In, std::size_t Pos>
  static constexpr bool check() {
    return diag::dense_input_not_flat<diag::layer<Pos>, diag::input_rank<In::rank>, In::rank == 1>::value;
  }

  template <Shape In, class T, class Backend>
  using bind = dense_layer<dense, In, T, Backend>;
};

// The bound dense layer. This primary template is the CPU implementation;
// another backend partially specializes dense_layer<Spec, In, T, Backend>
// (CUDA: in kernels/cuda, seen only by nvcc), so the network type a user
// writes is the same for every backend.
template <class Spec, Shape In, class T, class Backend>
struct dense_layer {
  static_assert(std::is_same_v<Backend, cpu>, "dense: this backend has no specialization of this layer");
  static constexpr std::size_t N = Spec::units;
  using Act = typename Spec::activation;
  using Reg = typename Spec::regularizer;
  static std::string name() { return Spec::spec(); }
  using value_type = T;
  using in_shape = In;
  using out_shape = shape<N>;
  static constexpr std::size_t K = In::size;
  static constexpr std::size_t kernel_count = K * N;
  static constexpr std::size_t parameter_count = K * N + N;
  static constexpr std::array<std::size_t, 2> variable_sizes{kernel_count, N};  // kernel, bias (clipnorm)
  static constexpr std::size_t state_count = 0;
  static constexpr std::size_t cache_per_sample = 0;

  static void init(layer_slot<T> s, rng& g) {
    const double limit = std::sqrt(6.0 / double(K + N));
    for (std::size_t i = 0; i < kernel_count; ++i) s.params[i] = T(g.uniform(-limit, limit));
    for (std::size_t j = 0; j < N; ++j) s.params[kernel_count + j] = T(0);
  }

  static void forward(layer_slot<T> s, const T* x, T* y, run_info r) {
    if constexpr (std::is_same_v<Act, relu>) {
      // relu is fused into the GEMM's epilogue.
      kernels::cpu::dense_forward<K, N, kernels::cpu::epilogue::relu>(x, s.params, s.params + kernel_count, y, r.batch);
    } else {
      kernels::cpu::dense_forward<K, N>(x, s.params, s.params + kernel_count, y, r.batch);
      Act::forward(y, r.batch, N);
    }
  }

  // dy is turned into dL/dz in place.
  static void backward(layer_slot<T> s, const T* x, const T* y, T* dy, T* dx, run_info r) {
    Act::backward(y, dy, r.batch, N);
    kernels::cpu::dense_backward_weights<K, N>(x, dy, s.grads, s.grads + kernel_count, r.batch);
    if (dx) kernels::cpu::dense_backward_input<K, N>(dy, s.params, dx, r.batch);
  }

  static T penalty(layer_slot<T> s) { return Reg::penalty(s.params, kernel_count); }
  static void add_penalty_gradient(layer_slot<T> s) { Reg::add_gradient(s.params, s.grads, kernel_count); }
};

}  // namespace ctnn
