// gru with reset_after = false has no recurrent_dropout (docs/sequences.md, "How it runs").
// first-error: gru: reset_after = false with recurrent_dropout is not supported
#include <ctnn/ctnn.hpp>
#include <ctnn/layers/gru.hpp>
using net = ctnn::sequential<ctnn::input<6, 4>,
                             ctnn::gru<8, ctnn::recurrent_options{.reset_after = false, .recurrent_dropout = 0.2}>,
                             ctnn::dense<1>>;
static_assert(net::parameter_count > 0);
