// ctnn/train/early_stopping.hpp — Keras 3's EarlyStopping.
//
// early_stopping{.monitor = "val_loss", .min_delta = 0, .patience = 0,
//   .mode = automatic, .baseline = none, .restore_best_weights = false,
//   .start_from_epoch = 0}. At each epoch end from start_from_epoch on:
// an improvement on best by more than |min_delta| (plateau_monitor.hpp; the
// first value always is one) records best (and copies the weights when
// restoring) and resets wait only if it also improves on baseline, else wait
// += 1; without one, when wait >= patience and epoch > 0, training stops. At train end the best epoch's weights (parameters and
// state) are put back when restore_best_weights is set, whether or not
// training stopped early (Keras 3). Requires patience, start_from_epoch >= 0.
// Unless verbose = 0, it says when and why it stopped, on `out` (std::cout):
//   "Epoch 5: early stopping: val_loss did not improve for 3 epochs (patience 3);
//    the best was 0.3012 at epoch 2"
// and, when restoring, "Restoring model weights from the end of the best epoch: 2."
// (epochs counted from 1 in messages; stopped_epoch and best_epoch are 0-based).
// Docs: docs/training.md, "Callbacks".
#pragma once
#include <cmath>
#include <cstddef>
#include <cstring>
#include <iostream>
#include <optional>
#include <ostream>
#include <stdexcept>
#include <string>
#include <vector>

#include "../core/format.hpp"
#include "../core/plan.hpp"
#include "monitor.hpp"
#include "process_role.hpp"
#include "plateau_monitor.hpp"

namespace ctnn {

struct early_stopping {
  std::string monitor = "val_loss";
  double min_delta = 0.0;
  int patience = 0;
  monitor_mode mode = monitor_mode::automatic;
  std::optional<double> baseline;
  bool restore_best_weights = false;
  int start_from_epoch = 0;
  int verbose = 1;                  // 0: quiet
  std::ostream* out = &std::cout;   // where the messages go

  // State, reset by on_train_begin.
  int wait = 0;
  std::size_t stopped_epoch = 0;  // 0-based epoch at whose end training stopped (0: it did not; it never stops at epoch 0)
  std::optional<double> best;
  std::size_t best_epoch = 0;  // 0-based epoch of `best`
  std::vector<unsigned char> best_weights;  // raw bytes of parameters then state

  void validate() const {
    if (patience < 0) throw std::invalid_argument("early_stopping: patience must be >= 0, got " + std::to_string(patience));
    if (start_from_epoch < 0)
      throw std::invalid_argument("early_stopping: start_from_epoch must be >= 0, got " + std::to_string(start_from_epoch));
  }

  template <class Ctx>
  void on_train_begin(Ctx&) {
    validate();
    wait = 0;
    stopped_epoch = 0;
    best.reset();
    best_epoch = 0;
    best_weights.clear();
  }

  template <class Ctx>
  void on_epoch_end(Ctx& ctx) {
    const double current = detail::monitored(ctx.epoch_logs, monitor, "early_stopping");
    if (ctx.epoch < std::size_t(start_from_epoch)) return;
    if (restore_best_weights && best_weights.empty()) {
      save(ctx.model);
      best_epoch = ctx.epoch;
    }
    const plateau_monitor rule = plateau();
    if (rule.observe(current, best, wait)) {
      best_epoch = ctx.epoch;
      if (restore_best_weights) save(ctx.model);
      return;
    }
    if (rule.exhausted(wait) && ctx.epoch > 0) {
      stopped_epoch = ctx.epoch;
      ctx.stop_training = true;
    }
  }

  template <class Ctx>
  void on_train_end(Ctx& ctx) {
    const bool say = verbose != 0 && out != nullptr && detail::writes_output(ctx);  // rank 0 prints
    if (stopped_epoch > 0 && say) *out << "Epoch " << stopped_epoch + 1 << ": early stopping: " << reason() << "\n";
    if (restore_best_weights && !best_weights.empty()) {
      if (say) *out << "Restoring model weights from the end of the best epoch: " << best_epoch + 1 << ".\n";
      restore(ctx.model);
    }
  }

 private:
  // Why training stopped, in one sentence.
  std::string reason() const {
    std::string s = monitor + " did not improve";
    if (min_delta != 0) s += " by more than " + detail::format_number(std::abs(min_delta));
    s += " for " + std::to_string(wait) + (wait == 1 ? " epoch" : " epochs") + " (patience " + std::to_string(patience) + ")";
    if (best) s += "; the best was " + detail::format_number(*best) + " at epoch " + std::to_string(best_epoch + 1);
    if (baseline && best && !plateau().improves(*best, baseline)) s += ", which never beat the baseline " + detail::format_number(*baseline);
    return s;
  }
  plateau_monitor plateau() const { return {monitor, mode, min_delta, patience, baseline}; }
  // Through host views (train/model.hpp: a device model's variables are copied), or
  // the spans of a model type without them.
  template <class M>
  void save(M& m) {
    if constexpr (requires { m.host_region(role::parameter); }) {
      const auto p = m.host_region(role::parameter);
      const auto s = m.host_region(role::state);
      keep(p.data(), p.size(), s.data(), s.size());
    } else {
      auto p = m.parameters();
      auto s = m.state();
      keep(p.data(), p.size_bytes(), s.data(), s.size_bytes());
    }
  }
  void keep(const void* p, std::size_t pn, const void* s, std::size_t sn) {
    best_weights.resize(pn + sn);
    if (pn) std::memcpy(best_weights.data(), p, pn);  // a region of 0 bytes may have no pointer (host_mirror)
    if (sn) std::memcpy(best_weights.data() + pn, s, sn);
  }
  template <class M>
  void restore(M& m) {
    if constexpr (requires { m.host_region(role::parameter, false); }) {
      auto p = m.host_region(role::parameter, false);
      auto s = m.host_region(role::state, false);
      if (p.size()) std::memcpy(p.data(), best_weights.data(), p.size());
      if (s.size()) std::memcpy(s.data(), best_weights.data() + p.size(), s.size());
      p.commit();
      s.commit();
    } else {
      auto p = m.parameters();
      auto s = m.state();
      std::memcpy(p.data(), best_weights.data(), p.size_bytes());
      std::memcpy(s.data(), best_weights.data() + p.size_bytes(), s.size_bytes());
    }
  }
};

}  // namespace ctnn
