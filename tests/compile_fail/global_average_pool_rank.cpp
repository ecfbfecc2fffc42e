// global_average_pool after dense (rank 1) at position 3.
// first-error: layer 3 (global_average_pool): input has rank 1 (10); it takes rank 2 or more (positions..., channels)
// expect: static assertion failed: global_average_pool: the input of this layer must have rank >= 2
// expect: global_average_pool_input_rank<ctnn::diag::layer<3>, ctnn::diag::input_rank<1>, false>
#include <ctnn/ctnn.hpp>
using net = ctnn::sequential<ctnn::input<28, 28>, ctnn::flatten, ctnn::dense<10>, ctnn::global_average_pool>;
constexpr auto n = net::parameter_count;
