// autotune.hpp: the policy's decisions on a simulated pipeline (scripted costs, no threads, no
// clocks, deterministic), the tuner's windows, and autotuned pipelines under fit.
#include <doctest/doctest.h>

#include <ctnn/data/autotune.hpp>
#include <ctnn/data/pipeline.hpp>
#include <ctnn/ctnn.hpp>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <numeric>
#include <sstream>
#include <stdexcept>
#include <thread>

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
  CHECK(e.find("% of step time is spent waiting for data") == e.size() - 40);
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
  CHECK(pol.explanation().find("; 20% of step time is spent waiting for data") != std::string::npos);
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
  CHECK(t.messages()[0].find("30% of step time is spent waiting for data") != std::string::npos);
  CHECK(t.explanation() == t.messages()[0]);
  CHECK(log.str() == "ctnn autotune: " + t.messages()[0] + "\n");
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
  for (auto& m : train.autotuner().messages()) printed += "ctnn autotune: " + m + "\n";
  CHECK(log.str() == printed);
  CHECK(train.autotuner().verdicts().size() == train.autotuner().messages().size());
  // the history keeps the explanation of every epoch
  REQUIRE(h.autotune.size() == 3);
  CHECK(h.autotune.back() == train.autotuner().explanation());
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
