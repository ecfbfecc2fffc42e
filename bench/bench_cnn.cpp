// Training throughput (samples/s) of the Fashion-MNIST CNN of
// examples/fashion_mnist_cnn.cpp: one step = forward in training mode, loss,
// backward, regularization gradients and one adam update, on a fixed batch
// of synthetic 28x28 images (the data does not change the work). ctnn runs on
// one thread. Peer: bench/peers/cnn_torch.py (same network, batch, optimizer).
//   build/bench/bench/bench_cnn --benchmark_repetitions=3
#include <benchmark/benchmark.h>

#include <ctnn/ctnn.hpp>

#include <cstdint>
#include <vector>

namespace {

using net = ctnn::sequential<ctnn::input<28, 28>,
                             ctnn::conv2d<32, 3, 3, 1, ctnn::padding::valid, ctnn::relu>,
                             ctnn::max_pool2d<2>,
                             ctnn::batch_norm,
                             ctnn::conv2d<64, 3, 3, 1, ctnn::padding::valid, ctnn::relu>,
                             ctnn::max_pool2d<2>,
                             ctnn::batch_norm,
                             ctnn::flatten,
                             ctnn::dense<128, ctnn::relu>,
                             ctnn::dropout<0.5f>,
                             ctnn::dense<10>>;

void cnn_train_step(benchmark::State& st) {
  const std::size_t batch = std::size_t(st.range(0));
  auto m = ctnn::make_model<net>(1);
  ctnn::adam opt{1e-3};
  const ctnn::sparse_categorical_crossentropy loss{.from_logits = true};
  ctnn::rng g(2);
  std::vector<float> x(batch * 784);
  std::vector<std::int32_t> y(batch);
  for (auto& v : x) v = float(g.uniform());
  for (auto& v : y) v = std::int32_t(g.below(10));

  // fit's training step (train/step.hpp): forward, loss, backward, update.
  ctnn::train_step step{m, loss, opt};
  m.reserve(batch, opt.slots_per_parameter());
  std::size_t i = 0;
  for (auto _ : st) {
    const ctnn::step_result r = step.run(x.data(), y.data(), batch, 0, i++);
    benchmark::DoNotOptimize(r.loss_sum);
  }
  st.SetItemsProcessed(std::int64_t(st.iterations()) * std::int64_t(batch));
  st.counters["samples_per_s"] = benchmark::Counter(double(st.iterations()) * double(batch), benchmark::Counter::kIsRate);
}

}  // namespace

BENCHMARK(cnn_train_step)->Arg(64)->Unit(benchmark::kMillisecond)->MinTime(3.0)->UseRealTime();

BENCHMARK_MAIN();
