// The tuner end to end on a tiny synthetic problem: two architectures x two
// optimizers (each compiled once), run-time dropout and l2, reproducibility,
// the project directory, failed trials, a SIGKILL mid-trial and the resume,
// Hyperband's continued trials, results_summary and the best model, the progress display,
// "units" setting the width of every dense<up_to<Max>> (docs/tuning.md runs a search over it).
#include <doctest/doctest.h>

#include <csignal>
#include <cstdint>
#include <filesystem>
#include <regex>
#include <sstream>
#include <string>
#include <sys/wait.h>
#include <unistd.h>
#include <vector>

#include <ctnn/ctnn.hpp>
#include <ctnn/tuning/bayesian.hpp>
#include <ctnn/tuning/hyperband.hpp>
#include <ctnn/tuning/tuner.hpp>

using namespace ctnn;
namespace tn = ctnn::tuning;

namespace {
using small = sequential<input<4>, dense<8, relu, dynamic_l2>, dynamic_dropout, dense<2>>;
using wide = sequential<input<4>, dense<16, relu>, dynamic_dropout, dense<2>>;
using tiny_tuner = tn::tuner<tn::architectures<small, wide>, tn::optimizers<adam<>, sgd<>>>;

// Class 1 when x0 + x1 > x2 + x3.
data::in_memory<shape<4>, sparse_labels> make_data(std::size_t n, std::uint64_t seed) {
  rng g(seed);
  std::vector<float> x(n * 4);
  std::vector<std::int32_t> y(n);
  for (std::size_t i = 0; i < n; ++i) {
    for (int k = 0; k < 4; ++k) x[i * 4 + k] = float(g.uniform(-1, 1));
    y[i] = x[i * 4] + x[i * 4 + 1] > x[i * 4 + 2] + x[i * 4 + 3] ? 1 : 0;
  }
  return {x, y};
}
const auto train_data = make_data(96, 1).shuffle(5);
const auto val_data = make_data(64, 2).batch(64);
const sparse_categorical_crossentropy loss{.from_logits = true};

tn::search_space space() {
  tn::search_space s;
  s.real("learning_rate", 1e-3, 1e-1, 0, tn::sampling::log);
  s.choice("batch_size", {std::int64_t(16), std::int64_t(32)});
  s.real("dropout", 0.0, 0.5, 0.25);
  s.real("l2", 1e-4, 1e-2, 0, tn::sampling::log).when("architecture", {std::string("small")});
  return s;
}
tn::tuner_options options(const std::filesystem::path& dir, std::uint64_t seed = 3) {
  tn::tuner_options o;
  o.directory = dir;
  o.project_name = "p";
  o.objective = tn::objective::max("val_sparse_categorical_accuracy");
  o.seed = seed;
  o.architecture_names = {"small", "wide"};
  o.optimizer_names = {"adam", "sgd"};
  return o;
}
std::filesystem::path scratch(const std::string& name) {
  auto p = std::filesystem::temp_directory_path() / ("ctnn_tuning_" + name + "_" + std::to_string(::getpid()));
  std::filesystem::remove_all(p);
  return p;
}

// Kills its own process (SIGKILL, nothing runs after it) at the end of epoch `at_epoch` of the
// `at_trial`-th training this process starts.
inline int trainings_started = 0;
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

TEST_CASE("tuner: a trial that throws is recorded as FAILED with its message and the search goes on") {
  const auto dir = scratch("fail");
  tn::search_space s;
  s.choice("learning_rate", {0.01, 1e30});
  s.choice("batch_size", {std::int64_t(32)});
  auto o = options(dir);
  o.objective = tn::objective::min("val_loss");
  o.architecture_names = {};
  o.optimizer_names = {};
  std::ostringstream shown;
  o.progress = &shown;
  tn::tuner<tn::architectures<wide>, tn::optimizers<sgd<>>> t(s, std::make_unique<tn::random_search>(6), o);
  t.search(loss, train_data, val_data, 2);
  // Random search stops after 20 collisions: both configurations, each once.
  REQUIRE(t.trials().size() == 2);
  // Keras Tuner's display, trial by trial (its times replaced by T): the table of values (the best
  // column "?" until a trial completed), the result, the best so far.
  std::string expected;
  const tn::trial* best = nullptr;
  for (std::size_t i = 0; i < 2; ++i) {
    const auto& tr = t.trials()[i];
    const std::string lr = tr.hp.get<double>("learning_rate") == 0.01 ? "0.01" : "1e+30";
    const std::string best_lr = !best ? "?" : best->hp.get<double>("learning_rate") == 0.01 ? "0.01" : "1e+30";
    char row[128];
    expected += "\nSearch: Running Trial #" + std::to_string(i + 1) + "\n\n";
    expected += "Value             |Best Value So Far |Hyperparameter\n";
    std::snprintf(row, sizeof row, "%-18s|%-18s|learning_rate\n", lr.c_str(), best_lr.c_str());
    expected += row;
    std::snprintf(row, sizeof row, "%-18s|%-18s|batch_size\n\n", "32", best ? "32" : "?");
    expected += row;
    if (tr.status == tn::trial_status::completed) {
      best = &tr;
      expected += "Trial " + std::to_string(i + 1) + " Complete [T]\nval_loss: " + tn::python_repr(*tr.score) + "\n";
    } else {
      expected += "Trial " + std::to_string(i + 1) + " Failed [T]\n" + tr.message + "\n";
    }
    expected += "\nBest val_loss So Far: " + (best ? tn::python_repr(*best->score) : std::string("None")) +
                "\nTotal elapsed time: T\n";
  }
  CHECK(std::regex_replace(shown.str(), std::regex("[0-9][0-9]h [0-9][0-9]m [0-9][0-9]s"), "T") == expected);
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

TEST_CASE("tuner: 'units' sets the active width of every dense<up_to<Max>>, and fails a network without one") {
  using sized = sequential<input<4>, dense<up_to<64>, relu>, dynamic_dropout, dense<2>>;
  tn::search_space s;
  s.integer("units", 16, 64, 16);
  auto o = options(scratch("units"));
  o.architecture_names = {"sized", "wide"};
  o.optimizer_names = {};
  tn::tuner<tn::architectures<sized, wide>, tn::optimizers<sgd<>>> t(s, std::make_unique<tn::random_search>(2), o);
  tn::values v;
  v.set("architecture", std::string("sized"));
  v.set("units", std::int64_t(48));
  std::size_t seen = 0;
  t.build(v, 1, [&](auto& m, auto&, std::size_t) {
    if constexpr (std::is_same_v<typename std::decay_t<decltype(m)>::network, sized>) seen = width<0>(m);
  });
  CHECK(seen == 48);
  v.set("units", std::int64_t(80));
  CHECK_THROWS_WITH(t.build(v, 1, [](auto&, auto&, std::size_t) {}),
                    "set_units: layer 1 (dense<up_to<64>, relu>): the active width 80 is outside [1, 64]");
  v.set("architecture", std::string("wide"));
  v.set("units", std::int64_t(32));
  CHECK_THROWS_WITH(t.build(v, 1, [](auto&, auto&, std::size_t) {}),
                    doctest::Contains("tuner: 'units' is set but network "));
}
