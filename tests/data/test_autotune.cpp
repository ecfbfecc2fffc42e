// autotune.hpp: the policy's decisions on a simulated pipeline (scripted costs, no threads, no
// clocks, deterministic), the tuner's windows, and autotuned pipelines under fit.
#include <doctest/doctest.h>

#include <ctnn/data/autotune.hpp>
#include <ctnn/data/pipeline.hpp>
#include <ctnn/ctnn.hpp>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <numeric>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

using namespace ctnn;
using data::knob;

namespace {

// A pipeline on a machine, as a formula. Per batch: `load` core-seconds of map
// work (spread over the map workers), `compute` core-seconds of model work
// (spread over the compute threads). The process gets the cores other
// processes leave; threads beyond them cost 8% each (switching); a shallow
// prefetch lets the two sides stall each other (the jitter term halves with
// every doubling of the depth). Noise: +-1% from a fixed seed.
struct sim {
  double load = 1e-3, compute = 1e-3;
  std::size_t cores = 2, compute_threads = 2;
  double other = 0;          // cores other processes keep busy
  double jitter = 0.3;
  double noise = 0.01;
  std::uint64_t seed = 1;
  std::size_t steps = 50;    // steps per window

  struct result {
    double step, wait;
  };
  // Noiseless step time of map parallelism p and prefetch depth d.
  result at(std::size_t p, std::size_t d) const {
    const double free = std::max(0.25, double(cores) - other);
    const double threads = double(compute_threads + p);
    const double pen = 1 + 0.08 * std::max(0.0, threads - free);
    const double compute_wall = compute / std::min(double(compute_threads), free) * pen;
    const double load_wall = load / std::min(double(p), free) * pen;
    const double bound = (load + compute) / free * pen;
    const double step = std::max({compute_wall, load_wall, bound}) + jitter * std::min(load_wall, compute_wall) / double(d);
    return {step, step - compute_wall};
  }
  double u() {  // in [0, 1)
    seed = seed * 6364136223846793005ull + 1442695040888963407ull;
    return double(seed >> 11) * (1.0 / 9007199254740992.0);
  }
  data::autotune_window window(const std::vector<data::knob_setting>& k) {
    std::size_t p = 1, d = 1;
    for (auto& x : k) (x.kind == knob::map_parallelism ? p : d) = x.value;
    const auto r = at(p, d);
    const double f = 1 + noise * (2 * u() - 1);
    data::autotune_window w;
    w.steps = steps;
    w.step_s = r.step * f * double(steps);
    w.wait_s = r.wait * f * double(steps);
    w.cpu_s = std::min(double(cores) - other, (load + compute) / r.step) * w.step_s;
    w.load_s = load * double(steps);
    w.machine_busy = std::min(double(cores), w.cpu_s / w.step_s + other);
    w.machine_cores = cores;
    w.compute_threads = compute_threads;
    return w;
  }
  // The best noiseless step time over every setting the budget allows.
  double best(std::size_t max_p, std::size_t max_d) const {
    double b = 1e9;
    for (std::size_t p = 1; p <= max_p; ++p)
      for (std::size_t d = 1; d <= max_d; d *= 2) b = std::min(b, at(p, d).step);
    return b;
  }
};

struct run_result {
  std::size_t p, d, windows_to_settle, changes_after;
  double step;
};
// Runs the policy on the simulation until it settles, then `after` more windows.
run_result drive(data::autotune_policy& pol, sim& s, std::vector<data::knob_setting>& k, std::size_t after = 200) {
  std::size_t n = 0;
  while (!pol.settled() && n < 500) {
    auto w = s.window(k);
    pol.observe(w, k);
    ++n;
  }
  const std::size_t changes = pol.changes();
  for (std::size_t i = 0; i < after; ++i) {
    auto w = s.window(k);
    pol.observe(w, k);
  }
  return {k[0].value, k[1].value, n, pol.changes() - changes, s.at(k[0].value, k[1].value).step};
}

std::vector<data::knob_setting> knobs(std::size_t p, std::size_t d, std::size_t max_p = 8, std::size_t bytes = 1000) {
  return {{knob::map_parallelism, p, max_p, 0}, {knob::prefetch_depth, d, 64, bytes}};
}

}  // namespace

TEST_CASE("policy: load-bound pipeline - converges from every start to within 5% of the best setting, then holds") {
  for (std::size_t p0 : {std::size_t(1), std::size_t(4)})
    for (std::size_t d0 : {std::size_t(1), std::size_t(16)}) {
      CAPTURE(p0);
      CAPTURE(d0);
      sim s{.load = 3e-3, .compute = 1e-3, .cores = 4, .compute_threads = 2};
      data::autotune_policy pol({.cores = 4, .memory_bytes = 1 << 20, .log = nullptr, .probe_machine = false});
      auto k = knobs(p0, d0);
      const auto r = drive(pol, s, k);
      CHECK(pol.settled());
      CAPTURE(pol.explanation());
      CHECK(r.step <= 1.05 * s.best(4, 64));
      CHECK(r.p >= 2);               // loading needed more than one worker
      CHECK(r.changes_after == 0);   // settled: no more changes, no oscillation
      CHECK(r.windows_to_settle < 100);
      REQUIRE(pol.verdicts().size() == 1);
      CHECK(pol.verdicts()[0].limit != data::autotune_limit::compute);
    }
}

TEST_CASE("policy: compute-bound pipeline - gives the cores back to compute and says compute is the limit") {
  for (std::size_t p0 : {std::size_t(1), std::size_t(4)})
    for (std::size_t d0 : {std::size_t(1), std::size_t(16)}) {
      CAPTURE(p0);
      CAPTURE(d0);
      sim s{.load = 0.2e-3, .compute = 2e-3, .cores = 4, .compute_threads = 2, .jitter = 0.1};
      data::autotune_policy pol({.cores = 4, .memory_bytes = 1 << 20, .log = nullptr, .probe_machine = false});
      auto k = knobs(p0, d0);
      const auto r = drive(pol, s, k);
      CHECK(r.step <= 1.05 * s.best(4, 64));
      CHECK(r.changes_after == 0);
      REQUIRE(!pol.verdicts().empty());
      CHECK(pol.verdicts().back().limit == data::autotune_limit::compute);
      CHECK(pol.explanation().find("limit: compute (the input pipeline is not the bottleneck)") != std::string::npos);
    }
}

TEST_CASE("policy: on 2 cores with 2 compute threads, a second map worker is kept only when it measures faster") {
  // Loading 1 ms, compute 1 ms of CPU on 2 cores already taken by the model's threads.
  sim s{.load = 1e-3, .compute = 1e-3, .cores = 2, .compute_threads = 2};
  data::autotune_policy pol({.cores = 2, .memory_bytes = 1 << 20, .log = nullptr, .probe_machine = false});
  auto k = knobs(1, 1, 2);
  const auto r = drive(pol, s, k);
  CHECK(r.step <= 1.05 * s.best(2, 64));
  CHECK(r.changes_after == 0);
  REQUIRE(pol.verdicts().size() == 1);
  const auto& v = pol.verdicts()[0];
  CAPTURE(v.text);
  CHECK(v.limit == data::autotune_limit::cpu);
  CHECK(v.text.find("limit: CPU: the process keeps 1.8 of 2 cores busy (2 compute threads, 1 map worker, 1 prefetch "
                    "thread) (map work 1.00 ms, compute 0.54 ms per step)") != std::string::npos);
}

TEST_CASE("policy: the machine's cores taken by another process - says so, and holds") {
  for (std::size_t p0 : {std::size_t(1), std::size_t(4)}) {
    CAPTURE(p0);
    sim s{.load = 1e-3, .compute = 1e-3, .cores = 4, .compute_threads = 4, .other = 3};
    data::autotune_policy pol({.cores = 4, .memory_bytes = 1 << 20, .log = nullptr, .probe_machine = false});
    auto k = knobs(p0, 1);
    const auto r = drive(pol, s, k);
    CHECK(r.step <= 1.05 * s.best(4, 64));
    CHECK(r.changes_after == 0);
    REQUIRE(pol.verdicts().size() == 1);
    CHECK(pol.verdicts()[0].limit == data::autotune_limit::other_processes);
    CHECK(pol.explanation().find("limit: CPU: all 4 cores of the machine are busy, other processes use 3.0 of them") !=
          std::string::npos);
  }
}

TEST_CASE("policy: costs that change half-way through an epoch start one new search and a new verdict") {
  sim s{.load = 0.2e-3, .compute = 2e-3, .cores = 4, .compute_threads = 2, .jitter = 0.1};
  data::autotune_policy pol({.cores = 4, .memory_bytes = 1 << 20, .log = nullptr, .probe_machine = false});
  auto k = knobs(1, 1);
  drive(pol, s, k, 20);
  REQUIRE(pol.verdicts().size() == 1);
  CHECK(pol.verdicts()[0].limit == data::autotune_limit::compute);
  s.load = 6e-3;  // the augmentation gets 30x dearer mid-epoch
  for (int i = 0; i < 10 && pol.settled(); ++i) {
    auto w = s.window(k);
    pol.observe(w, k);
  }
  CHECK(!pol.settled());  // searching again
  const auto r = drive(pol, s, k, 200);
  CAPTURE(pol.explanation());
  CHECK(pol.searches() == 1);
  CHECK(r.step <= 1.05 * s.best(4, 64));
  CHECK(r.p >= 2);
  CHECK(r.changes_after == 0);
  REQUIRE(pol.verdicts().size() == 2);
  CHECK(pol.verdicts()[1].limit != data::autotune_limit::compute);
  CHECK(pol.verdicts()[1].wait_share > 0.05);
}

TEST_CASE("policy: a memory budget caps the prefetch depth, from any start, and is named as the limit") {
  for (std::size_t d0 : {std::size_t(1), std::size_t(16)}) {
    CAPTURE(d0);
    sim s{.load = 1e-3, .compute = 1e-3, .cores = 8, .compute_threads = 2, .jitter = 0.6};
    data::autotune_policy pol({.cores = 8, .memory_bytes = 4000, .log = nullptr, .probe_machine = false});
    auto k = knobs(2, d0, 2, 1000);  // 2 workers at most; 1000 bytes a batch: at most 4 buffered
    const auto r = drive(pol, s, k);
    CHECK(r.d <= 4);
    CHECK(r.step <= 1.05 * s.best(2, 4));
    CHECK(r.changes_after == 0);
    REQUIRE(pol.verdicts().size() == 1);
    CHECK(pol.verdicts()[0].limit == data::autotune_limit::memory);
    CHECK(pol.explanation().find("limit: memory budget: a deeper prefetch would exceed 0.00 MiB") != std::string::npos);
  }
}

TEST_CASE("policy: the explanation says what changed, why it stopped, the limit and the waiting share") {
  sim s{.load = 3e-3, .compute = 1e-3, .cores = 4, .compute_threads = 2, .noise = 0};
  data::autotune_policy pol({.cores = 4, .memory_bytes = 1 << 20, .log = nullptr, .probe_machine = false});
  auto k = knobs(1, 1);
  drive(pol, s, k);
  const std::string e = pol.explanation();
  CAPTURE(e);
  CHECK(e.find("map parallelism 1 -> ") == 0);
  CHECK(e.find("prefetch depth 1 -> ") != std::string::npos);
  CHECK(e.find("; stopped: none of the ") != std::string::npos);
  CHECK(e.find(" neighbouring settings tried was faster (by 3%); limit: ") !=
        std::string::npos);
  CHECK(e.find("(map work 3.00 ms, compute ") != std::string::npos);
  CHECK(e.find("; waiting for data: ") != std::string::npos);
  CHECK(e.ends_with(" steps measured at this setting (not the epoch's input_share, which counts every step)"));
  CHECK(pol.verdicts()[0].values == std::vector<std::size_t>{k[0].value, k[1].value});
}

TEST_CASE("policy: a map worker more whose first trial windows were disturbed is measured again and kept") {
  // Load-bound on 2 cores: one worker busy all the time, the consumer waiting 46% of the step. The
  // first round of windows with 2 workers is disturbed (another process took the core: 4% slower
  // than 1 worker); later rounds show the real gain (25% faster). One round alone would refuse it.
  data::autotune_policy pol({.cores = 2, .memory_bytes = 1 << 20, .log = nullptr, .probe_machine = false});
  auto k = knobs(1, 1, 2);
  std::size_t two_worker_windows = 0;
  for (int i = 0; i < 200 && !pol.settled(); ++i) {
    const bool two = k[0].value == 2;
    double step = 1.2e-3;
    if (two) step = ++two_worker_windows <= 2 ? 1.25e-3 : 0.9e-3;
    data::autotune_window w{.steps = 30, .wait_s = 30 * (two ? 0.25e-3 : 0.55e-3), .step_s = 30 * step,
                            .cpu_s = 30 * 1.6e-3, .load_s = 30 * 1.19e-3, .compute_threads = 2};
    pol.observe(w, k);
  }
  CHECK(pol.settled());
  CHECK(k[0].value == 2);
  CHECK(two_worker_windows > 2);

  // The same pipeline where 2 workers really are slower: measured again, still refused.
  data::autotune_policy pol2({.cores = 2, .memory_bytes = 1 << 20, .log = nullptr, .probe_machine = false});
  auto k2 = knobs(1, 1, 2);
  for (int i = 0; i < 200 && !pol2.settled(); ++i) {
    const bool two = k2[0].value == 2;
    data::autotune_window w{.steps = 30, .wait_s = 30 * 0.55e-3, .step_s = 30 * (two ? 1.25e-3 : 1.2e-3),
                            .cpu_s = 30 * 1.6e-3, .load_s = 30 * 1.19e-3, .compute_threads = 2};
    pol2.observe(w, k2);
  }
  CHECK(pol2.settled());
  CHECK(k2[0].value == 1);
}

TEST_CASE("policy: a neighbour within twice the gain margin gets more rounds, one far slower gets none") {
  // p = 2 measures 2% faster in its first round (under the 3% bar), 10% faster afterwards: kept.
  data::autotune_policy pol({.cores = 2, .memory_bytes = 1 << 20, .log = nullptr, .probe_machine = false});
  auto k = knobs(1, 1, 2);
  std::size_t twos = 0;
  for (int i = 0; i < 200 && !pol.settled(); ++i) {
    const bool two = k[0].value == 2;
    double step = 1e-3;
    if (two) step = ++twos <= 2 ? 0.98e-3 : 0.9e-3;
    data::autotune_window w{.steps = 30, .wait_s = 30 * 0.2e-3, .step_s = 30 * step};  // map work unknown
    pol.observe(w, k);
  }
  CHECK(k[0].value == 2);
  CHECK(twos > 2);
  // p = 2 measures 20% slower: refused after its first round, not measured again.
  data::autotune_policy pol2({.cores = 2, .memory_bytes = 1 << 20, .log = nullptr, .probe_machine = false});
  auto k2 = knobs(1, 1, 2);
  std::size_t twos2 = 0;
  for (int i = 0; i < 200 && !pol2.settled(); ++i) {
    const bool two = k2[0].value == 2;
    twos2 += two;
    data::autotune_window w{.steps = 30, .wait_s = 30 * 0.2e-3, .step_s = 30 * (two ? 1.2e-3 : 1e-3)};
    pol2.observe(w, k2);
  }
  CHECK(k2[0].value == 1);
  CHECK(twos2 == 2);
}

TEST_CASE("policy: noise alone does not walk the prefetch depth away from its start") {
  // Load-bound (the consumer waits 33% of the step, so deeper queues are tried), but the depth
  // does not matter here (no jitter term) and every window is +-2% noisy. A deeper
  // queue must measure `gain` faster like any other move; kept when faster by any margin (the
  // rule before), the noise would have walked the depth to 4, 8, ... in some of these seeds.
  std::size_t moved = 0;
  for (std::uint64_t seed = 1; seed <= 40; ++seed) {
    CAPTURE(seed);
    sim s{.load = 1.5e-3, .compute = 1e-3, .cores = 4, .compute_threads = 2, .jitter = 0, .noise = 0.02, .seed = seed};
    data::autotune_policy pol({.cores = 4, .memory_bytes = 1 << 20, .log = nullptr, .probe_machine = false});
    auto k = knobs(2, 2, 2);  // 2 workers at most: only the depth can move up
    const auto r = drive(pol, s, k, 0);
    CHECK(pol.settled());
    moved += r.d != 2;
  }
  CHECK(moved == 0);
}

TEST_CASE("prefetch(data::autotune) starts at depth 2, the tuner's knob with it") {
  using E = data::sample<shape<1>>;
  data::prefetch_stage<E> p(nullptr, data::autotune);  // the start value needs no upstream
  REQUIRE(p.tuned() != nullptr);
  CHECK(p.tuned()->value.load() == 2);
  CHECK(p.tuned()->kind == knob::prefetch_depth);
  static_assert(data::prefetch_stage<E>::tuned_start_depth == 2);
}

TEST_CASE("policy: identical measurements keep the start setting (no gain, no change)") {
  data::autotune_policy pol({.cores = 4, .log = nullptr, .probe_machine = false});
  auto k = knobs(2, 4);
  data::autotune_window w{.steps = 10, .wait_s = 0.02, .step_s = 0.1};
  for (int i = 0; i < 60; ++i) pol.observe(w, k);
  CHECK(pol.settled());
  CHECK(k[0].value == 2);
  CHECK(k[1].value == 4);
  REQUIRE(pol.verdicts().size() == 1);
  CHECK(pol.explanation().find("map parallelism 2 (kept), prefetch depth 4 (kept); stopped: none of the 4 "
                               "neighbouring settings tried was faster (by 3%); limit: serial stages") == 0);
  CHECK(pol.explanation().find("; waiting for data: 20% of step time over the ") != std::string::npos);
}

TEST_CASE("tuner: windows of steps drive the policy, knobs follow it, each new verdict is printed once") {
  std::ostringstream log;
  data::tuner t({.cores = 2, .memory_bytes = 1 << 20, .log = &log, .probe_machine = false, .compute_threads = 2});
  auto map = std::make_shared<knob>(knob::map_parallelism, 1, 2);
  auto pf = std::make_shared<knob>(knob::prefetch_depth, 1, 64);
  t.enlist(map);
  t.enlist(map);  // enlisting twice (every pass) keeps one
  t.enlist(pf);
  t.begin_pass();
  for (int i = 0; i < 3; ++i) t.observe(0.5, 1.0, 0.1);  // refill steps: not measured
  for (int i = 0; i < 2000 && !t.settled(); ++i) t.observe(0.003, 0.010, 0.01);
  CHECK(t.settled());
  CHECK(map->value == 1);  // nothing measured faster
  CHECK(pf->value == 1);
  REQUIRE(t.messages().size() == 1);
  CHECK(t.messages()[0].find("map parallelism 1 (kept), prefetch depth 1 (kept); stopped: none of the 2") == 0);
  CHECK(t.messages()[0].find("waiting for data: 30% of step time over the ") != std::string::npos);
  CHECK(t.explanation() == t.messages()[0]);
  const auto v = t.verdicts();
  CHECK(v[0].pass == 0);
  CHECK(log.str() == "ctnn autotune (epoch 1, step " + std::to_string(v[0].step) + "): " + t.messages()[0] + "\n");
  for (int i = 0; i < 500; ++i) t.observe(0.003, 0.010, 0.01);
  CHECK(t.messages().size() == 1);  // the same verdict is not said again
}

TEST_CASE("autotune: bad budgets and knobs are rejected with the field named") {
  auto d = data::from_tensors<shape<4>>(std::vector<float>(8), std::vector<int>(2));
  CHECK_THROWS_WITH_AS(d.with_budget({.cores = 0}), "with_budget: autotune_budget.cores must be >= 1, got 0",
                       std::invalid_argument);
  CHECK_THROWS_WITH_AS(d.with_budget({.memory_bytes = 0}),
                       "with_budget: autotune_budget.memory_bytes must be >= 1, got 0", std::invalid_argument);
  CHECK_THROWS_WITH_AS(knob(knob::prefetch_depth, 0, 64), "autotune: a knob's start value must be in [1, 64], got 0",
                       std::invalid_argument);
  CHECK_THROWS_AS(data::autotune_policy({}, {.windows_per_setting = 0}), std::invalid_argument);
}

using S4 = data::sample<shape<4>>;
using net = sequential<input<4>, dense<8, relu>, dense<2>>;

TEST_CASE("autotune: a pipeline with autotuned map and prefetch trains, within its budget") {
  std::vector<float> x(4 * 512);
  std::vector<int> y(512);
  std::iota(x.begin(), x.end(), 0.f);
  for (std::size_t i = 0; i < y.size(); ++i) y[i] = int(i % 2);
  std::ostringstream log;
  auto train = data::from_tensors<shape<4>>(x, y)
                   .map([](S4 s) {
                     volatile double acc = 0;
                     for (int i = 0; i < 3000; ++i) acc = acc + i;
                     for (auto& v : s.x) v = v / 2048;
                     return s;
                   }, data::autotune)
                   .batch(8)
                   .prefetch(data::autotune)
                   .with_budget({.cores = 2, .memory_bytes = 1 << 20, .log = &log});
  auto m = make_model<net>(1);
  sgd opt;
  auto h = fit(m, sparse_categorical_crossentropy{.from_logits = true}, opt, train, epochs{3});
  CHECK(h.epochs() == 3);
  // Whatever this noisy machine measured: every verdict printed once, in order, and kept.
  std::string printed;
  for (auto& v : train.autotuner().verdicts())
    printed += "ctnn autotune (epoch " + std::to_string(v.pass + 1) + ", step " + std::to_string(v.step) + "): " +
               v.text + "\n";
  CHECK(log.str() == printed);
  CHECK(train.autotuner().verdicts().size() == train.autotuner().messages().size());
  // the history keeps, per epoch, the verdicts printed in it
  REQUIRE(h.autotune.size() == 3);
  std::size_t kept = 0;
  for (auto& e : h.autotune) kept += e.size();
  CHECK(kept == train.autotuner().messages().size());
}

TEST_CASE("tuner: the machine probe reads busy cores from /proc/stat") {
  data::detail::machine_cpu probe;
  CHECK(probe.busy_cores() == -1);  // the first call only takes a reference
  // /proc/stat advances in clock ticks (10 ms): work until a reading comes (at most about 2 s)
  double busy = -1;
  for (int tries = 0; tries < 200 && busy < 0; ++tries) {
    volatile double acc = 0;
    for (int i = 0; i < 2'000'000; ++i) acc = acc + i;
    busy = probe.busy_cores();
  }
  if (std::filesystem::exists("/proc/stat")) {
    CHECK(busy >= 0);
    CHECK(busy <= double(std::thread::hardware_concurrency()) + 1e-9);
  }
}

// ---- issue 24, item 6: names, the stage that dominates, hysteresis, history, the two shares ----

namespace {
// A source whose every element costs `us` microseconds of work (a parse), counting from 0.
struct slow_source final : data::stage<S4> {
  std::size_t n;
  int us;
  slow_source(std::size_t count, int micros) : n(count), us(micros) {}
  struct iter final : data::iterator<S4> {
    std::size_t i = 0, n;
    int us;
    iter(std::size_t count, int micros) : n(count), us(micros) {}
    bool next(S4& out) override {
      if (i == n) return false;
      const auto t0 = std::chrono::steady_clock::now();
      while (std::chrono::steady_clock::now() - t0 < std::chrono::microseconds(us)) {
      }
      out.x.assign(4, float(i));
      out.y.assign(1, int(i % 2));
      ++i;
      return true;
    }
  };
  data::iterator_ptr<S4> open(const data::open_context&) const override { return std::make_unique<iter>(n, us); }
};
}  // namespace

TEST_CASE("stage names: by kind and position, or by the label named() gives, and the knobs carry them") {
  auto d = data::dataset<S4>::source(std::make_shared<slow_source>(64, 0), "from_csv", data::cache_advice::yes)
               .map([](S4 s) { return s; }, data::autotune)
               .map([](S4 s) { return s; }, data::autotune)
               .named("parse")
               .shuffle(8, 1)
               .batch(4)
               .prefetch(data::autotune)
               .with_budget({.cores = 2, .log = nullptr, .probe_machine = false});
  CHECK(d.last_stage_name() == "prefetch #1 (stage 6)");
  {
    auto c = d.open(0);
    data::batch_of<shape<4>> b;
    while (c.next(b)) {
    }
  }
  // Two maps, both tuned: no longer both "map parallelism 1 (kept)". (A prefetch enlists before
  // the stages above it open, so it comes first.)
  CHECK(d.autotuner().knob_stages() ==
        std::vector<std::string>{"prefetch #1 (stage 6)", "map #1 (stage 2)", "map 'parse' (stage 3)"});
  std::vector<std::string> metered;
  for (auto& c : d.autotuner().stage_costs()) metered.push_back(c.name);
  CHECK(metered == std::vector<std::string>{"from_csv #1 (stage 1)", "map #1 (stage 2)", "map 'parse' (stage 3)",
                                            "shuffle #1 (stage 4)", "batch #1 (stage 5)", "prefetch #1 (stage 6)"});

  // ... and the policy's line names each knob by its stage.
  data::autotune_policy pol({.cores = 4, .log = nullptr, .probe_machine = false});
  std::vector<data::knob_setting> k = {{knob::map_parallelism, 1, 4, 0, "map #1 (stage 2)"},
                                       {knob::map_parallelism, 1, 4, 0, "map 'parse' (stage 3)"},
                                       {knob::prefetch_depth, 2, 64, 100, "prefetch #1 (stage 6)"}};
  data::autotune_window w{.steps = 10, .wait_s = 0.002, .step_s = 0.1};
  for (int i = 0; i < 100 && !pol.settled(); ++i) pol.observe(w, k);
  REQUIRE(pol.settled());
  CHECK(pol.explanation().find("map #1 (stage 2) parallelism 1 (kept), map 'parse' (stage 3) parallelism 1 (kept), "
                               "prefetch #1 (stage 6) depth ") == 0);
}

TEST_CASE("stage meters: each stage's own work, its upstream's excluded, is measured while a tuner is active") {
  // A source that works 300 us per element, a map that does nothing, batches of 4.
  auto d = data::dataset<S4>::source(std::make_shared<slow_source>(200, 300), "from_csv", data::cache_advice::yes)
               .map([](S4 s) { return s; }, data::autotune)
               .batch(4)
               .prefetch(2)
               .with_budget({.cores = 2, .log = nullptr, .probe_machine = false});
  {
    auto c = d.open(0);
    data::batch_of<shape<4>> b;
    while (c.next(b)) {
    }
  }
  const auto costs = d.autotuner().stage_costs();
  REQUIRE(costs.size() == 4);
  CAPTURE(costs[0].work_s);
  CAPTURE(costs[1].work_s);
  CAPTURE(costs[2].work_s);
  CHECK(costs[0].work_s >= 200 * 300e-6);                     // the source's work, all of it ...
  CHECK(costs[2].work_s < 0.5 * costs[0].work_s);             // ... not counted again in batch, downstream
  CHECK(costs[1].work_s < 0.5 * costs[0].work_s);             // the map's f is cheap
  CHECK(costs[3].work_s == 0);                                // prefetch only waits
  CHECK(costs[0].pass_bytes == doctest::Approx(200.0 * double(data::element_bytes(S4{{0, 0, 0, 0}, {0}}))));
  // Without a tuned stage nothing is measured (no clock reads on a plain pipeline).
  auto plain = data::dataset<S4>::source(std::make_shared<slow_source>(8, 0), "src").batch(4);
  auto c = plain.open(0);
  data::batch_of<shape<4>> b;
  while (c.next(b)) {
  }
  for (auto& x : plain.autotuner().stage_costs()) CHECK(x.work_s == 0);
}

namespace {
// A window of `steps` steps at `ms` per step, 40% of it waiting, with its stages' work per step.
data::autotune_window stage_window(double ms, std::vector<data::autotune_window::stage_cost> per_step,
                                   double machine_busy = -1, double memory = -1) {
  data::autotune_window w{.steps = 20, .wait_s = 20 * 0.4 * ms * 1e-3, .step_s = 20 * ms * 1e-3,
                          .cpu_s = 20 * 1.9 * ms * 1e-3, .load_s = -1, .machine_busy = machine_busy,
                          .machine_cores = 2, .compute_threads = 2};
  for (auto& s : per_step) s.work_s *= 20 * 1e-3;
  w.stages = std::move(per_step);
  w.memory_available = memory;
  return w;
}
std::string settle(data::autotune_policy& pol, std::vector<data::knob_setting>& k, const data::autotune_window& w) {
  for (int i = 0; i < 200 && !pol.settled(); ++i) pol.observe(w, k);
  REQUIRE(pol.settled());
  return pol.explanation();
}
}  // namespace

TEST_CASE("verdict: names the stage whose work dominates and recommends cache() after a parse that fits in memory") {
  // The user's CSV pipeline: 64 lines of 785 numbers parsed per step (1.9 ms), a cheap map; the
  // process keeps its 2 cores busy with that and the machine probe sees no other load.
  const std::vector<data::autotune_window::stage_cost> stages = {
      {"from_csv #1 (stage 1)", data::cache_advice::yes, 1.9, 60000 * 3300.0},
      {"map #1 (stage 2)", data::cache_advice::if_deterministic, 0.1, 60000 * 3300.0},
      {"batch #1 (stage 3)", data::cache_advice::no, 0.05, 60000 * 3300.0}};
  auto k = std::vector<data::knob_setting>{{knob::map_parallelism, 1, 1, 0, "map #1 (stage 2)"},
                                           {knob::prefetch_depth, 2, 2, 100, "prefetch #1 (stage 4)"}};
  data::autotune_policy pol({.cores = 2, .log = nullptr, .probe_machine = false});
  const std::string e = settle(pol, k, stage_window(2.5, stages, /*machine_busy=*/1.9, /*memory=*/8e9));
  CAPTURE(e);
  CHECK(pol.verdicts().back().limit != data::autotune_limit::other_processes);  // no other load measured
  CHECK(e.find("other processes") == std::string::npos);
  CHECK(e.find("; most of the input work: from_csv #1 (stage 1), 1.90 ms per step (93% of it); cache() right after it "
               "would do that work once instead of every epoch (its output, about 189 MiB a pass, fits in memory)") !=
        std::string::npos);

  // The same output with 300 MiB free: cache(path) instead.
  data::autotune_policy pol2({.cores = 2, .log = nullptr, .probe_machine = false});
  auto k2 = k;
  const std::string e2 = settle(pol2, k2, stage_window(2.5, stages, 1.9, 300 * 1048576.0));
  CHECK(e2.find("; its output, about 189 MiB a pass, does not fit in memory (300 MiB free): cache(path) right after it "
                "would do that work once") != std::string::npos);

  // A map of random augmentation that dominates is named, but not to be cached; a plain map is,
  // if its function is deterministic.
  auto aug = stages;
  aug[1] = {"map 'augment' (stage 2)", data::cache_advice::no, 3.0, 1e6};
  data::autotune_policy pol3({.cores = 2, .log = nullptr, .probe_machine = false});
  auto k3 = k;
  const std::string e3 = settle(pol3, k3, stage_window(4, aug, 1.9, 8e9));
  CHECK(e3.find("; most of the input work: map 'augment' (stage 2), 3.00 ms per step (61% of it); waiting") !=
        std::string::npos);
  auto plain = aug;
  plain[1].cache = data::cache_advice::if_deterministic;
  data::autotune_policy pol4({.cores = 2, .log = nullptr, .probe_machine = false});
  auto k4 = k;
  CHECK(settle(pol4, k4, stage_window(4, plain, 1.9, 8e9))
            .find("cache() right after it would do that work once instead of every epoch, if its function is "
                  "deterministic (its output, about 1.0 MiB a pass, fits in memory)") != std::string::npos);

  // Not waiting for data: no stage is blamed.
  auto w = stage_window(2.5, stages, 1.9, 8e9);
  w.wait_s = 0.01 * w.step_s;
  data::autotune_policy pol5({.cores = 2, .log = nullptr, .probe_machine = false});
  auto k5 = k;
  CHECK(settle(pol5, k5, w).find("most of the input work") == std::string::npos);
}

TEST_CASE("hysteresis: a prefetch depth does not flip-flop 2 -> 1 -> 2 -> 1 over epochs when the costs are steady") {
  // Depths 1 and 2 cost the same (1 ms per step, 30% waiting), 4 and more cost 12% more. Every
  // setting tried is measured 4% faster than it is (noise at its worst: always for the trial),
  // and each epoch starts with 3 slow windows (files reopened), which start a new search. With
  // one bar both ways each search undid the previous one: 2 -> 1, 1 -> 2, 2 -> 1, ...
  data::autotune_policy pol({.cores = 2, .memory_bytes = 1 << 20, .log = nullptr, .probe_machine = false});
  std::vector<data::knob_setting> k = {{knob::prefetch_depth, 2, 64, 1000, "prefetch #1 (stage 4)"}};
  double slow_depth_1 = 1.0;  // the real cost of depth 1, relative
  std::size_t home = k[0].value;
  bool was_settled = false;
  auto run_epoch = [&] {
    for (int w = 0; w < 40; ++w) {
      const std::size_t d = k[0].value;
      double ms = d >= 4 ? 1.12 : d == 1 ? slow_depth_1 : 1.0;
      if (d != home) ms *= 0.96;  // the trial's windows, flattered by noise
      if (w < 3) ms *= 1.4;
      data::autotune_window win{.steps = 20, .wait_s = 20 * 0.3e-3 * ms, .step_s = 20 * 1e-3 * ms};
      pol.observe(win, k);
      if (was_settled && !pol.settled()) home = k[0].value;  // a new search starts from here
      was_settled = pol.settled();
      if (pol.settled()) home = k[0].value;
    }
    return k[0].value;
  };
  std::vector<std::size_t> depths;
  for (int e = 0; e < 6; ++e) depths.push_back(run_epoch());
  CAPTURE(depths[0]);
  CAPTURE(depths[1]);
  CAPTURE(depths[2]);
  CAPTURE(depths[3]);
  std::size_t changes = 0;
  for (std::size_t i = 1; i < depths.size(); ++i) changes += depths[i] != depths[i - 1];
  CHECK(changes == 0);  // one decision (the first search's), kept

  // The costs change for real: depth 1 becomes 40% slower than 2. The decision is undone.
  REQUIRE(k[0].value == 1);
  slow_depth_1 = 1.4;
  for (int e = 0; e < 3; ++e) run_epoch();
  CHECK(k[0].value == 2);
}

TEST_CASE("hysteresis: with steady costs and +-5% noise no search undoes an earlier one (40 seeds)") {
  std::size_t reversals = 0, raised = 0;
  for (std::uint64_t seed = 1; seed <= 40; ++seed) {
    CAPTURE(seed);
    sim s{.load = 1.5e-3, .compute = 1e-3, .cores = 2, .compute_threads = 2, .jitter = 0.02, .noise = 0.05,
          .seed = seed};
    data::autotune_policy pol({.cores = 2, .memory_bytes = 1 << 20, .log = nullptr, .probe_machine = false});
    std::vector<data::knob_setting> k = {{knob::prefetch_depth, 2, 64, 1000}};
    auto epoch = [&] {  // 40 windows, the first 3 slower (a new pass): each may start a search
      for (int w = 0; w < 40; ++w) {
        auto win = s.window(k);
        if (w < 3) win.step_s *= 1.5;
        pol.observe(win, k);
      }
      return k[0].value;
    };
    std::vector<std::size_t> depths{2};
    for (int e = 0; e < 8; ++e) depths.push_back(epoch());
    for (std::size_t i = 1; i < depths.size(); ++i)
      if (depths[i] != depths[i - 1])
        for (std::size_t j = 0; j + 1 < i; ++j)
          if (depths[j] == depths[i] && depths[j + 1] != depths[i]) {
            ++reversals;
            break;
          }
    // The costs change for real: a consumer whose steps vary a lot (jitter) needs a deeper queue.
    s.jitter = 2.0;
    for (int e = 0; e < 4; ++e) epoch();
    raised += k[0].value >= 4;
  }
  CHECK(reversals == 0);
  CHECK(raised == 40);
}

TEST_CASE("history: hist.autotune of epoch e holds every decision printed during it, the first epoch's too") {
  // Every step waits ~2 ms for a sample; a memory budget below one element holds the prefetch at
  // depth 1, so the tuner settles (and prints) within the first epoch.
  std::vector<float> x(4 * 150);
  std::vector<int> y(150);
  for (std::size_t i = 0; i < y.size(); ++i) y[i] = int(i % 2);
  std::ostringstream log;
  auto train = data::from_tensors<shape<4>>(x, y)
                   .map([](S4 s) {
                     std::this_thread::sleep_for(std::chrono::milliseconds(2));
                     return s;
                   })
                   .batch(1)
                   .prefetch(data::autotune)
                   .with_budget({.cores = 2, .memory_bytes = 1, .log = &log, .probe_machine = false});
  auto m = make_model<net>(1);
  sgd opt;
  auto h = fit(m, sparse_categorical_crossentropy{.from_logits = true}, opt, train, epochs{2});
  REQUIRE(h.autotune.size() == 2);
  std::istringstream lines(log.str());
  std::string line;
  std::size_t printed = 0;
  std::vector<std::size_t> per_epoch(2);
  while (std::getline(lines, line)) {
    CAPTURE(line);
    std::size_t epoch = 0, step = 0;
    int used = 0;
    REQUIRE(std::sscanf(line.c_str(), "ctnn autotune (epoch %zu, step %zu): %n", &epoch, &step, &used) == 2);
    REQUIRE(epoch >= 1);
    REQUIRE(epoch <= 2);
    const std::string text = line.substr(std::size_t(used));
    const auto& kept = h.autotune[epoch - 1];
    CHECK(std::find(kept.begin(), kept.end(), text) != kept.end());
    ++printed;
    ++per_epoch[epoch - 1];
  }
  CHECK(per_epoch[0] >= 1);  // a decision was printed in the first epoch ...
  CHECK(h.autotune[0].size() == per_epoch[0]);  // ... and it is in autotune[0]
  CHECK(h.autotune[1].size() == per_epoch[1]);
  CHECK(printed == train.autotuner().messages().size());
}

TEST_CASE("the tuner's waiting share is labelled apart from the epoch's input_share, which counts every step") {
  // One simulated epoch: 3 refill steps waiting 90% of 10 ms, then steps of 10 ms waiting 3 ms.
  std::ostringstream log;
  data::tuner t({.cores = 2, .memory_bytes = 1 << 20, .log = &log, .probe_machine = false, .compute_threads = 2});
  auto pf = std::make_shared<knob>(knob::prefetch_depth, 1, 1);
  t.enlist(pf, "prefetch #1 (stage 3)");
  t.begin_pass(0);
  double wait = 0, step = 0;
  auto observe = [&](double w, double s) {
    t.observe(w, s, 0.01);
    wait += w;
    step += s;
  };
  for (int i = 0; i < 3; ++i) observe(0.009, 0.010);
  for (int i = 0; i < 400 && !t.settled(); ++i) observe(0.003, 0.010);
  for (int i = 0; i < 20; ++i) observe(0.003, 0.010);
  REQUIRE(t.settled());
  const std::string said = t.explanation();
  CAPTURE(said);
  const std::string epoch_line = input_verdict(wait / step);  // what fit logs for the epoch
  CAPTURE(epoch_line);
  // Two different numbers of two different spans, each with its own label: the tuner's names
  // its steps and says it is not the epoch's input_share; the epoch line's is the only
  // "of step time is spent waiting for data".
  CHECK(said.find("waiting for data: 30% of step time over the ") != std::string::npos);
  CHECK(said.find("steps measured at this setting (not the epoch's input_share, which counts every step)") !=
        std::string::npos);
  CHECK(said.find("is spent waiting for data") == std::string::npos);
  CHECK(epoch_line.find("of step time is spent waiting for data") != std::string::npos);
  CHECK(wait / step > 0.30);
}
