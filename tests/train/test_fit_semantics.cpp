// fit through its public API: what the epoch loop promises, checked where planted bugs survived the suite.
#include <doctest/doctest.h>

#include <ctnn/ctnn.hpp>

#include <cmath>
#include <set>
#include <vector>

using namespace ctnn;

namespace {
using net = sequential<input<2>, dense<4, relu>, dense<3>>;
using ds_t = data::in_memory<shape<2>, sparse_labels>;
ds_t numbers(std::size_t n) {
  std::vector<float> x;
  std::vector<int> y;
  for (std::size_t i = 0; i < n; ++i) {
    x.push_back(float(i) / float(n));
    x.push_back(float(i % 3) - 1.0f);
    y.push_back(int(i % 3));
  }
  return ds_t(x, y);
}

// A dataset that records the pass numbers fit opens and the labels of every batch it delivers.
struct recorder {
  using sample_shape = shape<2>;
  using value_type = float;
  using target_kind = sparse_labels;
  ds_t inner;
  std::vector<std::size_t>* opened;
  std::vector<std::vector<int>>* orders;
  struct cursor {
    ds_t::cursor c;
    std::vector<int>* order;
    bool next(data::batch_for<ds_t>& b) {
      if (!c.next(b)) return false;
      order->insert(order->end(), b.y.begin(), b.y.begin() + std::ptrdiff_t(b.size));
      return true;
    }
  };
  cursor open(std::size_t epoch) const {
    opened->push_back(epoch);
    orders->emplace_back();
    return {inner.open(epoch), &orders->back()};
  }
};
}  // namespace

TEST_CASE("fit: every epoch opens its own pass, so a shuffled dataset is seen in a new order each epoch") {
  std::vector<std::size_t> opened;
  std::vector<std::vector<int>> orders;
  // labels 0..29 so the order is visible; a network of 30 classes is not needed: record before the loss.
  std::vector<float> x(30 * 2);
  std::vector<int> y(30);
  for (int i = 0; i < 30; ++i) y[std::size_t(i)] = i % 3, x[std::size_t(2 * i)] = float(i);
  const recorder train{ds_t(x, y).shuffle(9).batch(7), &opened, &orders};
  auto m = make_model<net>(1);
  sgd opt;
  orders.reserve(8);
  fit(m, sparse_categorical_crossentropy{.from_logits = true}, opt, train, epochs{4});
  CHECK(opened == std::vector<std::size_t>{0, 1, 2, 3});
  REQUIRE(orders.size() == 4);
  std::set<std::vector<int>> distinct(orders.begin(), orders.end());
  CHECK(distinct.size() == 4);
}

TEST_CASE("fit: the epoch loss is the mean over samples, also when the last batch is short") {
  // 10 samples in batches of 4, 4, 2; a learning rate of 1e-30 keeps the model (to far below the tolerance) the same
  // for every batch.
  const auto d = numbers(10);
  auto m = make_model<net>(5);
  sgd opt{1e-30};
  const auto hist = fit(m, sparse_categorical_crossentropy{.from_logits = true}, opt, d.batch(4), epochs{1});
  // One batch of all 10 samples: its mean is the mean over samples.
  const double want = evaluate(m, sparse_categorical_crossentropy{.from_logits = true}, d.batch(10))["loss"];
  const double got = hist["loss"].front();
  CHECK(got == doctest::Approx(want).epsilon(1e-6));
  // ... and evaluate in short batches agrees too.
  CHECK(evaluate(m, sparse_categorical_crossentropy{.from_logits = true}, d.batch(4))["loss"] ==
        doctest::Approx(want).epsilon(1e-6));
}

namespace {
template <class M>
struct es_ctx {
  M& model;
  std::size_t epoch = 0;
  logs epoch_logs;
  bool stop_training = false;
};
}  // namespace

TEST_CASE("early_stopping: restore_best_weights puts back batch_norm's moving statistics with the parameters") {
  using bn_net = sequential<input<2>, dense<3>, batch_norm, dense<2>>;
  auto m = make_model<bn_net>(1);
  REQUIRE(m.state().size() > 0);
  es_ctx<decltype(m)> ctx{m};
  early_stopping es{.monitor = "loss", .patience = 1, .restore_best_weights = true};
  const std::vector<double> losses{1.0, 0.5, 0.9, 0.9};
  es.on_train_begin(ctx);
  for (std::size_t e = 0; e < losses.size() && !ctx.stop_training; ++e) {
    for (auto& v : m.parameters()) v = float(e + 1);
    for (auto& v : m.state()) v = float(10 * (e + 1));  // the moving statistics change every epoch too
    ctx.epoch = e;
    ctx.epoch_logs = logs{};
    ctx.epoch_logs.set("loss", losses[e]);
    es.on_epoch_end(ctx);
  }
  es.on_train_end(ctx);
  for (float v : m.parameters()) REQUIRE(v == 2.0f);
  for (float v : m.state()) REQUIRE(v == 20.0f);
}
