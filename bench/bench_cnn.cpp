// Training throughput (samples/s) of the Fashion-MNIST CNN of
// examples/fashion_mnist_cnn.cpp: one step = forward in training mode, loss,
// backward, regularization gradients and one adam update, on a fixed batch
// of synthetic 28x28 images (the data does not change the work). ctnn runs on
// one thread. Peer: bench/peers/cnn_torch.py (same network, batch, optimizer).
//   build/bench/bench/bench_cnn --benchmark_repetitions=3
#include <benchmark/benchmark.h>

#include <ctnn/ctnn.hpp>

#include "train_step_bench.hpp"

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

void cnn_train_step(benchmark::State& st) { ctnn_bench::train_step<net>(st, ctnn::adam{1e-3}); }

}  // namespace

BENCHMARK(cnn_train_step)->Arg(64)->Unit(benchmark::kMillisecond)->MinTime(3.0)->UseRealTime();

BENCHMARK_MAIN();
