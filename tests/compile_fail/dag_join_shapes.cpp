// An add_join over nodes of different widths: the message names the node, both inputs and their shapes.
// first-error: layer 1 (dag): node out (add): c yields 6 but b yields 8
// expect: dag_join_shapes_differ<ctnn::diag::layer<1>
#include <ctnn/ctnn.hpp>
#include <ctnn/layers/dag.hpp>
using net = ctnn::sequential<ctnn::input<4>, ctnn::dag<ctnn::node<"a", ctnn::dense<8>>, ctnn::node<"b", ctnn::dense<8>, "a">,
                                                       ctnn::node<"c", ctnn::dense<6>, "a">, ctnn::node<"out", ctnn::add_join, "b", "c">>>;
constexpr auto n = net::parameter_count;
