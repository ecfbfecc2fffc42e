// A final sparsity of 1.2 on the second layer: the message names the layer (2) and the sparsity.
// expect: static assertion failed: prune_low_magnitude: the schedule's sparsity for this layer must be >= 0 and < 1
// expect: prune_sparsity_out_of_range<ctnn::diag::layer<2>, ctnn::diag::sparsity_permille<1200>, false>
// first-error: layer 2 (prune_low_magnitude): final sparsity 1.2 of the schedule is not in [0, 1)
#include <ctnn/ctnn.hpp>
#include <ctnn/pruning.hpp>
using net = ctnn::sequential<ctnn::input<784>, ctnn::dense<256, ctnn::relu>,
                             ctnn::prune_low_magnitude<ctnn::dense<10>, ctnn::constant_sparsity<1.2>>>;
constexpr auto n = net::parameter_count;
