// ctnn/train/fit_loop.hpp — fit's epoch loop, the same for every network.
//
// fit (train/fit.hpp) checks its arguments, then hands the loop a fit_session: the small
// interface its network-typed code implements (start the step, call the callbacks' hook,
// open an epoch and read its next batch, run one training step on it, update the metrics and
// check the variables, the validation and the extras' logs, the optimizer's finalize, the
// extras' on_failure). fit_epochs is the loop around it: epochs and batches, the data and compute
// time, the running and epoch logs, the history, the stop and error rules. It is not a template:
// header-only it is inline, and with the compiled part (core/separate.hpp) it is compiled once,
// so a program's edit no longer generates it. A call through the interface costs a few
// nanoseconds a batch; the step inside it is the typed code.
#pragma once
#include <chrono>
#include <cmath>
#include <cstddef>
#include <exception>
#include <string>
#include <vector>

#include "../core/errors.hpp"
#include "../core/format.hpp"
#include "../core/separate.hpp"
#include "callbacks.hpp"
#include "history.hpp"
#include "input_analysis.hpp"
#include "step.hpp"

namespace ctnn::detail {

// The callbacks' hooks, in the order of train_context's documentation.
enum class callback_hook { train_begin, train_end, epoch_begin, epoch_end, batch_begin, batch_end };

// What fit_epochs asks of the network-typed side (fit.hpp: fit_session_of).
class fit_session {
 public:
  virtual void start() = 0;                                // the training step (the optimizer state prepared)
  virtual void call(callback_hook h) = 0;                  // every callback that implements h, in argument order
  virtual std::size_t autotune_said() = 0;                 // the tuner's decisions printed so far (0: no tuner)
  virtual void open(std::size_t epoch) = 0;                // the metrics reset, the epoch's batches opened
  virtual bool next(std::size_t& batch) = 0;               // the next batch (false: the epoch's end), its size
  virtual step_result run(std::size_t epoch, std::size_t step) = 0;  // one training step on it
  // after a finite step: the all-zero warning (first), the metrics, the variables' check after an update
  virtual void after_step(const step_result& r, std::size_t epoch, std::size_t step, bool first) = 0;
  virtual void metric_logs(logs& l) = 0;                   // each training metric's result
  virtual void validate(logs& l, std::size_t seen) = 0;    // val_*, then the hooks' reduce_logs
  virtual double learning_rate() = 0;                      // the rate the next update uses
  virtual void extra_logs(logs& l) = 0;                    // the backend's and the hooks' log_epoch
  virtual bool autotune_messages(std::vector<std::string>& said) = 0;  // false: no tuner
  virtual void close() = 0;                                // the epoch's batches closed
  virtual void finish() = 0;                               // the optimizer's finalize (EMA)
  virtual void failed(const std::string& what) = 0;        // the extras' on_failure

 protected:
  ~fit_session() = default;
};

// An exception's what(), for on_failure.
CTNN_LAZY [[gnu::cold]] CTNN_DECL std::string exception_text(std::exception_ptr p)
#if CTNN_DEFINITIONS
{
  try {
    std::rethrow_exception(p);
  } catch (const std::exception& e) {
    return e.what();
  } catch (...) {
    return "an exception not derived from std::exception";
  }
}
#else
;
#endif

// The loop's messages and epoch logs.
CTNN_LAZY [[noreturn, gnu::cold, gnu::noinline]] CTNN_DECL void throw_fit_loss_not_finite(double loss, std::size_t epoch,
                                                                             std::size_t step, double learning_rate)
#if CTNN_DEFINITIONS
{
  throw numeric_error("fit: the loss became " + std::string(std::isnan(loss) ? "NaN" : "infinite") + " at epoch " +
                      std::to_string(epoch + 1) + ", step " + std::to_string(step + 1) + " (learning rate " +
                      format_number(learning_rate) + ")");
}
#else
;
#endif
CTNN_LAZY [[noreturn, gnu::cold, gnu::noinline]] CTNN_DECL void throw_fit_no_batch(std::size_t epoch)
#if CTNN_DEFINITIONS
{
  throw std::invalid_argument("fit: the training dataset yielded no batch in epoch " + std::to_string(epoch + 1));
}
#else
;
#endif
// An epoch's timing logs: learning_rate, seconds, data_seconds, compute_seconds, input_share,
// input_bound.
CTNN_LAZY CTNN_DECL void set_epoch_time_logs(logs& l, double learning_rate, double seconds, double data_s, double compute_s)
#if CTNN_DEFINITIONS
{
  l.set("learning_rate", learning_rate);
  l.set("seconds", seconds);
  l.set("data_seconds", data_s);
  l.set("compute_seconds", compute_s);
  l.set("input_share", data_s + compute_s > 0 ? data_s / (data_s + compute_s) : 0.0);
  l.set("input_bound", double(int(input_bound(l["input_share"]))));
}
#else
;
#endif

// fit's loop: ctx.epochs epochs of s's batches, the callbacks through s.call; the history in ctx.hist.
CTNN_LAZY CTNN_DECL void fit_epochs(fit_session& s, train_context_base& ctx)
#if CTNN_DEFINITIONS
{
  using clock = std::chrono::steady_clock;
  auto secs = [](clock::duration d) { return std::chrono::duration<double>(d).count(); };
  // A failure from here on (an exception of the step, a callback or a check) is told to the
  // extras that have on_failure(what) (data_parallel: the other ranks then throw too), rethrown.
  try {
    s.start();  // the model's optimizer state is (re)initialised here for this optimizer (train/model.hpp)
    s.call(callback_hook::train_begin);
    for (std::size_t e = 0; e < ctx.epochs && !ctx.stop_training; ++e) {
      ctx.epoch = e;
      ctx.epoch_logs = logs{};
      s.call(callback_hook::epoch_begin);
      double loss_sum = 0, data_s = 0, compute_s = 0;
      std::size_t seen = 0;
      const auto epoch_start = clock::now();
      const std::size_t said_before = s.autotune_said();  // the tuner's decisions printed before this epoch
      s.open(e);
      ctx.running_logs = [&] {
        logs r;
        r.set("loss", seen ? loss_sum / double(seen) : 0.0);
        s.metric_logs(r);
        return r;
      };
      for (std::size_t step = 0;; ++step) {
        const auto t0 = clock::now();
        std::size_t n = 0;
        if (!s.next(n)) break;
        const auto t1 = clock::now();
        data_s += secs(t1 - t0);
        ctx.step = step;
        s.call(callback_hook::batch_begin);
        const step_result r = s.run(e, step);
        const double batch_loss = r.loss_sum / double(n) + r.penalty;
        ctx.batch_loss = batch_loss;
        if (!std::isfinite(batch_loss)) {
          s.call(callback_hook::batch_end);
          if (ctx.stop_training) break;
          throw_fit_loss_not_finite(batch_loss, e, step, s.learning_rate());
        }
        s.after_step(r, e, step, e == 0 && step == 0 && ctx.role.chief());
        loss_sum += r.loss_sum + r.penalty * double(n);
        seen += n;
        compute_s += secs(clock::now() - t1);
        s.call(callback_hook::batch_end);
        if (ctx.stop_training) break;
      }
      ctx.running_logs = nullptr;
      if (seen == 0 && !ctx.stop_training) throw_fit_no_batch(e);
      logs& l = ctx.epoch_logs;
      l.set("loss", loss_sum / double(seen));
      s.metric_logs(l);
      s.validate(l, seen);  // val_*, and the hooks that reduce the logs across ranks (data_parallel)
      set_epoch_time_logs(l, s.learning_rate(), secs(clock::now() - epoch_start), data_s, compute_s);
      s.extra_logs(l);  // the backend's figures (CUDA: device_wait_seconds, ...), the hooks' (loss_scale)
      s.call(callback_hook::epoch_end);
      // the logs, and the decisions printed during this epoch (the first epoch's too): history::append_epoch
      std::vector<std::string> said;
      const bool tuned = s.autotune_messages(said);
      ctx.hist.append_epoch(ctx.epoch_logs, tuned ? &said : nullptr, tuned ? said_before : 0);
      s.close();
    }
    s.finish();  // e.g. the EMA weights replace the weights
    s.call(callback_hook::train_end);
  } catch (...) {
    ctx.running_logs = nullptr;
    s.close();
    const std::string what = exception_text(std::current_exception());
    s.failed(what);
    throw;
  }
}
#else
;
#endif

}  // namespace ctnn::detail
