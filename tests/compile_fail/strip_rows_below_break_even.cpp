// strip_pruning<layout::rows> on a 2:4-pruned layer (50 % sparse, layer 1) through strip_pruning
// itself: the first error names the layout, the layer and its sparsity under g++ 12 and clang 19
// (clang cuts the text after about 34 characters), g++'s the layout to use instead.
// first-error: layout::rows, layer 1, 50.0 % spa
// first-error-gcc: strip to layout::bitmap (layout::block<R, C> for block-pruned layers)
// expect: strip_pruning: layout::csc and layout::rows are retired below 1 weight in 9 kept (88.9 % sparsity)
#include <ctnn/ctnn.hpp>
#include <ctnn/pruning.hpp>
using net = ctnn::sequential<ctnn::input<784>,
                             ctnn::prune_low_magnitude<ctnn::dense<256, ctnn::relu>, ctnn::constant_sparsity<0.0>,
                                                       ctnn::n_of_m<2, 4>>,
                             ctnn::dense<10>>;
auto stripped(const ctnn::model<net>& m) { return ctnn::strip_pruning<ctnn::layout::rows>(m); }
