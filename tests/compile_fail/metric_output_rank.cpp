// accuracy as a metric of a regression network whose output is 3x3x1 (rank 3; a rank-2
// output <S, K> is class scores per step, as Keras' metrics on [batch, S, K]).
// first-error: accuracy: the output of the network is 3x3x1 (rank 3); it takes one score per class (rank 1)
#include <ctnn/ctnn.hpp>
using net = ctnn::sequential<ctnn::input<4>, ctnn::dense<9>, ctnn::reshape<3, 3, 1>>;
void f(const ctnn::data::in_memory<ctnn::shape<4>, ctnn::dense_targets<ctnn::shape<9>>>& d) {
  auto m = ctnn::make_model<net>(1);
  ctnn::sgd opt;
  ctnn::fit(m, ctnn::mean_squared_error{}, opt, d, ctnn::epochs{1}, ctnn::accuracy{});
}
