// conv2d at position 3 with a 5x5 kernel over a 2x2 input (valid padding): position and sizes appear.
// first-error: layer 3 (conv2d<4, 5, 5>): the 5x5 kernel does not fit the input 2x2x4 with padding::valid
// expect: static assertion failed: conv2d: with valid padding the kernel must fit in the input
// expect: conv2d_kernel_larger_than_input<ctnn::diag::layer<3>, ctnn::diag::input_height<2>, ctnn::diag::input_width<2>, ctnn::diag::window_height<5>, ctnn::diag::window_width<5>, false>
#include <ctnn/ctnn.hpp>
using net = ctnn::sequential<ctnn::input<8, 8, 1>, ctnn::conv2d<4, 5, 5>, ctnn::max_pool2d<>, ctnn::conv2d<4, 5, 5>>;
constexpr auto n = net::parameter_count;
