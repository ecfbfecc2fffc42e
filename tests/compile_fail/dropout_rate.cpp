// dropout with a rate of 1 would drop everything.
// expect-gcc: dropout: the rate must be in [0, 1)
// first-error: dropout<1>: the rate must be in [0, 1), got 1
#include <ctnn/ctnn.hpp>
using net = ctnn::sequential<ctnn::input<10>, ctnn::dropout<1.0f>>;
constexpr auto n = net::parameter_count;
