// ctnn/train/reduce_lr_on_plateau.hpp — Keras' ReduceLROnPlateau.
//
// reduce_lr_on_plateau{.monitor = "val_loss", .factor = 0.1, .patience = 10,
//   .mode = automatic, .min_delta = 1e-4, .cooldown = 0, .min_lr = 0}.
// `best` starts at the worst value (+inf; -inf when maximizing). At each epoch
// end: in cooldown, count it down and reset wait; an improvement on best by more
// than min_delta (plateau_monitor.hpp) resets wait; otherwise (not in cooldown)
// wait += 1 and when wait >= patience the rate becomes max(lr * factor, min_lr)
// if lr > min_lr, then cooldown starts and wait = 0. The rate is changed through
// the context's scale_learning_rate (a scale kept with the model's optimizer
// state, which multiplies the schedule's value from then on). Requires factor in
// (0, 1), patience, cooldown, min_delta, min_lr >= 0 (checked at on_train_begin).
// Docs: docs/training.md, "Callbacks".
#pragma once
#include <algorithm>
#include <cstddef>
#include <optional>
#include <ostream>
#include <stdexcept>
#include <string>
#include <vector>

#include "../core/format.hpp"
#include "monitor.hpp"
#include "plateau_monitor.hpp"

namespace ctnn {

struct reduce_lr_on_plateau {
  std::string monitor = "val_loss";
  double factor = 0.1;
  int patience = 10;
  monitor_mode mode = monitor_mode::automatic;
  double min_delta = 1e-4;
  int cooldown = 0;
  double min_lr = 0.0;
  std::ostream* verbose = nullptr;  // a message per reduction when set

  // State, reset by on_train_begin.
  std::optional<double> best;  // +inf (-inf when maximizing) until a value improves on it
  int wait = 0;
  int cooldown_counter = 0;
  std::vector<std::size_t> reduced_at;  // 0-based epochs whose end reduced the rate

  void validate() const {
    auto bad = [](const std::string& what) { throw std::invalid_argument("reduce_lr_on_plateau: " + what); };
    if (!(factor > 0 && factor < 1)) bad("factor must be in (0, 1), got " + detail::format_number(factor));
    if (patience < 0) bad("patience must be >= 0, got " + std::to_string(patience));
    if (cooldown < 0) bad("cooldown must be >= 0, got " + std::to_string(cooldown));
    if (!(min_delta >= 0)) bad("min_delta must be >= 0, got " + detail::format_number(min_delta));
    if (!(min_lr >= 0)) bad("min_lr must be >= 0, got " + detail::format_number(min_lr));
  }

  template <class Ctx>
  void on_train_begin(Ctx&) {
    validate();
    best = plateau().worst();
    wait = 0;
    cooldown_counter = 0;
    reduced_at.clear();
  }

  template <class Ctx>
  void on_epoch_end(Ctx& ctx) {
    const double current = detail::monitored(ctx.epoch_logs, monitor, "reduce_lr_on_plateau");
    if (cooldown_counter > 0) {
      --cooldown_counter;
      wait = 0;
    }
    const plateau_monitor rule = plateau();
    const bool counting = cooldown_counter == 0;
    if (!rule.observe(current, best, wait, counting) && counting && rule.exhausted(wait)) {
      const double old_lr = ctx.learning_rate();
      if (float(old_lr) > float(min_lr)) {  // compared in float, as Keras compares its float32 variable
        const double new_lr = std::max(old_lr * factor, min_lr);
        ctx.scale_learning_rate(new_lr / old_lr);
        reduced_at.push_back(ctx.epoch);
        if (verbose)
          *verbose << "Epoch " << ctx.epoch + 1 << ": reduce_lr_on_plateau reducing learning rate to "
                   << detail::format_number(new_lr) << ".\n";
        cooldown_counter = cooldown;
        wait = 0;
      }
    }
  }

 private:
  plateau_monitor plateau() const { return {monitor, mode, min_delta, patience, {}}; }
};

}  // namespace ctnn
