// concatenate along channels of images of different heights: the message names the layer, the branch, both shapes and the axis.
// first-error: layer 1 (concatenate<-1>): branch 2 yields 2x2x4 but branch 1 yields 4x4x3; all dims but axis 2 must match
// expect: concatenate_branch_shapes_differ<ctnn::diag::layer<1>, ctnn::diag::branch<2>, false>
#include <ctnn/ctnn.hpp>
using net = ctnn::sequential<ctnn::input<4, 4, 3>, ctnn::concatenate<-1, ctnn::branch<>, ctnn::conv2d<4, 3, 3>>>;
constexpr auto n = net::parameter_count;
