// A dense layer after a rank-2 input: the message names the layer (1) and the rank (2).
// first-error: layer 1 (dense<10>): input has rank 2 (28x28); put ctnn::flatten before it
// expect: static assertion failed: dense: the input of this layer is not flat (rank 1); put ctnn::flatten before it
// expect: dense_input_not_flat<ctnn::diag::layer<1>, ctnn::diag::input_rank<2>, false>
#include <ctnn/ctnn.hpp>
using net = ctnn::sequential<ctnn::input<28, 28>, ctnn::dense<10>>;
constexpr auto n = net::parameter_count;
