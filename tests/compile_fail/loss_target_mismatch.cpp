// mean_squared_error needs dense targets; Fashion-MNIST has sparse labels.
// first-error: mean_squared_error takes dense target vectors; the dataset has sparse class labels: use sparse_categorical_crossentropy instead
// expect: loss: this loss needs the other kind of target (sparse class labels vs dense target vectors): sparse_categorical_crossentropy takes class labels, categorical_crossentropy one-hot rows
#include <ctnn/ctnn.hpp>
using net = ctnn::sequential<ctnn::input<28, 28>, ctnn::flatten, ctnn::dense<10>>;
void f(const ctnn::data::fashion_mnist::dataset& d) {
  auto m = ctnn::make_model<net>(1);
  ctnn::adam opt;
  ctnn::fit(m, ctnn::mean_squared_error{}, opt, d, ctnn::epochs{1});
}
