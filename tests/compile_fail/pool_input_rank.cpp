// average_pool2d over a rank-2 input at position 1: the position and the rank appear.
// first-error: layer 1 (average_pool2d<2>): input has rank 2 (28x28); pooling takes rank 3 (height x width x channels)
// expect: static assertion failed: pool2d: the input of this pooling layer is not rank 3
// expect: pool2d_input_not_rank3<ctnn::diag::layer<1>, ctnn::diag::input_rank<2>, false>
#include <ctnn/ctnn.hpp>
using net = ctnn::sequential<ctnn::input<28, 28>, ctnn::average_pool2d<2>>;
constexpr auto n = net::parameter_count;
