// A batch_norm before a conv2d with same padding cannot be folded into it (a padded position reads 0
// where the batch_norm would give beta - gamma mean / sqrt(var + eps)), nor into the layer before (a
// max pooling): quantized_t refuses it, naming the batch_norm's position.
// first-error: layer 3 (batch_norm): cannot be folded for int8: neither into the layer before (a dense, conv2d or depthwise_conv2d with identity activation right before it) nor into the next layer that is not flatten, reshape or dropout (a dense, or a conv2d right after it, dropout between, whose windows read no padding: valid padding)
#include <ctnn/ctnn.hpp>
#include <ctnn/quantization/convert.hpp>
using net = ctnn::sequential<ctnn::input<8, 8, 1>, ctnn::conv2d<4, 3, 3, 1, ctnn::padding::valid, ctnn::relu>,
                             ctnn::max_pool2d<2>, ctnn::batch_norm,
                             ctnn::conv2d<4, 3, 3, 1, ctnn::padding::same, ctnn::relu>, ctnn::flatten, ctnn::dense<2>>;
using q = ctnn::quantized_t<net>;
constexpr auto n = q::state_count;
