// Memory and speed of each precision policy against float32, side by side in
// one run: the Fashion-MNIST MLP (784-256-128-10) of examples/fashion_mnist_mlp.cpp.
//   train_step<P>/batch  one training step (forward, loss, backward, Adam
//                        update; the mixed policies with dynamic loss scaling)
//   predict<P>/batch     inference (float16: weights stored in half)
// Counters: plan_bytes (the model's one allocation at that batch with Adam's
// slots for training, none for inference), parameter_bytes, samples_per_s.
// The float32 rows are the peer: docs/performance.md gives each policy's
// ratio to them. Synthetic data (the data does not change the work).
//   CTNN_NUM_THREADS=1 build/bench/bench/bench_precision --benchmark_repetitions=3
#include <benchmark/benchmark.h>

#include <ctnn/mixed_precision.hpp>

#include <cstdint>
#include <vector>

namespace {

using net = ctnn::sequential<ctnn::input<28, 28>, ctnn::flatten, ctnn::dense<256, ctnn::relu>,
                             ctnn::dense<128, ctnn::relu>, ctnn::dense<10>>;

struct batch_data {
  std::vector<float> x;
  std::vector<std::int32_t> y;
  explicit batch_data(std::size_t n) : x(n * 784), y(n) {
    ctnn::rng g(2);
    for (auto& v : x) v = float(g.uniform());
    for (auto& v : y) v = std::int32_t(g.below(10));
  }
};

template <class P>
void train_step(benchmark::State& st) {
  const std::size_t batch = std::size_t(st.range(0));
  auto m = ctnn::make_model<net, P>(1);
  ctnn::adam opt{1e-3};
  const ctnn::sparse_categorical_crossentropy loss{.from_logits = true};
  const batch_data d(batch);
  ctnn::loss_scale scale;
  auto run = [&](auto& step) {
    m.reserve(batch, opt.slots_per_parameter());
    std::size_t i = 0;
    for (auto _ : st) {
      const ctnn::step_result r = step.run(d.x.data(), d.y.data(), batch, 0, i++);
      benchmark::DoNotOptimize(r.loss_sum);
    }
  };
  if constexpr (P::half) {
    ctnn::train_step<decltype(m), ctnn::sparse_categorical_crossentropy, ctnn::adam<>, ctnn::loss_scale> step(
        m, loss, opt, std::tie(scale));
    run(step);
  } else {
    ctnn::train_step step{m, loss, opt};
    run(step);
  }
  st.counters["plan_bytes"] = double(m.memory_bytes());
  st.counters["parameter_bytes"] = double(m.layout().bytes(ctnn::role::parameter));
  st.counters["samples_per_s"] = benchmark::Counter(double(st.iterations()) * double(batch), benchmark::Counter::kIsRate);
}

template <class P>
void predict(benchmark::State& st) {
  const std::size_t batch = std::size_t(st.range(0));
  auto m = ctnn::make_model<net, P>(1);
  const batch_data d(batch);
  for (auto _ : st) benchmark::DoNotOptimize(m.forward(d.x.data(), batch, false));
  st.counters["plan_bytes"] = double(m.memory_bytes());
  st.counters["parameter_bytes"] = double(m.layout().bytes(ctnn::role::parameter));
  st.counters["samples_per_s"] = benchmark::Counter(double(st.iterations()) * double(batch), benchmark::Counter::kIsRate);
}

}  // namespace

BENCHMARK_TEMPLATE(train_step, ctnn::precision::float32)->Arg(64)->Arg(256)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK_TEMPLATE(train_step, ctnn::precision::mixed_float16)->Arg(64)->Arg(256)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK_TEMPLATE(train_step, ctnn::precision::mixed_bfloat16)->Arg(64)->Arg(256)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK_TEMPLATE(predict, ctnn::precision::float32)->Arg(1)->Arg(256)->Unit(benchmark::kMicrosecond)->UseRealTime();
BENCHMARK_TEMPLATE(predict, ctnn::precision::mixed_float16)->Arg(1)->Arg(256)->Unit(benchmark::kMicrosecond)->UseRealTime();
BENCHMARK_TEMPLATE(predict, ctnn::precision::float16)->Arg(1)->Arg(256)->Unit(benchmark::kMicrosecond)->UseRealTime();

BENCHMARK_MAIN();
