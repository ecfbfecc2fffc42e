// A program that only defines network types and checks them at compile time (issue 30), with
// <ctnn/network.hpp> alone: the MLP and CNN of the examples, a residual block, a dag, the
// depthwise and separable layers, their output shapes, parameter counts and memory plans.
// tests/compile_time/network_header.cmake compiles it and fails when it reads a backend's kernels.
#include <ctnn/network.hpp>

using mlp = ctnn::sequential<ctnn::input<28, 28>, ctnn::flatten, ctnn::dense<256, ctnn::relu>,
                             ctnn::dense<128, ctnn::relu>, ctnn::dense<10>>;
static_assert(mlp::output_shape == ctnn::shape<10>{});
static_assert(mlp::parameter_count == 784 * 256 + 256 + 256 * 128 + 128 + 128 * 10 + 10);
static_assert(mlp::plan<>::layout(64, 2).total > 4 * 4 * mlp::parameter_count);

using cnn = ctnn::sequential<ctnn::input<28, 28>, ctnn::conv2d<32, 3, 3, 1, ctnn::padding::valid, ctnn::relu>,
                             ctnn::max_pool2d<2>, ctnn::batch_norm, ctnn::conv2d<64, 3, 3, 1, ctnn::padding::valid, ctnn::relu>,
                             ctnn::max_pool2d<2>, ctnn::batch_norm, ctnn::flatten, ctnn::dense<128, ctnn::relu>,
                             ctnn::dropout<0.5f>, ctnn::dense<10>>;
static_assert(cnn::output_shape == ctnn::shape<10>{});
static_assert(cnn::parameter_count == (9 * 32 + 32) + 2 * 32 + (9 * 32 * 64 + 64) + 2 * 64 + (1600 * 128 + 128) + (128 * 10 + 10));

using graph = ctnn::sequential<ctnn::input<8, 8, 3>,
                               ctnn::residual<ctnn::conv2d<3, 3, 3, 1, ctnn::padding::same, ctnn::relu>>,
                               ctnn::dag<ctnn::node<"a", ctnn::depthwise_conv2d<3, 3, 1, ctnn::padding::same>>,
                                         ctnn::node<"b", ctnn::separable_conv2d<3, 3, 3, 1, ctnn::padding::same>, "in">,
                                         ctnn::node<"s", ctnn::add_join, "a", "b">>,
                               ctnn::global_average_pool, ctnn::dense<2>>;
static_assert(graph::output_shape == ctnn::shape<2>{});
static_assert(graph::plan<>::layout(16, 2).total > 0);

int main() {}
