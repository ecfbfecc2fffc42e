// dense<-1>: ctnn's message, not a narrowing conversion error.
// first-error: dense<-1>: the number of units must be > 0
#include <ctnn/ctnn.hpp>
using net = ctnn::sequential<ctnn::input<4>, ctnn::dense<-1>>;
constexpr auto n = net::parameter_count;
