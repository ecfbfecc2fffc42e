// reshape at position 2 from 784 elements to 700: both sizes and the position appear.
// first-error: layer 2 (reshape<7x100>): input has 784 elements (784), the target shape 700
// expect: static assertion failed: reshape: the input's element count differs from the target shape's element count
// expect: reshape_element_count_mismatch<ctnn::diag::layer<2>, ctnn::diag::input_elements<784>, ctnn::diag::target_elements<700>, false>
#include <ctnn/ctnn.hpp>
using net = ctnn::sequential<ctnn::input<28, 28>, ctnn::flatten, ctnn::reshape<7, 100>, ctnn::relu>;
constexpr auto n = net::parameter_count;
