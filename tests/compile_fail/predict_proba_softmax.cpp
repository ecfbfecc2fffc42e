// predict_proba on a network that already ends in softmax.
// expect-gcc: static assertion failed: predict_proba: the network's last layer already applies softmax; its predict() gives probabilities
// expect-clang: predict_proba: the network
// first-error: predict_proba: layer 1, the last, already applies softmax: predict() gives probabilities
#include <ctnn/data/pipeline.hpp>
#include <ctnn/layers/dense.hpp>
#include <ctnn/train/predict.hpp>
using net = ctnn::sequential<ctnn::input<4>, ctnn::dense<3, ctnn::softmax>>;
void f(ctnn::model<net>& m, const ctnn::data::dataset<ctnn::data::batch_of<ctnn::shape<4>>>& ds) { ctnn::predict_proba(m, ds); }
