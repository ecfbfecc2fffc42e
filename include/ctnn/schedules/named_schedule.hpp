// ctnn/schedules/named_schedule.hpp — a callable of the step, named: a Schedule.
//
// named_schedule{"halving", [](std::int64_t s) { return 0.01 * std::pow(0.5, double(s / 1000)); }}:
// the rate at step s is f(s), name() the given name. Keras 3 takes a callable learning rate and
// names it in get_config by its function's name; a C++ lambda has no name, so an optimizer refuses
// a callable without name() at compile time (optimizers/base.hpp) and this wrapper gives it one.
// Requires f(std::int64_t) convertible to double (a compile error otherwise) and a non-empty name
// (std::invalid_argument otherwise).
#pragma once
#include <concepts>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <utility>

namespace ctnn {

template <class F>
  requires std::copy_constructible<F> && requires(const F& f, std::int64_t step) {
    { f(step) } -> std::convertible_to<double>;
  }
struct named_schedule {
  std::string label;
  F rate;

  named_schedule(std::string name, F f) : label(std::move(name)), rate(std::move(f)) {
    if (label.empty()) throw std::invalid_argument("named_schedule: the name must not be empty");
  }
  double operator()(std::int64_t step) const { return double(rate(step)); }
  std::string name() const { return label; }
};
template <class F>
named_schedule(std::string, F) -> named_schedule<F>;
template <class F>
named_schedule(const char*, F) -> named_schedule<F>;

}  // namespace ctnn
