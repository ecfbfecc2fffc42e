// An object that is not an optimizer: the failed constraint is named.
// expect: has_slots
// first-error: fit: the 3rd argument (not_an_optimizer) is not an optimizer of float variables (ctnn::Optimizer: sgd, adam, ...)
#include <ctnn/ctnn.hpp>
using net = ctnn::sequential<ctnn::input<4>, ctnn::dense<3>>;
struct not_an_optimizer {};
void f(const ctnn::data::in_memory<ctnn::shape<4>, ctnn::sparse_labels>& d) {
  auto m = ctnn::make_model<net>(1);
  not_an_optimizer opt;
  ctnn::fit(m, ctnn::sparse_categorical_crossentropy{}, opt, d, ctnn::epochs{1});
}
