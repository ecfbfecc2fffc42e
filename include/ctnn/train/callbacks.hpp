// ctnn/train/callbacks.hpp — the Callback concept and the hooks fit calls.
//
// A callback implements only the hooks it needs, each taking the training
// context (train_context<Model, Optimizer>):
//   on_train_begin, on_epoch_begin, on_batch_begin, on_batch_end,
//   on_epoch_end, on_train_end.
// The context is all a callback sees:
//   epoch, epochs, step (within the epoch), steps (per epoch, 0 unknown),
//   batch_loss, epoch_logs, hist, stop_training (set it to stop after the
//   current batch/epoch), running_logs() during an epoch (the loss and
//   metrics so far), model (its variables: save, restore, checkpoint),
//   optimizer (const: hyperparameters and schedule),
//   learning_rate() (the rate the next update uses) and
//   scale_learning_rate(f) (multiplies it from the next update on; the scale
//   is kept with the model's optimizer state). epoch_logger prints one line per epoch,
// ending with the input-pipeline verdict (train/input_analysis.hpp); the Keras
// callbacks live one per header beside this one (early_stopping.hpp, ...).
#pragma once
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <iostream>
#include <ostream>
#include <string>

#include "../core/format.hpp"
#include "history.hpp"
#include "model.hpp"

namespace ctnn {

template <class Model, class Optimizer>
struct train_context {
  Model& model;
  const Optimizer& optimizer;
  history& hist;
  std::size_t epoch = 0;   // 0-based
  std::size_t epochs = 0;  // total asked for
  std::size_t step = 0;    // batch index within the epoch
  std::size_t steps = 0;   // batches per epoch (0 when unknown)
  double batch_loss = 0;
  logs epoch_logs;
  bool stop_training = false;
  std::function<logs()> running_logs;  // during an epoch: the loss and metrics so far (progress_bar)

  double learning_rate() const {
    const auto& os = model.optimizer_state();
    return optimizer.learning_rate(os.iterations) * os.learning_rate_scale;
  }
  void scale_learning_rate(double factor) {
    detail::training_access::optimizer_state(model).learning_rate_scale *= factor;
  }
};

namespace detail {
struct any_context {
  template <class T>
  operator T&() const;  // never defined: only used to detect hooks
};
}  // namespace detail

template <class C>
concept has_on_train_begin = requires(C& c, detail::any_context ctx) { c.on_train_begin(ctx); };
template <class C>
concept has_on_train_end = requires(C& c, detail::any_context ctx) { c.on_train_end(ctx); };
template <class C>
concept has_on_epoch_begin = requires(C& c, detail::any_context ctx) { c.on_epoch_begin(ctx); };
template <class C>
concept has_on_epoch_end = requires(C& c, detail::any_context ctx) { c.on_epoch_end(ctx); };
template <class C>
concept has_on_batch_begin = requires(C& c, detail::any_context ctx) { c.on_batch_begin(ctx); };
template <class C>
concept has_on_batch_end = requires(C& c, detail::any_context ctx) { c.on_batch_end(ctx); };

template <class C>
concept Callback = has_on_train_begin<C> || has_on_train_end<C> || has_on_epoch_begin<C> || has_on_epoch_end<C> ||
                   has_on_batch_begin<C> || has_on_batch_end<C>;

// Prints "epoch 3/10 - 2.1s - loss: 0.3012 - accuracy: 0.8901 - val_loss: ..."
struct epoch_logger {
  std::ostream* out = &std::cout;
  epoch_logger() = default;
  explicit epoch_logger(std::ostream& o) : out(&o) {}

  template <class Ctx>
  void on_epoch_end(Ctx& ctx) {
    std::string line = "epoch " + std::to_string(ctx.epoch + 1) + "/" + std::to_string(ctx.epochs);
    for (auto& [k, v] : ctx.epoch_logs.items) {
      char buf[64];
      if (k == "seconds" || k == "data_seconds" || k == "compute_seconds")
        std::snprintf(buf, sizeof buf, "%.2fs", v);
      else if (k == "input_share")
        std::snprintf(buf, sizeof buf, "%.1f%%", 100 * v);
      else if (k == "input_bound")
        continue;  // said in words at the end of the line
      else if (k == "learning_rate")
        std::snprintf(buf, sizeof buf, "%.4g", v);
      else
        std::snprintf(buf, sizeof buf, "%.4f", v);
      line += " - " + k + ": " + buf;
    }
    if (ctx.epoch_logs.contains("input_share")) line += " - " + input_verdict(ctx.epoch_logs["input_share"]);
    *out << line << std::endl;
  }
};

}  // namespace ctnn
