// pruning/sensitivity.hpp: the layer x sparsity table, its baseline and suggestions.
#include <doctest/doctest.h>

#include <ctnn/ctnn.hpp>
#include <ctnn/pruning.hpp>

#include <vector>

using namespace ctnn;

TEST_CASE("sensitivity_analysis: one layer at a time, without retraining, the model unchanged") {
  using net = sequential<input<8>, dense<16, relu>, dense<3>>;
  std::vector<float> x(120 * 8);
  std::vector<std::int32_t> y(120);
  rng g(7);
  for (std::size_t i = 0; i < 120; ++i) {
    y[i] = std::int32_t(i % 3);
    for (std::size_t k = 0; k < 8; ++k) x[i * 8 + k] = float(g.uniform(-0.3, 0.3)) + (k % 3 == std::size_t(y[i]) ? 1.0f : 0.0f);
  }
  data::in_memory<shape<8>, sparse_labels> ds{x, y};
  auto m = make_model<net>(1);
  adam opt{0.02};
  const sparse_categorical_crossentropy xent{.from_logits = true};
  fit(m, xent, opt, ds.batch(20), epochs{15});
  const std::vector<float> before(m.parameters().begin(), m.parameters().end());

  auto t = sensitivity_analysis(m, xent, ds.batch(40), sparse_categorical_accuracy{}, {0.0, 0.5, 0.99});
  CHECK(std::equal(before.begin(), before.end(), m.parameters().begin()));
  CHECK(t.metric == "sparse_categorical_accuracy");
  REQUIRE(t.layers == std::vector<std::size_t>{1, 2});
  REQUIRE(t.value.size() == 2);
  CHECK(t.baseline > 0.9);
  CHECK(t.value[0][0] == t.baseline);  // sparsity 0 changes nothing
  CHECK(t.value[1][0] == t.baseline);
  // 99% of the 48 output weights leaves 1 (keep_count): the output layer can no longer tell 3 classes apart
  CHECK(t.value[1][2] < t.baseline - 0.2);
  const auto s = t.suggest(0.02);
  CHECK(s[1] < 0.99);
  CHECK(t.str().find("sparse_categorical_accuracy, unpruned") != std::string::npos);
  MESSAGE(t.str());
  CHECK_THROWS_WITH(sensitivity_analysis(m, xent, ds.batch(40), sparse_categorical_accuracy{}, {1.0}),
                    "sensitivity_analysis: every sparsity must be >= 0 and < 1, got 1");
}
