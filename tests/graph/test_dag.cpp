// layers/dag.hpp: named nodes wired as a DAG as one layer: the wiring table (reads, the problems
// the checks report, the dy rows' colouring), output values where they are known exactly, the
// variables' names in weights files, the summary and a short training run.
#include <doctest/doctest.h>

#include <ctnn/ctnn.hpp>
#include <ctnn/layers/dag.hpp>
#include <ctnn/train/summary.hpp>

#include <filesystem>
#include <sstream>
#include <string>
#include <vector>

using namespace ctnn;

namespace {
// x -> a -> b, x -> c; out = b + c + a: a is read by b and by out (not siblings), x by a and c
using diamond = dag<node<"a", dense<16, relu>>, node<"b", dense<16>, "a">, node<"c", dense<16>, "in">,
                    node<"out", add_join, "b", "c", "a">>;
using diamond_net = sequential<input<8>, diamond, dense<2>>;
template <class... N>
constexpr auto problem = detail::dag_table<N...>::first_problem.kind;
using kind = detail::dag_problem;
}  // namespace

static_assert(diamond_net::output_shape == shape<2>{});
static_assert(diamond_net::parameter_count == (8 * 16 + 16) + (16 * 16 + 16) + (8 * 16 + 16) + (16 * 2 + 2));
static_assert(sequential<input<4, 4, 2>, dag<node<"c", conv2d<3, 3, 3, 1, padding::same>>, node<"j", concatenate_join<-1>, "in", "c", "in">>>::
                  output_shape == shape<4, 4, 7>{});

// reads: none = the node before ("in" for the first)
using diamond_table = detail::dag_table<node<"a", dense<16, relu>>, node<"b", dense<16>, "a">, node<"c", dense<16>, "in">,
                                        node<"out", add_join, "b", "c", "a">>;
static_assert(diamond_table::src == std::array<std::size_t, 6>{4, 0, 4, 1, 2, 0});
static_assert(diamond_table::last_reader == std::array<std::size_t, 4>{3, 3, 3, 0});
// backward runs out, c, b, a: out's reads write the dy of b, c and a; c's read of x writes dx,
// then b's read of a and a's read of x add to them
static_assert(diamond_table::first_contribution == std::array<bool, 6>{false, false, true, true, true, true});
// b, c, a all wait for out: three dy rows
static_assert(diamond_table::colours == 3);

// the memory plan: a chain of 6 nodes keeps 2 dy rows, not 6 (node k's dy dies where node k-2's is born)
using chain_table = detail::dag_table<node<"a", dense<4>>, node<"b", dense<4>>, node<"c", dense<4>>, node<"d", dense<4>>,
                                      node<"e", dense<4>>, node<"f", dense<4>>>;
static_assert(chain_table::colours == 2 && chain_table::colours < chain_table::n);
static_assert(chain_table::colour == std::array<std::size_t, 6>{0, 1, 0, 1, 0, 0});  // f's dy: the dag's dy
// per sample: outputs of a..e (5 x 4), 2 dy rows (2 x 4), no scratch (no node's dy is added to)
using chain_layer_t = sequential<input<4>, dag<node<"a", dense<4>>, node<"b", dense<4>>, node<"c", dense<4>>, node<"d", dense<4>>,
                                               node<"e", dense<4>>, node<"f", dense<4>>>>::bound<float, cpu<>>;
static_assert(detail::type_at_t<0, chain_layer_t>::cache_per_sample == 5 * 4 + 2 * 4);

// a dag inside a dag's node: its variables named by both nodes
using nested = sequential<input<4>, dag<node<"x", dag<node<"a", dense<4>>, node<"s", add_join, "a", "in">>>,
                                        node<"y", add_join, "x", "in">>>::bound<float, cpu<>>;
static_assert(detail::type_at_t<0, nested>::parameter_count == 4 * 4 + 4);
static_assert(detail::type_at_t<0, nested>::buffers[0].name == "x.a.kernel");
static_assert(detail::type_at_t<0, nested>::buffers[1].name == "x.a.bias");

// the wiring problems the checks report (compile_fail cases show their messages)
static_assert(problem<node<"a", dense<4>>, node<"b", dense<4>, "q">> == kind::unknown);
static_assert(problem<node<"a", dense<4>, "b">, node<"b", dense<4>, "a">> == kind::later);  // a cycle
static_assert(problem<node<"a", dense<4>, "a">> == kind::later);
static_assert(problem<node<"a", dense<4>>, node<"a", dense<4>>> == kind::duplicate);
static_assert(problem<node<"in", dense<4>>> == kind::bad_name);
static_assert(problem<node<"a.b", dense<4>>> == kind::bad_name);
static_assert(problem<node<"a", dense<4>>, node<"b", dense<4>, "a", "in">> == kind::several);
static_assert(problem<node<"a", dense<4>>, node<"b", dense<4>, "in">> == kind::unread);
static_assert(problem<node<"a", dense<4>>, node<"b", add_join, "a", "a", "in">> == kind::none);

// the first lines of the cases without a compile_fail file
template <class... N>
constexpr diag::message wiring_message = diag::dag_wiring_text<3, N...>();
template <class... N>
constexpr std::string_view wiring_text{wiring_message<N...>.data(), wiring_message<N...>.size()};
static_assert(wiring_text<node<"a", dense<4>>, node<"b", dense<4>, "in">> ==
              "layer 3 (dag): node a is read by no node (only the last node is the output of the dag)");
static_assert(wiring_text<node<"a", dense<4>>, node<"b", dense<4>, "a", "in">> ==
              "layer 3 (dag): node b reads 2 nodes; only a join (add_join, concatenate_join<Axis>) takes several");
static_assert(wiring_text<node<"a", dense<4>>, node<"a", dense<4>>> == "layer 3 (dag): node a: two nodes have this name");
static_assert(wiring_text<node<"a-b", dense<4>>> ==
              "layer 3 (dag): node a-b: a node name is letters, digits and _, not empty and not in (the input)");

TEST_CASE("dag: values where they are known: x + 2 a(x), and a join of x with itself") {
  using net = sequential<input<3>, dag<node<"a", dense<3>>, node<"s", add_join, "a", "in", "a">>>;
  auto m = make_model<net>(4);
  auto p = m.parameters();
  std::fill(p.begin(), p.end(), 0.0f);
  p[0] = 1, p[4] = 1, p[8] = 1;  // a's kernel: the identity
  p[9] = 0.5f;                   // a's bias[0]
  std::vector<float> x{1, -2, 3, 4, 5, 6};
  const float* y = m.forward(x.data(), 2, false);
  const std::vector<float> want{4, -6, 9, 13, 15, 18};
  for (std::size_t i = 0; i < 6; ++i) CHECK(y[i] == doctest::Approx(want[i]));

  // x is 2x1x2 (h, w, c): concatenating along the channels gives per position [x, x]
  auto c = make_model<sequential<input<2, 1, 2>, dag<node<"j", concatenate_join<-1>, "in", "in">>>>(0);
  y = c.forward(x.data(), 1, false);
  const std::vector<float> want_c{1, -2, 1, -2, 3, 4, 3, 4};
  for (std::size_t i = 0; i < 8; ++i) CHECK(y[i] == want_c[i]);
}

TEST_CASE("dag: the variables are named by node, saved and loaded") {
  auto m = make_model<diamond_net>(1);
  std::vector<std::string> names;
  m.for_each_variable([&](const variable_ref& v) { names.push_back(std::string(v.name)); });
  CHECK(names == std::vector<std::string>{"a.kernel", "a.bias", "b.kernel", "b.bias", "c.kernel", "c.bias", "kernel", "bias"});
  const auto path = std::filesystem::temp_directory_path() / "ctnn_test_dag.weights";
  io::save_weights(m, path);
  auto n = make_model<diamond_net>(2);
  CHECK(n.parameters()[0] != m.parameters()[0]);
  io::load_weights(n, path);
  CHECK(std::equal(m.parameters().begin(), m.parameters().end(), n.parameters().begin()));
  std::filesystem::remove(path);
}

TEST_CASE("dag: summary shows each node with what it reads") {
  std::ostringstream out;
  summary<diamond_net>(out);
  const std::string s = out.str();
  CHECK(s.find("\ndag ") != std::string::npos);
  CHECK(s.find("\n  a = dense<16, relu>(in) ") != std::string::npos);
  CHECK(s.find("\n  b = dense<16>(a) ") != std::string::npos);
  CHECK(s.find("\n  out = add(b, c, a) ") != std::string::npos);
  CHECK(s.find("Total params: " + std::to_string(diamond_net::parameter_count)) != std::string::npos);
}

TEST_CASE("dag: a network of two dags learns XOR") {
  using net = sequential<input<2>,
                         dag<node<"h", dense<8, ctnn::tanh>>, node<"g", dense<8, ctnn::tanh>, "in">,
                             node<"j", concatenate_join<-1>, "h", "g", "in">>,
                         dag<node<"a", dense<8, ctnn::tanh>>, node<"b", dense<8, ctnn::tanh>>, node<"s", add_join, "a", "b">>,
                         dense<2>>;
  const data::in_memory<shape<2>, sparse_labels> ds({0, 0, 0, 1, 1, 0, 1, 1}, {0, 1, 1, 0});
  auto m = make_model<net>(5);
  adam opt{0.05};
  auto h = fit(m, sparse_categorical_crossentropy{.from_logits = true}, opt, ds.batch(4), epochs{150});
  CHECK(h["loss"].back() < 0.05);
}
