// Frame for documentation blocks that use the getting-started MLP type `net` under a 16-bit policy.
#include <ctnn/mixed_precision.hpp>

using net = ctnn::sequential<ctnn::input<28, 28>, ctnn::flatten,
                             ctnn::dense<256, ctnn::relu>, ctnn::dense<10>>;

int main() {
// @snippet@
}
