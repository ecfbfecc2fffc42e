// ctnn/optimizers/options.hpp — Keras 3's optimizer options, for any optimizer.
//
// with_options{adam{1e-3}, optimizer_options{.clipnorm = 1.0, .weight_decay =
//   0.004, .gradient_accumulation_steps = 4, .use_ema = true}} is that adam with
// Keras 3's base-optimizer options, run in the training step's phases
// (train/step.hpp) through ops<B>:
//  transform_gradients: accumulate N - 1 micro-steps (the N-th uses their
//    mean), then clip (clipnorm per parameter buffer, global_clipnorm or
//    clipvalue: at most one) and decay (w -= w * weight_decay * lr);
//  after_update: the weights' moving average (use_ema), written over the
//    weights every ema_overwrite_frequency updates and by finalize at the
//    end of fit.
// Name the type: a misspelled field is then the first error ("optimizer_options
// has no ... member named"); in a bare {.field = ...} it is a deduction failure of
// with_options that never names the field (g++ 12, clang 19; tests/compile_fail).
// optimizer_options::validate throws std::invalid_argument naming a bad
// option. Slots: the optimizer's slots_per_parameter() plus two (the
// accumulator, the average), after the optimizer's own. Which count (steps or
// iterations) each consumer reads: docs/training.md, "Which count each
// consumer reads"; the options in full: docs/training.md, "Optimizer options".
#pragma once
#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <tuple>
#include <utility>

#include "../core/backend.hpp"
#include "../core/concepts.hpp"
#include "../core/plan.hpp"
#include "../core/format.hpp"

namespace ctnn {

struct optimizer_options {
  std::optional<double> clipnorm;         // per-variable norm limit
  std::optional<double> clipvalue;        // elementwise limit
  std::optional<double> global_clipnorm;  // joint norm limit
  std::optional<double> weight_decay;     // decoupled: w -= w * weight_decay * lr
  int gradient_accumulation_steps = 1;    // 1: every call updates
  bool use_ema = false;
  double ema_momentum = 0.99;
  int ema_overwrite_frequency = 0;  // 0: only at the end of fit
  bool count_micro_steps = true;    // Keras 3: the schedule reads the step count; false: the update count

  void validate() const {
    auto bad = [](const std::string& what) { throw std::invalid_argument("optimizer_options: " + what); };
    const int clips = int(clipnorm.has_value()) + int(clipvalue.has_value()) + int(global_clipnorm.has_value());
    if (clips > 1) bad("only one of clipnorm, clipvalue and global_clipnorm may be set, got " + std::to_string(clips));
    auto positive = [&](const char* name, const std::optional<double>& v) {
      if (v && !(std::isfinite(*v) && *v > 0)) bad(std::string(name) + " must be finite and > 0, got " + detail::format_number(*v));
    };
    positive("clipnorm", clipnorm);
    positive("clipvalue", clipvalue);
    positive("global_clipnorm", global_clipnorm);
    if (weight_decay && !(std::isfinite(*weight_decay) && *weight_decay >= 0))
      bad("weight_decay must be finite and >= 0, got " + detail::format_number(*weight_decay));
    if (gradient_accumulation_steps < 1)
      bad("gradient_accumulation_steps must be >= 1, got " + std::to_string(gradient_accumulation_steps));
    if (!(ema_momentum >= 0 && ema_momentum <= 1))
      bad("ema_momentum must be in [0, 1], got " + detail::format_number(ema_momentum));
    if (ema_overwrite_frequency < 0)
      bad("ema_overwrite_frequency must be >= 0, got " + std::to_string(ema_overwrite_frequency));
  }
};

template <Optimizer O>
struct with_options : O {
  static constexpr std::size_t max_slots_per_parameter = O::max_slots_per_parameter + 2;
  optimizer_options options;

  with_options(O inner, optimizer_options opts) : O(std::move(inner)), options(std::move(opts)) { options.validate(); }

  // The optimizer's own slots come first; then the accumulator and the average.
  std::size_t inner_slots() const noexcept { return O::slots_per_parameter(); }
  std::size_t slots_per_parameter() const noexcept { return inner_slots() + 2; }

  // O's config() and these options (the optional ones when set), by Keras's names.
  auto config() const
    requires requires(const O& o) { o.config(); }
  {
    auto c = O::config();
    const std::pair<const char*, const std::optional<double>*> optional[] = {
        {"clipnorm", &options.clipnorm},
        {"clipvalue", &options.clipvalue},
        {"global_clipnorm", &options.global_clipnorm},
        {"weight_decay", &options.weight_decay}};
    for (const auto& [key, value] : optional)
      if (value->has_value()) c.emplace_back(key, **value);
    c.emplace_back("gradient_accumulation_steps", double(options.gradient_accumulation_steps));
    c.emplace_back("use_ema", double(options.use_ema));
    if (options.use_ema) {
      c.emplace_back("ema_momentum", options.ema_momentum);
      c.emplace_back("ema_overwrite_frequency", double(options.ema_overwrite_frequency));
    }
    c.emplace_back("count_micro_steps", double(options.count_micro_steps));
    return c;
  }

  // Phase 4 of the step: accumulate, clip, decay.
  template <class State>
  void transform_gradients(State& s) const {
    using T = typename std::remove_cvref_t<decltype(s.gradients)>::value_type;
    using X = ops<typename std::remove_cvref_t<decltype(s.model)>::backend>;
    T* g = s.gradients.data();
    T* w = s.parameters.data();
    const std::size_t n = s.gradients.size();
    const int N = options.gradient_accumulation_steps;
    if (N > 1) {
      T* acc = s.slots.data() + inner_slots() * n;
      const std::int64_t phase = s.micro_step % N;
      if (phase < N - 1) {
        X::accumulate(acc, g, n);
        s.apply_update = false;
        return;
      }
      X::accumulated_mean(g, acc, n, T(1) / T(N));
    }
    if (options.clipnorm) {
      s.model.for_each_variable_in_memory([&](const variable_ref& v) {  // offsets only: no host copy
        if (v.kind == role::parameter) X::clip_by_norm(g + v.offset / sizeof(T), v.extent, *options.clipnorm);
      });
    } else if (options.global_clipnorm) {
      X::clip_by_norm(g, n, *options.global_clipnorm);
    } else if (options.clipvalue) {
      X::clip_value(g, n, T(*options.clipvalue));
    }
    // w -= w k, as w *= 1 - k
    if (options.weight_decay) X::scale(w, n, T(1) - T(*options.weight_decay * s.learning_rate));
  }

  // Whether this step's transform_gradients can run one layer at a time (the step's per-layer
  // update, train/step.hpp): not with gradient accumulation (its steps that only accumulate, and
  // the mean first) nor with global_clipnorm (the norm of every gradient); clipnorm (per
  // variable), clipvalue and weight_decay act on each value or variable alone.
  bool per_layer_transform() const noexcept {
    return options.gradient_accumulation_steps == 1 && !options.global_clipnorm;
  }
  // transform_gradients on the part [lo, hi) of the regions (whole variables; per_layer_transform()):
  // the same arithmetic on each value as over the whole regions.
  template <class State>
  void transform_range(State& s, std::size_t lo, std::size_t hi) const {
    using T = typename std::remove_cvref_t<decltype(s.gradients)>::value_type;
    using X = ops<typename std::remove_cvref_t<decltype(s.model)>::backend>;
    T* g = s.gradients.data();
    T* w = s.parameters.data();
    if (options.clipnorm) {
      s.model.for_each_variable_in_memory([&](const variable_ref& v) {  // offsets only: no host copy
        const std::size_t at = v.offset / sizeof(T);
        if (v.kind == role::parameter && at >= lo && at < hi) X::clip_by_norm(g + at, v.extent, *options.clipnorm);
      });
    } else if (options.clipvalue) {
      X::clip_value(g + lo, hi - lo, T(*options.clipvalue));
    }
    if (options.weight_decay) X::scale(w + lo, hi - lo, T(1) - T(*options.weight_decay * s.learning_rate));
  }

  // The count the learning-rate schedule reads (train/model.hpp's detail::schedule_step).
  template <class State>  // optimizer_state
  std::int64_t schedule_step(const State& os) const noexcept {
    return options.gradient_accumulation_steps > 1 && options.count_micro_steps ? os.steps : os.iterations;
  }

  // Phase 6: the moving average of the weights, on every step (Keras 3), or
  // on updates only with count_micro_steps = false; s.iteration is the
  // number of updates applied before this step.
  template <class State>
  void after_update(State& s) const {
    if (!options.use_ema || !s.count_iteration || (!s.apply_update && !options.count_micro_steps)) return;
    using T = typename std::remove_cvref_t<decltype(s.parameters)>::value_type;
    using X = ops<typename std::remove_cvref_t<decltype(s.model)>::backend>;
    const std::size_t n = s.parameters.size();
    T* w = s.parameters.data();
    T* avg = s.slots.data() + (inner_slots() + 1) * n;
    X::moving_average(avg, w, n, s.iteration == 0 ? T(0) : T(options.ema_momentum));
    if (options.ema_overwrite_frequency > 0 && (s.iteration + 1) % options.ema_overwrite_frequency == 0)
      X::copy(avg, w, n);
  }

  // End of fit: the weights become their moving average (use_ema).
  template <class M>
  void finalize(M& m) const {
    if (!options.use_ema || m.optimizer_iterations() == 0) return;
    auto w = m.parameters();
    const auto* avg = m.optimizer_slots().data() + (inner_slots() + 1) * w.size();
    ops<typename M::backend>::copy(avg, w.data(), w.size());
  }
};

template <class O>
with_options(O, optimizer_options) -> with_options<O>;

}  // namespace ctnn
