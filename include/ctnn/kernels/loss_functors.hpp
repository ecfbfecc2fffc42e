// ctnn/kernels/loss_functors.hpp — the element-wise loss rules, written once.
//
// A pointwise loss rule has value(y, t) (one output's loss) and gradient(y, t)
// (d value / d y), both in double, host and device (CTNN_HOST_DEVICE).
// ops<B>::pointwise_loss(rule, y, t, count, d, scale, divisor, s) runs one over
// count values (core/backend_ops.hpp, has_loss_ops): sum of value / divisor
// into s->loss_sum, d = gradient * scale * s->loss_scale. The formulas are
// Keras 3's (keras/src/losses/losses.py, backend/tensorflow/nn.py), with
// Keras' epsilon 1e-7; where Keras clips an input, the gradient is 0 outside
// the clip range (tf.clip_by_value's). docs/training.md lists the losses.
#pragma once
#include <math.h>

#include "../config.hpp"

namespace ctnn::fn {

inline constexpr double loss_epsilon = 1e-7;  // Keras' backend.epsilon()

// Binary cross-entropy. Logits z: max(z, 0) - z t + log(1 + exp(-|z|))
// (tf.nn.sigmoid_cross_entropy_with_logits), gradient sigmoid(z) - t.
// Probabilities p: c = clip(p, eps, 1 - eps), -(t log c + (1 - t) log(1 - c)).
struct binary_crossentropy_rule {
  bool from_logits = false;
  CTNN_HOST_DEVICE double value(double y, double t) const {
    if (from_logits) return (y > 0 ? y : 0.0) - y * t + ::log1p(::exp(-::fabs(y)));
    const double c = y < loss_epsilon ? loss_epsilon : (y > 1 - loss_epsilon ? 1 - loss_epsilon : y);
    return -(t * ::log(c) + (1 - t) * ::log(1 - c));
  }
  CTNN_HOST_DEVICE double gradient(double y, double t) const {
    if (from_logits) {
      const double e = ::exp(-::fabs(y));  // sigmoid without overflow
      return (y >= 0 ? 1 / (1 + e) : e / (1 + e)) - t;
    }
    if (!(y >= loss_epsilon && y <= 1 - loss_epsilon)) return y == y ? 0.0 : y;  // clipped (NaN stays NaN)
    return -t / y + (1 - t) / (1 - y);
  }
};

// Huber: e = y - t; 0.5 e^2 where |e| <= delta, else delta |e| - 0.5 delta^2.
struct huber_rule {
  double delta = 1.0;
  CTNN_HOST_DEVICE double value(double y, double t) const {
    const double e = y - t, a = ::fabs(e);
    return a <= delta ? 0.5 * e * e : delta * a - 0.5 * delta * delta;
  }
  CTNN_HOST_DEVICE double gradient(double y, double t) const {
    const double e = y - t;
    return ::fabs(e) <= delta ? e : (e > 0 ? delta : -delta);
  }
};

// Kullback-Leibler divergence: tc = clip(t, eps, 1), pc = clip(y, eps, 1), tc log(tc / pc).
struct kl_divergence_rule {
  CTNN_HOST_DEVICE double value(double y, double t) const {
    const double tc = t < loss_epsilon ? loss_epsilon : (t > 1 ? 1.0 : t);
    const double pc = y < loss_epsilon ? loss_epsilon : (y > 1 ? 1.0 : y);
    return tc * ::log(tc / pc);
  }
  CTNN_HOST_DEVICE double gradient(double y, double t) const {
    const double tc = t < loss_epsilon ? loss_epsilon : (t > 1 ? 1.0 : t);
    if (!(y >= loss_epsilon && y <= 1)) return y == y ? 0.0 : y;  // clipped (NaN stays NaN)
    return -tc / y;
  }
};

}  // namespace ctnn::fn
