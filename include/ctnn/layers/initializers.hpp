// ctnn/layers/initializers.hpp — kernel initializers (Keras 3's VarianceScaling family).
//
// An initializer fills a kernel of `count` values with fan_in inputs and
// fan_out outputs per unit (dense: K and N; conv2d: KH*KW*C and KH*KW*F)
// from the model's rng:
//   glorot_uniform  U(-l, l), l = sqrt(6 / (fan_in + fan_out))   (the default, as Keras)
//   glorot_normal   truncated normal, stddev sqrt(2 / (fan_in + fan_out)) / 0.8796...
//   he_uniform      U(-l, l), l = sqrt(6 / fan_in)
//   he_normal       truncated normal, stddev sqrt(2 / fan_in) / 0.8796...
//   orthogonal      orthonormal rows or columns (QR of a normal matrix; recurrent kernels)
// "Truncated" as Keras: values beyond two standard deviations are drawn
// again; 0.87962566103423978 is the stddev of a standard normal truncated at
// +-2, so the kernel's variance is the one named. He initializers suit relu
// stacks: deep relu stacks under Glorot shrink the signal until the output
// is all zeros (fit warns when the first batch's output is; train/fit.hpp).
// Usage: dense<256, relu, he_uniform>, dense<256, relu, l2<0.001f>, he_normal>,
// conv2d<..., Act, Reg, he_uniform>.
#pragma once
#include <cmath>
#include <cstddef>
#include <string>
#include <type_traits>
#include <vector>

#include "../core/rng.hpp"
#include "../core/separate.hpp"

namespace ctnn {

template <class I>
concept Initializer = requires {
  typename I::is_initializer;
  { I::name() } -> std::convertible_to<std::string>;
};

namespace detail {
// A standard normal value within [-2, 2] (Box-Muller, redrawn beyond).
inline double truncated_standard_normal(rng& g) {
  for (;;) {
    const double u1 = 1.0 - g.uniform();  // (0, 1]
    const double u2 = g.uniform();
    const double z = std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
    if (std::abs(z) <= 2.0) return z;
  }
}
inline constexpr double truncation_stddev = 0.87962566103423978;

// The draws, once per element type: with the compiled part (core/separate.hpp) its float and double
// instances, not one copy per layer type of every program.
template <class T>
CTNN_OUTLINE void fill_uniform(T* w, std::size_t count, double limit, rng& g) {
  for (std::size_t i = 0; i < count; ++i) w[i] = T(g.uniform(-limit, limit));
}
template <class T>
CTNN_OUTLINE void fill_truncated_normal(T* w, std::size_t count, double stddev, rng& g) {
  for (std::size_t i = 0; i < count; ++i) w[i] = T(stddev * truncated_standard_normal(g));
}
CTNN_INSTANCE(template void fill_uniform<float>(float*, std::size_t, double, rng&);)
CTNN_INSTANCE(template void fill_uniform<double>(double*, std::size_t, double, rng&);)
CTNN_INSTANCE(template void fill_truncated_normal<float>(float*, std::size_t, double, rng&);)
CTNN_INSTANCE(template void fill_truncated_normal<double>(double*, std::size_t, double, rng&);)
}  // namespace detail

struct glorot_uniform {
  using is_initializer = void;
  static constexpr std::string name() { return "glorot_uniform"; }
  template <class T>
  static void fill(T* w, std::size_t count, std::size_t fan_in, std::size_t fan_out, rng& g) {
    detail::fill_uniform(w, count, std::sqrt(6.0 / double(fan_in + fan_out)), g);
  }
};
struct glorot_normal {
  using is_initializer = void;
  static constexpr std::string name() { return "glorot_normal"; }
  template <class T>
  static void fill(T* w, std::size_t count, std::size_t fan_in, std::size_t fan_out, rng& g) {
    detail::fill_truncated_normal(w, count, std::sqrt(2.0 / double(fan_in + fan_out)) / detail::truncation_stddev, g);
  }
};
struct he_uniform {
  using is_initializer = void;
  static constexpr std::string name() { return "he_uniform"; }
  template <class T>
  static void fill(T* w, std::size_t count, std::size_t fan_in, std::size_t, rng& g) {
    detail::fill_uniform(w, count, std::sqrt(6.0 / double(fan_in)), g);
  }
};
struct he_normal {
  using is_initializer = void;
  static constexpr std::string name() { return "he_normal"; }
  template <class T>
  static void fill(T* w, std::size_t count, std::size_t fan_in, std::size_t, rng& g) {
    detail::fill_truncated_normal(w, count, std::sqrt(2.0 / double(fan_in)) / detail::truncation_stddev, g);
  }
};

// orthogonal (Keras 3's Orthogonal, gain 1): a kernel of fan_in rows and fan_out
// columns with orthonormal rows (fan_in < fan_out) or columns: the Q of a QR
// factorization (Gram-Schmidt, R's diagonal positive, as Keras' q * sign(diag r))
// of a (max x min) matrix of standard normal values, transposed when fan_in <
// fan_out. The recurrent layers' default for recurrent_kernel.
struct orthogonal {
  using is_initializer = void;
  static constexpr std::string name() { return "orthogonal"; }
  template <class T>
  static void fill(T* w, std::size_t count, std::size_t fan_in, std::size_t fan_out, rng& g) {
    const std::size_t m = fan_in > fan_out ? fan_in : fan_out, n = fan_in > fan_out ? fan_out : fan_in;
    std::vector<double> q(m * n);  // column-major: column j at q[j * m]
    for (auto& v : q) {
      const double u1 = 1.0 - g.uniform(), u2 = g.uniform();
      v = std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
    }
    for (std::size_t j = 0; j < n; ++j) {
      double* c = q.data() + j * m;
      for (int pass = 0; pass < 2; ++pass)  // twice: orthogonal to rounding
        for (std::size_t k = 0; k < j; ++k) {
          const double* b = q.data() + k * m;
          double d = 0;
          for (std::size_t i = 0; i < m; ++i) d += c[i] * b[i];
          for (std::size_t i = 0; i < m; ++i) c[i] -= d * b[i];
        }
      double s = 0;
      for (std::size_t i = 0; i < m; ++i) s += c[i] * c[i];
      s = 1.0 / std::sqrt(s);
      for (std::size_t i = 0; i < m; ++i) c[i] *= s;
    }
    // w is fan_in x fan_out, row-major: Q (m x n) when fan_in >= fan_out, else Q^T
    for (std::size_t r = 0; r < fan_in && r * fan_out < count; ++r)
      for (std::size_t c = 0; c < fan_out; ++c)
        w[r * fan_out + c] = T(fan_in >= fan_out ? q[c * m + r] : q[r * m + c]);
  }
};

// The layer options after the activation, in either order: a regularizer
// and/or an initializer (dense<N, Act, Opts...>).
// Regularizer comes from regularizers/penalties.hpp, included by the layers.
// no_option (an empty option slot) is a template argument of every dense layer, so it is
// declared in ctnn, not ctnn::detail: a namespace named by a model's type is searched by
// argument-dependent lookup, and detail's function templates must not answer a user's own
// unqualified call with a model argument (tests/device/test_device_routes.cpp has one).
struct no_option {};
namespace detail {
using ctnn::no_option;
template <class X>
inline constexpr bool is_initializer_v = Initializer<X>;
// The initializer among A, B (glorot_uniform when neither is one).
template <class A, class B>
using initializer_of = std::conditional_t<Initializer<A>, A, std::conditional_t<Initializer<B>, B, glorot_uniform>>;
}  // namespace detail

}  // namespace ctnn
