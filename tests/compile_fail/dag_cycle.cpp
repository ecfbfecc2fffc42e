// A dag whose nodes read each other (a cycle): a node may read only nodes listed before it.
// first-error: layer 1 (dag): node a reads b, which is not listed before it (a cycle, or a use before the definition)
// expect: dag_wiring_invalid<ctnn::diag::layer<1>, false>
#include <ctnn/ctnn.hpp>
#include <ctnn/layers/dag.hpp>
using net = ctnn::sequential<ctnn::input<4>, ctnn::dag<ctnn::node<"a", ctnn::dense<4>, "b">, ctnn::node<"b", ctnn::dense<4>, "a">>>;
constexpr auto n = net::parameter_count;
