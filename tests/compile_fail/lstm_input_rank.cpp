// An lstm after a flat input: the message names the layer (1), its units and the input's rank and size.
// first-error: layer 1 (lstm<32>): input has rank 1 (784); a recurrent layer takes shape<steps, features>
#include <ctnn/ctnn.hpp>
using net = ctnn::sequential<ctnn::input<784>, ctnn::lstm<32>, ctnn::dense<10>>;
constexpr auto n = net::parameter_count;
