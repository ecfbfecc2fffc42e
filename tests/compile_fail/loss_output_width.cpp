// mean_squared_error takes any output shape, but as many values as the targets: 3x3 = 9 against 4.
// first-error: mean_squared_error: the output of the network has 9 values per sample (3x3), the targets 4
#include <ctnn/ctnn.hpp>
using net = ctnn::sequential<ctnn::input<4>, ctnn::dense<9>, ctnn::reshape<3, 3>>;
void f(const ctnn::data::in_memory<ctnn::shape<4>, ctnn::dense_targets<ctnn::shape<4>>>& d) {
  auto m = ctnn::make_model<net>(1);
  ctnn::sgd opt;
  ctnn::fit(m, ctnn::mean_squared_error{}, opt, d, ctnn::epochs{1});
}
