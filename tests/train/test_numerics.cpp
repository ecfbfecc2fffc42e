// numerics.hpp through fit and evaluate: non-finite input data, parameters and losses raise numeric_error.
#include <doctest/doctest.h>

#include <ctnn/ctnn.hpp>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

using namespace ctnn;

namespace {
using net = sequential<input<4>, dense<8, relu>, dense<3>>;
using ds_t = data::in_memory<shape<4>, sparse_labels>;
// 24 samples; value `at` of the inputs replaced by v.
ds_t data_with(std::size_t at, float v) {
  std::vector<float> x(24 * 4);
  std::vector<int> y(24);
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = float((i * 7) % 11) / 11.0f - 0.3f;
  for (std::size_t i = 0; i < y.size(); ++i) y[i] = int(i % 3);
  if (at < x.size()) x[at] = v;
  return ds_t(x, y);
}
constexpr float qnan = std::numeric_limits<float>::quiet_NaN();
constexpr float inf = std::numeric_limits<float>::infinity();
}  // namespace

TEST_CASE("fit: a NaN or -Inf input value stops training at the step that took it in, naming epoch and step") {
  for (float bad : {qnan, -inf}) {
    CAPTURE(bad);
    auto m = make_model<net>(3);
    adam opt;
    // sample 13 (in the second batch of 8), value 2
    const auto train = data_with(13 * 4 + 2, bad).batch(8);
    std::string msg = "no numeric_error";
    try {
      fit(m, sparse_categorical_crossentropy{.from_logits = true}, opt, train, epochs{2});
    } catch (const numeric_error& e) {
      msg = e.what();
    }
    CAPTURE(msg);
    CHECK(msg.find("epoch 1, step 2") != std::string::npos);
    // A NaN input value: relu hides it from the loss (2.30 and finite), only the parameters show it.
    if (std::isnan(bad)) CHECK(msg.find("fit: after the update of epoch 1, step 2: parameter") != std::string::npos);
  }
}

TEST_CASE("fit: finite data trains without a numeric_error, the parameters stay finite") {
  auto m = make_model<net>(3);
  adam opt;
  fit(m, sparse_categorical_crossentropy{.from_logits = true}, opt, data_with(~std::size_t(0), 0).batch(8), epochs{3});
  for (float p : m.parameters()) REQUIRE(std::isfinite(p));
}

TEST_CASE("evaluate and validation: a non-finite loss raises numeric_error naming the batch") {
  const ds_t good = data_with(~std::size_t(0), 0);
  auto m = make_model<net>(3);
  for (auto& p : m.parameters()) p = qnan;  // (the span's tail may be alignment padding: poison them all)
  CHECK_THROWS_WITH_AS(evaluate(m, sparse_categorical_crossentropy{.from_logits = true}, good.batch(8)),
                       "evaluate: batch 1: the loss is NaN", numeric_error);
  for (auto& p : m.parameters()) p = -inf;
  CHECK_THROWS_AS(evaluate(m, mean_squared_error{}, data::in_memory<shape<4>, dense_targets<shape<3>>>(
                                                        std::vector<float>(8), std::vector<float>(6)).batch(2)),
                  numeric_error);
}

TEST_CASE("evaluate: a NaN weight that a relu hides from the loss raises numeric_error naming it, as fit does") {
  const ds_t good = data_with(~std::size_t(0), 0);
  auto m = make_model<net>(3);
  // layer 1's kernel [4 x 8] all NaN: its relu (y > 0 ? y : 0) outputs 0, so the logits are
  // layer 2's bias alone, 0 after make_model: the loss is ln 3, finite
  auto p = m.parameters();
  for (std::size_t i = 0; i < 32; ++i) p[i] = qnan;
  CHECK_THROWS_WITH_AS(evaluate(m, sparse_categorical_crossentropy{.from_logits = true}, good.batch(8)),
                       "evaluate: the model's variables: parameter 0 (layer 1 'kernel' [0]) is NaN (a NaN or infinity "
                       "in the input data, or a learning rate too large; data::check_numerics names the sample)",
                       numeric_error);
}
