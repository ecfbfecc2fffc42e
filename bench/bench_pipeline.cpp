// bench_pipeline: data-loading time versus compute time in fit, per epoch.
//
// Every benchmark trains one epoch per iteration of an MLP (784 -> 64 relu
// -> 10) on Fashion-MNIST batches of 64 and reports, as counters (seconds
// per epoch): epoch_s (wall time of the epoch), wait_s (time fit waited for
// the next batch), compute_s (time fit computed), and for the pipelines of
// (b)/(c) load_alone_s (the same pipeline read without training) and
// compute_alone_s (training on ready batches), each the best of 3 passes, with
//   vs_max = epoch_min_s / max(load_alone_s, compute_alone_s)   (1.0 = perfect overlap)
//   vs_sum = epoch_min_s / (load_alone_s + compute_alone_s)     (1.0 = no overlap)
// where epoch_min_s is the fastest timed epoch (the machine is shared: the
// minimum is the least disturbed measurement of each).
// (a) decode_gz_every_epoch vs cached: the whole training set (938 batches).
// (b) augment_p1 / p2 / autotune: a map costing ~1 ms per batch (calibrated
//     at start) on 200 batches, followed by prefetch(2) (autotune: both tuned).
// (c) augment_p1_no_prefetch vs augment_p1 (prefetch 2).
// Run: build/bench/bench/bench_pipeline --benchmark_counters_tabular=true
#include <benchmark/benchmark.h>

#include <ctnn/ctnn.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <iostream>

using namespace ctnn;
using net = sequential<input<28, 28>, flatten, dense<64, relu>, dense<10>>;
using batch = data::batch_of<shape<28, 28>>;
using clk = std::chrono::steady_clock;

namespace {

constexpr std::size_t batch_size = 64, batches = 200;

const data::fashion_mnist::dataset& images() {
  static const auto d = data::fashion_mnist::train();
  return d;
}
// The first `batches` batches, ready in memory.
const data::dataset<batch>& ready() {
  static const auto d = [] {
    auto r = data::from(images()).take(batch_size * batches).batch(batch_size).cache();
    auto c = r.open(0);
    batch b;
    while (c.next(b)) {
    }
    return r;
  }();
  return d;
}

// An augmentation: a few contrast passes over the batch, `reps` of them.
struct augment {
  int reps = 1;
  batch operator()(batch b) const {
    for (int r = 0; r < reps; ++r) {
      const float a = 0.99995f;
      for (float& v : b.x) v = v * a + (1 - a) * 0.5f;
    }
    return b;
  }
};
int reps_for_1ms() {
  static const int reps = [] {
    batch b;
    auto c = ready().open(0);
    c.next(b);
    const int trial = 200;
    batch out;
    const auto t0 = clk::now();
    for (int i = 0; i < 5; ++i) out = augment{trial}(b);
    const double per = std::chrono::duration<double>(clk::now() - t0).count() / 5 / trial;
    benchmark::DoNotOptimize(out.x.data());
    return std::max(1, int(1e-3 / per));
  }();
  return reps;
}

struct epoch_times {
  double epoch = 0, wait = 0, compute = 0;
};
template <class D>
epoch_times train_epoch(const D& d, model<net>& m, adam<>& opt) {
  auto h = fit(m, sparse_categorical_crossentropy{.from_logits = true}, opt, d, epochs{1});
  return {h["seconds"][0], h["data_seconds"][0], h["compute_seconds"][0]};
}
// Reading the pipeline without training: the best of 3 passes.
template <class D>
double load_alone(const D& d) {
  double best = 1e9;
  for (int i = 0; i < 3; ++i) {
    const auto t0 = clk::now();
    auto c = d.open(0);
    batch b;
    std::size_t n = 0;
    while (c.next(b)) n += b.size;
    benchmark::DoNotOptimize(n);
    best = std::min(best, std::chrono::duration<double>(clk::now() - t0).count());
  }
  return best;
}
double compute_alone() {
  static const double s = [] {
    auto m = make_model<net>(1);
    adam<> opt;
    train_epoch(ready(), m, opt);  // warm-up
    double best = 1e9;
    for (int i = 0; i < 3; ++i) best = std::min(best, train_epoch(ready(), m, opt).compute);
    return best;
  }();
  return s;
}

template <class D>
void run(benchmark::State& state, const D& d, bool with_alone) {
  auto m = make_model<net>(1);
  adam<> opt;
  train_epoch(d, m, opt);  // warm-up (fills caches, lets autotune settle)
  epoch_times sum;
  double best = 1e9;
  for (auto _ : state) {
    const auto t = train_epoch(d, m, opt);
    best = std::min(best, t.epoch);
    sum.epoch += t.epoch;
    sum.wait += t.wait;
    sum.compute += t.compute;
  }
  const double n = double(state.iterations());
  state.counters["epoch_s"] = sum.epoch / n;
  state.counters["wait_s"] = sum.wait / n;
  state.counters["compute_s"] = sum.compute / n;
  state.counters["epoch_min_s"] = best;
  if (with_alone) {
    const double load = load_alone(d), comp = compute_alone();
    state.counters["load_alone_s"] = load;
    state.counters["compute_alone_s"] = comp;
    state.counters["vs_max"] = best / std::max(load, comp);
    state.counters["vs_sum"] = best / (load + comp);
  }
}

void decode_gz_every_epoch(benchmark::State& state) {
  run(state, data::fashion_mnist::train_files().batch(batch_size), false);
}
void cached(benchmark::State& state) {
  run(state, data::fashion_mnist::train_files().cache().batch(batch_size), false);
}
void compute_only(benchmark::State& state) { run(state, ready(), true); }
void augment_p1_no_prefetch(benchmark::State& state) {
  run(state, ready().map(augment{reps_for_1ms()}), true);
}
void augment_p1(benchmark::State& state) { run(state, ready().map(augment{reps_for_1ms()}).prefetch(2), true); }
void augment_p2(benchmark::State& state) { run(state, ready().map(augment{reps_for_1ms()}, 2).prefetch(2), true); }
void augment_autotune(benchmark::State& state) {
  const auto d = ready().map(augment{reps_for_1ms()}, data::autotune).prefetch(data::autotune);
  run(state, d, true);
  for (auto& msg : d.autotuner().messages()) state.SetLabel(msg);
}

}  // namespace

BENCHMARK(decode_gz_every_epoch)->Unit(benchmark::kMillisecond)->Iterations(3);
BENCHMARK(cached)->Unit(benchmark::kMillisecond)->Iterations(3);
BENCHMARK(compute_only)->Unit(benchmark::kMillisecond)->Iterations(5);
BENCHMARK(augment_p1_no_prefetch)->Unit(benchmark::kMillisecond)->Iterations(5);
BENCHMARK(augment_p1)->Unit(benchmark::kMillisecond)->Iterations(5);
BENCHMARK(augment_p2)->Unit(benchmark::kMillisecond)->Iterations(5);
BENCHMARK(augment_autotune)->Unit(benchmark::kMillisecond)->Iterations(5);

BENCHMARK_MAIN();
