// A layer inside a residual block that cannot take its input: the child's own message, at the residual's position.
// first-error: layer 1 (dense<4>): input has rank 2 (6x6); put ctnn::flatten before it
#include <ctnn/ctnn.hpp>
using net = ctnn::sequential<ctnn::input<6, 6>, ctnn::residual<ctnn::dense<4>>>;
constexpr auto n = net::parameter_count;
