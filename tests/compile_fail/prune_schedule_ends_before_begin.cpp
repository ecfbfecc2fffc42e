// A polynomial schedule from step 500 to step 100 on the first layer.
// expect: static assertion failed: prune_low_magnitude: the schedule for this layer ends before it begins (end_step <= begin_step)
// expect: prune_schedule_ends_before_it_begins<ctnn::diag::layer<1>, ctnn::diag::begin_step<500>, ctnn::diag::end_step<100>, false>
// first-error: layer 1 (prune_low_magnitude): the schedule ends at step 100, before it begins (step 500)
#include <ctnn/ctnn.hpp>
#include <ctnn/pruning.hpp>
using sched = ctnn::polynomial_sparsity<0.0, 0.8, 500, 100>;
using net = ctnn::sequential<ctnn::input<784>, ctnn::prune_low_magnitude<ctnn::dense<256, ctnn::relu>, sched>,
                             ctnn::dense<10>>;
constexpr auto n = net::parameter_count;
