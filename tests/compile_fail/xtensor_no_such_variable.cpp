// variable<1, "kernal">: the dense layer at index 1 declares "kernel" and "bias".
// expect: static assertion failed: ctnn::variable: this layer declares no variable of this name
// expect-gcc: no_such_variable<ctnn::diag::layer<1>, ctnn::xtd::name_literal<7>{"kernal"}
// first-error: ctnn::variable<1, kernal>: layer 1 (index from 0) declares no variable kernal; it has kernel, bias
#include <ctnn/layers/dense.hpp>
#include <ctnn/layers/reshape.hpp>
#include <ctnn/xtensor.hpp>
using net = ctnn::sequential<ctnn::input<2, 2>, ctnn::flatten, ctnn::dense<3>>;
void f(ctnn::model<net>& m) { ctnn::variable<1, "kernal">(m); }
