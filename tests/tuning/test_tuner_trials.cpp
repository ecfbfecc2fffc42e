// What runs inside a tuner's trial: run-time dropout and l2 (bit for bit as the
// compile-time ones), a trial that throws, a callback copied fresh into every
// trial, and Bayesian optimisation's GP trials on a one-architecture tuner.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>

#include <ctnn/ctnn.hpp>
#include <ctnn/tuning/bayesian.hpp>
#include <ctnn/tuning/tuner.hpp>

#include "tuning/tuner_common.hpp"

using namespace ctnn;
using namespace tuner_test;

TEST_CASE("dynamic_dropout and dynamic_l2 train bit for bit as dropout<0.25> and l2<0.001f>") {
  using fixed_net = sequential<input<4>, dense<8, relu, l2<0.001f>>, dropout<0.25>, dense<2>>;
  using dyn_net = sequential<input<4>, dense<8, relu, dynamic_l2>, dynamic_dropout, dense<2>>;
  auto a = make_model<fixed_net>(9);
  auto b = make_model<dyn_net>(9);
  CHECK(set_dropout_rate(b, 0.25) == 1);
  CHECK(set_regularization(b, "l2", 0.001) == 1);
  adam oa{0.01}, ob{0.01};
  auto ha = fit(a, loss, oa, train_data.batch(16), epochs{2});
  auto hb = fit(b, loss, ob, train_data.batch(16), epochs{2});
  CHECK(ha["loss"] == hb["loss"]);
  auto pa = a.parameters(), pb = b.parameters();
  REQUIRE(pa.size() == pb.size());
  CHECK(std::equal(pa.begin(), pa.end(), pb.begin()));
  CHECK_THROWS_WITH(set_dropout_rate(b, 1.0), doctest::Contains("must be in [0, 1), got 1"));
  CHECK_THROWS_WITH(set_regularization(b, "l2", -1.0), doctest::Contains("l2 factor must be finite and >= 0"));
  CHECK(set_regularization(b, "l1", 0.1) == 0);  // no dynamic_l1 in this network
}

TEST_CASE("tuner: a trial that throws is recorded as FAILED with its message and the search goes on") {
  const auto dir = scratch("fail");
  tn::search_space s;
  s.choice("learning_rate", {0.01, 1e30});
  s.choice("batch_size", {std::int64_t(32)});
  auto o = options(dir);
  o.objective = tn::objective::min("val_loss");
  o.architecture_names = {};
  o.optimizer_names = {};
  tn::tuner<tn::architectures<wide>, tn::optimizers<sgd<>>> t(s, std::make_unique<tn::random_search>(6), o);
  t.search(loss, train_data, val_data, 2);
  // Random search stops after 20 collisions: both configurations, each once.
  REQUIRE(t.trials().size() == 2);
  int failed = 0, completed = 0;
  for (auto& tr : t.trials()) {
    if (tr.status == tn::trial_status::failed) {
      ++failed;
      CHECK(tr.hp.get<double>("learning_rate") == 1e30);
      CHECK(tr.message.find("fit: ") == 0);
      const auto j = nlohmann::json::parse(io::read_file(dir / "p" / ("trial_" + tr.id) / "trial.json", "test"));
      CHECK(j.at("status") == "FAILED");
      CHECK(j.at("message") == tr.message);
    } else {
      ++completed;
    }
  }
  CHECK(failed == 1);
  CHECK(completed == 1);
  CHECK(t.best_trials(5).size() == 1);
  std::filesystem::remove_all(dir);
}

TEST_CASE("tuner: early_stopping is copied fresh into every trial") {
  const auto dir = scratch("es");
  tiny_tuner t(space(), std::make_unique<tn::random_search>(3), options(dir));
  // No epoch improves on the first by min_delta = 100: each trial stops after its second epoch
  // (Keras' rule: the first epoch sets the best, the second exhausts patience 0). A callback shared
  // between trials would stop the later ones after their first epoch.
  t.search(loss, train_data, val_data, 3, sparse_categorical_accuracy{},
           early_stopping{.monitor = "val_loss", .min_delta = 100, .patience = 0});
  REQUIRE(t.trials().size() == 3);
  for (auto& tr : t.trials()) CHECK(tr.metrics.at("val_loss").size() == 2);
  std::filesystem::remove_all(dir);
}

TEST_CASE("tuner: bayesian optimisation runs its GP trials after the random ones") {
  const auto dir = scratch("bo");
  tn::search_space s;
  s.real("learning_rate", 1e-3, 1e-1, 0, tn::sampling::log);
  s.choice("batch_size", {std::int64_t(16), std::int64_t(32)});
  auto o = options(dir);
  o.architecture_names = {"wide"};
  o.optimizer_names = {"adam"};
  tn::tuner<tn::architectures<wide>, tn::optimizers<adam<>>> t(
      s, std::make_unique<tn::bayesian_optimization>(tn::bayesian_optimization::options{.max_trials = 5, .num_initial_points = 2}), o);
  t.search(loss, train_data, val_data, 1, sparse_categorical_accuracy{});
  REQUIRE(t.trials().size() == 5);
  for (auto& tr : t.trials()) {
    CHECK(tr.status == tn::trial_status::completed);
    const double lr = tr.hp.get<double>("learning_rate");
    CHECK(lr >= 1e-3);
    CHECK(lr <= 1e-1);
  }
  std::filesystem::remove_all(dir);
}
