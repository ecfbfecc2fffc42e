// adam<double>: the optimizer's template argument is its learning-rate schedule, not an element type.
// first-error: optimizer: its template argument is the learning-rate schedule; double is not one
#include <ctnn/ctnn.hpp>
using net = ctnn::sequential<ctnn::input<4>, ctnn::dense<3>>;
void f(const ctnn::data::in_memory<ctnn::shape<4>, ctnn::sparse_labels>& d) {
  auto m = ctnn::make_model<net>(1);
  ctnn::adam<double> opt{1e-3};
  ctnn::fit(m, ctnn::sparse_categorical_crossentropy{.from_logits = true}, opt, d, ctnn::epochs{1});
}
