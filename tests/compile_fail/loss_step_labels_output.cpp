// Labels per step (step_labels<8>) need a per-step output <8, classes>; this network gives one <5> per sample.
// first-error: sparse_categorical_crossentropy: the dataset has 8 labels per sample (step_labels), the output of the network is 5; a per-step loss takes an output <8, classes>
#include <ctnn/ctnn.hpp>
using net = ctnn::sequential<ctnn::input<8, 3>, ctnn::lstm<4>, ctnn::dense<5>>;
void f(const ctnn::data::in_memory<ctnn::shape<8, 3>, ctnn::step_labels<8>>& d) {
  auto m = ctnn::make_model<net>(1);
  ctnn::adam opt;
  ctnn::fit(m, ctnn::sparse_categorical_crossentropy{}, opt, d, ctnn::epochs{1});
}
