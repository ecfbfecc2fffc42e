// ctnn/metrics/auc.hpp — Keras' AUC (summation_method "interpolation").
//
// Dense targets, N per sample (any output shape), every output one yes/no
// (positive when the target is not 0), flattened as Keras' multi_label=False.
// num_thresholds (> 1, default 200) thresholds as Keras places them: -1e-7,
// i / (num_thresholds - 1) for 0 < i < num_thresholds - 1, 1 + 1e-7; a
// prediction (sigmoid(y) when from_logits, clipped to [0, 1]) counts as
// positive above a threshold, bucketed in float as Keras' evenly spaced path
// (ceil(p (num_thresholds - 1)) - 1). curve::roc: the trapezoids of recall
// over the false-positive rate; curve::pr: Davis & Goadrich's interpolation of
// precision over recall (Keras' interpolate_pr_auc). Streams over batches
// until reset; std::invalid_argument for num_thresholds < 2. docs/training.md.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <stdexcept>
#include <string>
#include <vector>

#include "../core/output_rule.hpp"
#include "detail.hpp"

namespace ctnn {

struct auc {
  enum class curve_kind : unsigned char { roc, pr };
  static constexpr curve_kind roc = curve_kind::roc, pr = curve_kind::pr;

  std::size_t num_thresholds = 200;
  curve_kind curve = roc;
  bool from_logits = false;
  // Per bucket b (Keras' segment sums): weights of positive / negative outputs whose
  // prediction lies above threshold b and not above threshold b + 1.
  std::vector<double> positives, negatives;

  // Output: any rank, as many values per sample as the targets (core/output_rule.hpp).
  static constexpr accepts_output accepts{"auc", output_rule::any_shape, target_rule::dense,
                                          "sparse_categorical_accuracy"};
  std::string name() const { return accepts.name; }
  void reset() {
    if (num_thresholds < 2)
      throw std::invalid_argument("auc: num_thresholds must be at least 2, not " + std::to_string(num_thresholds));
    positives.assign(num_thresholds, 0.0);
    negatives.assign(num_thresholds, 0.0);
  }
  template <std::size_t N, class T>
  void update(const T* y, const T* targets, std::size_t batch) {
    if (positives.size() != num_thresholds) reset();
    const float steps = float(num_thresholds - 1);
    for (std::size_t i = 0; i < batch * N; ++i) {
      double p = double(y[i]);
      if (from_logits) p = 1.0 / (1.0 + std::exp(-p));
      p = p < 0 ? 0.0 : (p > 1 ? 1.0 : p);  // NaN: bucket 0 below
      const float b = std::ceil(float(p) * steps) - 1.0f;
      const std::size_t bucket = b > 0 ? std::size_t(b) : 0;
      (double(targets[i]) != 0.0 ? positives : negatives)[bucket] += 1.0;
    }
  }
  // tp[i], fp[i] = outputs above threshold i (suffix sums of the buckets); fn, tn the rest.
  double result() const {
    const std::size_t n = positives.size();
    if (n < 2) return 0.0;
    std::vector<double> tp(n), fp(n);
    double sp = 0, sn = 0;
    for (std::size_t i = n; i-- > 0;) {
      tp[i] = sp += positives[i];
      fp[i] = sn += negatives[i];
    }
    const double all_pos = tp[0], all_neg = fp[0];
    using detail::divide_no_nan;
    double area = 0;
    if (curve == pr) {  // Keras' interpolate_pr_auc
      for (std::size_t i = 0; i + 1 < n; ++i) {
        const double dtp = tp[i] - tp[i + 1], pa = tp[i] + fp[i], pb = tp[i + 1] + fp[i + 1];
        const double slope = divide_no_nan(dtp, std::max(pa - pb, 0.0));
        const double intercept = tp[i + 1] - slope * pb;
        const double ratio = pa > 0 && pb > 0 ? divide_no_nan(pa, std::max(pb, 0.0)) : 1.0;
        area += divide_no_nan(slope * (dtp + intercept * std::log(ratio)), std::max(all_pos, 0.0));
      }
      return area;
    }
    for (std::size_t i = 0; i + 1 < n; ++i) {  // trapezoids of recall over the false-positive rate
      const double x0 = divide_no_nan(fp[i], all_neg), x1 = divide_no_nan(fp[i + 1], all_neg);
      const double y0 = divide_no_nan(tp[i], all_pos), y1 = divide_no_nan(tp[i + 1], all_pos);
      area += (x0 - x1) * (y0 + y1) / 2;
    }
    return area;
  }
};

}  // namespace ctnn
