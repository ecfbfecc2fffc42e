// ctnn/optimizers/detail.hpp — hyperparameter checks shared by the optimizers.
#pragma once
#include <cmath>
#include <stdexcept>
#include <string>

#include "../core/format.hpp"

namespace ctnn::detail {

// Throws std::invalid_argument("<who>: <what> must be in [lo, hi), got v").
inline void require_range(const char* who, const char* what, double v, double lo, double hi, bool hi_inclusive = false) {
  const bool ok = std::isfinite(v) && v >= lo && (hi_inclusive ? v <= hi : v < hi);
  if (!ok)
    throw std::invalid_argument(std::string(who) + ": " + what + " must be in [" + format_number(lo) + ", " +
                                format_number(hi) + (hi_inclusive ? "]" : ")") + ", got " + format_number(v));
}
inline void require_positive(const char* who, const char* what, double v) {
  if (!(std::isfinite(v) && v > 0))
    throw std::invalid_argument(std::string(who) + ": " + what + " must be finite and > 0, got " + format_number(v));
}

}  // namespace ctnn::detail
