// bench/bench_nets.hpp — the benchmarks' two Fashion-MNIST networks, one definition: the MLP
// 784-256-128-10 (bench_mlp.cpp's) and the CNN of examples/fashion_mnist_cnn.cpp (bench_cnn.cpp's),
// as ctnn_bench::mlp and ctnn_bench::cnn.
#pragma once
#include <ctnn/ctnn.hpp>

namespace ctnn_bench {
using mlp = ctnn::sequential<ctnn::input<28, 28>, ctnn::flatten, ctnn::dense<256, ctnn::relu>,
                             ctnn::dense<128, ctnn::relu>, ctnn::dense<10>>;
using cnn = ctnn::sequential<ctnn::input<28, 28>, ctnn::conv2d<32, 3, 3, 1, ctnn::padding::valid, ctnn::relu>,
                             ctnn::max_pool2d<2>, ctnn::batch_norm,
                             ctnn::conv2d<64, 3, 3, 1, ctnn::padding::valid, ctnn::relu>, ctnn::max_pool2d<2>,
                             ctnn::batch_norm, ctnn::flatten, ctnn::dense<128, ctnn::relu>, ctnn::dropout<0.5f>,
                             ctnn::dense<10>>;
}  // namespace ctnn_bench
