// strip_pruning's layout must meet the layout contract (pruning/layout.hpp); a pattern is not a layout.
// first-error: strip_pruning<ctnn::unstructured>: not a sparse layout (layout::fastest, bitmap, csc, rows, block<R, C>); a pruning pattern goes to prune_low_magnitude
// expect: has_layout_layer<L>
// expect-gcc: [with L = ctnn::unstructured]
// expect-gcc: SparseLayout<Layout>
#include <ctnn/ctnn.hpp>
#include <ctnn/pruning.hpp>
using net = ctnn::sequential<ctnn::input<16>,
                             ctnn::prune_low_magnitude<ctnn::dense<8, ctnn::relu>, ctnn::constant_sparsity<0.5>>,
                             ctnn::dense<3>>;
void f(const ctnn::model<net>& m) { auto s = ctnn::strip_pruning<ctnn::unstructured>(m); }
