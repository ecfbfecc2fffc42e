// dense<-1>: ctnn's message, not a narrowing conversion error.
// first-error-gcc: dense<-1>: the number of units must be > 0
// first-error-clang: dense<-1>: the number of units mus
#include <ctnn/ctnn.hpp>
using net = ctnn::sequential<ctnn::input<4>, ctnn::dense<-1>>;
constexpr auto n = net::parameter_count;
