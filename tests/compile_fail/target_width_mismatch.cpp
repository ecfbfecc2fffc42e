// One-hot targets of 5 classes against a network with 10 outputs.
// first-error: categorical_crossentropy: the output of the network has 10 values per sample (10), the targets 5
// expect: static assertion failed: loss: the dataset's targets have a different width than the network's output
// expect: loss_target_width_mismatch<ctnn::diag::target_width<5>, ctnn::diag::output_width<10>, false>
#include <ctnn/ctnn.hpp>
using net = ctnn::sequential<ctnn::input<4>, ctnn::dense<10>>;
using ds = ctnn::data::in_memory<ctnn::shape<4>, ctnn::dense_targets<ctnn::shape<5>>>;
void f(const ds& d) {
  auto m = ctnn::make_model<net>(1);
  ctnn::adam opt;
  ctnn::fit(m, ctnn::categorical_crossentropy{}, opt, d, ctnn::epochs{1});
}
