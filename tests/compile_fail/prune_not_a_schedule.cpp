// A learning-rate schedule where prune_low_magnitude takes a pruning schedule: the constraint's own line,
// which names the wrapper and the concept (g++) or the wrapper and its arguments (clang).
// first-error-gcc: (PruningSchedule<Schedule>) struct ctnn::prune_low_magnitude
// first-error-clang: constraints not satisfied for class template 'prune_low_magnitude' [with Layer = ctnn::dense<8>, Schedule = ctnn::exponential_decay
#include <ctnn/ctnn.hpp>
#include <ctnn/pruning.hpp>
using net = ctnn::sequential<ctnn::input<16>, ctnn::prune_low_magnitude<ctnn::dense<8>, ctnn::exponential_decay>>;
constexpr auto n = net::parameter_count;
