// categorical_crossentropy (one-hot rows) on Fashion-MNIST's integer class labels:
// the message names the loss to use instead, as Keras users reach for the other one.
// first-error: categorical_crossentropy takes dense target vectors; the dataset has sparse class labels: use sparse_categorical_crossentropy instead
#include <ctnn/ctnn.hpp>
using net = ctnn::sequential<ctnn::input<28, 28>, ctnn::flatten, ctnn::dense<10>>;
void f(const ctnn::data::fashion_mnist::dataset& d) {
  auto m = ctnn::make_model<net>(1);
  ctnn::adam opt;
  ctnn::fit(m, ctnn::categorical_crossentropy{.from_logits = true}, opt, d, ctnn::epochs{1});
}
