// The tuner end to end on a tiny synthetic problem (tuner_common.hpp), two
// architectures x two optimizers, and its project directory: random search's
// reproducibility, a SIGKILL mid-trial and the resume, Hyperband's continued
// trials, results_summary and the best model. What runs inside a trial is in
// test_tuner_trials.cpp (two files, which a parallel build compiles side by side).
#include <doctest/doctest.h>

#include <csignal>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <sstream>
#include <string>
#include <sys/wait.h>
#include <unistd.h>

#include <ctnn/ctnn.hpp>
#include <ctnn/tuning/hyperband.hpp>
#include <ctnn/tuning/tuner.hpp>

#include "tuning/tuner_common.hpp"

using namespace ctnn;
using namespace tuner_test;

namespace {
// Kills its own process (SIGKILL, nothing runs after it) at the end of epoch `at_epoch` of the
// `at_trial`-th training this process starts.
int trainings_started = 0;
struct kill_at {
  int at_trial, at_epoch;
  int mine = -1;
  template <class Ctx>
  void on_train_begin(Ctx&) {
    mine = trainings_started++;
  }
  template <class Ctx>
  void on_epoch_end(Ctx& ctx) {
    if (mine == at_trial && int(ctx.epoch) == at_epoch) ::kill(::getpid(), SIGKILL);
  }
};
}  // namespace

TEST_CASE("tuner: random search is reproducible from its seed and writes the project directory") {
  const auto d1 = scratch("rs1"), d2 = scratch("rs2");
  tiny_tuner t1(space(), std::make_unique<tn::random_search>(6), options(d1));
  t1.search(loss, train_data, val_data, 2, sparse_categorical_accuracy{});
  tiny_tuner t2(space(), std::make_unique<tn::random_search>(6), options(d2));
  t2.search(loss, train_data, val_data, 2, sparse_categorical_accuracy{});
  REQUIRE(t1.trials().size() == 6);
  REQUIRE(t2.trials().size() == 6);
  bool both_archs[2] = {false, false};
  for (std::size_t i = 0; i < 6; ++i) {
    const auto& a = t1.trials()[i];
    CAPTURE(a.id);
    CHECK(a.hp == t2.trials()[i].hp);
    CHECK(a.score == t2.trials()[i].score);  // bit for bit
    CHECK(a.status == tn::trial_status::completed);
    CHECK(a.metrics.at("val_sparse_categorical_accuracy").size() == 2);
    both_archs[a.hp.get<std::string>("architecture") == "wide"] = true;
    CHECK(a.hp.has("l2") == (a.hp.get<std::string>("architecture") == "small"));  // conditional
    CHECK(std::filesystem::exists(d1 / "p" / ("trial_" + a.id) / "checkpoint.ctnn"));
    const auto j = nlohmann::json::parse(io::read_file(d1 / "p" / ("trial_" + a.id) / "trial.json", "test"));
    CHECK(j.at("status") == "COMPLETED");
    CHECK(j.at("score").get<double>() == *a.score);
    CHECK(j.at("hyperparameters") == a.hp.to_json());
  }
  CHECK(both_archs[0]);
  CHECK(both_archs[1]);
  CHECK(t1.trials()[0].id == "0");  // width of max_trials - 1 = 5: one digit
  const auto oj = nlohmann::json::parse(io::read_file(d1 / "p" / "oracle.json", "test"));
  CHECK(oj.at("oracle") == "random_search");
  CHECK(oj.at("trials").size() == 6);
  // Another seed draws other values.
  tiny_tuner t3(space(), std::make_unique<tn::random_search>(2), options(scratch("rs3"), 4));
  t3.search(loss, train_data, val_data, 1, sparse_categorical_accuracy{});
  CHECK_FALSE(t3.trials()[0].hp == t1.trials()[0].hp);
  // A finished search constructed again resumes with nothing left to do.
  tiny_tuner again(space(), std::make_unique<tn::random_search>(6), options(d1));
  again.search(loss, train_data, val_data, 2, sparse_categorical_accuracy{});
  CHECK(again.trials_run() == 0);
  CHECK(again.trials().size() == 6);
  // A different space in the same project is refused.
  tn::search_space other = space();
  other.boolean("extra");
  CHECK_THROWS_WITH(tiny_tuner(other, std::make_unique<tn::random_search>(6), options(d1)),
                    doctest::Contains("another search space"));
  std::filesystem::remove_all(d1);
  std::filesystem::remove_all(d2);
}

TEST_CASE("tuner: killed by SIGKILL mid-trial, the search resumes without repeating completed trials") {
  const auto whole = scratch("whole"), killed = scratch("killed");
  tiny_tuner ref(space(), std::make_unique<tn::random_search>(5), options(whole));
  ref.search(loss, train_data, val_data, 3, sparse_categorical_accuracy{});

  const pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    // The third trial (index 2) is killed at the end of its second epoch.
    trainings_started = 0;
    try {
      tiny_tuner t(space(), std::make_unique<tn::random_search>(5), options(killed));
      t.search(loss, train_data, val_data, 3, sparse_categorical_accuracy{}, kill_at{2, 1});
    } catch (...) {
    }
    ::_exit(3);  // reached only if the kill did not happen
  }
  int status = 0;
  REQUIRE(::waitpid(child, &status, 0) == child);
  REQUIRE(WIFSIGNALED(status));
  CHECK(WTERMSIG(status) == SIGKILL);
  const auto j = nlohmann::json::parse(io::read_file(killed / "p" / "trial_2" / "trial.json", "test"));
  CHECK(j.at("status") == "RUNNING");
  CHECK(j.at("metrics").at("val_loss").size() == 1);  // its first epoch was recorded, the second not
  CHECK_FALSE(std::filesystem::exists(killed / "p" / "trial_3"));

  tiny_tuner resumed(space(), std::make_unique<tn::random_search>(5), options(killed));
  REQUIRE(resumed.trials().size() == 3);
  CHECK(resumed.trials()[0].status == tn::trial_status::completed);
  CHECK(resumed.trials()[2].status == tn::trial_status::running);
  resumed.search(loss, train_data, val_data, 3, sparse_categorical_accuracy{});
  CHECK(resumed.trials_run() == 3);  // trial 2 again, then 3 and 4; 0 and 1 kept
  REQUIRE(resumed.trials().size() == 5);
  for (std::size_t i = 0; i < 5; ++i) {
    CAPTURE(i);
    CHECK(resumed.trials()[i].hp == ref.trials()[i].hp);
    CHECK(resumed.trials()[i].score == ref.trials()[i].score);
    CHECK(resumed.trials()[i].metrics.at("val_loss") == ref.trials()[i].metrics.at("val_loss"));
  }
  std::filesystem::remove_all(whole);
  std::filesystem::remove_all(killed);
}

TEST_CASE("tuner: hyperband continues trials from their checkpoints, then results_summary and the best model") {
  const auto dir = scratch("hb");
  auto o = options(dir);
  tiny_tuner t(space(), std::make_unique<tn::hyperband>(3, 3), o);
  t.search(loss, train_data, val_data, 3, sparse_categorical_accuracy{});
  // max_epochs 3: brackets 1 (3 x 1 epoch, then 1 x 3 from epoch 1) and 0 (2 x 3 epochs):
  // end size ceil(1 + log3(3)) = 2; size(1, 0) = 3, size(1, 1) = 1, size(0, 0) = 2.
  REQUIRE(t.trials().size() == 6);
  const auto& cont = t.trials()[3];
  CHECK(cont.hp.get<std::int64_t>("tuner/round") == 1);
  CHECK(cont.hp.get<std::int64_t>("tuner/initial_epoch") == 1);
  CHECK(cont.metrics.at("val_loss").size() == 2);  // epochs 2 and 3
  CHECK(cont.best_step >= 1);
  const std::string from = cont.hp.get<std::string>("tuner/trial_id");
  const auto& src = t.trials()[std::stoul(from)];
  CHECK(cont.hp.get<std::string>("architecture") == src.hp.get<std::string>("architecture"));
  for (auto& tr : t.trials()) CHECK(tr.metrics.at("val_loss").size() == std::size_t(tr.hp.get<std::int64_t>("tuner/epochs") - tr.hp.get<std::int64_t>("tuner/initial_epoch")));

  std::ostringstream out;
  t.results_summary(out, 2);
  const auto best = t.best_trials(2);
  std::string want = "Results summary\nResults in " + (dir / "p").string() + "\nShowing 2 best trials\n" +
                     "Objective(name=\"val_sparse_categorical_accuracy\", direction=\"max\")\n";
  for (auto& b : best) {
    want += "\nTrial " + b.id + " summary\nHyperparameters:\n";
    for (auto& [k, v] : b.hp.items()) want += k + ": " + tn::to_string(v) + "\n";
    want += "Score: " + tn::python_repr(*b.score) + "\n";
  }
  CHECK(out.str() == want);
  CHECK(out.str().find("tuner/epochs: ") != std::string::npos);
  CHECK(t.best_hyperparameters()[0] == best[0].hp);

  // The best model, loaded from its checkpoint, scores the recorded best value on the validation data.
  bool called = false;
  t.with_best_model([&](auto& m, const tn::trial& tr) {
    auto l = evaluate(m, loss, val_data, sparse_categorical_accuracy{});
    CHECK(l["sparse_categorical_accuracy"] == doctest::Approx(*tr.score).epsilon(1e-6));
    called = true;
  });
  CHECK(called);
  if (best[0].hp.get<std::string>("architecture") == "wide") {
    auto m = t.load_best_model<wide>();
    CHECK_THROWS_WITH(t.load_best_model<small>(), doctest::Contains("uses architecture 'wide'"));
  } else {
    auto m = t.load_best_model<small>();
    CHECK_THROWS_WITH(t.load_best_model<wide>(), doctest::Contains("uses architecture 'small'"));
  }
  std::filesystem::remove_all(dir);
}
