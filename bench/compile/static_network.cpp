// A program that only defines a network type and checks it at compile time
// (issue 30: <= 1 s to compile): shapes, parameter count and the memory plan; with
// <ctnn/network.hpp>, the header for such programs (static_only.cpp: the same with <ctnn/ctnn.hpp>).
#include <ctnn/network.hpp>  // the types alone: no backend kernels

using net = ctnn::sequential<ctnn::input<28, 28>, ctnn::flatten, ctnn::dense<256, ctnn::relu>,
                             ctnn::dense<128, ctnn::relu>, ctnn::dense<10>>;
static_assert(net::output_shape == ctnn::shape<10>{});
static_assert(net::parameter_count == 784 * 256 + 256 + 256 * 128 + 128 + 128 * 10 + 10);
// parameters, gradients, Adam's two slots and the activations of a batch of 64, in bytes
static_assert(net::plan<>::layout(64, 2).total > 4 * 4 * net::parameter_count);

int main() {}
