// ctnn/schedules/detail.hpp — hyperparameter checks shared by the schedules.
//
// Each throws std::invalid_argument("<schedule>: <parameter> must be ..., got v").
#pragma once
#include <cmath>
#include <cstdint>
#include <stdexcept>
#include <string>

#include "../core/format.hpp"

namespace ctnn::detail {

inline void schedule_positive(const char* who, const char* what, double v) {
  if (!(std::isfinite(v) && v > 0))
    throw std::invalid_argument(std::string(who) + ": " + what + " must be finite and > 0, got " + format_number(v));
}
inline void schedule_non_negative(const char* who, const char* what, double v) {
  if (!(std::isfinite(v) && v >= 0))
    throw std::invalid_argument(std::string(who) + ": " + what + " must be finite and >= 0, got " + format_number(v));
}
inline void schedule_steps(const char* who, const char* what, std::int64_t v, bool zero_ok = false) {
  if (zero_ok ? v < 0 : v <= 0)
    throw std::invalid_argument(std::string(who) + ": " + what + (zero_ok ? " must be >= 0, got " : " must be > 0, got ") +
                                std::to_string(v));
}

}  // namespace ctnn::detail
