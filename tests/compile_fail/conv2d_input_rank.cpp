// conv2d after flatten (rank 1) at position 2: the position and the rank appear.
// first-error: layer 2 (conv2d<8, 3, 3>): input has rank 1 (784); conv2d takes rank 3 (height x width x channels) or 2 (height x width)
// expect: static assertion failed: conv2d: the input of this layer is neither rank 3 (height, width, channels) nor rank 2
// expect: conv2d_input_rank<ctnn::diag::layer<2>, ctnn::diag::input_rank<1>, false>
#include <ctnn/ctnn.hpp>
using net = ctnn::sequential<ctnn::input<28, 28>, ctnn::flatten, ctnn::conv2d<8, 3, 3>>;
constexpr auto n = net::parameter_count;
