// A pipeline of single samples (no .batch(n)) is not a Dataset fit can train on: one line says so.
// first-error: fit: the 4th argument is not a dataset of batches (data::Dataset); a pipeline of samples needs .batch(n)
#include <ctnn/ctnn.hpp>
using net = ctnn::sequential<ctnn::input<28, 28>, ctnn::flatten, ctnn::dense<10>>;
void f() {
  auto d = ctnn::data::fashion_mnist::train_files().prefetch(2);
  auto m = ctnn::make_model<net>(1);
  ctnn::adam opt;
  ctnn::fit(m, ctnn::sparse_categorical_crossentropy{}, opt, d, ctnn::epochs{1});
}
