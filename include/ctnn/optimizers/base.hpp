// ctnn/optimizers/base.hpp — optimizer_base: what every optimizer shares.
//
// An optimizer derives from optimizer_base<Schedule> and adds only its own:
// its hyperparameters (checked in its constructor with detail::require_*),
// config() (them by name, as optimizer_config), name(), slots_per_parameter() (how many arrays of n values this object
// uses: Adam 2, 3 with amsgrad) with max_slots_per_parameter its constexpr
// bound (for a constexpr memory_plan), and update<B>(args), which builds its
// rule (a functor of kernels/functors.hpp, or its own over a value type V)
// and hands it to apply<B>: ops<B>::map(rule, n, w, g, slot k...) on every
// backend. The base holds the learning-rate schedule, a Schedule (a callable of the step without
// name() is refused at compile time; named_schedule names one): learning_rate(it) is
// its rate at update it (the model's training state may scale it:
// reduce_lr_on_plateau); and init_slots (none: the model zero-fills slots).
// Keras 3's common options (clipping, weight decay, accumulation, EMA) wrap
// any optimizer: optimizers/options.hpp. docs/design.md, "Add an optimizer".
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "../backends/cpu/ops.hpp"
#include "../core/compile_message.hpp"
#include "../core/concepts.hpp"
#include "../schedules/constant_schedule.hpp"
#include "../schedules/named_schedule.hpp"
#include "detail.hpp"
#include "prepared.hpp"

namespace ctnn {

// An optimizer's own hyperparameters as named numbers (true/false as 1/0), Keras's get_config
// names: its config(), which a model file's training configuration keeps (train/model_file.hpp).
using optimizer_config = std::vector<std::pair<std::string, double>>;

namespace detail {
template <class S>
concept step_schedule = requires(const S& s, std::int64_t step) {
  { s(step) } -> std::convertible_to<double>;
};
// "optimizer: its template argument is the learning-rate schedule; double is not one (...)"
template <class S>
constexpr diag::message not_a_schedule_text() {
  diag::message m;
  m << "optimizer: its template argument is the learning-rate schedule; ";
  m.type<S>() << " is not one (a rate from a step: constant_schedule, exponential_decay, ...)";
  return m;
}
// "optimizer: the learning-rate schedule <S> has no name() (...)": a callable of the step alone
// (a lambda) is a rate but not a Schedule, whose name() warmup's and the docs' names read; Keras
// names a callable learning rate by its function's name (get_config), which a lambda does not have.
template <class S>
constexpr diag::message unnamed_schedule_text() {
  diag::message m;
  m << "optimizer: the learning-rate schedule ";
  m.type<S>() << " has no name() (a Schedule is double operator()(std::int64_t) const and std::string name() const; "
                 "name a lambda with named_schedule{name, f})";
  return m;
}

}  // namespace detail

template <class S = constant_schedule>
struct optimizer_base {
  static_assert(diag::require<detail::step_schedule<S>, &detail::not_a_schedule_text<S>>());
  static_assert(diag::require<!detail::step_schedule<S> || has_schedule_name<S>, &detail::unnamed_schedule_text<S>>());
  using schedule_type = S;
  S schedule;

  explicit optimizer_base(S lr) : schedule(std::move(lr)) {}

  double learning_rate(std::int64_t it) const { return double(schedule(it)); }
  // slots: slots_per_parameter() arrays of n values, zero-filled by the model.
  template <class T>
  void init_slots(T*, std::size_t) const {}

 protected:
  // One update through ops<B>::map: rule(w, g, slot k...) for slot indices k,
  // slot k of parameter i at a.slots[k * a.stride() + i]; true when every new w is finite.
  template <class B, class T, class F, class... K>
  static bool apply(const F& rule, const update_args<T>& a, K... k) {
    return ops<B>::map(rule, a.n, a.w, a.g, (a.slots + std::size_t(k) * a.stride())...);
  }
};

}  // namespace ctnn
