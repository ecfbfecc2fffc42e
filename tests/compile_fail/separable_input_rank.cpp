// separable_conv2d at position 2 on a flat input: the message names the layer, its position and the rank.
// first-error: layer 2 (separable_conv2d<3, 3>): input has rank 1 (32); separable_conv2d takes rank 3 (height x width x channels) or 2 (height x width)
#include <ctnn/ctnn.hpp>
using net = ctnn::sequential<ctnn::input<64>, ctnn::dense<32>, ctnn::separable_conv2d<8, 3, 3>>;
constexpr auto n = net::parameter_count;
