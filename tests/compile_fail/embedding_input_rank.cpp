// An embedding after a <steps, features> input: the message names the layer (1), its sizes and the input's rank.
// first-error: layer 1 (embedding<100, 8>): input has rank 2 (5x3); embedding takes shape<steps> of integer ids
#include <ctnn/ctnn.hpp>
using net = ctnn::sequential<ctnn::input<5, 3>, ctnn::embedding<100, 8>, ctnn::lstm<4>>;
constexpr auto n = net::parameter_count;
