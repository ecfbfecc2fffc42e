// strip_pruning<layout::csc> on a layer pruned to 80 % (layer 2; layer 1 at 90 % is taken): the
// first error names the layout, the layer and its sparsity under g++ 12 and clang 19 (clang cuts
// the text after about 34 characters), g++'s the layout to use instead; the sentence follows.
// first-error: layout::csc, layer 2, 80.0 % spar
// first-error-gcc: layout::csc, layer 2, 80.0 % sparse (6554 of 32768 weights kept): below 88.9 %
// first-error-gcc: strip to layout::bitmap (layout::block<R, C> for block-pruned layers)
// expect: strip_pruning: layout::csc and layout::rows are retired below 1 weight in 9 kept (88.9 % sparsity)
#include <ctnn/ctnn.hpp>
#include <ctnn/pruning.hpp>
using net = ctnn::sequential<ctnn::input<784>,
                             ctnn::prune_low_magnitude<ctnn::dense<256, ctnn::relu>, ctnn::constant_sparsity<0.9>>,
                             ctnn::prune_low_magnitude<ctnn::dense<128, ctnn::relu>, ctnn::constant_sparsity<0.8>>,
                             ctnn::dense<10>>;
using stripped = ctnn::stripped_t<net, ctnn::layout::csc>;
constexpr auto n = stripped::parameter_count;
