// ctnn/cuda/layers.cuh — the bound layers whose generic form loops on the host.
//
// dropout_layer and batch_norm_layer (layers/dropout.hpp, batch_norm.hpp)
// read and write their buffers directly; for cuda<SM> these partial
// specializations run the kernels of kernels.cuh instead, with the same
// buffers (so the plan, the saved weights and the network type are those of
// the CPU) and the same formulas. The other layers reach the device through
// ops<cuda<SM>> as they are.
//   dropout:    the keep/drop draw is a counter-based hash of (a 64-bit seed
//               drawn from run_info::gen per training forward, element index):
//               the same rate and scaling as the CPU layer, not the same mask.
//   batch_norm: per-channel sums in float32 by ops::column_sums (two stages,
//               deterministic), two passes for the variance as on the CPU.
//               Under a mixed model's layer policy (mixed_layer_policy below)
//               its moving statistics are float32 buffers (elem::f32), as
//               Keras and the CPU mixed model keep them; under any other
//               policy they are variable_type, as on the CPU.
// init() runs on the host: the device model (model.cuh) calls it on a host
// mirror of the parameters and copies them to the device.
#pragma once
#include <cstddef>
#include <stdexcept>
#include <type_traits>

#include "../../layers/batch_norm.hpp"
#include "../../layers/dropout.hpp"
#include "ops.cuh"

namespace ctnn {

namespace cuda_detail {
// The layers' policy of a mixed model on the device (cuda/model.cuh): the
// uniform policy of the 16-bit type C (every op and kernel runs in C), whose
// batch_norm keeps its moving statistics in float32.
template <class C>
struct mixed_layer_policy : precision::policy<C> {};
template <class P>
inline constexpr bool float32_statistics_v = false;
template <class C>
inline constexpr bool float32_statistics_v<mixed_layer_policy<C>> = true;
}  // namespace cuda_detail

namespace precision {
template <class C>
struct policy_of<cuda_detail::mixed_layer_policy<C>> {  // a policy already: bound as it is
  using type = cuda_detail::mixed_layer_policy<C>;
};
}  // namespace precision

// The buffers, shapes, counts, name and init are the CPU layer's (the base
// class, bound on cpu<>: declarations only); forward and backward run here.
template <class Spec, Shape In, class P, int SM>
struct dropout_layer<Spec, In, P, cuda<SM>> : dropout_layer<Spec, In, P, cpu<>> {
  using base = dropout_layer<Spec, In, P, cpu<>>;
  static constexpr double Rate = base::Rate;
  using T = typename base::T;
  using O = ops<cuda<SM>>;
  static constexpr bool draws_random = true;  // cuda/model.cuh: no captured training step

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
struct batch_norm_layer<Spec, In, Pol, cuda<SM>> {
  static_assert(Pol::uniform, "batch_norm: the CUDA backend's mixed-precision specialization is not wired yet");
  using T = typename Pol::compute_type;
  using V = typename Pol::variable_type;
  using O = ops<cuda<SM>>;
  static constexpr double Momentum = Spec::momentum, Epsilon = Spec::epsilon;
  static constexpr std::size_t C = last_dim_v<In>;
  static constexpr std::size_t P = In::size / C;
  using variable_type = V;
  using compute_type = T;
  using in_shape = In;
  using out_shape = In;
  // The moving statistics' element: float32 under a mixed model's layer policy, else the variables'.
  static constexpr bool float32_statistics = cuda_detail::float32_statistics_v<Pol>;
  using S = std::conditional_t<float32_statistics, float, V>;
  static constexpr elem statistics_elem = float32_statistics ? elem::f32 : elem::variable;
  static constexpr std::array<buffer, 5> buffers{
      buffer::parameter("gamma", {C}), buffer::parameter("beta", {C}),
      buffer::make(role::state, statistics_elem, "moving_mean", {C}),
      buffer::make(role::state, statistics_elem, "moving_variance", {C}), buffer::cache("batch_statistics", 2 * C)};
  static constexpr std::size_t parameter_count = count_of(buffers, role::parameter);
  static constexpr std::size_t state_count = count_of(buffers, role::state);
  static constexpr std::size_t cache_per_sample = count_of(buffers, role::cache);
  static std::string name() { return Spec::name(); }

  // moving_mean then moving_variance: the slot's state block holds S values (the plan sized it from statistics_elem)
  static S* statistics(layer_slot<T> s) noexcept { return reinterpret_cast<S*>(s.state); }

  static void init(layer_slot<T> s, rng&) {  // host mirror
    for (std::size_t c = 0; c < C; ++c) {
      s.params[c] = V(1);
      s.params[C + c] = V(0);
      statistics(s)[c] = S(0);
      statistics(s)[C + c] = S(1);
    }
  }

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
        x, y, static_cast<const V*>(s.params), static_cast<const V*>(s.params + C), static_cast<const T*>(mean),
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
        x, dy, dx, static_cast<const V*>(s.params), mean, inv, static_cast<const V*>(s.grads),
        static_cast<const V*>(s.grads + C), rows, C, r.training);
    O::launched();
  }
};

}  // namespace ctnn
