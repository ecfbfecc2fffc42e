// prune_low_magnitude around dropout (no kernel) at position 2: the first error
// names the position and the wrapper under g++ 12 and clang 19 (clang cuts the
// text after about 34 characters); the sentence follows.
// first-error: layer 2 (prune_low_magnitude)
// expect: prune_low_magnitude: this layer has no kernel to prune (dense, conv2d, simple_rnn, lstm and gru are prunable)
#include <ctnn/ctnn.hpp>
#include <ctnn/pruning.hpp>
using net = ctnn::sequential<ctnn::input<28, 28>, ctnn::flatten,
                             ctnn::prune_low_magnitude<ctnn::dropout<0.2f>, ctnn::constant_sparsity<0.5>>,
                             ctnn::dense<10>>;
constexpr auto n = net::parameter_count;
