// quantization::int8_pass<S> runs S on int8 values: only max_pool2d, average_pool2d,
// global_average_pool, flatten, reshape and dropout do (a dense layer would need its own int8
// kernel: quantized_dense).
// first-error: int8_pass: the layer is max_pool2d, average_pool2d, global_average_pool, flatten, reshape or dropout
#include <ctnn/ctnn.hpp>
#include <ctnn/layers/int8_pass.hpp>
using net = ctnn::sequential<ctnn::input<8>, ctnn::quantization::int8_pass<ctnn::dense<4>>>;
constexpr auto bytes = net::memory_plan(1).activations;
