// variable<3, "kernel"> on a network of 2 layers (indices 0 and 1): the first error names the index and the count.
// first-error: ctnn::variable<3, ...>: the network has 2 layers (indices 0 to 1)
// expect: static assertion failed: ctnn::variable: the network has no layer at this index (layers count from 0)
#include <ctnn/layers/dense.hpp>
#include <ctnn/layers/reshape.hpp>
#include <ctnn/xtensor.hpp>
using net = ctnn::sequential<ctnn::input<2, 2>, ctnn::flatten, ctnn::dense<3>>;
void f(ctnn::model<net>& m) { ctnn::variable<3, "kernel">(m); }
