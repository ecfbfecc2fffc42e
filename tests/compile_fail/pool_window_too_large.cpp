// max_pool2d<3> at position 2 over a 2x2 input (valid padding): position and sizes appear.
// first-error: layer 2 (max_pool2d<3>): the 3x3 window does not fit the input 2x2x3 with padding::valid
// expect: static assertion failed: pool2d: with valid padding the pooling window must fit in the input
// expect: pool2d_window_larger_than_input<ctnn::diag::layer<2>, ctnn::diag::input_height<2>, ctnn::diag::input_width<2>, ctnn::diag::window_height<3>, ctnn::diag::window_width<3>, false>
#include <ctnn/ctnn.hpp>
using net = ctnn::sequential<ctnn::input<4, 4, 3>, ctnn::max_pool2d<2>, ctnn::max_pool2d<3>>;
constexpr auto n = net::parameter_count;
