// depthwise_conv2d at position 2 with a 5x5 kernel over a 4x4 input (valid padding): position and sizes appear.
// first-error: layer 2 (depthwise_conv2d<5, 5>): the 5x5 kernel does not fit the input 4x4x3 with padding::valid
#include <ctnn/ctnn.hpp>
using net = ctnn::sequential<ctnn::input<8, 8, 3>, ctnn::max_pool2d<>, ctnn::depthwise_conv2d<5, 5>>;
constexpr auto n = net::parameter_count;
