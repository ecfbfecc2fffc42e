// ctnn/data/autotune/tuner.hpp — the autotuner: measurements from the running
// pipeline, decisions by autotune_policy.
//
// A stage given data::autotune owns a knob; when a pipeline opens, its knobs
// enlist with the dataset's tuner (enlist(knob, stage name)) and its stages
// enlist a stage_meter (their own work time, elements and bytes). The cursor the
// trainer reads from reports each step (waiting time, step time, process CPU
// time); the tuner adds steps up into windows (>= window_steps steps and >=
// window_seconds; the first skip_after_open steps of a pass and skip_after_change
// steps after a change not measured), adds the map workers' busy time, the
// machine's busy cores (autotune/machine.hpp) and the stages' costs, hands each
// window to the policy, applies the knob values it returns and prints each new
// verdict with its epoch and step on the budget's log. Every thread that competes
// for the cores is counted: the compute threads (the CPU kernels' pool unless the
// budget says otherwise), the map workers and the prefetch threads.
// Docs: docs/input-pipeline.md ("Autotune").
#pragma once
#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include "../../backends/cpu/thread_pool.hpp"
#include "../../core/narrow_std.hpp"
#include "machine.hpp"
#include "policy.hpp"

namespace ctnn::data {

// The measured cost of one stage, kept while a tuner is active (stages enlist it when a pass
// opens; metering is on once a knob enlisted). work_ns is the time in the stage's own work, its
// upstream's excluded: a map's time in f, a reader's time reading and parsing.
struct stage_meter {
  stage_meter(stage_name n, cache_advice c) : name(std::move(n)), cache(c) {}
  const stage_name name;
  const cache_advice cache;
  std::atomic<bool> on{false};
  std::atomic<std::uint64_t> work_ns{0};
  std::atomic<std::uint64_t> elements{0}, bytes{0};  // what it delivered, in all passes
  std::atomic<std::uint64_t> pass_elements{0};       // the most it delivered in one complete pass
};

// ---- the tuner: measurements from the running pipeline, decisions by the policy ----

template <class = void>
class basic_tuner {
 public:
  static constexpr std::size_t window_steps = 10;
  static constexpr double window_seconds = 0.05;
  static constexpr std::size_t skip_after_change = 5;  // steps not measured after a knob changed (refill)
  static constexpr std::size_t skip_after_open = 3;    // ... and at the start of a pass

  explicit basic_tuner(autotune_budget b = {}) : budget_((check_budget(b, "with_budget"), b)), policy_(b) { reset_window(); }

  const autotune_budget& budget() const { return budget_; }

  // A stage's knob; `stage` is the stage's name for the explanations ("" in tests of the tuner alone).
  void enlist(const std::shared_ptr<knob>& k, std::string stage = {}) {
    std::lock_guard lk(m_);
    for (auto& h : knobs_)
      if (h == k) return;
    knobs_.push_back(k);
    knob_names_.push_back(std::move(stage));
    busy_seen_.push_back(k->busy_ns.load());
    for (auto& m : meters_) m->on = true;  // a tuned pipeline: every stage measures its work
  }
  // A stage's meter (its own work), in pipeline order: the source first.
  void enlist(const std::shared_ptr<stage_meter>& m) {
    std::lock_guard lk(m_);
    for (auto& h : meters_)
      if (h == m) return;
    meters_.push_back(m);
    work_seen_.push_back(m->work_ns.load());
    work_start_.push_back(m->work_ns.load());
    if (!knobs_.empty()) m->on = true;
  }
  bool active() const {
    std::lock_guard lk(m_);
    return !knobs_.empty();
  }

  // A pass starts: its first steps refill the pipeline and are not measured. `pass` is the epoch
  // (counted from 0) that the printed decisions name.
  void begin_pass(std::size_t pass = 0) {
    std::lock_guard lk(m_);
    reset_window();
    skip_ = skip_after_open;
    pass_ = pass;
    step_ = 0;
  }

  // One consumer step: wait_s waiting for data out of step_s in all; cpu_s process CPU time in it.
  void observe(double wait_s, double step_s, double cpu_s) {
    std::lock_guard lk(m_);
    ++step_;
    if (skip_) {
      --skip_;
      if (!skip_) reset_window();
      return;
    }
    w_.wait_s += wait_s;
    w_.step_s += step_s;
    w_.cpu_s += cpu_s;
    if (++w_.steps < window_steps || w_.step_s < window_seconds) return;
    w_.load_s = 0;
    for (std::size_t i = 0; i < knobs_.size(); ++i) {
      const std::uint64_t b = knobs_[i]->busy_ns.load();
      w_.load_s += 1e-9 * double(b - busy_seen_[i]);
    }
    w_.machine_busy = budget_.probe_machine ? probe_.busy_cores() : -1;
    w_.machine_cores = budget_.probe_machine ? std::max(1u, std::thread::hardware_concurrency()) : 0;
    w_.compute_threads = budget_.compute_threads ? budget_.compute_threads : kernels::cpu::threads();
    w_.memory_available = budget_.probe_machine ? detail::free_memory_bytes() : -1;
    for (std::size_t i = 0; i < meters_.size(); ++i)
      w_.stages.push_back(cost(i, meters_[i]->work_ns.load() - work_seen_[i]));
    std::vector<knob_setting> ks;
    for (std::size_t i = 0; i < knobs_.size(); ++i)
      ks.push_back({knobs_[i]->kind, knobs_[i]->value.load(), knobs_[i]->max, knobs_[i]->unit_bytes.load(),
                    knob_names_[i]});
    const bool said = policy_.observe(w_, ks);
    bool changed = false;
    for (std::size_t i = 0; i < knobs_.size(); ++i)
      if (knobs_[i]->value.load() != ks[i].value) {
        knobs_[i]->value = ks[i].value;
        changed = true;
      }
    if (said) {
      said_at_.push_back({pass_, step_});
      if (budget_.log)
        *budget_.log << "ctnn autotune (epoch " << pass_ + 1 << ", step " << step_ << "): " << policy_.explanation()
                     << std::endl;
    }
    reset_window();
    if (changed) skip_ = skip_after_change;
  }

  // The one-line explanations, one per change of verdict, oldest first.
  std::vector<std::string> messages() const {
    std::lock_guard lk(m_);
    std::vector<std::string> r;
    for (auto& v : policy_.verdicts()) r.push_back(v.text);
    return r;
  }
  std::vector<autotune_verdict> verdicts() const {
    std::lock_guard lk(m_);
    auto v = policy_.verdicts();
    for (std::size_t i = 0; i < v.size() && i < said_at_.size(); ++i) {
      v[i].pass = said_at_[i].first;
      v[i].step = said_at_[i].second;
    }
    return v;
  }
  // The stages of the enlisted knobs, in enlisting order ("map #1 (stage 2)", ...).
  std::vector<std::string> knob_stages() const {
    std::lock_guard lk(m_);
    return knob_names_;
  }
  // Every metered stage (source first) with its work since it enlisted, in seconds, and the
  // estimated bytes of one pass of its output.
  std::vector<autotune_window::stage_cost> stage_costs() const {
    std::lock_guard lk(m_);
    std::vector<autotune_window::stage_cost> r;
    for (std::size_t i = 0; i < meters_.size(); ++i) r.push_back(cost(i, meters_[i]->work_ns.load() - work_start_[i]));
    return r;
  }
  std::size_t said() const {  // how many verdicts were said (printed) so far
    std::lock_guard lk(m_);
    return policy_.verdicts().size();
  }
  // The latest explanation ("" before the first verdict): what fit can copy into an epoch's record.
  std::string explanation() const {
    std::lock_guard lk(m_);
    return policy_.explanation();
  }
  bool settled() const {
    std::lock_guard lk(m_);
    return policy_.settled();
  }
  std::size_t changes() const {  // neighbours tried so far (and depths lowered to fit memory)
    std::lock_guard lk(m_);
    return policy_.changes();
  }
  std::size_t searches() const {  // searches started again because the costs moved
    std::lock_guard lk(m_);
    return policy_.searches();
  }

 private:
  // Meter i as the policy sees it, with `work_ns` of work; its output per pass is estimated from
  // its mean element size and its largest complete pass (the elements so far before one ends).
  autotune_window::stage_cost cost(std::size_t i, std::uint64_t work_ns) const {
    const auto& m = *meters_[i];
    const std::uint64_t n = m.elements.load(), pass_n = m.pass_elements.load();
    const double per = n ? double(m.bytes.load()) / double(n) : 0;
    return {m.name.str(), m.cache, 1e-9 * double(work_ns), n ? per * double(pass_n ? pass_n : n) : -1};
  }

  void reset_window() {
    w_ = {};
    w_.cpu_s = 0;
    for (std::size_t i = 0; i < knobs_.size(); ++i) busy_seen_[i] = knobs_[i]->busy_ns.load();
    for (std::size_t i = 0; i < meters_.size(); ++i) work_seen_[i] = meters_[i]->work_ns.load();
  }

  autotune_budget budget_;
  mutable std::mutex m_;
  autotune_policy policy_;
  std::vector<std::shared_ptr<knob>> knobs_;
  std::vector<std::uint64_t> busy_seen_;
  std::vector<std::string> knob_names_;
  std::vector<std::shared_ptr<stage_meter>> meters_;
  std::vector<std::uint64_t> work_seen_, work_start_;
  detail::machine_cpu probe_;
  autotune_window w_{};
  std::size_t skip_ = 0, pass_ = 0, step_ = 0;
  std::vector<std::pair<std::size_t, std::size_t>> said_at_;  // (pass, step) of each verdict
};

using tuner = basic_tuner<>;

}  // namespace ctnn::data
