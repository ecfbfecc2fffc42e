// Training throughput (samples/s) of the small ResNet of
// examples/fashion_mnist_resnet.cpp (keep the two networks the same): one step =
// forward in training mode, loss, backward and one adam update, on a fixed batch
// of 128 synthetic 28x28 images (the data does not change the work); seconds per
// epoch = 60,000 / samples_per_s. Threads: CTNN_NUM_THREADS. Peer:
// bench/peers/resnet_torch.py (same network, batch, optimizer).
//   CTNN_NUM_THREADS=1 taskset -c 1 build/release/bench/bench_resnet --benchmark_repetitions=3
#include <benchmark/benchmark.h>

#include <ctnn/ctnn.hpp>

#include <cstdint>
#include <vector>

namespace {

using bn = ctnn::batch_normalization<0.9>;
template <std::size_t C, std::size_t Stride = 1>
using conv = ctnn::conv2d<C, 3, 3, Stride, ctnn::padding::same>;
template <std::size_t C, std::size_t Stride = 1>
using block = ctnn::residual<conv<C, Stride>, bn, ctnn::relu, conv<C>, bn>;
using net = ctnn::sequential<ctnn::input<28, 28>, conv<16>, bn, ctnn::relu, block<32, 2>, ctnn::relu, block<64, 2>,
                             ctnn::relu, block<64>, ctnn::relu, ctnn::global_average_pool, ctnn::dense<10>>;

void resnet_train_step(benchmark::State& st) {
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

BENCHMARK(resnet_train_step)->Arg(128)->Unit(benchmark::kMillisecond)->MinTime(3.0)->UseRealTime();

BENCHMARK_MAIN();
