// accuracy as a metric of a regression network whose output is 3x3 (rank 2).
// first-error-gcc: accuracy: the output of the network is 3x3 (rank 2); it takes one score per class (rank 1)
// first-error-clang: accuracy: the output of the networ
#include <ctnn/ctnn.hpp>
using net = ctnn::sequential<ctnn::input<4>, ctnn::dense<9>, ctnn::reshape<3, 3>>;
void f(const ctnn::data::in_memory<ctnn::shape<4>, ctnn::dense_targets<ctnn::shape<9>>>& d) {
  auto m = ctnn::make_model<net>(1);
  ctnn::sgd opt;
  ctnn::fit(m, ctnn::mean_squared_error{}, opt, d, ctnn::epochs{1}, ctnn::accuracy{});
}
