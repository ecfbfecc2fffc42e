// A type that is neither an element type nor a precision policy where make_model takes the precision:
// the first error names it (it failed deep inside dense's initialisation before).
// first-error: model: my_policy is neither an element type (float, double, float16_t, bfloat16_t) nor a precision policy
#include <ctnn/ctnn.hpp>
using net = ctnn::sequential<ctnn::input<4>, ctnn::dense<3>>;
struct my_policy {};
auto m = ctnn::make_model<net, my_policy>(0);
