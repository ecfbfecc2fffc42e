// The case: sparse_categorical_crossentropy on a 26x26x10 output (it trained as 6,760 classes).
// first-error: sparse_categorical_crossentropy: the output of the network is 26x26x10 (rank 3); it takes one score per class (rank 1): end the network with flatten and dense<classes>
#include <ctnn/ctnn.hpp>
using net = ctnn::sequential<ctnn::input<28, 28, 1>, ctnn::conv2d<10, 3, 3>>;
void f(const ctnn::data::in_memory<ctnn::shape<28, 28, 1>, ctnn::sparse_labels>& d) {
  auto m = ctnn::make_model<net>(1);
  ctnn::adam opt;
  ctnn::fit(m, ctnn::sparse_categorical_crossentropy{}, opt, d, ctnn::epochs{1});
}
