// mean_absolute_error as a metric of a classifier trained on sparse labels.
// first-error: mean_absolute_error takes dense target vectors; the dataset has sparse class labels: use sparse_categorical_accuracy instead
#include <ctnn/ctnn.hpp>
using net = ctnn::sequential<ctnn::input<4>, ctnn::dense<3>>;
void f(const ctnn::data::in_memory<ctnn::shape<4>, ctnn::sparse_labels>& d) {
  auto m = ctnn::make_model<net>(1);
  ctnn::evaluate(m, ctnn::sparse_categorical_crossentropy{.from_logits = true}, d, ctnn::mean_absolute_error{});
}
