// predict_sample with a fixed 2x3 sample for a network of 2x2 samples: axis 1 has extent 3, not 2.
// expect: static assertion failed: ctnn xtensor: an axis of the input has another extent than the network's input shape
// expect: xtensor_extent_mismatch<ctnn::diag::axis<1>, ctnn::diag::expression_extent<3>, ctnn::diag::wanted_extent<2>, false>
// first-error: ctnn xtensor: axis 1 of the input has extent 3; input<2x2> wants 2
#include <ctnn/layers/dense.hpp>
#include <ctnn/layers/reshape.hpp>
#include <ctnn/xtensor.hpp>
using net = ctnn::sequential<ctnn::input<2, 2>, ctnn::flatten, ctnn::dense<3>>;
void f(ctnn::model<net>& m, const xt::xtensor_fixed<float, xt::xshape<2, 3>>& x) { ctnn::predict_sample(m, x); }
