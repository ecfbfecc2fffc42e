// A batch_norm after a conv2d with its own relu (not linear: TFMOT folds only after a linear
// activation) and before a same-padded conv2d folds neither way: quantized_t refuses it, naming the
// batch_norm's position and both directions.
// first-error: layer 2 (batch_norm): cannot be folded for int8: neither into the layer before (a dense, conv2d or depthwise_conv2d with identity activation right before it) nor into the next layer that is not flatten, reshape or dropout (a dense, or a conv2d right after it, dropout between, whose windows read no padding: valid padding)
#include <ctnn/ctnn.hpp>
#include <ctnn/quantization/convert.hpp>
using net = ctnn::sequential<ctnn::input<8, 8, 1>, ctnn::conv2d<4, 3, 3, 1, ctnn::padding::same, ctnn::relu>,
                             ctnn::batch_norm, ctnn::conv2d<4, 3, 3, 1, ctnn::padding::same>, ctnn::flatten,
                             ctnn::dense<2>>;
using q = ctnn::quantized_t<net>;
constexpr auto n = q::state_count;
