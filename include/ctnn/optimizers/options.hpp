// ctnn/optimizers/options.hpp — Keras 3's optimizer options, for any optimizer.
//
// with_options{adam{1e-3}, {.clipnorm = 1.0, .weight_decay = 0.004,
//   .gradient_accumulation_steps = 4, .use_ema = true}} is an adam that, in
// the training step's phases (train/step.hpp), as Keras 3's base optimizer:
//  transform_gradients:
//  1. accumulates: with N = gradient_accumulation_steps > 1, N - 1 steps only
//     add their gradient up (no update); the N-th uses the mean of the N;
//  2. on an update step, clips: clipnorm (each variable's L2 norm: every
//     parameter buffer a layer declares, e.g. a kernel and its bias
//     separately), global_clipnorm (all gradients' joint norm) or clipvalue
//     (elementwise); at most one of the three (std::invalid_argument otherwise);
//  3. on an update step, decays the weights: w -= w * weight_decay * lr
//     (decoupled, before the update);
//  update: the optimizer's own update;
//  after_update:
//  4. keeps an exponential moving average of the weights (use_ema):
//     ema = m * ema + (1 - m) * w with m = ema_momentum (0 while iterations
//     is 0); w = ema when (iterations + 1) % ema_overwrite_frequency == 0
//     (0: never); at the end of fit (finalize) w = ema, as Keras'
//     finalize_variable_values.
// Counts, as Keras 3: the model's optimizer_state().iterations counts applied
// updates (Adam's bias correction, the EMA's first step and overwrite period
// read it); .steps counts every step, micro-steps included (the learning-rate
// schedule, hence weight decay, reads it under accumulation; with
// count_micro_steps = false it reads iterations too and the EMA moves on
// updates only, so N accumulated steps behave as one larger batch).
// docs/training.md, "Which count each consumer reads", has the table.
// It adds two slot arrays (the accumulator, the average) to the optimizer's.
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
  static constexpr std::size_t inner_slots = O::slots_per_parameter;
  static constexpr std::size_t slots_per_parameter = O::slots_per_parameter + 2;  // + accumulator, average
  optimizer_options options;

  with_options(O inner, optimizer_options opts) : O(std::move(inner)), options(std::move(opts)) { options.validate(); }

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
      T* acc = s.slots.data() + inner_slots * n;
      const std::int64_t phase = s.micro_step % N;
      if (phase < N - 1) {
        X::accumulate(acc, g, n);
        s.apply_update = false;
        return;
      }
      X::accumulated_mean(g, acc, n, T(1) / T(N));
    }
    if (options.clipnorm) {
      s.model.for_each_variable([&](const variable_ref& v) {
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
    T* avg = s.slots.data() + (inner_slots + 1) * n;
    X::moving_average(avg, w, n, s.iteration == 0 ? T(0) : T(options.ema_momentum));
    if (options.ema_overwrite_frequency > 0 && (s.iteration + 1) % options.ema_overwrite_frequency == 0)
      X::copy(avg, w, n);
  }

  // End of fit: the weights become their moving average (use_ema).
  template <class M>
  void finalize(M& m) const {
    if (!options.use_ema || m.optimizer_iterations() == 0) return;
    auto w = m.parameters();
    const auto* avg = m.optimizer_slots().data() + (inner_slots + 1) * w.size();
    ops<typename M::backend>::copy(avg, w.data(), w.size());
  }
};

template <class O>
with_options(O, optimizer_options) -> with_options<O>;

}  // namespace ctnn
