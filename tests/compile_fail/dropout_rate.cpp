// dropout with a rate of 1 would drop everything.
// expect: dropout: the rate must be in [0, 1)
#include <ctnn/ctnn.hpp>
using net = ctnn::sequential<ctnn::input<10>, ctnn::dropout<1.0f>>;
constexpr auto n = net::parameter_count;
