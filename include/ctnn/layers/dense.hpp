// ctnn/layers/dense.hpp — dense<N, Activation, Regularizer>: a fully connected layer.
//
// Computes y = activation(x * W + b) for a flat input x of K features.
// Parameters: the kernel W[K, N] (row-major, Keras' layout), then the bias
// b[N]: K*N + N values. Init as Keras: Glorot-uniform kernel
// (limit sqrt(6 / (K + N))) unless an initializer is given (he_uniform, ...:
// layers/initializers.hpp), zero bias; an element-wise activation (its
// rule<T>(), kernels/functors.hpp: relu, leaky_relu, sigmoid, tanh) is fused
// into the forward GEMM, softmax runs after it.
// The regularizer (default none) applies to the kernel. Requires: N > 0 and a
// rank-1 input (else a compile error naming the layer's position and the
// input's rank). Output: shape<N>.
#pragma once
#include <array>
#include <cmath>
#include <cstddef>
#include <string>
#include <string_view>
#include <type_traits>

#include "../core/backend.hpp"
#include "../core/concepts.hpp"
#include "../core/diagnostics.hpp"
#include "../core/plan.hpp"
#include "../core/shape.hpp"
#include "../backends/cpu/ops.hpp"
#include "../regularizers/regularizers.hpp"
#include "activation.hpp"
#include "initializers.hpp"

namespace ctnn {

template <class Spec, Shape In, class P, class Backend>
struct dense_layer;

// N is signed so that dense<-1> meets this check, not a narrowing error.
// After the activation come a regularizer and/or an initializer, in either
// order: dense<256, relu, he_uniform>, dense<256, relu, l2<0.001f>, he_normal>.
template <long long N, Activation Act = identity, class Opt1 = no_regularizer, class Opt2 = detail::no_option>
struct dense {
  static_assert(diag::require<(N > 0), &diag::units_text<N>>(), "dense: the number of units must be > 0");
  static_assert((Regularizer<Opt1> || Initializer<Opt1>) &&
                    (Regularizer<Opt2> || Initializer<Opt2> || std::is_same_v<Opt2, detail::no_option>) &&
                    !(Regularizer<Opt1> && Regularizer<Opt2>) && !(Initializer<Opt1> && Initializer<Opt2>),
                "dense: after the activation come at most one regularizer and one initializer (he_uniform, ...)");
  using is_layer_spec = void;
  using activation = Act;
  using regularizer = std::conditional_t<Regularizer<Opt2>, Opt2, std::conditional_t<Regularizer<Opt1>, Opt1, no_regularizer>>;
  using initializer = detail::initializer_of<Opt1, Opt2>;
  static constexpr std::size_t units = N;

  static std::string name() {
    std::string s = "dense<" + std::to_string(N);
    if (!std::is_same_v<Act, identity>) s += ", " + Act::name();
    if (regularizer::active) s += ", " + regularizer::name();
    if (!std::is_same_v<initializer, glorot_uniform>) s += ", " + initializer::name();
    return s + ">";
  }

  template <Shape In, std::size_t Pos>
  static constexpr bool check() {
    constexpr bool located = diag::require<In::rank == 1, &diag::dense_not_flat_text<Pos, N, In>>();
    return located && diag::dense_input_not_flat<diag::layer<Pos>, diag::input_rank<In::rank>, In::rank == 1>::value;
  }

  template <Shape In, class P, class Backend>
  using bind = dense_layer<dense, In, precision::policy_of_t<P>, Backend>;
};

namespace layer_kind {
struct dense {};  // the kind tag of dense_layer (its member `kind`)
}  // namespace layer_kind

// The bound dense layer, for any backend whose ops<Backend> has the dense
// products (cpu<Arch> and backends built on it). A backend with its own
// memory layout or precision (CUDA's half specializations, seen only by
// nvcc) partially specializes dense_layer<Spec, In, P, Backend>, so the
// network type a user writes is the same for every backend.
template <class Spec, Shape In, class P, class Backend>
struct dense_layer {
  using kind = layer_kind::dense;  // what it is, for tools that map layers (onnx/export.hpp, onnx/import.hpp)
  using spec = Spec;
  static constexpr std::size_t N = Spec::units;
  using Act = typename Spec::activation;
  using Reg = typename Spec::regularizer;
  using T = typename P::compute_type;
  using O = ops<Backend>;
  static std::string name() { return Spec::name(); }
  using variable_type = typename P::variable_type;
  using compute_type = T;
  using in_shape = In;
  using out_shape = shape<N>;
  static constexpr std::size_t K = In::size;
  static constexpr std::size_t kernel_count = K * N;
  static constexpr auto buffers = detail::with_regularizer_buffers<Reg>(
      std::array<buffer, 2>{buffer::parameter("kernel", {K, N}), buffer::parameter("bias", {N})});
  static constexpr std::size_t parameter_count = count_of(buffers, role::parameter);
  static constexpr std::size_t state_count = 0;
  static constexpr std::size_t cache_per_sample = 0;

  static void init(layer_slot<T> s, rng& g) {
    Spec::initializer::fill(s.params, kernel_count, K, N, g);
    for (std::size_t j = 0; j < N; ++j) s.params[kernel_count + j] = T(0);
    detail::init_regularizer<Reg>(s);
  }

  static void forward(layer_slot<T> s, const T* x, T* y, run_info r) {
    if constexpr (requires { Act::template rule<T>(); }) {
      // the activation's rule runs in the GEMM's epilogue
      O::template dense_forward<K, N>(x, s.params, s.params + kernel_count, y, r.batch, Act::template rule<T>());
    } else {
      O::template dense_forward<K, N>(x, s.params, s.params + kernel_count, y, r.batch);
      Act::template forward<Backend>(y, r.batch, N);
    }
  }

  // dy is turned into dL/dz in place.
  static void backward(layer_slot<T> s, const T* x, const T* y, T* dy, T* dx, run_info r) {
    Act::template backward<Backend>(y, dy, r.batch, N);
    O::template dense_backward_weights<K, N>(x, dy, s.grads, s.grads + kernel_count, r.batch);
    if (dx) O::template dense_backward_input<K, N>(dy, s.params, dx, r.batch);
  }

  // The regularizer's penalty of the kernel added to sc (Backend's memory; nothing waits);
  // penalty(s): its value on a host backend. Its run-time factor, if any, as a file holds it: check_metadata.
  static void add_penalty(layer_slot<T> s, step_scalars* sc) {
    detail::add_regularizer_penalty<Reg, Backend>(s, kernel_count, sc);
  }
  static T penalty(layer_slot<T> s)
    requires(Backend::memory::host_accessible)
  {
    step_scalars sc;
    add_penalty(s, &sc);
    return T(sc.penalty);
  }
  static std::string check_metadata(std::string_view, const std::byte* bytes) {
    return detail::check_regularizer_metadata<Reg>(bytes);
  }
  static void add_penalty_gradient(layer_slot<T> s) { detail::add_regularizer_gradient<Reg, Backend>(s, kernel_count); }
};

}  // namespace ctnn
