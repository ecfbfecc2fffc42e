// expect: static assertion failed: sequential: the first element must be ctnn::input<dims...>, the shape of one sample
// first-error: sequential: its first element is ctnn::flatten; it must be ctnn::input<dims...>, the shape of one sample
#include <ctnn/ctnn.hpp>
using net = ctnn::sequential<ctnn::flatten, ctnn::dense<10>>;
constexpr auto n = net::parameter_count;
