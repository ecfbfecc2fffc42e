// ctnn/kernels/functors.hpp — every element-wise rule, written once.
//
// Each functor is one rule over a value type V: float or double (a scalar, on
// the host or, under nvcc, per CUDA thread) or xsimd::batch<T, A> (the CPU's
// vectors). ops<cpu<A>>::map runs one over n elements of k arrays (batches
// for the body, the same functor on scalars for the tail); ops<cuda<SM>>
// runs it per thread on float. Arguments by reference are read and written
// back, arguments by value only read; a rule that returns a V returns the
// value whose finiteness the caller wants to know (an update's new weight).
// Math inside a rule is called unqualified: the scalar overloads below, or
// xsimd's for batches (found by argument-dependent lookup), so this header
// includes no xsimd and nvcc compiles it. Activations have forward(z) and
// backward(y, d) (the derivative from the output y); forward_of / backward_of
// make them in-place map rules, and the GEMM epilogue calls forward on its
// accumulators (epilogue_rule); chain<F...> is a list of rules applied in
// order, one epilogue (forward only). The formulas are those of the scalar
// references in kernels/ (activations_reference.hpp) and of optimizers/*.hpp.
#pragma once
#include <math.h>

#include <concepts>
#include <cstddef>
#include <type_traits>
#include <utility>

#include "../config.hpp"

namespace ctnn::fn {

// ---- scalar math (batches use xsimd's by argument-dependent lookup) ----
template <class T>
  requires std::is_floating_point_v<T>
CTNN_HOST_DEVICE inline T select(bool c, T a, T b) { return c ? a : b; }
CTNN_HOST_DEVICE inline float sqrt(float x) { return ::sqrtf(x); }
CTNN_HOST_DEVICE inline double sqrt(double x) { return ::sqrt(x); }
CTNN_HOST_DEVICE inline float exp(float x) { return ::expf(x); }
CTNN_HOST_DEVICE inline double exp(double x) { return ::exp(x); }
CTNN_HOST_DEVICE inline float tanh(float x) { return ::tanhf(x); }
CTNN_HOST_DEVICE inline double tanh(double x) { return ::tanh(x); }
CTNN_HOST_DEVICE inline float abs(float x) { return ::fabsf(x); }
CTNN_HOST_DEVICE inline double abs(double x) { return ::fabs(x); }
// a * b + c; batches: xsimd::fma (one rounding where the architecture has FMA).
CTNN_HOST_DEVICE inline float fma(float a, float b, float c) { return a * b + c; }
CTNN_HOST_DEVICE inline double fma(double a, double b, double c) { return a * b + c; }
// std::max / std::min's choice: the first argument unless the second is larger / smaller.
CTNN_HOST_DEVICE inline float max(float a, float b) { return a < b ? b : a; }
CTNN_HOST_DEVICE inline double max(double a, double b) { return a < b ? b : a; }
CTNN_HOST_DEVICE inline float min(float a, float b) { return b < a ? b : a; }
CTNN_HOST_DEVICE inline double min(double a, double b) { return b < a ? b : a; }

// ---- activations: forward(z) -> y, backward(y, d) -> dL/dz ----
struct identity_fn {
  template <class V>
  CTNN_HOST_DEVICE V forward(V z) const { return z; }
  template <class V>
  CTNN_HOST_DEVICE V backward(V, V d) const { return d; }
};
struct relu_fn {
  template <class V>
  CTNN_HOST_DEVICE V forward(V z) const { return select(z > V(0), z, V(0)); }
  template <class V>
  CTNN_HOST_DEVICE V backward(V y, V d) const { return select(y > V(0), d, V(0)); }
};
// For 0 < alpha, y > 0 exactly when z > 0.
template <class S>
struct leaky_relu_fn {
  S alpha;
  template <class V>
  CTNN_HOST_DEVICE V forward(V z) const { return select(z > V(0), z, V(alpha) * z); }
  template <class V>
  CTNN_HOST_DEVICE V backward(V y, V d) const { return select(y > V(0), d, V(alpha) * d); }
};
// e = exp(-|z|) never overflows: 1 / (1 + e) for z >= 0, e / (1 + e) below.
struct sigmoid_fn {
  template <class V>
  CTNN_HOST_DEVICE V forward(V z) const {
    const V e = exp(-abs(z));
    const V s = V(1) / (V(1) + e);
    return select(z >= V(0), s, e * s);
  }
  template <class V>
  CTNN_HOST_DEVICE V backward(V y, V d) const { return d * (y * (V(1) - y)); }
};
struct tanh_fn {
  template <class V>
  CTNN_HOST_DEVICE V forward(V z) const { return tanh(z); }
  template <class V>
  CTNN_HOST_DEVICE V backward(V y, V d) const { return d * (V(1) - y * y); }
};

// The element type of a value type V: V itself, or a batch's value_type (xsimd::batch<float, A>: float).
template <class V>
struct lane {
  using type = V;
};
template <class V>
  requires requires { typename V::value_type; }
struct lane<V> {
  using type = typename V::value_type;
};
// tanh and sigmoid for the recurrent cells' gates (lstm.hpp): in float, tanh as the rational
// function of Eigen's float tanh and ONNX Runtime's MLAS (odd degree 13 over even degree 6, the
// argument clamped to +-7.90531110763549805, where it reaches 1; a NaN passes through) and
// sigmoid(z) = 0.5 + 0.5 tanh(z / 2): about 16 operations and one division, no exp, no branch;
// absolute error at most 3.1e-7 (tanh) and 1.8e-7 (sigmoid; so a large relative error far below 0:
// 0.25 % at z = -10) seen, the results within [-1, 1] / [0, 1] (tests/kernels/test_activations.cpp,
// every architecture); in double, tanh_fn and sigmoid_fn (gradient checks run in double).
struct gate_tanh_fn {
  template <class V>
  CTNN_HOST_DEVICE V forward(V z) const {
    if constexpr (std::is_same_v<typename lane<V>::type, float>) {
      const V c(7.90531110763549805f);
      const V x = select(z < -c, -c, select(z > c, c, z)), x2 = x * x;
      V p = fma(x2, V(-2.76076847742355e-16f), V(2.00018790482477e-13f));
      p = fma(x2, p, V(-8.60467152213735e-11f));
      p = fma(x2, p, V(5.12229709037114e-08f));
      p = fma(x2, p, V(1.48572235717979e-05f));
      p = fma(x2, p, V(6.37261928875436e-04f));
      p = fma(x2, p, V(4.89352455891786e-03f));
      V q = fma(x2, V(1.19825839466702e-06f), V(1.18534705686654e-04f));
      q = fma(x2, q, V(2.26843463243900e-03f));
      q = fma(x2, q, V(4.89352518554385e-03f));
      return x * p / q;
    } else {
      return tanh_fn{}.forward(z);
    }
  }
};
struct gate_sigmoid_fn {
  template <class V>
  CTNN_HOST_DEVICE V forward(V z) const {
    if constexpr (std::is_same_v<typename lane<V>::type, float>) return fma(V(0.5f), gate_tanh_fn{}.forward(V(0.5f) * z), V(0.5f));
    else return sigmoid_fn{}.forward(z);
  }
};

// What a GEMM epilogue runs on its accumulators (value type V): V forward(V).
// Satisfied by the activations above and by chain<F...>.
template <class E, class V>
concept epilogue_rule = std::is_trivially_copyable_v<E> && requires(const E& e, V v) {
  { e.forward(v) } -> std::same_as<V>;
};

// A list of rules as one rule: forward(z) = Fn.forward(... F1.forward(z)), a
// fold, no nesting (chain<> is the identity). Forward only: a backward would
// need every intermediate value, so a list is an epilogue (ops<B>::dense_forward),
// not a layer's activation: fn::chain{fn::relu_fn{}, fn::affine_fn<float>{2, 0}}.
namespace detail {
template <std::size_t I, class F>
struct link {
  F f;
};
template <class Is, class... F>
struct chain_links;
template <std::size_t... I, class... F>
struct chain_links<std::index_sequence<I...>, F...> : link<I, F>... {
  constexpr chain_links() = default;
  CTNN_HOST_DEVICE constexpr chain_links(const F&... f)
    requires(sizeof...(F) > 0)
      : link<I, F>{f}... {}
  template <class V>
  CTNN_HOST_DEVICE V forward(V z) const {
    ((z = static_cast<const link<I, F>&>(*this).f.forward(z)), ...);
    return z;
  }
};
}  // namespace detail
template <class... F>
struct chain : detail::chain_links<std::index_sequence_for<F...>, F...> {
  using detail::chain_links<std::index_sequence_for<F...>, F...>::chain_links;
};
template <class... F>
chain(F...) -> chain<F...>;

// An affine rule, y = k z + c, for lists (a rescaled activation: chain{tanh_fn{}, affine_fn<float>{0.5f, 0.5f}}).
template <class S>
struct affine_fn {
  S k, c;
  template <class V>
  CTNN_HOST_DEVICE V forward(V z) const { return fma(z, V(k), V(c)); }
  template <class V>
  CTNN_HOST_DEVICE V backward(V, V d) const { return V(k) * d; }
};

// In-place map rules of an activation: y = forward(y); d = backward(y, d).
template <class A>
struct forward_of {
  A a;
  template <class V>
  CTNN_HOST_DEVICE void operator()(V& y) const { y = a.forward(y); }
};
template <class A>
struct backward_of {
  A a;
  template <class V>
  CTNN_HOST_DEVICE void operator()(V y, V& d) const { d = a.backward(y, d); }
};

// ---- simple maps ----
template <class S>
struct scale {  // x *= k
  S k;
  template <class V>
  CTNN_HOST_DEVICE void operator()(V& x) const { x = x * V(k); }
};
template <class S>
struct clip {  // x = clamp(x, -c, c)
  S c;
  template <class V>
  CTNN_HOST_DEVICE void operator()(V& x) const { x = min(max(x, V(-c)), V(c)); }
};
template <class S>
struct fill {  // x = v
  S v;
  template <class V>
  CTNN_HOST_DEVICE void operator()(V& x) const { x = V(v); }
};
struct accumulate {  // a += g
  template <class V>
  CTNN_HOST_DEVICE void operator()(V& a, V g) const { a = a + g; }
};
template <class S>
struct accumulated_mean {  // g = (acc + g) * inv; acc = 0 (the last micro-step of accumulation)
  S inv;
  template <class V>
  CTNN_HOST_DEVICE void operator()(V& g, V& acc) const {
    g = (acc + g) * V(inv);
    acc = V(0);
  }
};
template <class S>
struct moving_average {  // avg = mom avg + (1 - mom) w
  S mom, rest;
  template <class V>
  CTNN_HOST_DEVICE void operator()(V& avg, V w) const { avg = V(mom) * avg + V(rest) * w; }
};
template <class S>
struct unscale {  // g *= inv; returns g as it was, whose finiteness decides the step
  S inv;
  template <class V>
  CTNN_HOST_DEVICE V operator()(V& g) const {
    const V before = g;
    g = g * V(inv);
    return before;
  }
};
template <class S>
struct penalty_gradient {  // g += l1 sign(w) + l2x2 w (sign(0) = 0, as TensorFlow's gradient of abs)
  S l1, l2x2;
  template <class V>
  CTNN_HOST_DEVICE void operator()(V w, V& g) const {
    g = g + select(w > V(0), V(l1), select(w < V(0), V(-l1), V(0))) + V(l2x2) * w;
  }
};
// A run-time regularization factor as the kernels use it: itself when finite and >= 0, else NaN,
// so a bad factor gives a NaN penalty and gradient (the step stops), never a silently wrong one.
CTNN_HOST_DEVICE inline float checked_factor(float f) { return f >= 0.0f && f <= 3.40282347e38f ? f : NAN; }
template <class S>
struct penalty_gradient_by {  // penalty_gradient with l1 and l2x2 times *factor (B's memory), read where it runs
  S l1, l2x2;
  const float* factor;
  template <class V>
  CTNN_HOST_DEVICE void operator()(V w, V& g) const {
    const S f = S(checked_factor(*factor));
    penalty_gradient<S>{l1 * f, l2x2 * f}(w, g);
  }
};
struct check_finite {  // returns x: a map of it says whether every x is finite
  template <class V>
  CTNN_HOST_DEVICE V operator()(V x) const { return x; }
};

// ---- optimizer updates (optimizers/*.hpp); each returns the new w ----
// m += (g - m) b1; v += (g^2 - v) b2; w -= alpha m / (sqrt(v) + eps)
template <class S>
struct adam_update {
  S alpha, b1, b2, eps;
  template <class V>
  CTNN_HOST_DEVICE V operator()(V& w, V g, V& m, V& v) const {
    m = fma(g - m, V(b1), m);
    v = fma(g * g - v, V(b2), v);
    w = w - V(alpha) * m / (sqrt(v) + V(eps));
    return w;
  }
};
// The same with vh = max(vh, v) used in place of v.
template <class S>
struct amsgrad_update {
  S alpha, b1, b2, eps;
  template <class V>
  CTNN_HOST_DEVICE V operator()(V& w, V g, V& m, V& v, V& vh) const {
    m = fma(g - m, V(b1), m);
    v = fma(g * g - v, V(b2), v);
    vh = max(vh, v);
    w = w - V(alpha) * m / (sqrt(vh) + V(eps));
    return w;
  }
};
// acc += g^2; w -= lr g / sqrt(acc + eps)
template <class S>
struct adagrad_update {
  S lr, eps;
  template <class V>
  CTNN_HOST_DEVICE V operator()(V& w, V g, V& acc) const {
    acc = fma(g, g, acc);
    w = w - V(lr) * g / sqrt(acc + V(eps));
    return w;
  }
};
// w -= lr g
template <class S>
struct sgd_update {
  S lr;
  template <class V>
  CTNN_HOST_DEVICE V operator()(V& w, V g) const {
    w = w - V(lr) * g;
    return w;
  }
};
// m = mom m - lr g; w += m (nesterov: w += mom m - lr g)
template <class S>
struct momentum_update {
  S lr, mom;
  bool nesterov;
  template <class V>
  CTNN_HOST_DEVICE V operator()(V& w, V g, V& m) const {
    const V lg = V(lr) * g;
    m = V(mom) * m - lg;
    w = w + (nesterov ? V(mom) * m - lg : m);
    return w;
  }
};
// vel = rho vel + (1 - rho) g^2; centered: avg = rho avg + (1 - rho) g and
// denom = vel - avg^2 + eps, else vel + eps; inc = lr g / sqrt(denom);
// momentum: mb = mom mb + inc, w -= mb; else w -= inc.
// Arguments: w, g, vel, then avg (Centered), then mb (Momentum).
template <class S, bool Centered, bool Momentum>
struct rmsprop_update {
  S lr, rho, rho1, eps, mom;
  template <class V, class... R>
    requires(sizeof...(R) == int(Centered) + int(Momentum))
  CTNN_HOST_DEVICE V operator()(V& w, V g, V& vel, R&... rest) const {
    V* extra[] = {&rest..., nullptr};
    vel = V(rho) * vel + V(rho1) * g * g;
    V denom;
    if constexpr (Centered) {
      V& avg = *extra[0];
      avg = V(rho) * avg + V(rho1) * g;
      denom = vel - avg * avg + V(eps);
    } else {
      denom = vel + V(eps);
    }
    const V inc = V(lr) * g / sqrt(denom);
    if constexpr (Momentum) {
      V& mb = *extra[Centered ? 1 : 0];
      mb = V(mom) * mb + inc;
      w = w - mb;
    } else {
      w = w - inc;
    }
    return w;
  }
};

}  // namespace ctnn::fn
