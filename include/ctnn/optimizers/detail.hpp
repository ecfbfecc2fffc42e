// ctnn/optimizers/detail.hpp — what the optimizers share: hyperparameter checks.
#pragma once
#include <cmath>
#include <cstddef>
#include <stdexcept>
#include <string>

#include "../core/format.hpp"
#include "../core/separate.hpp"

namespace ctnn::detail {

// Throws std::invalid_argument("<who>: <what> must be in [lo, hi), got v").
// The messages are built out of line (once per program, not at every check).
[[noreturn, gnu::cold, gnu::noinline]] CTNN_DECL void throw_out_of_range(const char* who, const char* what, double v,
                                                                     double lo, double hi, bool hi_inclusive)
#if CTNN_DEFINITIONS
{
  throw std::invalid_argument(std::string(who) + ": " + what + " must be in [" + format_number(lo) + ", " +
                              format_number(hi) + (hi_inclusive ? "]" : ")") + ", got " + format_number(v));
}
#else
;
#endif
[[noreturn, gnu::cold, gnu::noinline]] CTNN_DECL void throw_not_positive(const char* who, const char* what, double v)
#if CTNN_DEFINITIONS
{
  throw std::invalid_argument(std::string(who) + ": " + what + " must be finite and > 0, got " + format_number(v));
}
#else
;
#endif
inline void require_range(const char* who, const char* what, double v, double lo, double hi, bool hi_inclusive = false) {
  const bool ok = std::isfinite(v) && v >= lo && (hi_inclusive ? v <= hi : v < hi);
  if (!ok) throw_out_of_range(who, what, v, lo, hi, hi_inclusive);
}
inline void require_positive(const char* who, const char* what, double v) {
  if (!(std::isfinite(v) && v > 0)) throw_not_positive(who, what, v);
}

}  // namespace ctnn::detail
