// A third argument of prune_low_magnitude that is no pruning pattern (it compiled and pruned unstructured).
// first-error: layer 1 (prune_low_magnitude): int is not a pruning pattern (unstructured, n_of_m<N, M>, block<R, C>, units, global_magnitude)
// expect: prune_low_magnitude: the third argument must be a pruning pattern
#include <ctnn/ctnn.hpp>
#include <ctnn/pruning.hpp>
using net = ctnn::sequential<ctnn::input<16>, ctnn::prune_low_magnitude<ctnn::dense<8>, ctnn::constant_sparsity<0.5>, int>>;
constexpr auto n = net::parameter_count;
