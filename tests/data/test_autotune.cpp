// autotune.hpp: the tuner's decisions on given measurements, and autotuned pipelines under fit.
#include <doctest/doctest.h>

#include <ctnn/data/autotune.hpp>
#include <ctnn/data/pipeline.hpp>
#include <ctnn/ctnn.hpp>

#include <memory>
#include <numeric>
#include <filesystem>
#include <sstream>
#include <thread>

using namespace ctnn;
using data::knob;

namespace {
// One window of 10 steps of 10 ms each, `share` of it waiting, `cores` busy.
void window(data::tuner& t, double share, double cores = 0.5, double step = 0.01) {
  for (int i = 0; i < 10; ++i) t.observe(step * share, step, step * cores);
}
}  // namespace

TEST_CASE("tuner: raises map parallelism while it cuts the wait, reverts what does not help, then says why it stops") {
  std::ostringstream log;
  data::tuner t({.cores = 4, .memory_bytes = 1 << 20, .log = &log, .probe_machine = false});
  auto map = std::make_shared<knob>(knob::map_parallelism, 1, 8);
  t.enlist(map);
  t.enlist(map);  // enlisting twice (every pass) keeps one
  window(t, 0.5);
  CHECK(map->value == 2);  // trial
  window(t, 0.3);          // better by >= 10%: kept
  CHECK(map->value == 2);
  window(t, 0.3);
  CHECK(map->value == 3);  // next trial
  window(t, 0.29);         // no real gain: reverted
  CHECK(map->value == 2);
  CHECK(t.messages().empty());
  window(t, 0.3);  // nothing left to try, the cores are not busy
  REQUIRE(t.messages().size() == 1);
  CHECK(t.messages()[0].find("no tunable parameter reduces the wait: 30% of step time is spent waiting for data") == 0);
  CHECK(log.str() == "ctnn autotune: " + t.messages()[0] + "\n");
  window(t, 0.3);
  window(t, 0.01);
  CHECK(t.messages().size() == 1);  // said once
}

TEST_CASE("tuner: a change that cuts the wait but slows the steps is reverted") {
  data::tuner t({.cores = 4, .log = nullptr, .probe_machine = false});
  auto map = std::make_shared<knob>(knob::map_parallelism, 1, 8);
  t.enlist(map);
  window(t, 0.4, 0.5, 0.010);  // 4 ms waiting per 10 ms step
  CHECK(map->value == 2);
  window(t, 0.25, 0.5, 0.012);  // 3 ms waiting, but 12 ms steps: the workers took the model's cores
  CHECK(map->value == 1);
}

TEST_CASE("tuner: limited by the CPU budget") {
  data::tuner t({.cores = 2, .log = nullptr, .probe_machine = false});
  auto map = std::make_shared<knob>(knob::map_parallelism, 2, 8);
  t.enlist(map);
  window(t, 0.4, 1.95);
  REQUIRE(t.messages().size() == 1);
  CHECK(t.messages()[0] ==
        "limited by the CPU budget: all 2 cores are busy (the process used 1.9); 40% of step time is spent waiting for data");
  CHECK(map->value == 2);

  data::tuner u({.cores = 2, .log = nullptr, .probe_machine = false});
  auto m2 = std::make_shared<knob>(knob::map_parallelism, 2, 8);
  u.enlist(m2);
  window(u, 0.4, 1.0);
  REQUIRE(u.messages().size() == 1);
  CHECK(u.messages()[0] ==
        "limited by the CPU budget: map workers use all 2 cores of the budget; 40% of step time is spent waiting for data");
}

TEST_CASE("tuner: prefetch depth doubles within the memory budget") {
  data::tuner t({.cores = 1, .memory_bytes = 1000, .log = nullptr, .probe_machine = false});
  auto pf = std::make_shared<knob>(knob::prefetch_depth, 1, 64);
  pf->unit_bytes = 200;
  t.enlist(pf);
  window(t, 0.5);
  CHECK(pf->value == 2);
  window(t, 0.2);
  window(t, 0.2);
  CHECK(pf->value == 4);
  window(t, 0.1);
  window(t, 0.1);  // 8 x 200 bytes would exceed 1000
  CHECK(pf->value == 4);
  REQUIRE(t.messages().size() == 1);
  CHECK(t.messages()[0] == "limited by the memory budget: a deeper prefetch would exceed 0 MiB; 10% of step time is spent waiting for data");
}

TEST_CASE("tuner: says once that the input pipeline is not the bottleneck") {
  data::tuner t({.log = nullptr, .probe_machine = false});
  auto pf = std::make_shared<knob>(knob::prefetch_depth, 1, 64);
  t.enlist(pf);
  window(t, 0.02);
  window(t, 0.02);
  CHECK(t.messages().empty());  // three calm windows in a row
  window(t, 0.02);
  REQUIRE(t.messages().size() == 1);
  CHECK(t.messages()[0] == "input pipeline is not the bottleneck: 2% of step time is spent waiting for data");
  CHECK(pf->value == 1);
  CHECK(t.settled());
  window(t, 0.5);  // the wait comes back: it tunes again, silently
  CHECK(pf->value == 2);
  window(t, 0.5);
  window(t, 0.5);
  CHECK(t.messages().size() == 1);
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
  CHECK(train.autotuner().messages().size() <= 1);  // whatever this noisy machine measured, said at most once
  if (!train.autotuner().messages().empty()) CHECK(log.str().find("ctnn autotune: ") == 0);
}

TEST_CASE("tuner: the machine probe reads busy cores from /proc/stat") {
  data::detail::machine_cpu probe;
  CHECK(probe.busy_cores() == -1);  // the first call only takes a reference
  volatile double acc = 0;
  for (int i = 0; i < 2'000'000; ++i) acc = acc + i;
  const double busy = probe.busy_cores();
  if (std::filesystem::exists("/proc/stat")) {
    CHECK(busy >= 0);
    CHECK(busy <= double(std::thread::hardware_concurrency()) + 1e-9);
  }
}
