// A dag node reading a name no node has: the message names the dag's position, the node and the name.
// first-error: layer 2 (dag): node b reads q, which is no node of this dag
// expect: dag_wiring_invalid<ctnn::diag::layer<2>, false>
#include <ctnn/ctnn.hpp>
#include <ctnn/layers/dag.hpp>
using net = ctnn::sequential<ctnn::input<4>, ctnn::dense<8>,
                             ctnn::dag<ctnn::node<"a", ctnn::dense<8>>, ctnn::node<"b", ctnn::dense<8>, "q">>>;
constexpr auto n = net::parameter_count;
