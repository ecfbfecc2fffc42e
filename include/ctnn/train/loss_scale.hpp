// ctnn/train/loss_scale.hpp — loss scaling, as Keras 3's LossScaleOptimizer.
//
// loss_scale is a step hook (train/step.hpp) passed to fit as an extra argument:
//   scale_loss           dL/dy is multiplied by the current scale (small gradients survive
//                        16-bit deltas);
//   transform_gradients  all gradients finite: divided by the scale (before clipping and
//                        accumulation); otherwise the step is skipped (no weight, slot or
//                        count changes) and a dynamic scale halves.
// Dynamic (default, Keras' values): 2^15, doubled after dynamic_growth_steps (2000) finite
// steps, halved on each skip; numeric_error after max_consecutive_skips skips in a row.
// fixed(s) keeps s and raises numeric_error on a non-finite gradient. A NaN loss (NaN data)
// is not skipped: fit raises "the loss became NaN" as without loss scaling.
// fit records "loss_scale" and "skipped_steps" per epoch. docs/mixed-precision.md has the rest.
#pragma once
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>

#include "../core/errors.hpp"
#include "history.hpp"
#include "numerics.hpp"
#include "step.hpp"

namespace ctnn {

struct loss_scale_options {
  double initial_scale = 32768.0;       // Keras: 2 ** 15
  std::int64_t dynamic_growth_steps = 2000;
  bool dynamic = true;
  std::int64_t max_consecutive_skips = 40;
  void validate() const {
    if (!(initial_scale > 0) || !std::isfinite(initial_scale))
      throw std::invalid_argument("loss_scale: initial_scale must be finite and > 0, got " + std::to_string(initial_scale));
    if (dynamic_growth_steps < 1)
      throw std::invalid_argument("loss_scale: dynamic_growth_steps must be >= 1, got " +
                                  std::to_string(dynamic_growth_steps));
    if (max_consecutive_skips < 1)
      throw std::invalid_argument("loss_scale: max_consecutive_skips must be >= 1, got " +
                                  std::to_string(max_consecutive_skips));
  }
};

class loss_scale {
 public:
  loss_scale() : loss_scale(loss_scale_options{}) {}
  explicit loss_scale(loss_scale_options o) : o_(o), scale_(o.initial_scale) { o_.validate(); }
  static loss_scale fixed(double scale) {
    loss_scale_options o;
    o.initial_scale = scale;
    o.dynamic = false;
    return loss_scale(o);
  }

  double scale() const noexcept { return scale_; }
  bool dynamic() const noexcept { return o_.dynamic; }
  const loss_scale_options& options() const noexcept { return o_; }
  std::int64_t skipped_steps() const noexcept { return skipped_; }  // since construction
  std::int64_t good_steps() const noexcept { return good_; }        // finite steps since the last change of scale

  template <class M>
  void scale_loss(step_state<M>& s) const {
    s.loss_scale = scale_;
  }

  template <class M>
  void transform_gradients(step_state<M>& s) {
    using O = ops<typename M::backend>;
    auto g = s.gradients;
    const double used = scale_;
    // Divided by the scale and checked in one pass (ops<B>::unscale); a
    // skipped step's gradients are left divided too, unused (the next
    // backward overwrites them).
    const bool finite = used != 1.0 ? O::unscale(g.data(), g.size(), 1.0 / used) : O::all_finite(g.data(), g.size());
    // A NaN or infinity in the batch's inputs (one a relu hid from the loss)
    // is the data's, not an overflow: the step is not skipped, the update
    // makes the parameters non-finite and fit stops with its error, as
    // without loss scaling.
    const bool data = !finite && s.inputs &&
                      detail::first_non_finite(s.inputs, s.batch * M::input_size) < s.batch * M::input_size;
    if (!record(finite, data, s.epoch, s.step)) s.skip_step = true;
  }

  // The decision of transform_gradients once it is known whether every
  // gradient is finite (a device backend checks them where they live;
  // ops<B>::unscale): false when the step is to be skipped (the scale halved),
  // true when it goes ahead (the gradients are to be divided by the scale in
  // force before this call). non_finite_data: the batch's inputs hold a NaN
  // or infinity (the step goes ahead; see transform_gradients). Throws
  // numeric_error as described at the top.
  bool record(bool finite, bool non_finite_data, std::size_t epoch, std::size_t step) {
    if (!finite) {
      if (non_finite_data) return true;
      if (!o_.dynamic)
        throw numeric_error("loss_scale: a gradient became non-finite at epoch " + std::to_string(epoch + 1) +
                            ", step " + std::to_string(step + 1) + " under the fixed loss scale " +
                            std::to_string(scale_) + "; lower it or use the dynamic scale");
      ++skipped_;
      ++epoch_skipped_;
      if (++consecutive_ >= o_.max_consecutive_skips)
        throw numeric_error("loss_scale: the gradients stayed non-finite for " + std::to_string(consecutive_) +
                            " steps in a row (epoch " + std::to_string(epoch + 1) + ", step " +
                            std::to_string(step + 1) +
                            "): not an overflow of the scaled loss; the model or the data produce NaN or infinity");
      scale_ /= 2;
      good_ = 0;
      return false;
    }
    consecutive_ = 0;
    if (o_.dynamic && ++good_ >= o_.dynamic_growth_steps) {
      scale_ *= 2;
      good_ = 0;
    }
    return true;
  }

  // fit calls it at each epoch's end: the scale and the steps skipped in that epoch (CTNN_LAZY,
  // core/separate.hpp: header-only compiled only where a program fits with loss scaling).
  CTNN_LAZY void log_epoch(logs& l);

 private:
  loss_scale_options o_;
  double scale_;
  std::int64_t good_ = 0, skipped_ = 0, epoch_skipped_ = 0, consecutive_ = 0;
};

#if CTNN_DEFINITIONS
CTNN_LAZY_DEFINITION CTNN_DECL void loss_scale::log_epoch(logs& l) {
  l.set("loss_scale", scale_);
  l.set("skipped_steps", double(epoch_skipped_));
  epoch_skipped_ = 0;
}
#endif

}  // namespace ctnn
