// expect: static assertion failed: sequential: this element is not a layer spec (it has no bind<InShape, T, Backend>)
// first-error: layer 2 (not_a_layer): not a layer spec (it has no bind<InShape, T, Backend>)
#include <ctnn/ctnn.hpp>
struct not_a_layer {};
using net = ctnn::sequential<ctnn::input<4>, ctnn::dense<3>, not_a_layer>;
constexpr auto n = net::parameter_count;
