// add over branches of different widths: the message names the layer, the branch and both shapes.
// first-error: layer 2 (add): branch 2 yields 6 but branch 1 yields 8
// expect: add_branch_shapes_differ<ctnn::diag::layer<2>, ctnn::diag::branch<2>, false>
#include <ctnn/ctnn.hpp>
using net = ctnn::sequential<ctnn::input<4>, ctnn::dense<8>, ctnn::add<ctnn::branch<>, ctnn::dense<6>>>;
constexpr auto n = net::parameter_count;
