// ctnn/backends/cuda/layers.cuh — the bound layers whose generic form loops on the host.
//
// dropout_layer and batch_norm_layer (layers/dropout.hpp, batch_norm.hpp)
// read and write their buffers directly; for cuda<SM> these partial
// specializations run the kernels of kernels.cuh instead. Each derives from
// the CPU layer bound on cpu<> with the same policy, so its buffers, counts,
// traits (kind, spec, keeps_channels, ...), name and init (run by the model
// on a host view) are the CPU layer's: the plan, the weights files, the
// mixed-precision regions and the tools that read traits (strip, onnx) are
// those of the CPU. Only forward and backward differ, with the same formulas.
//   dropout:    the keep/drop draw is a counter-based hash of (a 64-bit seed
//               drawn from run_info::gen per training forward, element index):
//               the same rate and scaling as the CPU layer, not the same mask.
//               draws_random: a training pass is never captured as a graph.
//   batch_norm: per-channel sums in float32 by ops::column_sums (two stages,
//               deterministic), two passes for the variance as on the CPU.
//               The moving statistics are the CPU layer's S (float32 under
//               the mixed policies: precision::state_type_t), its parameters
//               and caches the compute type.
#pragma once
#include <cstddef>
#include <stdexcept>
#include <type_traits>

#include "../../layers/batch_norm.hpp"
#include "../../layers/dropout.hpp"
#include "ops.cuh"

namespace ctnn {

// The buffers, shapes, counts, name and init are the CPU layer's (the base
// class, bound on cpu<>: declarations only); forward and backward run here.
template <class Spec, Shape In, class P, int SM>
struct dropout_layer<Spec, In, P, cuda<SM>> : dropout_layer<Spec, In, P, cpu<>> {
  using base = dropout_layer<Spec, In, P, cpu<>>;
  static constexpr double Rate = base::Rate;
  using T = typename base::T;
  using O = ops<cuda<SM>>;
  static constexpr bool draws_random = true;  // no captured training pass (runner.cuh)

  static void forward(layer_slot<T> s, const T* x, T* y, run_info r) {
    const std::size_t n = r.batch * In::size;
    if (!r.training) return O::copy(x, y, n);
    if (!r.gen) throw std::invalid_argument("dropout: training needs a random generator (run_info::gen is null)");
    const float scale = float(1.0 / (1.0 - Rate));
    cuda_kernels::dropout_forward<<<O::grid(n), O::block, 0, O::stream()>>>(x, y, s.cache, n, float(Rate), scale,
                                                                             r.gen->next());
    O::launched();
  }

  static void backward(layer_slot<T> s, const T*, const T*, T* dy, T* dx, run_info r) {
    if (!dx) return;
    const std::size_t n = r.batch * In::size;
    O::multiply(dy, r.training ? static_cast<const T*>(s.cache) : nullptr, dx, n);
  }
};

template <class Spec, Shape In, class Pol, int SM>
struct batch_norm_layer<Spec, In, Pol, cuda<SM>> : batch_norm_layer<Spec, In, Pol, cpu<>> {
  using base = batch_norm_layer<Spec, In, Pol, cpu<>>;
  using T = typename base::T;
  using S = typename base::S;
  using O = ops<cuda<SM>>;
  static constexpr double Momentum = base::Momentum, Epsilon = base::Epsilon;
  static constexpr std::size_t C = base::C;
  static constexpr std::size_t P = base::P;
  using base::statistics;

  static void forward(layer_slot<T> s, const T* x, T* y, run_info r) {
    const std::size_t rows = r.batch * P;
    T* mean = s.cache;
    T* inv = s.cache + C;
    if (r.training) {
      // sum(x) -> mean, then sum((x - mean)^2), in float32 at the workspace's end
      float* mean_f = O::workspace_tail(2 * C);
      float* sq_f = mean_f + C;
      O::column_sums(cuda_kernels::value_of<T>{x, C}, rows, C, mean_f, 2 * C);
      cuda_kernels::divide<<<unsigned((C + 255) / 256), 256, 0, O::stream()>>>(mean_f, C, float(rows));
      O::launched();
      O::column_sums(cuda_kernels::squared_deviation<T>{x, mean_f, C}, rows, C, sq_f, 2 * C);
      cuda_kernels::batch_norm_statistics<<<unsigned((C + 255) / 256), 256, 0, O::stream()>>>(
          static_cast<const float*>(mean_f), static_cast<const float*>(sq_f), rows, C, statistics(s),
          statistics(s) + C, mean, inv, float(Momentum), float(Epsilon));
    } else {
      cuda_kernels::batch_norm_inference_statistics<<<unsigned((C + 255) / 256), 256, 0, O::stream()>>>(
          static_cast<const S*>(statistics(s)), static_cast<const S*>(statistics(s) + C), mean, inv, C,
          float(Epsilon));
    }
    O::launched();
    cuda_kernels::batch_norm_apply<<<O::grid(rows * C), O::block, 0, O::stream()>>>(
        x, y, static_cast<const T*>(s.params), static_cast<const T*>(s.params + C), static_cast<const T*>(mean),
        static_cast<const T*>(inv), rows, C);
    O::launched();
  }

  static void backward(layer_slot<T> s, const T* x, const T*, T* dy, T* dx, run_info r) {
    const std::size_t rows = r.batch * P;
    const T* mean = s.cache;
    const T* inv = s.cache + C;
    O::column_sums(cuda_kernels::times_normalized<T>{dy, x, mean, inv, C}, rows, C, s.grads);  // dgamma
    O::column_sums(cuda_kernels::value_of<T>{dy, C}, rows, C, s.grads + C);                      // dbeta
    if (!dx) return;
    cuda_kernels::batch_norm_input_gradient<<<O::grid(rows * C), O::block, 0, O::stream()>>>(
        x, dy, dx, static_cast<const T*>(s.params), mean, inv, static_cast<const T*>(s.grads),
        static_cast<const T*>(s.grads + C), rows, C, r.training);
    O::launched();
  }
};

}  // namespace ctnn
