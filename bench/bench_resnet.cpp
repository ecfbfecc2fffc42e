// Training throughput (samples/s) of the small ResNet of
// examples/fashion_mnist_resnet.cpp (keep the two networks the same): one step =
// forward in training mode, loss, backward and one adam update, on a fixed batch
// of 128 synthetic 28x28 images (the data does not change the work); seconds per
// epoch = 60,000 / samples_per_s. Threads: CTNN_NUM_THREADS. Peer:
// bench/peers/resnet_torch.py (same network, batch, optimizer).
//   CTNN_NUM_THREADS=1 taskset -c 1 build/release/bench/bench_resnet --benchmark_repetitions=3
#include <benchmark/benchmark.h>

#include <ctnn/ctnn.hpp>

#include "train_step_bench.hpp"

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

void resnet_train_step(benchmark::State& st) { ctnn_bench::train_step<net>(st, ctnn::adam{1e-3}); }

}  // namespace

BENCHMARK(resnet_train_step)->Arg(128)->Unit(benchmark::kMillisecond)->MinTime(3.0)->UseRealTime();

BENCHMARK_MAIN();
