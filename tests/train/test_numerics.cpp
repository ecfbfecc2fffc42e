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

TEST_CASE("find_parameter: the model's constant table of parameter buffers is for_each_variable's parameters, and the plan's offset table") {
  using bn_net = sequential<input<6, 6>, conv2d<2, 3, 3, 1, padding::valid, relu>, batch_norm, flatten, dense<3>>;
  auto check = []<class M>(M& m) {
    constexpr auto& table = detail::parameter_table<typename M::layers, typename M::policy, typename M::plan>;
    std::vector<variable_ref> params;
    m.for_each_variable([&](const variable_ref& v) {
      if (v.kind == role::parameter) params.push_back(v);
    });
    REQUIRE(table.size() == params.size());
    for (std::size_t j = 0; j < table.size(); ++j) {
      CHECK(table[j].layer == params[j].layer);
      CHECK(table[j].name == params[j].name);
      CHECK(table[j].offset == params[j].offset);
      CHECK(table[j].bytes == params[j].extent * params[j].element_bytes);
      CHECK(table[j].element_bytes == params[j].element_bytes);
    }
    // the last element of every buffer is found in it; one past the region in none
    for (const variable_ref& v : params) {
      variable_ref found{};
      std::size_t element = 0;
      REQUIRE(detail::find_parameter(m, v.offset / v.element_bytes + v.extent - 1, v.element_bytes, found, element));
      CHECK(found.layer == v.layer);
      CHECK(found.name == v.name);
      CHECK(element == v.extent - 1);
    }
    variable_ref found{};
    std::size_t element = 0;
    CHECK_FALSE(detail::find_parameter(m, m.parameters().size(), sizeof(m.parameters()[0]), found, element));
    // the plan's offsets of the roles that do not grow with the batch come from its table
    // (net_plan::fixed_offsets): the sums of the blocks before, at any batch
    using P = typename M::plan;
    for (std::size_t r = 0; r < role_count; ++r)
      for (std::size_t batch : {1, 5}) {
        std::size_t sum = 0;
        for (std::size_t i = 0; i <= M::layer_count; ++i) {
          CHECK(P::offset(i, role(r), batch) == sum);
          if (i < M::layer_count) sum += align_bytes(P::block_bytes(i, role(r), batch));
        }
      }
  };
  auto a = make_model<net>(1);
  check(a);
  auto b = make_model<bn_net>(1);
  check(b);
  auto c = make_model<net, double>(1);
  check(c);
}

TEST_CASE("evaluate: a NaN in a bias that a relu hides is named by layer, buffer and element") {
  const ds_t good = data_with(~std::size_t(0), 0);
  auto m = make_model<net>(3);
  m.parameters()[32 + 5] = qnan;  // after layer 1's kernel [4 x 8]: its bias [5]; relu(NaN) is 0
  CHECK_THROWS_WITH_AS(evaluate(m, sparse_categorical_crossentropy{.from_logits = true}, good.batch(8)),
                       doctest::Contains("(layer 1 'bias' [5]) is NaN"), numeric_error);
}
