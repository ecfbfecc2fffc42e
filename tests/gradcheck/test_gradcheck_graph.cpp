// Finite-difference gradient checks, in double precision, through the joins of the graph
// layers (issue 29): residual over a dense block and a conv block, with and without a
// projection, nested; add and concatenate over branches; dag: both joins, nodes read twice (by
// nodes that are not siblings, and twice by one join), the input read by several nodes.
#include <doctest/doctest.h>

#include <ctnn/ctnn.hpp>
#include <ctnn/layers/dag.hpp>

#include "gradcheck.hpp"

using namespace ctnn;

namespace {
constexpr double tol = 1e-6;
}

TEST_CASE("gradcheck: residual (issue 29)") {
  CHECK(gradcheck::check_layer<residual<dense<5, ctnn::tanh>, dense<5>>, shape<5>>() < tol);
  CHECK(gradcheck::check_layer<residual<dense<4, ctnn::tanh>, dense<3>>, shape<5>>() < tol);  // dense projection
  CHECK(gradcheck::check_layer<residual<conv2d<3, 3, 3, 1, padding::same, ctnn::tanh>, conv2d<3, 3, 3, 1, padding::same>>,
                               shape<5, 5, 3>>() < tol);
  CHECK(gradcheck::check_layer<residual<conv2d<4, 3, 3, 2, padding::same, sigmoid>>, shape<6, 6, 2>>() < tol);  // 1x1 stride 2
  CHECK(gradcheck::check_layer<residual<dense<4, ctnn::tanh>, residual<dense<4, ctnn::tanh>>>, shape<4>>() < tol);  // nested
}

TEST_CASE("gradcheck: add and concatenate (issue 29)") {
  CHECK(gradcheck::check_layer<add<dense<4, ctnn::tanh>, branch<dense<3, sigmoid>, dense<4>>, branch<>>, shape<4>>() < tol);
  CHECK(gradcheck::check_layer<concatenate<-1, dense<3, ctnn::tanh>, branch<>, branch<dense<2, sigmoid>, dense<2>>>, shape<4>>() < tol);
  // images: channels (-1) and height (0) joins, a conv branch next to the input itself
  CHECK(gradcheck::check_layer<concatenate<-1, conv2d<2, 3, 3, 1, padding::same, ctnn::tanh>, branch<>>, shape<4, 4, 2>>() < tol);
  CHECK(gradcheck::check_layer<concatenate<0, branch<>, conv2d<2, 3, 1, 1, padding::valid, ctnn::tanh>>, shape<5, 3, 2>>() < tol);
}

TEST_CASE("gradcheck: dag (issue 29)") {
  // a is read by cat and twice by out; in by a, b and cat; out's dy reaches a three ways
  CHECK(gradcheck::check_layer<dag<node<"a", dense<4, ctnn::tanh>>, node<"b", dense<3, sigmoid>, "in">,
                                   node<"cat", concatenate_join<-1>, "a", "b", "in">, node<"h", dense<4, ctnn::tanh>, "cat">,
                                   node<"out", add_join, "h", "a", "a">>,
                               shape<4>>() < tol);
  // a chain (its dy rows share buffers) with a residual inside a node, ending in a layer node
  CHECK(gradcheck::check_layer<dag<node<"r", residual<dense<4, ctnn::tanh>>>, node<"s", add_join, "r", "in">,
                                   node<"t", dense<3, sigmoid>>, node<"u", dense<2>>>,
                               shape<4>>() < tol);
  // images: a join along the height of x and a conv of it
  CHECK(gradcheck::check_layer<dag<node<"c", conv2d<2, 3, 1, 1, padding::valid, ctnn::tanh>>, node<"j", concatenate_join<0>, "in", "c">>,
                               shape<5, 3, 2>>() < tol);
}
