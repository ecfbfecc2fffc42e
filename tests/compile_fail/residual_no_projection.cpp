// A residual block from 8x8x2 to 6x8x4: no one 1x1 stride gives both 6 and 8, so the message names the layer and both shapes.
// first-error: layer 2 (residual): the block maps 8x8x2 to 6x8x4; no dense or 1x1 conv2d projection gives x that shape
// expect: residual_needs_projection<ctnn::diag::layer<2>, false>
#include <ctnn/ctnn.hpp>
using net = ctnn::sequential<ctnn::input<8, 8, 2>, ctnn::conv2d<2, 1, 1>, ctnn::residual<ctnn::conv2d<4, 3, 1>>>;
constexpr auto n = net::parameter_count;
