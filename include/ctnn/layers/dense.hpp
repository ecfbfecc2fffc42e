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
//
// dense<up_to<Max>, Act, ...>: compiled at the maximum width Max (shapes, the
// parameter count and the plan use Max) with a run-time active width n in
// [1, Max], the layer's metadata buffer "units" (u32, saved with the weights;
// Max after init; set_width / set_units, train/widths.hpp). It computes
// dense<n>'s outputs with the first n columns of W and b, and 0 for the units
// n..Max-1, so the next layer's rows for them have no effect; the products run
// at width n, and the inactive units' gradients are 0. Host backends, float or
// double, an element-wise activation (no softmax), no regularizer.
#pragma once
#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>

#include "../core/backend.hpp"
#include "../core/concepts.hpp"
#include "../core/diagnostics.hpp"
#include "../core/format.hpp"
#include "../core/plan.hpp"
#include "../core/shape.hpp"
#include "../core/backend.hpp"
#include "../regularizers/penalties.hpp"
#include "activation.hpp"
#include "initializers.hpp"

namespace ctnn {

template <class Spec, Shape In, class P, class Backend>
struct dense_layer;
template <class Spec, Shape In, class P, class Backend>
struct dense_up_to_layer;

namespace detail {
// up_to<Max> is a long long that dense reads as "Max, with a run-time active width": an encoded
// value, so that dense keeps its one non-type parameter (and every pattern written over
// dense<N, ...> still compiles); a positive N is a plain width.
inline constexpr long long up_to_base = -(1LL << 62);
inline constexpr long long up_to_limit = 1LL << 40;
constexpr bool is_up_to(long long n) { return n > up_to_base && n <= up_to_base + up_to_limit; }
template <std::size_t Max>
consteval long long encode_up_to() {
  static_assert(Max > 0 && Max <= std::size_t(up_to_limit), "up_to: the maximum width must be in [1, 2^40]");
  return up_to_base + static_cast<long long>(Max);
}
}  // namespace detail

// dense<up_to<Max>, ...>: a dense layer compiled at Max units with a run-time active width.
template <std::size_t Max>
inline constexpr long long up_to = detail::encode_up_to<Max>();

// N is signed so that dense<-1> meets this check, not a narrowing error.
// After the activation come a regularizer and/or an initializer, in either
// order: dense<256, relu, he_uniform>, dense<256, relu, l2<0.001f>, he_normal>.
template <long long N, Activation Act = identity, class Opt1 = no_regularizer, class Opt2 = detail::no_option>
struct dense {
  static_assert(diag::require<(N > 0 || detail::is_up_to(N)), &diag::units_text<N>>(),
                "dense: the number of units must be > 0");
  static_assert((Regularizer<Opt1> || Initializer<Opt1>) &&
                    (Regularizer<Opt2> || Initializer<Opt2> || std::is_same_v<Opt2, detail::no_option>) &&
                    !(Regularizer<Opt1> && Regularizer<Opt2>) && !(Initializer<Opt1> && Initializer<Opt2>),
                "dense: after the activation come at most one regularizer and one initializer (he_uniform, ...)");
  using is_layer_spec = void;
  using activation = Act;
  using regularizer = std::conditional_t<Regularizer<Opt2>, Opt2, std::conditional_t<Regularizer<Opt1>, Opt1, no_regularizer>>;
  using initializer = detail::initializer_of<Opt1, Opt2>;
  static constexpr bool is_up_to = detail::is_up_to(N);  // dense<up_to<units>, ...>
  static constexpr std::size_t units = is_up_to ? std::size_t(N - detail::up_to_base) : std::size_t(N);

  static constexpr std::string name() {  // a constant where the options' names are (train/summary.hpp)
    constexpr bool act = !std::is_same_v<Act, identity>, reg = regularizer::active,
                   init = !std::is_same_v<initializer, glorot_uniform>;
    using sv = std::string_view;
    return detail::concat({is_up_to ? "dense<up_to<" : "dense<", detail::decimal(units), is_up_to ? ">" : "",
                           act ? ", " : "", act ? sv(Act::name()) : sv(), reg ? ", " : "",
                           reg ? sv(regularizer::name()) : sv(), init ? ", " : "", init ? sv(initializer::name()) : sv(),
                           ">"});
  }

  template <Shape In, std::size_t Pos>
  static constexpr bool check() {
    constexpr long long shown = static_cast<long long>(units);  // up_to<Max>'s Max, not its encoding
    constexpr bool located = diag::require<In::rank == 1, &diag::dense_not_flat_text<Pos, shown, In>>();
    return located && diag::dense_input_not_flat<diag::layer<Pos>, diag::input_rank<In::rank>, In::rank == 1>::value;
  }

  template <Shape In, class P, class Backend>
  using bind = std::conditional_t<is_up_to, dense_up_to_layer<dense, In, precision::policy_of_t<P>, Backend>,
                                  dense_layer<dense, In, precision::policy_of_t<P>, Backend>>;
};

namespace layer_kind {
struct dense {};        // the kind tag of dense_layer (its member `kind`)
struct dense_up_to {};  // dense_up_to_layer's: tools that map dense layers take strip_to's static type
}  // namespace layer_kind

// The bound dense layer, for any backend whose ops<Backend> has the dense
// products (cpu<Arch> and backends built on it). A backend with its own
// memory layout or precision (CUDA's half specializations, seen only by
// nvcc) partially specializes dense_layer<Spec, In, P, Backend>, so the
// network type a user writes is the same for every backend.
template <class Spec, Shape In, class P, class Backend>
struct dense_layer
    : detail::kernel_regularization<typename Spec::regularizer, Backend, typename P::compute_type, In::size * Spec::units> {
  using kind = layer_kind::dense;  // what it is, for tools that map layers (onnx/export.hpp, onnx/import.hpp)
  using spec = Spec;
  static constexpr std::size_t N = Spec::units;
  using Act = typename Spec::activation;
  using Reg = typename Spec::regularizer;
  using T = typename P::compute_type;
  using O = ops<Backend>;
  static constexpr std::string name() { return Spec::name(); }
  using variable_type = typename P::variable_type;
  using compute_type = T;
  using in_shape = In;
  using out_shape = shape<N>;
  static constexpr std::size_t K = In::size;
  static constexpr std::size_t kernel_count = K * N;
  static_assert(kernel_count == dense_layer::regularized_count);
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

};

// The bound dense<up_to<N>, ...>: dense_layer's buffers (kernel [K, N], bias [N]) and "units"
// (u32 metadata): the active width n. The products run
// on the first n columns (ops' *_active forms); y's columns n.. are 0, and so are the gradients of
// the kernel's and the bias' columns n.. (dy's columns for them are never read).
template <class Spec, Shape In, class P, class Backend>
struct dense_up_to_layer {
  using kind = layer_kind::dense_up_to;
  using spec = Spec;
  static constexpr std::size_t N = Spec::units;  // the maximum width
  using Act = typename Spec::activation;
  using Reg = typename Spec::regularizer;
  using T = typename P::compute_type;
  using O = ops<Backend>;
  static_assert(Backend::memory::host_accessible,
                "dense<up_to<N>>: the active width is read on the host: a host backend (cpu<Arch>) runs it; "
                "strip_to gives the static type for other backends");
  static_assert(std::is_same_v<T, float> || std::is_same_v<T, double>,
                "dense<up_to<N>>: computes in float or double (no half precision policy)");
  static_assert(!Reg::active, "dense<up_to<N>>: takes no regularizer (its penalty would cover the inactive units)");
  static_assert(requires { Act::template rule<T>(); },
                "dense<up_to<N>>: the activation must be element-wise (softmax would see the inactive units)");
  static constexpr std::string name() { return Spec::name(); }
  using variable_type = typename P::variable_type;
  using compute_type = T;
  using in_shape = In;
  using out_shape = shape<N>;
  static constexpr std::size_t K = In::size;
  static constexpr std::size_t kernel_count = K * N;
  static constexpr std::size_t max_units = N;
  static constexpr std::array<buffer, 3> buffers{buffer::parameter("kernel", {K, N}), buffer::parameter("bias", {N}),
                                                 buffer::make(role::metadata, elem::u32, "units", {1})};
  static constexpr std::size_t parameter_count = count_of(buffers, role::parameter);
  static constexpr std::size_t state_count = 0;
  static constexpr std::size_t cache_per_sample = 0;

  // The active width of a slot (host memory), checked to be in [1, N].
  static std::size_t width(layer_slot<T> s) {
    std::uint32_t n;
    std::memcpy(&n, s.metadata, sizeof n);
    if (n == 0 || n > N)
      throw std::invalid_argument(name() + ": the active width " + std::to_string(n) + " is outside [1, " +
                                  std::to_string(N) + "]");
    return n;
  }
  static void set_width(layer_slot<T> s, std::size_t n) {
    if (n == 0 || n > N)
      throw std::invalid_argument(name() + ": the active width " + std::to_string(n) + " is outside [1, " +
                                  std::to_string(N) + "]");
    const auto v = std::uint32_t(n);
    std::memcpy(s.metadata, &v, sizeof v);
  }

  static void init(layer_slot<T> s, rng& g) {
    Spec::initializer::fill(s.params, kernel_count, K, N, g);
    for (std::size_t j = 0; j < N; ++j) s.params[kernel_count + j] = T(0);
    set_width(s, N);
  }

  static void forward(layer_slot<T> s, const T* x, T* y, run_info r) {
    const std::size_t n = width(s);
    O::template dense_forward_active<K, N>(x, s.params, s.params + kernel_count, y, r.batch, n, Act::template rule<T>());
    if (n < N)
      for (std::size_t i = 0; i < r.batch; ++i) std::fill(y + i * N + n, y + (i + 1) * N, T(0));
  }

  // dy's first n columns are turned into dL/dz in place; its columns n.. are not read.
  static void backward(layer_slot<T> s, const T* x, const T* y, T* dy, T* dx, run_info r) {
    const std::size_t n = width(s);
    if (n == N) Act::template backward<Backend>(y, dy, r.batch, N);
    else
      for (std::size_t i = 0; i < r.batch; ++i) Act::template backward<Backend>(y + i * N, dy + i * N, 1, n);
    O::template dense_backward_weights_active<K, N>(x, dy, s.grads, s.grads + kernel_count, r.batch, n);
    if (n < N) {
      for (std::size_t k = 0; k < K; ++k) std::fill(s.grads + k * N + n, s.grads + (k + 1) * N, T(0));
      std::fill(s.grads + kernel_count + n, s.grads + kernel_count + N, T(0));
    }
    if (dx) O::template dense_backward_input_active<K, N>(dy, s.params, dx, r.batch, n);
  }

  // "units" as a file holds it (load_weights checks it before loading): "" when in [1, N].
  static std::string check_metadata(std::string_view, const std::byte* bytes) {
    std::uint32_t n;
    std::memcpy(&n, bytes, sizeof n);
    if (n >= 1 && n <= N) return {};
    return "the active width " + std::to_string(n) + " is outside [1, " + std::to_string(N) + "]";
  }
};

}  // namespace ctnn
