// ctnn/data/autotune.hpp — tuning map parallelism and prefetch depth while training runs.
//
// A stage given data::autotune owns a knob (its parallelism or depth). When a
// pipeline is opened its knobs enlist with the dataset's tuner; the cursor the
// trainer reads from reports, per step, the time spent waiting for the next
// element, the whole step time and the process CPU time. Every window (>= 10
// steps and >= 50 ms) the tuner compares the waiting share with the previous
// one: while >= 5% of step time is spent waiting it raises one knob (map
// parallelism +1 up to the core budget, then prefetch depth x2 up to the
// memory budget) and keeps the change only if the next window's mean wait
// per step fell by >= 10% and its mean step time did not grow by > 2%.
// The reason names the CPU when the process, or the whole machine (other
// processes, read from /proc/stat), uses >= 85% of the cores.
// When nothing is left to try, or the wait is already small, it says so
// once, in plain words with the reason (messages(); also printed to
// budget.log unless null); it goes on tuning if the wait grows again later.
#pragma once
#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdio>
#include <iostream>
#include <memory>
#include <mutex>
#include <ostream>
#include <string>
#include <thread>
#include <vector>

namespace ctnn::data {

struct autotune_t {};
inline constexpr autotune_t autotune{};

struct autotune_budget {
  std::size_t cores = std::max(1u, std::thread::hardware_concurrency());  // total map workers
  std::size_t memory_bytes = std::size_t(256) << 20;                       // all prefetch buffers
  std::ostream* log = &std::clog;                                           // where verdicts are said
  bool probe_machine = true;  // read /proc/stat to tell when other processes take the cores
};

namespace detail {
// Cores of the whole machine busy since the previous call, from /proc/stat (-1 if unreadable).
class machine_cpu {
 public:
  double busy_cores() {
    std::FILE* f = std::fopen("/proc/stat", "r");
    if (!f) return -1;
    unsigned long long v[8] = {};
    const int n = std::fscanf(f, "cpu %llu %llu %llu %llu %llu %llu %llu %llu", &v[0], &v[1], &v[2], &v[3], &v[4], &v[5],
                              &v[6], &v[7]);
    std::fclose(f);
    if (n < 4) return -1;
    unsigned long long total = 0;
    for (auto x : v) total += x;
    const unsigned long long idle = v[3] + v[4];
    const double cores = std::max(1u, std::thread::hardware_concurrency());
    double r = -1;
    if (total_ && total > total_) r = cores * double((total - idle) - (total_ - idle_)) / double(total - total_);
    total_ = total;
    idle_ = idle;
    return r;
  }

 private:
  unsigned long long total_ = 0, idle_ = 0;
};
}  // namespace detail

// One tunable value. Stages read `value` from their threads; the tuner writes it.
struct knob {
  enum kind_t { map_parallelism, prefetch_depth };
  knob(kind_t k, std::size_t start, std::size_t hard_max) : kind(k), value(start), max(hard_max) {}
  kind_t kind;
  std::atomic<std::size_t> value;
  std::size_t max;                            // what the stage can do (threads it started, queue limit)
  std::atomic<std::size_t> unit_bytes{0};     // prefetch: bytes of one buffered element
  bool exhausted = false;                     // raising it did not help (tuner thread only)
};

class tuner {
 public:
  explicit tuner(autotune_budget b = {}) : budget_(b) {}

  const autotune_budget& budget() const { return budget_; }

  void enlist(const std::shared_ptr<knob>& k) {
    std::lock_guard lk(m_);
    for (auto& h : knobs_)
      if (h == k) return;
    knobs_.push_back(k);
  }
  bool active() const {
    std::lock_guard lk(m_);
    return !knobs_.empty();
  }

  // One consumer step: wait_s waiting for data out of step_s in all; cpu_s process CPU time in it.
  void observe(double wait_s, double step_s, double cpu_s) {
    std::lock_guard lk(m_);
    wait_ += wait_s;
    total_ += step_s;
    cpu_ += cpu_s;
    if (++steps_ < 10 || total_ < 0.05) return;
    machine_ = budget_.probe_machine ? probe_.busy_cores() : -1;
    decide(wait_ / total_, cpu_ / total_, wait_ / double(steps_), total_ / double(steps_));
    wait_ = total_ = cpu_ = 0;
    steps_ = 0;
  }

  std::vector<std::string> messages() const {
    std::lock_guard lk(m_);
    return messages_;
  }
  bool settled() const {
    std::lock_guard lk(m_);
    return said_;
  }

 private:
  static std::string pct(double share) {
    char b[32];
    std::snprintf(b, sizeof b, "%.0f%%", 100 * share);
    return b;
  }
  std::size_t threads_in_use() const {
    std::size_t n = 0;
    for (auto& k : knobs_)
      if (k->kind == knob::map_parallelism) n += k->value;
    return n;
  }
  std::size_t prefetch_bytes() const {
    std::size_t n = 0;
    for (auto& k : knobs_)
      if (k->kind == knob::prefetch_depth) n += k->value * k->unit_bytes;
    return n;
  }
  void say(const std::string& s) {
    said_ = true;
    messages_.push_back(s);
    if (budget_.log) *budget_.log << "ctnn autotune: " << s << std::endl;
  }

  // share: waiting / step time; wait, step: mean seconds per step in the window.
  void decide(double share, double cores_used, double wait, double step) {
    if (trial_) {
      // Kept only if the wait fell by >= 10% without making the steps slower
      // (more workers can steal the cores the model computes on).
      if (wait <= trial_wait_ * 0.9 && step <= trial_step_ * 1.02) {
        trial_->exhausted = false;
      } else {
        trial_->value = trial_old_;  // no gain: back to what it was, and do not try it again
        trial_->exhausted = true;
      }
      trial_.reset();
      return;  // the next window measures the settled state
    }
    if (share < 0.05) {
      if (++calm_ >= 3 && !said_)
        say("input pipeline is not the bottleneck: " + pct(share) + " of step time is spent waiting for data");
      return;
    }
    calm_ = 0;
    bool cpu_capped = false, mem_capped = false;
    for (auto& k : knobs_) {
      if (k->exhausted || k->value >= k->max) continue;
      if (k->kind == knob::map_parallelism && threads_in_use() + 1 > budget_.cores) {
        cpu_capped = true;
        continue;
      }
      if (k->kind == knob::prefetch_depth) {
        const std::size_t next = std::min(k->max, 2 * k->value);
        if (prefetch_bytes() + (next - k->value) * k->unit_bytes > budget_.memory_bytes) {
          mem_capped = true;
          continue;
        }
      }
      trial_ = k;
      trial_old_ = k->value;
      trial_wait_ = wait;
      trial_step_ = step;
      k->value = k->kind == knob::map_parallelism ? k->value + 1 : std::min(k->max, 2 * k->value);
      return;
    }
    if (said_) return;  // keeps tuning when the wait comes back, but says it once
    const std::string waiting = pct(share) + " of step time is spent waiting for data";
    if (cores_used >= 0.85 * double(budget_.cores)) {
      char b[160];
      std::snprintf(b, sizeof b, "limited by the CPU budget: all %zu cores are busy (the process used %.1f); ",
                    budget_.cores, cores_used);
      say(b + waiting);
    } else if (machine_ >= 0.85 * std::max(1u, std::thread::hardware_concurrency())) {
      char b[200];
      std::snprintf(b, sizeof b,
                    "limited by the CPU: all %u cores of the machine are busy (this process uses %.1f of them, other "
                    "processes the rest); ",
                    std::max(1u, std::thread::hardware_concurrency()), cores_used);
      say(b + waiting);
    } else if (cpu_capped) {
      say("limited by the CPU budget: map workers use all " + std::to_string(budget_.cores) +
          " cores of the budget; " + waiting);
    } else if (mem_capped) {
      say("limited by the memory budget: a deeper prefetch would exceed " +
          std::to_string(budget_.memory_bytes >> 20) + " MiB; " + waiting);
    } else {
      say("no tunable parameter reduces the wait: " + waiting +
          ", and more map workers or a deeper prefetch did not help (the serial stages - reading, filter, "
          "shuffle, batch - or a map without autotune set the pace)");
    }
  }

  autotune_budget budget_;
  mutable std::mutex m_;
  std::vector<std::shared_ptr<knob>> knobs_;
  std::vector<std::string> messages_;
  detail::machine_cpu probe_;
  double machine_ = -1;  // busy cores of the machine in the last window (-1: unknown)
  double wait_ = 0, total_ = 0, cpu_ = 0;
  std::size_t steps_ = 0, calm_ = 0;
  std::shared_ptr<knob> trial_;
  std::size_t trial_old_ = 0;
  double trial_wait_ = 0, trial_step_ = 0;
  bool said_ = false;
};

}  // namespace ctnn::data
