// sparse_categorical_crossentropy (class indices) on one-hot rows: the message
// names categorical_crossentropy, the loss for them.
// first-error: sparse_categorical_crossentropy takes sparse class labels; the dataset has dense target vectors: use categorical_crossentropy instead
#include <ctnn/ctnn.hpp>
using net = ctnn::sequential<ctnn::input<4>, ctnn::dense<3>>;
void f(const ctnn::data::in_memory<ctnn::shape<4>, ctnn::dense_targets<ctnn::shape<3>>>& d) {
  auto m = ctnn::make_model<net>(1);
  ctnn::adam opt;
  ctnn::fit(m, ctnn::sparse_categorical_crossentropy{.from_logits = true}, opt, d, ctnn::epochs{1});
}
