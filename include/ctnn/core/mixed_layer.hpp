// ctnn/core/mixed_layer.hpp — how a layer runs under a 16-bit policy on a host backend.
//
// mixed_layer<L32, P, Backend, Round> wraps L32, the layer bound under float32,
// for policy P (mixed_float16, mixed_bfloat16, float16). It declares L32's
// buffers (caches kept in float32, so the float32 code runs unchanged on
// them) and the model stores the variables in P::variable_type and the
// activations and deltas in P::compute_type (the last layer's output and
// dL/dy in float: P::io_type). Each pass converts its 16-bit inputs to
// float32 in a per-thread workspace (backends/cpu/convert.hpp: F16C / AVX-512),
// runs L32's float32 kernels (float32 accumulation), and rounds its outputs to
// the 16-bit type. Variables: with Round (the default) the layer computes with
// its variables rounded to the compute type, as Keras casts a mixed layer's
// kernel to float16 (and as a GPU's half GEMM reads it); the gradients are
// float32 and land in the float32 gradients directly. keep_float32<Spec>
// binds a layer with Round = false: it computes with the float32 variables
// as they are. Under float16 (inference) the variables are stored in
// float16 and converted for each pass; such a model does not train (the
// train step refuses it at compile time).
// A dense layer under mixed_bfloat16 whose input is bfloat16 runs its forward
// product on AVX512-BF16 dot products when the CPU has them
// (backends/cpu/bf16_gemm.hpp: the same bfloat16 operands, float32 sums in
// another order), else the conversion path above.
// The workspace is the one allocation outside the model's plan: four
// float buffers of at most batch x the widest layer, plus one layer's variables,
// per thread; it grows and is reused, never shrinks.
#pragma once
#include <algorithm>
#include <array>
#include <cstddef>
#include <new>
#include <string>
#include <type_traits>

#include "../backends/cpu/arch.hpp"
#include "../backends/cpu/bf16_gemm.hpp"
#include "../backends/cpu/convert.hpp"
#include "../backends/cpu/backend.hpp"
#include "concepts.hpp"
#include "plan.hpp"
#include "precision.hpp"

namespace ctnn {

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

struct mixed_workspace {
  float_scratch x, y, dy, dx, params, state, rounded, transposed;
  static mixed_workspace& local() {
    thread_local mixed_workspace ws;
    return ws;
  }
};

// L32's buffers with its compute-typed caches made float32.
template <std::size_t N>
constexpr std::array<buffer, N> float32_caches(std::array<buffer, N> bs) {
  for (buffer& b : bs)
    if (b.type == elem::compute) b.type = elem::f32;
  return bs;
}

template <class B>
struct arch_of {
  using type = kernels::cpu::default_arch;
};
template <class B>
  requires requires { typename B::arch; }
struct arch_of<B> {
  using type = typename B::arch;
};

}  // namespace detail

template <class L32, class P, class Backend, bool Round>
struct mixed_layer {
  using V = typename P::variable_type;
  using C = typename P::compute_type;
  using arch = typename detail::arch_of<Backend>::type;
  using variable_type = V;
  using compute_type = C;
  using in_shape = typename L32::in_shape;
  using out_shape = typename L32::out_shape;
  using float32_layer = L32;
  static constexpr auto buffers = detail::float32_caches(L32::buffers);
  static constexpr std::size_t parameter_count = L32::parameter_count;
  static constexpr std::size_t state_count = L32::state_count;
  static constexpr std::size_t cache_per_sample = L32::cache_per_sample;
  static constexpr bool rounds_variables = Round || !std::is_same_v<V, float>;
  static std::string name() { return L32::name(); }

  static void init(layer_slot<V, C> s, rng& g) {
    if constexpr (std::is_same_v<V, float>) {
      L32::init(float_slot(s, s.params, s.state), g);
    } else {
      auto& ws = detail::mixed_workspace::local();
      float* p = ws.params.get(parameter_count + 1);
      float* st = ws.state.get(state_count + 1);
      L32::init(float_slot(s, p, st), g);
      kernels::cpu::convert<arch>(p, s.params, parameter_count);
      kernels::cpu::convert<arch>(st, s.state, state_count);
    }
  }

  template <class X, class Y>
  static void forward(layer_slot<V, C> s, const X* x, Y* y, run_info r) {
    auto& ws = detail::mixed_workspace::local();
    if constexpr (Round && std::is_same_v<X, bfloat16_t> && std::is_same_v<V, float> && requires { L32::is_dense; }) {
      if (kernels::cpu::has_avx512_bf16()) return dense_forward_bf16(s, x, y, r, ws);
    }
    const float* xf = as_float(x, r.batch * in_shape::size, ws.x);
    float* yf = out_float(y, r.batch * out_shape::size, ws.y);
    float* st = state_float(s, ws);
    L32::forward(float_slot(s, params_float(s, ws), st), xf, yf, r);
    if constexpr (!std::is_same_v<Y, float>) kernels::cpu::convert<arch>(yf, y, r.batch * out_shape::size);
    if constexpr (!std::is_same_v<V, float> && state_count > 0) kernels::cpu::convert<arch>(st, s.state, state_count);
  }

  // dy (dL/d output, the 16-bit type, float for the last layer) in, dx out (nullptr for the first layer).
  template <class X, class Y>
  static void backward(layer_slot<V, C> s, const X* x, const Y* y, Y* dy, X* dx, run_info r) {
    static_assert(std::is_same_v<V, float>, "mixed_layer: a model whose variables are 16-bit (precision::float16) "
                                            "is for inference; train under mixed_float16");
    auto& ws = detail::mixed_workspace::local();
    const std::size_t nin = r.batch * in_shape::size, nout = r.batch * out_shape::size;
    const float* xf = as_float(x, nin, ws.x);
    const float* yf = as_float(y, nout, ws.y);
    float* dyf = out_float(dy, nout, ws.dy);
    if constexpr (!std::is_same_v<Y, float>) kernels::cpu::convert<arch>(dy, dyf, nout);
    float* dxf = dx ? out_float(dx, nin, ws.dx) : nullptr;
    L32::backward(float_slot(s, params_float(s, ws), s.state), xf, yf, dyf, dxf, r);
    if constexpr (!std::is_same_v<X, float>)
      if (dx) kernels::cpu::convert<arch>(dxf, dx, nin);
  }

  static float penalty(layer_slot<V, C> s)
    requires requires(layer_slot<float, float> f) { L32::penalty(f); } && std::is_same_v<V, float>
  {
    return float(L32::penalty(float_slot(s, s.params, s.state)));
  }
  static void add_penalty_gradient(layer_slot<V, C> s)
    requires requires(layer_slot<float, float> f) { L32::add_penalty_gradient(f); } && std::is_same_v<V, float>
  {
    L32::add_penalty_gradient(float_slot(s, s.params, s.state));
  }

 private:
  // y = act(x W + b) with W rounded to bfloat16 and transposed (N x K) for the dot products.
  template <class Y>
  static void dense_forward_bf16(layer_slot<V, C> s, const bfloat16_t* x, Y* y, run_info r, detail::mixed_workspace& ws) {
    constexpr std::size_t K = L32::K, N = L32::N;
    bfloat16_t* wt = reinterpret_cast<bfloat16_t*>(ws.transposed.get(K * N / 2 + 1));
    for (std::size_t k = 0; k < K; ++k)
      for (std::size_t j = 0; j < N; ++j) wt[j * K + k] = bfloat16_t(s.params[k * N + j]);
    float* yf = out_float(y, r.batch * N, ws.y);
    kernels::cpu::gemm_nt_bf16(x, wt, yf, r.batch, N, K);
    const float* bias = s.params + L32::kernel_count;
    for (std::size_t i = 0; i < r.batch; ++i)
      for (std::size_t j = 0; j < N; ++j) yf[i * N + j] += float(bfloat16_t(bias[j]));
    L32::Act::template forward<Backend>(yf, r.batch, N);
    if constexpr (!std::is_same_v<Y, float>) kernels::cpu::convert<arch>(yf, y, r.batch * N);
  }

  static layer_slot<float, float> float_slot(layer_slot<V, C> s, float* params, float* state) {
    layer_slot<float, float> f;
    f.params = params;
    if constexpr (std::is_same_v<V, float>) f.grads = s.grads;
    f.state = state;
    f.cache = reinterpret_cast<float*>(s.cache);  // declared f32 (float32_caches)
    f.mask = s.mask;
    f.metadata = s.metadata;
    return f;
  }
  template <class X>
  static const float* as_float(const X* x, std::size_t n, detail::float_scratch& buf) {
    if constexpr (std::is_same_v<X, float>) {
      return x;
    } else {
      float* f = buf.get(n);
      kernels::cpu::convert<arch>(x, f, n);
      return f;
    }
  }
  template <class Y>
  static float* out_float(Y* y, std::size_t n, detail::float_scratch& buf) {
    if constexpr (std::is_same_v<Y, float>) return y;
    else return buf.get(n);
  }
  // The variables as the layer computes with them: rounded through the
  // compute type (Round), converted from 16-bit storage (float16), or as stored.
  static float* params_float(layer_slot<V, C> s, detail::mixed_workspace& ws) {
    if constexpr (parameter_count == 0) {
      return reinterpret_cast<float*>(s.params);
    } else if constexpr (!std::is_same_v<V, float>) {
      float* p = ws.params.get(parameter_count);
      kernels::cpu::convert<arch>(s.params, p, parameter_count);
      return p;
    } else if constexpr (Round) {
      float* p = ws.params.get(parameter_count);
      C* h = reinterpret_cast<C*>(ws.rounded.get(parameter_count / 2 + 1));
      kernels::cpu::convert<arch>(s.params, h, parameter_count);
      kernels::cpu::convert<arch>(h, p, parameter_count);
      return p;
    } else {
      return s.params;
    }
  }
  static float* state_float(layer_slot<V, C> s, detail::mixed_workspace& ws) {
    if constexpr (std::is_same_v<V, float> || state_count == 0) {
      return reinterpret_cast<float*>(s.state);
    } else {
      float* st = ws.state.get(state_count);
      kernels::cpu::convert<arch>(s.state, st, state_count);
      return st;
    }
  }
};

// keep_float32<Spec>: Spec computing with its float32 variables under any
// policy (Keras: a layer made with dtype="float32" inside a mixed model). Its
// inputs and outputs are still stored in the policy's types; under float32 or
// float64 it is Spec itself.
template <class Spec>
struct keep_float32 {
  using is_layer_spec = void;
  using spec = Spec;
  static std::string name() { return "keep_float32<" + Spec::name() + ">"; }
  template <Shape In, std::size_t Pos>
  static constexpr bool check() {
    if constexpr (requires { Spec::template check<In, Pos>(); }) return Spec::template check<In, Pos>();
    else return true;
  }
  template <Shape In, class P, class Backend>
  using bind = typename Spec::template bind<In, P, Backend>;  // non-16-bit policies (sequential binds the rest)
};

template <class S>
inline constexpr bool is_keep_float32_v = false;
template <class S>
inline constexpr bool is_keep_float32_v<keep_float32<S>> = true;

namespace detail {
template <class S>
struct keep_spec {
  using type = S;
};
template <class S>
struct keep_spec<keep_float32<S>> {
  using type = S;
};
}  // namespace detail

}  // namespace ctnn
