// Sparse class labels against an output of one value: there is no class to choose.
// first-error: sparse_categorical_crossentropy: the output of the network has 1 value per sample; it takes at least 2 class scores (sparse class labels)
#include <ctnn/ctnn.hpp>
using net = ctnn::sequential<ctnn::input<4>, ctnn::dense<1>>;
void f(const ctnn::data::in_memory<ctnn::shape<4>, ctnn::sparse_labels>& d) {
  auto m = ctnn::make_model<net>(1);
  ctnn::evaluate(m, ctnn::sparse_categorical_crossentropy{}, d);
}
