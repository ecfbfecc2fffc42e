// Two initializers after the activation: dense takes at most one regularizer and one initializer.
// first-error: dense: after the activation come at most one regularizer and one initializer
#include <ctnn/ctnn.hpp>
using net = ctnn::sequential<ctnn::input<4>, ctnn::dense<8, ctnn::relu, ctnn::he_uniform, ctnn::he_normal>>;
constexpr auto n = net::parameter_count;
