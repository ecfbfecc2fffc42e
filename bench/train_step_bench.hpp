// bench/train_step_bench.hpp — what bench_cnn, bench_resnet and bench_rnn share: fit's training
// step (train/step.hpp: forward, loss, backward, update) of Net with optimizer opt on one random
// batch of 784 inputs (28x28) and 10 classes, batch st.range(0); samples per second as the
// counter samples_per_s (read by bench/report.py and bench/peers/rnn_rounds.py). With
// CTNN_BENCH_UPDATE_AFTER_BACKWARD=1 in the environment every update runs after the whole backward
// (train_step::set_per_layer_update(false)): the same binary's before / after.
#pragma once
#include <benchmark/benchmark.h>

#include <ctnn/ctnn.hpp>

#include <cstdint>
#include <cstdlib>
#include <vector>

namespace ctnn_bench {

template <class Net, class Optimizer>
void train_step(benchmark::State& st, Optimizer opt) {
  const std::size_t batch = std::size_t(st.range(0));
  auto m = ctnn::make_model<Net>(1);
  const ctnn::sparse_categorical_crossentropy loss{.from_logits = true};
  ctnn::rng g(2);
  std::vector<float> x(batch * 784);
  std::vector<std::int32_t> y(batch);
  for (auto& v : x) v = float(g.uniform());
  for (auto& v : y) v = std::int32_t(g.below(10));
  ctnn::train_step step{m, loss, opt};
  if (const char* e = std::getenv("CTNN_BENCH_UPDATE_AFTER_BACKWARD"); e && *e == '1') step.set_per_layer_update(false);
  m.reserve(batch, opt.slots_per_parameter());
  std::size_t i = 0;
  for (auto _ : st) {
    const ctnn::step_result r = step.run(x.data(), y.data(), batch, 0, i++);
    benchmark::DoNotOptimize(r.loss_sum);
  }
  st.SetItemsProcessed(std::int64_t(st.iterations()) * std::int64_t(batch));
  st.counters["samples_per_s"] = benchmark::Counter(double(st.iterations()) * double(batch), benchmark::Counter::kIsRate);
}

}  // namespace ctnn_bench
