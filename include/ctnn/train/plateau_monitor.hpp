// ctnn/train/plateau_monitor.hpp — the plateau rule early_stopping and
// reduce_lr_on_plateau share: is a monitored value an improvement, and how long
// has it not improved.
//
// plateau_monitor{monitor, mode, min_delta, patience, baseline} (the callback's
// own fields; it holds no state): maximizes() follows monitor_mode (automatic:
// maximize when the name contains "acc"). improves(current, reference): true when
// there is no reference, else current - |min_delta| > reference when maximizing,
// current + |min_delta| < reference when minimizing (Keras 3's form). observe(current,
// best, wait, counting): an improvement on best becomes best; wait goes to 0 when
// current improves on best and also on the baseline (when there is one), else up by
// one while counting. Returns whether it improved on best. exhausted(wait): wait >=
// patience. worst(): the value every other value improves on (+inf when minimizing,
// -inf when maximizing; Keras' ReduceLROnPlateau starts `best` there).
// The state (best, wait) stays in the callback, where users read it.
#pragma once
#include <cmath>
#include <limits>
#include <optional>
#include <string_view>

#include "monitor.hpp"

namespace ctnn {

struct plateau_monitor {
  std::string_view monitor;
  monitor_mode mode = monitor_mode::automatic;
  double min_delta = 0.0;  // its magnitude is used
  int patience = 0;
  std::optional<double> baseline{};  // none: every improvement resets the wait

  bool maximizes() const { return detail::maximizes(monitor, mode); }

  double worst() const {
    return maximizes() ? -std::numeric_limits<double>::infinity() : std::numeric_limits<double>::infinity();
  }

  bool improves(double current, const std::optional<double>& reference) const {
    if (!reference) return true;
    const double d = std::abs(min_delta);
    return maximizes() ? current - d > *reference : current + d < *reference;
  }

  bool observe(double current, std::optional<double>& best, int& wait, bool counting = true) const {
    const bool improved = improves(current, best);
    if (improved) best = current;
    if (improved && (!baseline || improves(current, baseline))) wait = 0;
    else if (counting) ++wait;
    return improved;
  }

  bool exhausted(int wait) const { return wait >= patience; }
};

}  // namespace ctnn
