// ctnn/layers/batch_norm.hpp — batch_normalization<Momentum, Epsilon>; batch_norm.
//
// keras.layers.BatchNormalization over the last axis (C channels; statistics
// over the batch and every other axis): y = gamma * (x - mean) / sqrt(var +
// Epsilon) + beta. In training (run_info::training) mean and var are the
// batch's (biased variance, as Keras 3) and the moving statistics are updated:
// moving = moving * Momentum + batch * (1 - Momentum); at inference the moving
// statistics are used. Parameters (trainable): gamma[C] (init 1), beta[C]
// (init 0). State (non-trainable, saved with the weights): moving_mean[C]
// (init 0), moving_variance[C] (init 1). batch_norm = Keras' defaults
// (momentum 0.99, epsilon 1e-3). Cache: the batch mean and 1/sqrt(var + eps)
// (2C values; the plan's cache_per_sample * batch holds them). Synchronized (sync_batch_norm):
// the training statistics over every replica of a data-parallel job (run_info::replicas).
#pragma once
#include <array>
#include <cmath>
#include <cstddef>
#include <string>
#include <type_traits>

#include "../core/backend.hpp"
#include "../core/concepts.hpp"
#include "../core/format.hpp"
#include "../core/plan.hpp"
#include "../core/precision.hpp"
#include "../core/shape.hpp"

namespace ctnn {

// The synchronized statistics' host kernels, defined in backends/cpu/normalization.hpp (which
// ops<cpu<Arch>>, backends/cpu/ops.hpp, includes: a model of this layer reads it); declared only
// here, so that a network type's check does not read the CPU kernels and the thread pool.
namespace kernels::cpu {
template <std::size_t C, class T, class S, class Average>
void batch_norm_forward_cross_replica(const T* x, T* y, const T* gamma, const T* beta, S* moving_mean, S* moving_var,
                                      T* mean, T* inv, std::size_t rows, double momentum, double epsilon,
                                      Average&& average);
template <std::size_t C, class T, class Average>
void batch_norm_backward_cross_replica(const T* x, const T* dy, T* dx, const T* gamma, const T* mean, const T* inv,
                                       T* dgamma, T* dbeta, std::size_t rows, Average&& average);
}  // namespace kernels::cpu

template <class Spec, Shape In, class Pol, class Backend>
struct batch_norm_layer;

template <auto Momentum = 0.99, auto Epsilon = 1e-3, bool Synchronized = false>
struct batch_normalization {
  static_assert(std::is_floating_point_v<decltype(Momentum)> && std::is_floating_point_v<decltype(Epsilon)>,
                "batch_norm: the momentum and epsilon must be floating-point numbers");
  static_assert(Momentum >= 0 && Momentum <= 1, "batch_norm: the momentum must be in [0, 1]");
  static_assert(Epsilon > 0 && Epsilon < 1e30, "batch_norm: epsilon must be finite and > 0");
  using is_layer_spec = void;
  static constexpr double momentum = double(Momentum), epsilon = double(Epsilon);
  static constexpr bool synchronized = Synchronized;

  static constexpr std::string name() {
    if (std::is_same_v<batch_normalization, batch_normalization<>>) return "batch_norm";
    if (std::is_same_v<batch_normalization, batch_normalization<0.99, 1e-3, true>>) return "sync_batch_norm";
    return "batch_normalization<" + detail::format_number(Momentum) + ", " + detail::format_number(Epsilon) +
           (Synchronized ? ", true>" : ">");
  }

  template <Shape In, class P, class Backend>
  using bind = batch_norm_layer<batch_normalization, In, precision::policy_of_t<P>, Backend>;
};

namespace layer_kind {
struct batch_norm {};  // the kind tag of batch_norm_layer (its member `kind`)
}  // namespace layer_kind

// The bound batch normalization: its buffers, and ops<Backend>'s batch_norm_forward / _backward.
template <class Spec, Shape In, class Pol, class Backend>
struct batch_norm_layer {
    using kind = layer_kind::batch_norm;  // what it is, for tools that map layers (onnx/export.hpp, onnx/import.hpp)
    using spec = Spec;
    using T = typename Pol::compute_type;
    using S = precision::state_type_t<Pol>;    // the moving statistics (float32 under the mixed policies)
    static constexpr double Momentum = Spec::momentum, Epsilon = Spec::epsilon;
    static constexpr std::size_t C = last_dim_v<In>;
    static constexpr std::size_t P = In::size / C;  // positions per sample
    using variable_type = typename Pol::variable_type;
    using compute_type = T;
    using in_shape = In;
    using out_shape = In;
    static constexpr std::array<buffer, 5> buffers{
        buffer::parameter("gamma", {C}), buffer::parameter("beta", {C}), buffer::state("moving_mean", {C}),
        buffer::state("moving_variance", {C}),
        buffer::cache("batch_statistics", 2 * C)};  // batch mean, inverse std (only 2C of batch * 2C are used)
    static constexpr std::size_t parameter_count = count_of(buffers, role::parameter);
    static constexpr std::size_t state_count = count_of(buffers, role::state);
    static constexpr std::size_t cache_per_sample = count_of(buffers, role::cache);
    static constexpr std::string name() { return Spec::name(); }

    // The moving statistics are S values: the model hands them as its state region.
    static S* statistics(layer_slot<T> s) { return reinterpret_cast<S*>(s.state); }

    static void init(layer_slot<T> s, rng&) {
      S* st = statistics(s);
      for (std::size_t c = 0; c < C; ++c) {
        s.params[c] = T(1);
        s.params[C + c] = T(0);
        st[c] = S(0);
        st[C + c] = S(1);
      }
    }

    static auto average_over(run_info r) {
      return [c = r.replicas](double* v, std::size_t n) { c->average(c->context, v, n); };
    }

    // The formulas run in ops<Backend> (has_layer_ops: backends/cpu/normalization.hpp, backends/cuda).
    static void forward(layer_slot<T> s, const T* x, T* y, run_info r) {
      S* st = statistics(s);
      if constexpr (Spec::synchronized) {
        if (r.training && r.replicas) {
          static_assert(Backend::memory::host_accessible,
                        "sync_batch_norm: synchronized statistics run on host memory only (not yet on a device "
                        "backend: docs/distributed.md)");
          kernels::cpu::batch_norm_forward_cross_replica<C>(x, y, s.params, s.params + C, st, st + C, s.cache,
                                                            s.cache + C, r.batch * P, Momentum, Epsilon,
                                                            average_over(r));
          return;
        }
      }
      ops<Backend>::template batch_norm_forward<C>(x, y, s.params, s.params + C, st, st + C, s.cache, s.cache + C,
                                                   r.batch * P, Momentum, Epsilon, r.training);
    }

    // Training: the gradient through the batch statistics,
    //   dx = gamma * inv / M * (M * dy - sum(dy) - xhat * sum(dy * xhat)).
    // Inference (frozen statistics): dx = gamma * inv * dy.
    static void backward(layer_slot<T> s, const T* x, const T*, T* dy, T* dx, run_info r) {
      if constexpr (Spec::synchronized) {
        if (r.training && r.replicas) {
          kernels::cpu::batch_norm_backward_cross_replica<C>(x, dy, dx, s.params, s.cache, s.cache + C, s.grads,
                                                             s.grads + C, r.batch * P, average_over(r));
          return;
        }
      }
      ops<Backend>::template batch_norm_backward<C>(x, dy, dx, s.params, s.cache, s.cache + C, s.grads, s.grads + C,
                                                    r.batch * P, r.training);
    }
};

using batch_norm = batch_normalization<>;
// Keras' BatchNormalization(synchronized=True): in data-parallel training (data_parallel during
// fit) the statistics are those of every replica's batch together (one all-reduce of 2C + 1
// doubles per forward and per backward); elsewhere it is batch_norm. docs/distributed.md.
using sync_batch_norm = batch_normalization<0.99, 1e-3, true>;

}  // namespace ctnn
