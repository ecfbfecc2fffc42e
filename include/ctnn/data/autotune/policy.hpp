// ctnn/data/autotune/policy.hpp — the autotuner's decision logic: pure,
// deterministic, no threads, no clocks.
//
// autotune (the tag a stage is given), autotune_budget (cores, memory, log,
// probe_machine, compute_threads; check_budget throws std::invalid_argument naming
// the field), knob (one tunable value: map parallelism or prefetch depth, in
// [1, max]), stage_name and cache_advice (how explanations name a stage and what
// they advise), and autotune_policy: observe(window, knobs) takes one measured
// autotune_window with the knobs at their values and may change the values (the
// caller applies them); it returns true when it settled with a new
// autotune_verdict (the limiting resource, the wait share, the knobs' values and a
// one-line explanation). autotune_options sets how cautious it is (gain 3%, 2
// windows per setting, drift 25% over 3 windows, ...). Given the same windows it
// makes the same decisions. The search, its bars and its hysteresis:
// docs/input-pipeline.md ("Autotune").
#pragma once
#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <iostream>
#include <ostream>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace ctnn::data {

struct autotune_t {};
inline constexpr autotune_t autotune{};

struct autotune_budget {
  std::size_t cores = std::max(1u, std::thread::hardware_concurrency());  // map workers in all, at most
  std::size_t memory_bytes = std::size_t(256) << 20;                       // all prefetch buffers
  std::ostream* log = &std::clog;                                           // where verdicts are said
  bool probe_machine = true;       // read /proc/stat to tell when other processes take the cores
  std::size_t compute_threads = 0;  // threads the model computes on; 0: the CPU kernels' pool size
};

// Throws std::invalid_argument naming `where` and the field when a budget cannot work.
inline void check_budget(const autotune_budget& b, const char* where) {
  if (b.cores == 0) throw std::invalid_argument(std::string(where) + ": autotune_budget.cores must be >= 1, got 0");
  if (b.memory_bytes == 0)
    throw std::invalid_argument(std::string(where) + ": autotune_budget.memory_bytes must be >= 1, got 0");
  if (b.compute_threads > 4096)
    throw std::invalid_argument(std::string(where) + ": autotune_budget.compute_threads must be <= 4096, got " +
                                std::to_string(b.compute_threads));
}

// A stage as the tuner's explanations name it: "map #2 (stage 3)" (its kind, its number among
// the stages of that kind, its position counted from the source, which is stage 1), or with a
// label given by dataset::named("parse"): "map 'parse' (stage 3)".
struct stage_name {
  std::string kind;          // "from_csv", "map", "batch", ...; "" for a knob of no named stage
  std::size_t position = 0;  // 1: the source, 2: the stage after it, ...
  std::size_t ordinal = 0;   // 1: the first stage of its kind, ...
  std::string label;         // "" if none
  std::string str() const {
    if (kind.empty()) return {};
    const std::string where = "(stage " + std::to_string(position) + ")";
    if (!label.empty()) return kind + " '" + label + "' " + where;
    return kind + " #" + std::to_string(ordinal) + " " + where;
  }
};

// Would cache() right after a stage save its work on later passes? `yes` for a reader that
// parses or decodes files (the same output every pass), `if_deterministic` for a map without a
// random seed (ctnn cannot see whether f is), `no` for the rest (random augmentation, shuffle,
// stages that only copy).
enum class cache_advice { no, yes, if_deterministic };

// One tunable value. Stages read `value` from their threads; the tuner writes it.
struct knob {
  enum kind_t { map_parallelism, prefetch_depth };
  knob(kind_t k, std::size_t start, std::size_t hard_max) : kind(k), value(start), max(hard_max) {
    if (start == 0 || start > hard_max)
      throw std::invalid_argument("autotune: a knob's start value must be in [1, " + std::to_string(hard_max) +
                                  "], got " + std::to_string(start));
  }
  kind_t kind;
  std::atomic<std::size_t> value;
  std::size_t max;                          // what the stage can do (threads it started, queue limit)
  std::atomic<std::size_t> unit_bytes{0};   // prefetch: bytes of one buffered element
  std::atomic<std::uint64_t> busy_ns{0};    // map: time its workers spent in f, in all
};

// ---- the decision logic: pure, deterministic, no threads, no clocks ----

// What one window measured (sums over its steps).
struct autotune_window {
  std::size_t steps = 0;
  double wait_s = 0;               // waiting for the next element
  double step_s = 0;               // whole steps (wait + compute)
  double cpu_s = -1;               // process CPU time (-1: unknown)
  double load_s = -1;              // map workers' time in f (-1: unknown)
  double machine_busy = -1;        // busy cores of the whole machine, all processes (-1: unknown)
  std::size_t machine_cores = 0;   // cores of the machine (0: unknown)
  std::size_t compute_threads = 1;  // threads the model computes on
  struct stage_cost {
    std::string name;                         // stage_name::str()
    cache_advice cache = cache_advice::no;
    double work_s = 0;                        // its own work in this window
    double pass_bytes = -1;                   // its output in one pass, estimated (-1: unknown)
  };
  std::vector<stage_cost> stages;  // every metered stage, source first (empty: not measured)
  double memory_available = -1;    // bytes the machine has free (-1: unknown)
};

// A knob as the policy sees it; observe() may change `value`.
struct knob_setting {
  knob::kind_t kind;
  std::size_t value, max, unit_bytes = 0;
  std::string stage;  // the stage's name ("map #2 (stage 3)"); "" prints "map parallelism", "prefetch depth"
};

enum class autotune_limit { compute, loading, cpu, other_processes, memory, serial_stages };

inline const char* to_string(autotune_limit l) {
  switch (l) {
    case autotune_limit::compute: return "compute";
    case autotune_limit::loading: return "loading";
    case autotune_limit::cpu: return "cpu";
    case autotune_limit::other_processes: return "other processes";
    case autotune_limit::memory: return "memory";
    case autotune_limit::serial_stages: return "serial stages";
  }
  return "?";
}

struct autotune_verdict {
  std::size_t window = 0;            // the window (counted from 0) after which it was said
  autotune_limit limit{};
  double wait_share = 0;             // of step time, in the settled setting's windows
  std::vector<std::size_t> values;   // the knobs' settled values, in enlisting order
  std::string text;                  // the one-line explanation
  std::size_t pass = 0, step = 0;    // set by the tuner: the pass (epoch) and its step it was said in
};

// How cautious the policy is.
struct autotune_options {
  double gain = 0.03;                  // a neighbour is kept if its best window is this much faster
  std::size_t windows_per_setting = 2;
  std::size_t extra_rounds = 1;        // more rounds of windows for a trial too close to call
  double drift = 0.25;                 // settled: step time moving by this much ...
  std::size_t drift_windows = 3;       // ... this many windows in a row starts a new search
  double waiting = 0.05;               // below this share of waiting the input is not the bottleneck
};

// autotune_policy and tuner are class templates of nothing (basic_*<>) so that
// their member functions are compiled only in programs that run an autotuned
// pipeline: as plain classes every translation unit including ctnn/ctnn.hpp
// paid for them (docs/performance.md, "Compile time and memory").
template <class = void>
class basic_autotune_policy {
 public:
  using options = autotune_options;

  explicit basic_autotune_policy(autotune_budget b = {}, options o = {}) : budget_(b), opt_(o) {
    check_budget(b, "autotune_policy");
    if (o.windows_per_setting == 0 || o.drift_windows == 0 || !(o.gain >= 0 && o.gain < 1) || !(o.drift > 0))
      throw std::invalid_argument("autotune_policy: options need windows_per_setting >= 1, drift_windows >= 1, "
                                  "0 <= gain < 1 and drift > 0");
  }

  // One window measured with `knobs` at their values; may change the values (the caller applies them).
  // Returns true when it settled with a new verdict in this window.
  bool observe(const autotune_window& w, std::vector<knob_setting>& knobs) {
    const std::size_t index = windows_++;
    if (w.steps == 0 || !(w.step_s > 0)) return false;
    if (knobs.size() != kinds_.size() || !same_kinds(knobs)) {  // a knob enlisted: search anew
      held_.clear();
      restart(knobs);
    }
    last_ = w;
    if (fit_memory(knobs)) {  // a depth over the memory budget is lowered before anything is measured
      restart(knobs);
      return false;
    }
    const double per_step = w.step_s / double(w.steps);
    switch (phase_) {
      case phase::settled: {
        // The costs moved: the step time, or the cores other processes leave (by >= half a core).
        const double other = w.machine_busy >= 0 && w.cpu_s >= 0 ? w.machine_busy - w.cpu_s / w.step_s : -1;
        const bool moved = per_step > settled_step_ * (1 + opt_.drift) || per_step < settled_step_ * (1 - opt_.drift) ||
                           (other >= 0 && settled_other_ >= 0 && std::abs(other - settled_other_) >= 0.5);
        drifting_ = moved ? drifting_ + 1 : 0;
        if (drifting_ >= opt_.drift_windows * patience_) {
          ++searches_;
          restart(knobs);
        }
        return false;
      }
      case phase::base:
        add(base_, w);
        if (base_.windows < opt_.windows_per_setting) return false;
        return next_trial(knobs, index);
      case phase::trial:
        // Windows alternate between the neighbour and the current setting (T B T B), so a change in
        // the machine's load while it is measured falls on both alike.
        add(on_trial_ ? trial_ : fresh_, w);
        const std::size_t need = opt_.windows_per_setting * (rounds_ + 1);
        if (trial_.windows < need || fresh_.windows < need) {
          on_trial_ = fresh_.windows >= need || (trial_.windows < need && !on_trial_);
          knobs[move_.knob].value = on_trial_ ? move_.to : move_.from;
          return false;
        }
        // Every move must be `gain` faster, a deeper prefetch too: were a deeper queue kept when
        // faster by any margin, window-to-window noise of a few percent would walk the depth up to
        // whatever the noise favoured (measured: 8 and 16 where 2 was 5-12 % faster over epochs).
        // A move that undoes an earlier search's decision must be 2 x `gain` faster (hysteresis):
        // with one bar both ways, noise re-decided the depth at every search (2 -> 1 -> 2 -> 1).
        const double bar = 1 - opt_.gain * (reverting_ ? 2 : 1);
        const bool faster = trial_.best < fresh_.best * bar;
        if (measure_again(bar, faster)) {
          // The measurement does not settle it: measure both again (T B T B), the best window of
          // each over all rounds deciding.
          ++rounds_;
          on_trial_ = true;
          knobs[move_.knob].value = move_.to;
          return false;
        }
        rounds_ = 0;
        base_ = fresh_;
        fresh_ = {};
        ++tried_;
        if (faster) {
          knobs[move_.knob].value = move_.to;
          base_ = trial_;  // kept: the trial's windows measure the new setting
          last_move_ = move_;
        } else {
          knobs[move_.knob].value = move_.from;  // back, and never again in this search
          last_move_ = {};
        }
        trial_ = {};
        return next_trial(knobs, index);
    }
    return false;
  }

  bool settled() const { return phase_ == phase::settled; }
  std::size_t changes() const { return changes_; }    // neighbours tried and depths lowered to fit memory
  std::size_t searches() const { return searches_; }  // searches started because the costs moved
  std::size_t windows() const { return windows_; }
  const std::vector<autotune_verdict>& verdicts() const { return verdicts_; }
  std::string explanation() const { return verdicts_.empty() ? std::string() : verdicts_.back().text; }

 private:
  enum class phase { base, trial, settled };
  struct stats {
    std::size_t windows = 0, steps = 0;
    double best = 0;  // fastest mean step time of a window
    double wait = 0, step = 0, cpu = 0, load = 0, busy = 0;
    bool cpu_known = true, load_known = true, busy_known = true;
    std::vector<autotune_window::stage_cost> stages;  // work summed over the windows, the rest as last seen
    double memory_available = -1;
  };
  struct move {
    std::size_t knob = std::size_t(-1), from = 0, to = 0;
  };
  // Does moving knob i to v undo what an earlier search decided for it (held_)?
  bool reverts(const std::vector<knob_setting>& k, std::size_t i, std::size_t v) const {
    for (auto& h : held_)
      if (h.knob == i && k[i].value == h.to && (v > h.to) == (h.from > h.to)) return true;
    return false;
  }

  static void add(stats& s, const autotune_window& w) {
    const double per = w.step_s / double(w.steps);
    s.best = s.windows == 0 ? per : std::min(s.best, per);
    ++s.windows;
    s.steps += w.steps;
    s.wait += w.wait_s;
    s.step += w.step_s;
    if (w.cpu_s < 0) s.cpu_known = false;
    else s.cpu += w.cpu_s;
    if (w.load_s < 0) s.load_known = false;
    else s.load += w.load_s;
    if (w.machine_busy < 0) s.busy_known = false;
    else s.busy += w.machine_busy * w.step_s;  // time-weighted
    if (s.windows == 1 || s.stages.size() != w.stages.size()) {
      s.stages = w.stages;
    } else {
      for (std::size_t i = 0; i < w.stages.size(); ++i) {
        const double sum = s.stages[i].work_s + w.stages[i].work_s;
        s.stages[i] = w.stages[i];
        s.stages[i].work_s = sum;
      }
    }
    s.memory_available = w.memory_available;
  }

  // After a trial's round of windows: is one more round worth it? Yes (up to extra_rounds) when
  // the result is a close call either way: the trial came within 2 x `gain` of the bar, above it
  // (noise can hide a gain that small) or below it (noise can fake one: a neighbour that only
  // seemed `gain` faster in one round must show it again over both); and when a map worker more
  // was refused although the measurements predict it helps: the consumer waits for data and
  // every map worker is busy nearly all the time (a trial disturbed by another process would
  // otherwise be final).
  bool measure_again(double bar, bool faster) const {
    if (rounds_ >= opt_.extra_rounds) return false;
    if (reverting_) return true;  // undoing an earlier decision: never on one round of windows
    const double r = trial_.best / fresh_.best;
    if (r < bar * (1 + 2 * opt_.gain) && r > bar / (1 + 2 * opt_.gain)) return true;
    if (faster) return false;
    const bool more_workers = kinds_[move_.knob] == knob::map_parallelism && move_.to > move_.from;
    const bool predicted = base_.step > 0 && base_.wait / base_.step >= 2 * opt_.waiting && base_.load_known &&
                           base_.load >= 0.8 * double(move_.from) * base_.step;
    return more_workers && predicted;
  }

  bool same_kinds(const std::vector<knob_setting>& k) const {
    for (std::size_t i = 0; i < k.size(); ++i)
      if (k[i].kind != kinds_[i]) return false;
    return true;
  }

  void restart(const std::vector<knob_setting>& knobs) {
    kinds_.clear();
    for (auto& k : knobs) kinds_.push_back(k.kind);
    phase_ = phase::base;
    base_ = trial_ = fresh_ = {};
    visited_.clear();
    visited_.push_back(values(knobs));
    start_ = values(knobs);
    tried_ = 0;
    drifting_ = 0;
    rounds_ = 0;
    last_move_ = {};
    cpu_capped_ = mem_capped_ = false;
  }

  static std::vector<std::size_t> values(const std::vector<knob_setting>& k) {
    std::vector<std::size_t> v;
    for (auto& x : k) v.push_back(x.value);
    return v;
  }
  std::size_t bytes(const std::vector<knob_setting>& k) const {
    std::size_t n = 0;
    for (auto& x : k)
      if (x.kind == knob::prefetch_depth) n += x.value * x.unit_bytes;
    return n;
  }
  std::size_t workers(const std::vector<knob_setting>& k) const {
    std::size_t n = 0;
    for (auto& x : k)
      if (x.kind == knob::map_parallelism) n += x.value;
    return n;
  }
  bool fit_memory(std::vector<knob_setting>& k) {
    bool lowered = false;
    while (bytes(k) > budget_.memory_bytes) {
      knob_setting* deepest = nullptr;
      for (auto& x : k)
        if (x.kind == knob::prefetch_depth && x.value > 1 && (!deepest || x.value > deepest->value)) deepest = &x;
      if (!deepest) break;
      deepest->value /= 2;
      ++changes_;
      lowered = true;
    }
    return lowered;
  }

  // Can knob i go to value v? Notes why not when the budget stops it.
  bool allowed(std::vector<knob_setting>& k, std::size_t i, std::size_t v) {
    if (v == 0 || v > k[i].max) return false;
    if (k[i].kind == knob::map_parallelism && v > k[i].value && workers(k) + (v - k[i].value) > budget_.cores) {
      cpu_capped_ = true;
      return false;
    }
    if (k[i].kind == knob::prefetch_depth && v > k[i].value &&
        bytes(k) + (v - k[i].value) * k[i].unit_bytes > budget_.memory_bytes) {
      mem_capped_ = true;
      return false;
    }
    const std::size_t old = k[i].value;
    k[i].value = v;
    const auto cfg = values(k);
    k[i].value = old;
    return std::find(visited_.begin(), visited_.end(), cfg) == visited_.end();
  }

  // Picks the next neighbour to try, or settles.
  bool next_trial(std::vector<knob_setting>& k, std::size_t index) {
    const bool waiting = base_.wait / base_.step >= opt_.waiting;
    std::vector<move> moves;
    auto up = [&](std::size_t i) {
      return k[i].kind == knob::map_parallelism ? k[i].value + 1 : std::min(k[i].max, 2 * k[i].value);
    };
    auto down = [&](std::size_t i) { return k[i].kind == knob::map_parallelism ? k[i].value - 1 : k[i].value / 2; };
    // The direction that just helped first; then up while waiting for data, down (fewer threads, less memory) always.
    if (last_move_.knob != std::size_t(-1)) {
      const std::size_t i = last_move_.knob;
      moves.push_back({i, k[i].value, last_move_.to > last_move_.from ? up(i) : down(i)});
    }
    // Map workers before prefetch depth: a thread is the bigger lever.
    for (auto kind : {knob::map_parallelism, knob::prefetch_depth})
      for (std::size_t i = 0; i < k.size(); ++i)
        if (waiting && k[i].kind == kind) moves.push_back({i, k[i].value, up(i)});
    for (auto kind : {knob::map_parallelism, knob::prefetch_depth})
      for (std::size_t i = 0; i < k.size(); ++i)
        if (k[i].kind == kind) moves.push_back({i, k[i].value, down(i)});
    for (auto& m : moves) {
      if (m.to == m.from || !allowed(k, m.knob, m.to)) continue;
      move_ = m;
      reverting_ = reverts(k, m.knob, m.to);
      on_trial_ = true;
      fresh_ = trial_ = {};
      k[m.knob].value = m.to;
      visited_.push_back(values(k));
      ++changes_;
      phase_ = phase::trial;
      return false;
    }
    // Nothing left to try: settle on this setting.
    phase_ = phase::settled;
    // A search that ends where the previous one did doubles the patience of the next (a noisy
    // machine then stops causing searches); one that moves resets it.
    const auto now_values = values(k);
    // What this search moved is held: a later search undoes it only when that is 2 x `gain` faster.
    for (std::size_t i = 0; i < k.size(); ++i)
      if (start_[i] != now_values[i]) {
        std::erase_if(held_, [&](const held& h) { return h.knob == i; });
        held_.push_back({i, start_[i], now_values[i]});
      }
    patience_ = settled_values_ == now_values ? std::min<std::size_t>(patience_ * 2, 64) : 1;
    settled_values_ = now_values;
    settled_step_ = base_.step / double(base_.steps);
    settled_other_ = base_.busy_known && base_.cpu_known ? (base_.busy - base_.cpu) / base_.step : -1;
    drifting_ = 0;
    return say(k, index);
  }

  static std::string fmt(const char* f, double v) {
    char b[48];
    std::snprintf(b, sizeof b, f, v);
    return b;
  }
  static std::string pct(double share) { return fmt("%.0f%%", 100 * share); }

  static std::string mib(double bytes) { return fmt(bytes < 10 * 1048576.0 ? "%.1f" : "%.0f", bytes / 1048576.0); }

  // "; most of the input work: from_csv #1 (stage 1), 2.10 ms per step (84% of it); cache() right
  // after it ...": the stage whose own work is the largest, while the consumer waits for data.
  // The advice is the tf.data performance guide's ("Map and Cache": if the function passed to map
  // is expensive, apply cache after the map as long as the resulting dataset still fits in memory
  // or local storage): cache() when one pass of its output fits in half the free memory (or the
  // free memory is unknown), cache(path) when it does not.
  std::string slowest_stage(double share) const {
    if (share < opt_.waiting || base_.stages.empty() || base_.steps == 0) return {};
    std::size_t top = 0;
    double total = 0;
    for (std::size_t i = 0; i < base_.stages.size(); ++i) {
      total += base_.stages[i].work_s;
      if (base_.stages[i].work_s > base_.stages[top].work_s) top = i;
    }
    const auto& st = base_.stages[top];
    if (!(total > 0) || st.name.empty()) return {};
    std::string r = "; most of the input work: " + st.name + ", " + fmt("%.2f", 1e3 * st.work_s / double(base_.steps)) +
                    " ms per step (" + pct(st.work_s / total) + " of it)";
    if (st.cache == cache_advice::no) return r;
    const std::string cond = st.cache == cache_advice::if_deterministic ? ", if its function is deterministic" : "";
    const bool size_known = st.pass_bytes >= 0;
    const bool fits = !size_known || base_.memory_available < 0 || st.pass_bytes <= base_.memory_available / 2;
    if (fits)
      r += "; cache() right after it would do that work once instead of every epoch" + cond +
           (size_known ? " (its output, about " + mib(st.pass_bytes) + " MiB a pass, fits in memory)"
                       : " (if its output fits in memory)");
    else
      r += "; its output, about " + mib(st.pass_bytes) + " MiB a pass, does not fit in memory (" +
           mib(base_.memory_available) + " MiB free): cache(path) right after it would do that work once" + cond;
    return r;
  }

  bool say(const std::vector<knob_setting>& k, std::size_t index) {
    const double share = base_.wait / base_.step;
    const double cpu_cores = base_.cpu_known ? base_.cpu / base_.step : -1;
    const double busy = base_.busy_known ? base_.busy / base_.step : -1;
    const std::size_t cores = last_.machine_cores ? last_.machine_cores : budget_.cores;
    std::size_t prefetchers = 0;
    for (auto& x : k)
      if (x.kind == knob::prefetch_depth) ++prefetchers;
    const std::size_t maps = workers(k);
    const std::string threads = std::to_string(last_.compute_threads) + " compute thread" +
                                (last_.compute_threads == 1 ? "" : "s") + ", " + std::to_string(maps) + " map worker" +
                                (maps == 1 ? "" : "s") + ", " + std::to_string(prefetchers) + " prefetch thread" +
                                (prefetchers == 1 ? "" : "s");
    autotune_limit limit;
    std::string why;
    const double other = busy >= 0 && cpu_cores >= 0 ? busy - cpu_cores : -1;
    if (share < opt_.waiting) {
      limit = autotune_limit::compute;
      why = "compute (the input pipeline is not the bottleneck)";
    } else if (busy >= 0.85 * double(cores) && other >= 0.5) {
      limit = autotune_limit::other_processes;
      why = "CPU: all " + std::to_string(cores) + " cores of the machine are busy, other processes use " +
            fmt("%.1f", other) + " of them (" + threads + " here)";
    } else if (cpu_cores >= 0.85 * double(cores)) {
      limit = autotune_limit::cpu;
      why = "CPU: the process keeps " + fmt("%.1f", cpu_cores) + " of " + std::to_string(cores) + " cores busy (" +
            threads + ")";
    } else if (mem_capped_) {
      limit = autotune_limit::memory;
      why = "memory budget: a deeper prefetch would exceed " + fmt("%.2f", double(budget_.memory_bytes) / 1048576.0) +
            " MiB";
    } else if (cpu_capped_) {
      limit = autotune_limit::loading;
      why = "loading: map workers fill the budget of " + std::to_string(budget_.cores) + " cores";
    } else {
      limit = autotune_limit::serial_stages;
      why = "serial stages: more map workers or a deeper prefetch did not help (reading, filter, shuffle, batch or a "
            "map without autotune set the pace)";
    }
    std::string costs;
    if (base_.load_known && base_.load > 0)
      costs = " (map work " + fmt("%.2f", 1e3 * base_.load / double(base_.steps)) + " ms, compute " +
              fmt("%.2f", 1e3 * (base_.step - base_.wait) / double(base_.steps)) + " ms per step)";

    std::string changed;
    const auto now = values(k);
    for (std::size_t i = 0; i < k.size(); ++i) {
      if (!changed.empty()) changed += ", ";
      if (k[i].stage.empty()) changed += k[i].kind == knob::map_parallelism ? "map parallelism " : "prefetch depth ";
      else changed += k[i].stage + (k[i].kind == knob::map_parallelism ? " parallelism " : " depth ");
      changed += start_[i] == now[i] ? std::to_string(now[i]) + " (kept)"
                                     : std::to_string(start_[i]) + " -> " + std::to_string(now[i]);
    }
    const std::string stopped =
        tried_ == 0 && share < opt_.waiting
            ? "nothing to gain, less than " + pct(opt_.waiting) + " of step time waiting and no knob to lower"
            : "none of the " + std::to_string(tried_) + " neighbouring settings tried was faster (by " +
                  pct(opt_.gain) + ")";
    // The share is the consumer's wait over the windows measured at the settled setting, which
    // leave out the first steps of a pass and the trials; the epoch line's input_share counts
    // every step of the epoch. They differ, so the label says which this is.
    const std::string text = changed + "; stopped: " + stopped + "; limit: " + why + costs + slowest_stage(share) +
                             "; waiting for data: " + pct(share) + " of step time over the " +
                             std::to_string(base_.steps) + " steps measured at this setting (not the epoch's " +
                             "input_share, which counts every step)";
    const bool same = !verdicts_.empty() && verdicts_.back().limit == limit && verdicts_.back().values == now;
    if (same) return false;
    verdicts_.push_back({index, limit, share, now, text});
    return true;
  }

  autotune_budget budget_;
  options opt_;
  phase phase_ = phase::base;
  std::vector<knob::kind_t> kinds_;
  std::vector<std::vector<std::size_t>> visited_;
  std::vector<std::size_t> start_;
  stats base_, trial_, fresh_;
  bool on_trial_ = true;
  move move_, last_move_;
  autotune_window last_;
  std::size_t windows_ = 0, changes_ = 0, searches_ = 0, tried_ = 0, drifting_ = 0, rounds_ = 0;
  double settled_step_ = 0, settled_other_ = -1;
  std::size_t patience_ = 1;
  std::vector<std::size_t> settled_values_;
  bool cpu_capped_ = false, mem_capped_ = false;
  std::vector<autotune_verdict> verdicts_;
  struct held {
    std::size_t knob, from, to;
  };
  std::vector<held> held_;  // the moves earlier searches kept, one per knob
  bool reverting_ = false;  // the trial undoes one of them
};

using autotune_policy = basic_autotune_policy<>;

}  // namespace ctnn::data
