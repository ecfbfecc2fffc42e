// bidirectional wraps a recurrent layer only (Keras: a sequence layer with go_backwards).
// first-error: bidirectional: the wrapped layer must be a recurrent layer (simple_rnn, lstm or gru)
#include <ctnn/ctnn.hpp>
using net = ctnn::sequential<ctnn::input<6, 4>, ctnn::bidirectional<ctnn::dense<8>>, ctnn::dense<1>>;
static_assert(net::parameter_count > 0);
