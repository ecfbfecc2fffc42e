// A std::vector given to fit where the dataset goes: one line says so.
// first-error: fit: the 4th argument is not a dataset of batches (data::Dataset)
#include <ctnn/ctnn.hpp>
#include <vector>
using net = ctnn::sequential<ctnn::input<4>, ctnn::dense<2>>;
void f(const std::vector<float>& x) {
  auto m = ctnn::make_model<net>(1);
  ctnn::adam opt;
  ctnn::fit(m, ctnn::sparse_categorical_crossentropy{}, opt, x, ctnn::epochs{1});
}
