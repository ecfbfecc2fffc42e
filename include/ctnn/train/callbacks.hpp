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
//   is kept with the model's optimizer state), role (this process's rank and
//   size in data-parallel training; the callbacks that write files or print do
//   so on rank 0 only: docs/distributed.md). epoch_logger prints one line per epoch,
// ending with the input-pipeline verdict (train/input_analysis.hpp); the Keras
// callbacks live one per header beside this one (early_stopping.hpp, ...).
#pragma once
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <iostream>
#include <ostream>
#include <string>
#include <vector>

#include "../core/format.hpp"
#include "../core/narrow_std.hpp"
#include "history.hpp"
#include "input_analysis.hpp"
#include "model.hpp"
#include "process_role.hpp"
#include "../core/separate.hpp"

namespace ctnn {

// What fit's loop (train/fit_loop.hpp) reads and writes of the context, the same for every model and
// optimizer; train_context adds the model and the optimizer.
struct train_context_base {
  history& hist;
  std::size_t epoch = 0;   // 0-based
  std::size_t epochs = 0;  // total asked for
  std::size_t step = 0;    // batch index within the epoch
  std::size_t steps = 0;   // batches per epoch (0 when unknown)
  double batch_loss = 0;
  logs epoch_logs{};
  bool stop_training = false;
  std::function<logs()> running_logs{};// during an epoch: the loss and metrics so far (progress_bar)
  process_role role{};                 // rank 0 writes and prints (docs/distributed.md)
};

template <class Model, class Optimizer>
struct train_context : train_context_base {
  Model& model;
  const Optimizer& optimizer;

  train_context(Model& m, const Optimizer& o, history& h) : train_context_base{h}, model(m), optimizer(o) {}
  double learning_rate() const { return detail::current_learning_rate(optimizer, model.optimizer_state()); }
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

namespace detail {
// Durations as a person reads them: "12s", "1.2s", "850ms", "<1ms" (never "0.00s").
inline std::string duration_text(double s) {
  char buf[32];
  if (s >= 10) std::snprintf(buf, sizeof buf, "%.0fs", s);
  else if (s >= 1) std::snprintf(buf, sizeof buf, "%.1fs", s);
  else if (s >= 0.001) std::snprintf(buf, sizeof buf, "%.0fms", s * 1e3);
  else return "<1ms";
  return buf;
}
// The short names of the compact epoch line ("val_" kept): Keras' own
// abbreviations (acc, mae, mse, lr).
inline std::string short_key(const std::string& k) {
  const bool val = k.rfind("val_", 0) == 0;
  const std::string base = val ? k.substr(4) : k;
  std::string s = base;
  if (base == "sparse_categorical_accuracy" || base == "categorical_accuracy" || base == "accuracy") s = "acc";
  else if (base == "mean_absolute_error") s = "mae";
  else if (base == "mean_squared_error") s = "mse";
  else if (base == "learning_rate") s = "lr";
  return val ? "val_" + s : s;
}
inline bool is_timing_key(const std::string& k) {
  return k == "seconds" || k == "data_seconds" || k == "compute_seconds" || k == "input_share" || k == "input_bound";
}
}  // namespace detail

// epoch_logger: one line per epoch that fits `columns` characters (80),
// continued on indented lines when there are more values than fit:
//   "epoch 3/10  1.2s  loss: 0.3012  acc: 0.8901  val_loss: 0.3301  val_acc: 0.8800"
// Long keys are abbreviated (sparse_categorical_accuracy and accuracy: acc,
// mean_absolute_error: mae, mean_squared_error: mse); the epoch's time reads
// 12s, 1.2s, 850ms or <1ms; an input-bound epoch ends with the verdict in
// words ("moderately input-bound", "highly input-bound"; train/input_analysis.hpp).
// verbose = true prints every key under its full name, learning_rate, the
// timing keys and the verdict's whole sentence (also "not input-bound: ...").
struct epoch_logger {
  std::ostream* out = &std::cout;
  bool verbose = false;
  std::size_t columns = 80;
  epoch_logger() = default;
  explicit epoch_logger(std::ostream& o, bool verbose_ = false) : out(&o), verbose(verbose_) {}

  template <class Ctx>
  void on_epoch_end(Ctx& ctx) {
    if (!detail::writes_output(ctx)) return;
    write<>(ctx.epoch_logs, ctx.epoch, ctx.epochs);
  }

 private:
  // The line itself: a template of nothing, not of Ctx, so that it is
  // compiled only where a model logs, and once however many models log
  // (cold: once an epoch, optimized for size). With CTNN_COMPILED_KERNELS only
  // declared: the compiled part holds it (core/separate.hpp).
  template <class = void>
  [[gnu::cold]] void write(const logs& l, std::size_t epoch, std::size_t epochs) const
#if CTNN_DEFINITIONS
  {
    std::vector<std::string> items;
    if (l.contains("seconds")) items.push_back(detail::duration_text(l["seconds"]));
    for (auto& [k, v] : l.items) {
      char buf[64];
      if (detail::is_timing_key(k) || (!verbose && k == "learning_rate")) continue;
      std::snprintf(buf, sizeof buf, k == "learning_rate" ? "%.4g" : "%.4f", v);
      items.push_back((verbose ? k : detail::short_key(k)) + ": " + buf);
    }
    if (verbose) {
      if (l.contains("data_seconds")) items.push_back("data: " + detail::duration_text(l["data_seconds"]));
      if (l.contains("compute_seconds")) items.push_back("compute: " + detail::duration_text(l["compute_seconds"]));
    }
    if (l.contains("input_share")) {
      if (verbose) items.push_back(input_verdict(l["input_share"]));
      else if (input_bound(l["input_share"]) != input_bound_level::no)
        items.push_back(input_bound_words(input_bound(l["input_share"])));
    }
    std::string text = "epoch " + std::to_string(epoch + 1) + "/" + std::to_string(epochs);
    std::size_t line_start = 0;
    for (const std::string& item : items) {
      const char* sep = verbose ? " - " : "  ";
      if (text.size() - line_start + std::strlen(sep) + item.size() > columns) {
        text += "\n   ";
        line_start = text.size() - 3;
        text += item;
      } else {
        text += sep + item;
      }
    }
    *out << text << std::endl;
  }
#else
  ;
#endif
};
CTNN_INSTANCE(template void epoch_logger::write<void>(const logs&, std::size_t, std::size_t) const;)

}  // namespace ctnn
