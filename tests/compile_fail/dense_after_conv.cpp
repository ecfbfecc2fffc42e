// The example: dense<128> at position 2 after a conv2d whose output is 26x26x8.
// first-error: layer 2 (dense<128>): input has rank 3 (26x26x8); put ctnn::flatten before it
// expect: static assertion failed: dense: the input of this layer is not flat (rank 1); put ctnn::flatten before it
#include <ctnn/ctnn.hpp>
using net = ctnn::sequential<ctnn::input<28, 28, 1>, ctnn::conv2d<8, 3, 3, 1, ctnn::padding::valid, ctnn::relu>,
                             ctnn::dense<128>, ctnn::dense<10>>;
constexpr auto n = net::parameter_count;
