// ctnn/train/model_checkpoint.hpp — Keras' ModelCheckpoint (weights, and the optimizer's state if asked).
//
// model_checkpoint{.filepath = "ckpt-{epoch:02d}-{val_loss:.4f}.ctnn",
//   .monitor = "val_loss", .save_best_only = false, .mode = automatic,
//   .initial_value_threshold = none}. At each epoch end the path is formatted
// ({epoch} is 1-based; {key} or {key:spec} with a printf-like spec such as
// 02d or .4f takes the epoch log's value) and the weights are written with
// io::save_weights, atomically (temporary file, fsync, rename). With
// save_best_only, only when the monitored value beats the best so far
// (plateau_monitor's rule with min_delta 0, as early_stopping's: strictly,
// so NaN never; Keras 3 has no min_delta here; the best starts at
// initial_value_threshold or +-infinity and, as in Keras, is kept across fits). An unknown key or a bad spec in
// the path throws std::invalid_argument at on_train_begin. .save_optimizer_state = true also writes
// the optimizer's state (io::save_optimizer_state) to "<path>.opt", before the weights, so that
// io::load_weights(path) + io::load_optimizer_state(path + ".opt") resume the run exactly (Keras's
// save_weights_only = false keeps the optimizer's variables in its one .keras file).
#pragma once
#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <optional>
#include <ostream>
#include <stdexcept>
#include <string>
#include <vector>

#include "../core/format.hpp"
#include "../io/weights.hpp"
#include "monitor.hpp"
#include "optimizer_state_file.hpp"
#include "process_role.hpp"
#include "plateau_monitor.hpp"

namespace ctnn {

namespace detail {

// Formats "{epoch:02d}" and "{key:.4f}" fields of a checkpoint path.
// `check_only` validates the template against the key names only.
// (CTNN_LAZY, core/separate.hpp: header-only a template of nothing, as a plain inline function
// calling logs' members would compile them in every program; in the compiled part otherwise)
CTNN_LAZY CTNN_DECL std::string format_checkpoint_path(const std::string& tpl, std::size_t epoch1, const logs& l,
                                                       bool check_only = false)
#if CTNN_DEFINITIONS
{
  std::string out;
  for (std::size_t i = 0; i < tpl.size(); ++i) {
    if (tpl[i] != '{') {
      out += tpl[i];
      continue;
    }
    const std::size_t close = tpl.find('}', i);
    if (close == std::string::npos)
      throw std::invalid_argument("model_checkpoint: unclosed '{' in the file path '" + tpl + "'");
    const std::string field = tpl.substr(i + 1, close - i - 1);
    const std::size_t colon = field.find(':');
    const std::string key = field.substr(0, colon);
    std::string spec = colon == std::string::npos ? "" : field.substr(colon + 1);
    // spec: [0][width][.precision][d|f|e|g]
    std::size_t k = 0;
    while (k < spec.size() && std::isdigit(static_cast<unsigned char>(spec[k]))) ++k;
    if (k < spec.size() && spec[k] == '.') {
      ++k;
      while (k < spec.size() && std::isdigit(static_cast<unsigned char>(spec[k]))) ++k;
    }
    char conv = key == "epoch" ? 'd' : 'g';
    if (k + 1 == spec.size() && std::string("dfeg").find(spec[k]) != std::string::npos) {
      conv = spec[k];
      spec.pop_back();
    } else if (k != spec.size()) {
      throw std::invalid_argument("model_checkpoint: unsupported format '" + field + "' in the file path '" + tpl + "'");
    }
    if (key != "epoch" && !check_only && !l.contains(key))
      throw std::invalid_argument("model_checkpoint: the file path '" + tpl + "' names '" + key +
                                  "', which is not in the epoch logs");
    if (!check_only) {
      const double v = key == "epoch" ? double(epoch1) : l[key];
      char buf[128];
      const std::string f = "%" + spec + (conv == 'd' ? "lld" : std::string(1, conv));
      if (conv == 'd')
        std::snprintf(buf, sizeof buf, f.c_str(), static_cast<long long>(std::llround(v)));
      else
        std::snprintf(buf, sizeof buf, f.c_str(), v);
      out += buf;
    }
    i = close;
  }
  return out;
}
#else
;
#endif

}  // namespace detail

struct model_checkpoint {
  std::string filepath;
  std::string monitor = "val_loss";
  bool save_best_only = false;
  monitor_mode mode = monitor_mode::automatic;
  std::optional<double> initial_value_threshold;
  std::ostream* verbose = nullptr;  // a line per save (and per non-improvement) when set
  bool save_optimizer_state = false;  // also "<path>.opt": the optimizer's state, to resume exactly

  // State: the best value so far (kept across fits, as Keras) and the files written.
  std::optional<double> best;
  std::vector<std::string> saved;

  template <class Ctx>
  void on_train_begin(Ctx&) {
    if (filepath.empty()) throw std::invalid_argument("model_checkpoint: filepath is empty");
    detail::format_checkpoint_path(filepath, 1, logs{}, true);
    if (!best) best = initial_value_threshold;
  }

  template <class Ctx>
  void on_epoch_end(Ctx& ctx) {
    if (!detail::writes_output(ctx)) return;  // rank 0 writes (docs/distributed.md)
    const std::string path = detail::format_checkpoint_path(filepath, ctx.epoch + 1, ctx.epoch_logs);
    if (save_best_only) {
      const double current = detail::monitored(ctx.epoch_logs, monitor, "model_checkpoint");
      const plateau_monitor rule{monitor, mode};
      const bool better = rule.improves(current, best.value_or(rule.worst()));  // Keras: best starts at +-inf
      if (!better) {
        if (verbose) *verbose << "Epoch " << ctx.epoch + 1 << ": " << monitor << " did not improve\n";
        return;
      }
      if (verbose)
        *verbose << "Epoch " << ctx.epoch + 1 << ": " << monitor << " improved to " << detail::format_number(current)
                 << ", saving the weights to " << path << "\n";
      best = current;
    } else if (verbose) {
      *verbose << "Epoch " << ctx.epoch + 1 << ": saving the weights to " << path << "\n";
    }
    if (save_optimizer_state) io::save_optimizer_state(ctx.model, ctx.optimizer, path + ".opt");
    io::save_weights(ctx.model, path);
    saved.push_back(path);
  }
};

}  // namespace ctnn
