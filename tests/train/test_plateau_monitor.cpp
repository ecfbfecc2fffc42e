// plateau_monitor.hpp: the improvement, baseline and patience rule of early_stopping and
// reduce_lr_on_plateau, driven directly with scripted values.
#include <doctest/doctest.h>

#include <ctnn/train/plateau_monitor.hpp>

#include <cmath>
#include <limits>
#include <optional>
#include <vector>

using ctnn::monitor_mode;
using ctnn::plateau_monitor;

TEST_CASE("plateau_monitor: the direction follows the mode, automatic maximizes names with 'acc'") {
  CHECK_FALSE(plateau_monitor{.monitor = "val_loss"}.maximizes());
  CHECK(plateau_monitor{.monitor = "val_accuracy"}.maximizes());
  CHECK(plateau_monitor{.monitor = "sparse_categorical_accuracy"}.maximizes());
  CHECK(plateau_monitor{.monitor = "val_loss", .mode = monitor_mode::max}.maximizes());
  CHECK_FALSE(plateau_monitor{.monitor = "accuracy", .mode = monitor_mode::min}.maximizes());
  const double inf = std::numeric_limits<double>::infinity();
  CHECK(plateau_monitor{.monitor = "loss"}.worst() == inf);
  CHECK(plateau_monitor{.monitor = "accuracy"}.worst() == -inf);
}

TEST_CASE("plateau_monitor: improves by more than |min_delta|, in the monitored direction") {
  const plateau_monitor down{.monitor = "loss", .min_delta = 0.1};
  CHECK(down.improves(5.0, std::nullopt));  // no reference yet: the first value improves
  CHECK(down.improves(0.5, 0.7));
  CHECK_FALSE(down.improves(0.65, 0.7));  // by less than min_delta
  CHECK_FALSE(down.improves(0.7, 0.7));
  CHECK_FALSE(down.improves(0.9, 0.7));
  const plateau_monitor negative{.monitor = "loss", .min_delta = -0.1};  // the magnitude counts
  CHECK(negative.improves(0.5, 0.7));
  CHECK_FALSE(negative.improves(0.65, 0.7));
  const plateau_monitor up{.monitor = "accuracy", .min_delta = 0.1};
  CHECK(up.improves(0.9, 0.7));
  CHECK_FALSE(up.improves(0.75, 0.7));
  CHECK_FALSE(up.improves(0.5, 0.7));
  const plateau_monitor exact{.monitor = "loss"};  // min_delta 0: strictly better
  CHECK(exact.improves(0.69, 0.7));
  CHECK_FALSE(exact.improves(0.7, 0.7));
  // NaN never improves on a value; against worst() every finite value does
  CHECK_FALSE(exact.improves(std::nan(""), 0.7));
  CHECK(exact.improves(1e300, exact.worst()));
  CHECK_FALSE(exact.improves(std::numeric_limits<double>::infinity(), exact.worst()));
}

TEST_CASE("plateau_monitor: observe keeps the best value and counts the epochs without improvement") {
  const plateau_monitor rule{.monitor = "loss", .patience = 2};
  std::optional<double> best;
  int wait = 0;
  std::vector<bool> improved;
  std::vector<int> waits;
  for (double v : {1.0, 0.9, 0.95, 0.92, 0.8, 0.85}) {
    improved.push_back(rule.observe(v, best, wait));
    waits.push_back(wait);
  }
  CHECK(improved == std::vector<bool>{true, true, false, false, true, false});
  CHECK(waits == std::vector<int>{0, 0, 1, 2, 0, 1});
  CHECK(*best == 0.8);
  CHECK_FALSE(rule.exhausted(1));
  CHECK(rule.exhausted(2));
  CHECK(rule.exhausted(3));
  CHECK(plateau_monitor{.monitor = "loss"}.exhausted(0));  // patience 0: any count is enough
}

TEST_CASE("plateau_monitor: an improvement resets the wait only when it also beats the baseline") {
  const plateau_monitor rule{.monitor = "loss", .patience = 3, .baseline = 0.5};
  std::optional<double> best;
  int wait = 0;
  CHECK(rule.observe(1.0, best, wait));  // improves on best (none yet), not on the baseline
  CHECK(wait == 1);
  CHECK(rule.observe(0.9, best, wait));
  CHECK(wait == 2);
  CHECK(*best == 0.9);
  CHECK(rule.observe(0.4, best, wait));  // beats the baseline too
  CHECK(wait == 0);
  CHECK_FALSE(rule.observe(0.45, best, wait));
  CHECK(wait == 1);
}

TEST_CASE("plateau_monitor: not counting (reduce_lr_on_plateau's cooldown) leaves the wait, still records the best") {
  const plateau_monitor rule{.monitor = "accuracy", .patience = 1};
  std::optional<double> best = rule.worst();
  int wait = 0;
  CHECK(rule.observe(0.5, best, wait, false));
  CHECK(*best == 0.5);
  CHECK_FALSE(rule.observe(0.4, best, wait, false));
  CHECK(wait == 0);
  CHECK_FALSE(rule.observe(0.4, best, wait, true));
  CHECK(wait == 1);
  CHECK(rule.exhausted(wait));
  // a first value that is NaN: from an empty best it is recorded (Keras 3's EarlyStopping),
  // from worst() it is not (Keras' ReduceLROnPlateau)
  std::optional<double> none;
  int w = 0;
  CHECK(rule.observe(std::nan(""), none, w));
  CHECK(std::isnan(*none));
  std::optional<double> from_worst = rule.worst();
  CHECK_FALSE(rule.observe(std::nan(""), from_worst, w));
  CHECK(*from_worst == rule.worst());
}
