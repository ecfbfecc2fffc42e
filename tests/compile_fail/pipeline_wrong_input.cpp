// A pipeline of 28x28 batches given to a network whose input has 100 values.
// expect: static assertion failed: fit: the dataset's samples have a different element count than the network's input
// expect: dataset_input_mismatch<ctnn::diag::dataset_elements<784>, ctnn::diag::network_elements<100>, false>
// first-error: fit: the samples of the dataset are 28x28 (784 values); the network takes input<100> (100 values)
#include <ctnn/ctnn.hpp>
using net = ctnn::sequential<ctnn::input<100>, ctnn::dense<10>>;
void f() {
  auto d = ctnn::data::fashion_mnist::train_files().batch(32).prefetch(2);
  auto m = ctnn::make_model<net>(1);
  ctnn::adam opt;
  ctnn::fit(m, ctnn::sparse_categorical_crossentropy{}, opt, d, ctnn::epochs{1});
}
