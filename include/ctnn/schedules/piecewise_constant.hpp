// ctnn/schedules/piecewise_constant.hpp — Keras' PiecewiseConstantDecay.
//
// piecewise_constant{boundaries, values}: values[0] while step <= boundaries[0],
// values[i] while boundaries[i-1] < step <= boundaries[i], values.back() after
// the last boundary. Requires values.size() == boundaries.size() + 1,
// boundaries strictly increasing and >= 0, values finite and >= 0
// (std::invalid_argument naming the parameter otherwise).
#pragma once
#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "detail.hpp"

namespace ctnn {

struct piecewise_constant {
  std::vector<std::int64_t> boundaries;
  std::vector<double> values;

  piecewise_constant(std::vector<std::int64_t> b, std::vector<double> v) : boundaries(std::move(b)), values(std::move(v)) {
    if (values.size() != boundaries.size() + 1)
      throw std::invalid_argument("piecewise_constant: values must have one more entry than boundaries, got " +
                                  std::to_string(values.size()) + " values for " + std::to_string(boundaries.size()) +
                                  " boundaries");
    for (std::size_t i = 0; i < boundaries.size(); ++i) {
      if (boundaries[i] < 0 || (i > 0 && boundaries[i] <= boundaries[i - 1]))
        throw std::invalid_argument("piecewise_constant: boundaries must be >= 0 and strictly increasing, got " +
                                    std::to_string(boundaries[i]) + " at index " + std::to_string(i));
    }
    for (double x : values) detail::schedule_non_negative("piecewise_constant", "every value", x);
  }

  double operator()(std::int64_t step) const {
    std::size_t i = 0;
    while (i < boundaries.size() && step > boundaries[i]) ++i;
    return values[i];
  }
  std::string name() const {
    std::string s = "piecewise_constant(";
    for (std::size_t i = 0; i < values.size(); ++i) {
      s += detail::format_number(values[i]);
      if (i < boundaries.size()) s += " |" + std::to_string(boundaries[i]) + "| ";
    }
    return s + ")";
  }
};

}  // namespace ctnn
