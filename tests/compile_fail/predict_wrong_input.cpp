// predict on a dataset whose samples have 3 values, for a network whose input has 4.
// first-error: predict: the samples of the dataset are 3 (3 values); the network takes input<4> (4 values)
// expect: predict: the dataset's samples do not have the network's input size
#include <ctnn/data/pipeline.hpp>
#include <ctnn/layers/dense.hpp>
#include <ctnn/train/predict.hpp>
using net = ctnn::sequential<ctnn::input<4>, ctnn::dense<3>>;
void f(ctnn::model<net>& m, const ctnn::data::dataset<ctnn::data::batch_of<ctnn::shape<3>>>& ds) { ctnn::predict(m, ds); }
