// ctnn/train/progress_bar.hpp — a Keras-style progress bar.
//
// progress_bar{} writes to std::cout and is interactive when stdout is a
// terminal (isatty); progress_bar{out, interactive} chooses. Interactive: an
// "Epoch e/E" line, then one line redrawn in place at most every `interval`
// seconds: "120/938 ━━━━━━━━━━━━━━━━━━━━ 7s 9ms/step - loss: 0.5123 - accuracy: ..."
// (steps, bar, ETA, time per step, running loss and metrics), finished at the
// epoch end with the elapsed time and the validation values. Not interactive:
// one line per epoch, "Epoch 1/10 - 938/938 - 8s - 9ms/step - loss: ... - val_loss: ...".
// Values print as %.4f (%.4e below 1e-3); timing keys and learning_rate are
// left out; the epoch's end says the input verdict in words ("not input-bound",
// "moderately input-bound", "highly input-bound"; train/input_analysis.hpp).
#pragma once
#include <unistd.h>

#include <cmath>
#include <cstddef>
#include <cstdio>
#include <iostream>
#include <ostream>
#include <string>

#include "../core/narrow_std.hpp"
#include "history.hpp"
#include "process_role.hpp"
#include "input_analysis.hpp"

namespace ctnn {

namespace detail {

inline std::string progress_value(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, std::abs(v) > 1e-3 || v == 0 ? "%.4f" : "%.4e", v);
  return buf;
}
// Keras' time per step: "3s/step", "12ms/step", "250us/step".
inline std::string per_step(double s) {
  char buf[64];
  if (s >= 1 || s == 0)
    std::snprintf(buf, sizeof buf, "%.0fs/step", s);
  else if (s >= 1e-3)
    std::snprintf(buf, sizeof buf, "%.0fms/step", s * 1e3);
  else
    std::snprintf(buf, sizeof buf, "%.0fus/step", s * 1e6);
  return buf;
}
// Keras' ETA: "7s", "2:05", "1:02:03".
inline std::string eta_text(double s) {
  const long t = long(s);
  char buf[64];
  if (t > 3600)
    std::snprintf(buf, sizeof buf, "%ld:%02ld:%02ld", t / 3600, (t % 3600) / 60, t % 60);
  else if (t > 60)
    std::snprintf(buf, sizeof buf, "%ld:%02ld", t / 60, t % 60);
  else
    std::snprintf(buf, sizeof buf, "%lds", t);
  return buf;
}
inline bool shown_in_progress(const std::string& k) {
  return k != "seconds" && k != "data_seconds" && k != "compute_seconds" && k != "input_share" && k != "input_bound" &&
         k != "learning_rate";
}
// (CTNN_LAZY, core/separate.hpp: header-only a template of nothing, as a plain inline function
// calling logs' members would compile them in every program; in the compiled part otherwise)
CTNN_LAZY CTNN_DECL std::string progress_logs(const logs& l)
#if CTNN_DEFINITIONS
{
  std::string s;
  for (auto& [k, v] : l.items)
    if (shown_in_progress(k)) s += " - " + k + ": " + progress_value(v);
  if (l.contains("input_share")) s += std::string(" - ") + input_bound_words(input_bound(l["input_share"]));
  return s;
}
#else
;
#endif

}  // namespace detail

struct progress_bar {
  using clock = std::chrono::steady_clock;
  std::ostream* out = &std::cout;
  bool interactive = ::isatty(STDOUT_FILENO) != 0;
  double interval = 0.05;  // seconds between redraws (Keras' default)
  std::size_t width = 20;  // bar characters

  progress_bar() = default;
  explicit progress_bar(std::ostream& o, bool interactive_ = false) : out(&o), interactive(interactive_) {}

  template <class Ctx>
  void on_epoch_begin(Ctx& ctx) {
    if (!detail::writes_output(ctx)) return;  // rank 0 prints (docs/distributed.md)
    start_ = last_draw_ = clock::now();
    done_ = 0;
    last_len_ = 0;
    if (interactive) *out << "Epoch " << ctx.epoch + 1 << "/" << ctx.epochs << "\n" << std::flush;
  }

  template <class Ctx>
  void on_batch_end(Ctx& ctx) {
    if (!detail::writes_output(ctx)) return;
    done_ = ctx.step + 1;
    const auto now = clock::now();
    last_batch_ = now;
    if (!interactive) return;
    if (std::chrono::duration<double>(now - last_draw_).count() < interval) return;
    last_draw_ = now;
    const double elapsed = std::chrono::duration<double>(now - start_).count();
    const double per = elapsed / double(done_);
    std::string line = counter(ctx.steps) + " " + bar(ctx.steps);
    if (ctx.steps > done_) line += " " + detail::eta_text(per * double(ctx.steps - done_));
    line += " " + detail::per_step(per);
    if (ctx.running_logs) line += detail::progress_logs(ctx.running_logs());
    draw(line, false);
  }

  template <class Ctx>
  void on_epoch_end(Ctx& ctx) {
    if (!detail::writes_output(ctx)) return;
    const double elapsed = std::chrono::duration<double>(clock::now() - start_).count();
    // Time per step counts the training steps only; the elapsed time includes validation.
    const double per = done_ ? std::chrono::duration<double>(last_batch_ - start_).count() / double(done_) : 0.0;
    char secs[32];
    std::snprintf(secs, sizeof secs, "%.0fs", elapsed);
    const std::string logs_text = detail::progress_logs(ctx.epoch_logs);
    if (interactive) {
      draw(counter(ctx.steps ? ctx.steps : done_) + " " + bar(0) + " " + secs + " " + detail::per_step(per) + logs_text, true);
    } else {
      *out << "Epoch " << ctx.epoch + 1 << "/" << ctx.epochs << " - " << done_ << "/" << (ctx.steps ? ctx.steps : done_)
           << " - " << secs << " - " << detail::per_step(per) << logs_text << "\n"
           << std::flush;
    }
  }

 private:
  std::string counter(std::size_t steps) const {
    const std::string total = steps ? std::to_string(steps) : "Unknown";
    std::string cur = std::to_string(done_);
    if (steps) cur.insert(0, total.size() > cur.size() ? total.size() - cur.size() : 0, ' ');
    return cur + "/" + total;
  }
  // steps == 0: a full bar (finished, or total unknown).
  std::string bar(std::size_t steps) const {
    const std::size_t filled = steps ? width * done_ / steps : width;
    std::string s = "\x1b[1m";
    for (std::size_t i = 0; i < filled; ++i) s += "\u2501";
    s += "\x1b[0m\x1b[2m";
    for (std::size_t i = filled; i < width; ++i) s += "\u2501";
    return s + "\x1b[0m";
  }
  void draw(const std::string& line, bool final) {
    std::string padded = line;
    if (padded.size() < last_len_) padded.append(last_len_ - padded.size(), ' ');
    last_len_ = line.size();
    *out << "\r" << padded << (final ? "\n" : "") << std::flush;
  }

  clock::time_point start_{}, last_draw_{}, last_batch_{};
  std::size_t done_ = 0, last_len_ = 0;
};

}  // namespace ctnn
