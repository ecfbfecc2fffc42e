// layers/add.hpp and layers/concatenate.hpp: the joins' output shapes, their values on
// identity branches (where the expected output is known exactly), a dense branch beside x,
// and a short training run through both joins.
#include <doctest/doctest.h>

#include <ctnn/ctnn.hpp>
#include <ctnn/layers/add.hpp>
#include <ctnn/layers/branch.hpp>
#include <ctnn/layers/concatenate.hpp>
#include <ctnn/layers/graph_nodes.hpp>

#include <vector>

using namespace ctnn;

static_assert(sequential<input<4>, concatenate<-1, dense<3>, branch<>, branch<dense<2>, dense<5>>>>::output_shape == shape<12>{});
static_assert(sequential<input<4, 4, 2>, concatenate<-1, conv2d<3, 3, 3, 1, padding::same>, branch<>>>::output_shape ==
              shape<4, 4, 5>{});
static_assert(sequential<input<5, 3, 2>, concatenate<0, branch<>, conv2d<2, 3, 1>>>::output_shape == shape<8, 3, 2>{});
static_assert(sequential<input<4>, add<dense<3>, branch<dense<2>, dense<3>>>>::output_shape == shape<3>{});

TEST_CASE("concatenate: identity branches join rows along the axis, Keras's layout") {
  // x is 2x2x2 (h, w, c); axis -1 gives per position [x_c0, x_c1, x_c0, x_c1]; axis 0 stacks x twice
  std::vector<float> x{1, 2, 3, 4, 5, 6, 7, 8, 11, 12, 13, 14, 15, 16, 17, 18};  // two samples
  auto last = make_model<sequential<input<2, 2, 2>, concatenate<-1, branch<>, branch<>>>>(0);
  const float* y = last.forward(x.data(), 2, false);
  const std::vector<float> want_last{1, 2, 1, 2, 3, 4, 3, 4, 5, 6, 5, 6, 7, 8, 7, 8};
  for (std::size_t i = 0; i < want_last.size(); ++i) CHECK(y[i] == want_last[i]);
  CHECK(y[16] == 11);
  CHECK(y[18] == 11);
  auto first = make_model<sequential<input<2, 2, 2>, concatenate<0, branch<>, branch<>>>>(0);
  y = first.forward(x.data(), 2, false);
  for (std::size_t i = 0; i < 8; ++i) {
    CHECK(y[i] == x[i]);
    CHECK(y[8 + i] == x[i]);
    CHECK(y[16 + i] == x[8 + i]);
  }
}

TEST_CASE("add: x + x + dense(x), the dense branch's variables named by position") {
  using net = sequential<input<3>, add<branch<>, branch<>, dense<3>>>;
  auto m = make_model<net>(4);
  std::vector<std::string> names;
  m.for_each_variable([&](const variable_ref& v) { names.push_back(std::string(v.name)); });
  CHECK(names == std::vector<std::string>{"2.kernel", "2.bias"});
  auto p = m.parameters();
  std::fill(p.begin(), p.end(), 0.0f);
  p[0] = 1, p[4] = 1, p[8] = 1;  // identity kernel
  p[9] = 0.5f;                   // bias 0
  std::vector<float> x{1, -2, 3};
  const float* y = m.forward(x.data(), 1, false);
  CHECK(y[0] == doctest::Approx(3.5));
  CHECK(y[1] == doctest::Approx(-6));
  CHECK(y[2] == doctest::Approx(9));
}

TEST_CASE("add and concatenate: an inception-like net learns XOR") {
  using net = sequential<input<2>, concatenate<-1, dense<6, ctnn::tanh>, branch<dense<6, ctnn::tanh>, dense<6, ctnn::tanh>>, branch<>>,
                         add<dense<8, ctnn::tanh>, dense<8, ctnn::tanh>>, dense<2>>;
  const data::in_memory<shape<2>, sparse_labels> ds({0, 0, 0, 1, 1, 0, 1, 1}, {0, 1, 1, 0});
  auto m = make_model<net>(5);
  adam opt{0.05};
  auto h = fit(m, sparse_categorical_crossentropy{.from_logits = true}, opt, ds.batch(4), epochs{150});
  CHECK(h["loss"].back() < 0.05);
}
