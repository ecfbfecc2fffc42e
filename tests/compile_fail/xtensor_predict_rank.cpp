// predict on an xt::xtensor<float, 2> for a network of 2x2 samples (a batch needs rank 3).
// expect: static assertion failed: ctnn xtensor: the input's rank is not the network's input rank + 1
// expect: xtensor_batch_rank_mismatch<ctnn::diag::expression_rank<2>, ctnn::diag::wanted_rank<3>, false>
// first-error: ctnn xtensor: the input has rank 2; a batch of input<2x2> has rank 3 (put the batch axis first; one sample: predict_sample)
#include <ctnn/layers/dense.hpp>
#include <ctnn/layers/reshape.hpp>
#include <ctnn/xtensor.hpp>
using net = ctnn::sequential<ctnn::input<2, 2>, ctnn::flatten, ctnn::dense<3>>;
void f(ctnn::model<net>& m, const xt::xtensor<float, 2>& x) { ctnn::predict(m, x); }
