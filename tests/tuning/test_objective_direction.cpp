// The objective's direction, in both directions and for every oracle, on toy
// objectives whose best is known: a trial's score and best_step, best_trials,
// best_hyperparameters, early_stopping inside the trials, Hyperband's
// promotions and Bayesian optimisation's proposals. Each check fails when the
// direction's sign is dropped (objective::better, or the negation of a
// maximized score in bayesian.hpp).
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <unistd.h>
#include <vector>

#include <ctnn/ctnn.hpp>
#include <ctnn/tuning/bayesian.hpp>
#include <ctnn/tuning/hyperband.hpp>
#include <ctnn/tuning/tuner.hpp>

#include "tuning/toy_data.hpp"

using namespace ctnn;
namespace tn = ctnn::tuning;

namespace {
using net = sequential<input<4>, dense<8, relu>, dense<2>>;
using toy_tuner = tn::tuner<tn::architectures<net>, tn::optimizers<sgd<>>>;

using toy_data::make_data;
const auto train_data = make_data(16, 1);
const auto val_data = make_data(16, 2).batch(16);
const sparse_categorical_crossentropy loss{.from_logits = true};

// How far a learning rate is from the toy optimum 1e-2, in decades, squared.
double miss(double lr) {
  const double d = std::log10(lr) + 2;
  return d * d;
}
// Writes two toy objectives into the epoch logs (before the tuner records them), from the trial's
// learning rate and the epoch: "toy_accuracy" = -miss(lr) + 0.01 epoch, best (largest) for the rate
// nearest 1e-2 and at the last epoch; "toy_loss" = miss(lr) - 0.01 epoch, best (smallest) likewise.
struct toy_objective {
  template <class Ctx>
  void on_epoch_end(Ctx& ctx) {
    const double m = miss(ctx.learning_rate()), e = 0.01 * double(ctx.epoch);
    ctx.epoch_logs.set("toy_accuracy", -m + e);
    ctx.epoch_logs.set("toy_loss", m - e);
  }
};

std::filesystem::path scratch(const std::string& name) {
  auto p = std::filesystem::temp_directory_path() / ("ctnn_direction_" + name + "_" + std::to_string(::getpid()));
  std::filesystem::remove_all(p);
  return p;
}

void check_direction(const std::string& name, std::unique_ptr<tn::oracle> o, const tn::objective& obj) {
  CAPTURE(name);
  CAPTURE(obj.repr());
  const auto dir = scratch(name);
  tn::search_space s;
  s.real("learning_rate", 1e-4, 1e-1, 0, tn::sampling::log);
  tn::tuner_options opt;
  opt.directory = dir;
  opt.objective = obj;
  opt.seed = 11;
  toy_tuner t(s, std::move(o), opt);
  // early_stopping (monitor mode automatic: "acc" maximized, else minimized) with patience 0 stops a
  // trial at its second epoch unless every epoch improves, as each does here in the right direction.
  t.search(loss, train_data, val_data, 3, toy_objective{}, early_stopping{.monitor = obj.name, .patience = 0});
  REQUIRE(t.trials().size() >= 3);
  // A trial of n epochs scores its last epoch's value: -miss + 0.01 (n - 1) maximized, miss - 0.01 (n - 1) minimized.
  auto epochs_of = [](const tn::trial& tr) {
    return std::size_t(tr.hp.get_or<std::int64_t>("tuner/epochs", 3) - tr.hp.get_or<std::int64_t>("tuner/initial_epoch", 0));
  };
  auto expected = [&](const tn::trial& tr) {
    const double m = miss(tr.hp.get<double>("learning_rate")), e = 0.01 * double(epochs_of(tr) - 1);
    return obj.maximize ? -m + e : m - e;
  };
  const tn::trial* want = nullptr;
  for (auto& tr : t.trials()) {
    CAPTURE(tr.id);
    REQUIRE(tr.status == tn::trial_status::completed);
    const auto& h = tr.metrics.at(obj.name);
    CHECK(h.size() == epochs_of(tr));  // early stopping never stopped a trial
    CHECK(*tr.score == h.back());      // the best epoch is the last
    CHECK(*tr.score == doctest::Approx(expected(tr)).epsilon(1e-6));
    CHECK(tr.best_step == std::size_t(tr.hp.get_or<std::int64_t>("tuner/epochs", 3)) - 1);
    if (!want || (obj.maximize ? expected(tr) > expected(*want) : expected(tr) < expected(*want))) want = &tr;
  }
  const auto best = t.best_trials(t.trials().size());
  REQUIRE(best.size() == t.trials().size());
  CHECK(best[0].id == want->id);
  for (std::size_t i = 1; i < best.size(); ++i)
    CHECK((obj.maximize ? *best[i].score <= *best[i - 1].score : *best[i].score >= *best[i - 1].score));
  CHECK(t.best_hyperparameters()[0] == want->hp);
  std::filesystem::remove_all(dir);
}
}  // namespace

TEST_CASE("objective direction: random search, Hyperband and Bayesian optimisation, maximized and minimized") {
  for (bool maximize : {true, false}) {
    const auto obj = maximize ? tn::objective::max("toy_accuracy") : tn::objective::min("toy_loss");
    const std::string d = maximize ? "max" : "min";
    check_direction("random_" + d, std::make_unique<tn::random_search>(5), obj);
    check_direction("hyperband_" + d, std::make_unique<tn::hyperband>(3, 3), obj);
    check_direction("bayesian_" + d, std::make_unique<tn::bayesian_optimization>(
                                         tn::bayesian_optimization::options{.max_trials = 5, .num_initial_points = 2}),
                    obj);
  }
}

namespace {
// Runs an oracle without training: every trial completes at once with score f(learning rate).
template <class F>
std::vector<tn::trial> drive(tn::oracle& o, std::size_t max, F f) {
  std::vector<tn::trial> trials;
  while (trials.size() < max) {
    tn::trial t;
    t.id = std::to_string(trials.size());
    auto v = o.populate(t.id, trials);
    if (!v) break;
    t.hp = *v;
    t.status = tn::trial_status::completed;
    t.score = f(t.hp.get<double>("learning_rate"));
    trials.push_back(t);
  }
  return trials;
}
tn::search_space lr_space() {
  tn::search_space s;
  s.real("learning_rate", 1e-5, 1e-1, 0, tn::sampling::log);
  return s;
}
}  // namespace

TEST_CASE("objective direction: Hyperband promotes the best trials of a round, maximized and minimized") {
  for (bool maximize : {true, false}) {
    CAPTURE(maximize);
    tn::hyperband o(9, 3);
    o.configure(lr_space(), maximize ? tn::objective::max("toy_accuracy") : tn::objective::min("toy_loss"), 5);
    const auto trials = drive(o, 100, [&](double lr) { return maximize ? -miss(lr) : miss(lr); });
    REQUIRE(trials.size() == 23);
    // Bracket 2: round 0 is trials 0-8; round 1 (trials 9-11) continues the three nearest 1e-2, nearest first.
    std::vector<std::size_t> order{0, 1, 2, 3, 4, 5, 6, 7, 8};
    std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
      return miss(trials[a].hp.get<double>("learning_rate")) < miss(trials[b].hp.get<double>("learning_rate"));
    });
    for (std::size_t k = 0; k < 3; ++k) CHECK(trials[9 + k].hp.get<std::string>("tuner/trial_id") == trials[order[k]].id);
  }
}

TEST_CASE("objective direction: Bayesian optimisation's proposals approach the best, maximized and minimized") {
  // The existing bayesian test minimizes; here each direction, each acquisition. A dropped sign sends
  // the proposals to the worst value (an end of the range, 3 decades away).
  for (bool maximize : {true, false})
    for (auto acq : {tn::acquisition::upper_confidence_bound, tn::acquisition::expected_improvement}) {
      CAPTURE(maximize);
      CAPTURE(int(acq));
      tn::bayesian_optimization o({.max_trials = 12, .num_initial_points = 3, .acquisition = acq});
      o.configure(lr_space(), maximize ? tn::objective::max("toy_accuracy") : tn::objective::min("toy_loss"), 11);
      const auto trials = drive(o, 12, [&](double lr) { return maximize ? -miss(lr) : miss(lr); });
      REQUIRE(trials.size() == 12);
      double best = 1e9, later = 0;
      for (std::size_t i = 0; i < trials.size(); ++i) {
        const double m = miss(trials[i].hp.get<double>("learning_rate"));
        best = std::min(best, m);
        if (i >= 7) later += std::sqrt(m) / 5;  // the mean distance in decades of the last five proposals
      }
      CHECK(best < 0.01);  // within 10^0.1 of 1e-2
      CHECK(later < 0.5);
    }
}
