// Two layers in the global_magnitude group with different schedules: one threshold needs one sparsity.
// expect: static assertion failed: prune_low_magnitude: every layer pruned with global_magnitude must have the same schedule
// expect: prune_global_schedules_differ<ctnn::diag::layer<2>, ctnn::diag::first_global_layer<1>, false>
// first-error: layer 2 (prune_low_magnitude): its global_magnitude schedule differs from that of layer 1; one group has one threshold and one schedule
#include <ctnn/ctnn.hpp>
#include <ctnn/pruning.hpp>
using net = ctnn::sequential<
    ctnn::input<16>,
    ctnn::prune_low_magnitude<ctnn::dense<8, ctnn::relu>, ctnn::constant_sparsity<0.5>, ctnn::global_magnitude>,
    ctnn::prune_low_magnitude<ctnn::dense<3>, ctnn::constant_sparsity<0.8>, ctnn::global_magnitude>>;
constexpr auto n = ctnn::pruning::global_nnz<net>;
