// ctnn/schedules/constant_schedule.hpp — a fixed learning rate.
//
// constant_schedule{0.001}: the rate at every step. Implicitly built from a number, so
// adam{0.01} means adam<constant_schedule>{constant_schedule{0.01}}. The value must be finite
// and > 0 (std::invalid_argument otherwise).
#pragma once
#include <cmath>
#include <cstdint>
#include <stdexcept>
#include <string>

#include "../core/format.hpp"

namespace ctnn {

struct constant_schedule {
  double value = 0.001;
  constexpr constant_schedule() = default;
  constant_schedule(double v) : value(v) {  // NOLINT: implicit on purpose
    if (!(std::isfinite(v) && v > 0))
      throw std::invalid_argument("constant_schedule: the learning rate must be finite and > 0, got " +
                                  detail::format_number(v));
  }
  double operator()(std::int64_t) const { return value; }
  std::string name() const { return detail::format_number(value); }
};

}  // namespace ctnn
