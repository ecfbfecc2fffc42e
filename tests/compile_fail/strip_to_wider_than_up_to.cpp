// strip_to into a static width above the model's dense<up_to<Max>>: a compile error, not a run-time one.
// first-error: strip_to: a width of the target is above the model's up_to<Max>
#include <ctnn/ctnn.hpp>
using searched = ctnn::sequential<ctnn::input<8>, ctnn::dense<ctnn::up_to<64>, ctnn::relu>, ctnn::dense<3>>;
using deployed = ctnn::sequential<ctnn::input<8>, ctnn::dense<80, ctnn::relu>, ctnn::dense<3>>;
void f(const ctnn::model<searched>& m) { auto d = ctnn::strip_to<deployed>(m); }
