// A project directory read back: every corruption of oracle.json and trial.json
// (the issue's crashing states among them) is an io_error naming the file and
// the key; a finished search searched again trains nothing; the project
// directory's filesystem failures are io_errors naming the path.
#include <doctest/doctest.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <functional>
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
using json = nlohmann::json;

namespace {
using net = sequential<input<4>, dense<8, relu>, dense<2>>;
using state_tuner = tn::tuner<tn::architectures<net>, tn::optimizers<sgd<>>>;

using toy_data::make_data;
const auto train_data = make_data(32, 1);
const auto val_data = make_data(32, 2).batch(32);
const sparse_categorical_crossentropy loss{.from_logits = true};

tn::search_space space() {
  tn::search_space s;
  s.real("learning_rate", 1e-3, 1e-1, 0, tn::sampling::log);
  s.choice("batch_size", {std::int64_t(16), std::int64_t(32)});
  return s;
}
tn::tuner_options options(const std::filesystem::path& dir) {
  tn::tuner_options o;
  o.directory = dir;
  o.project_name = "p";
  o.objective = tn::objective::min("val_loss");
  o.seed = 5;
  return o;
}
std::filesystem::path scratch(const std::string& name) {
  auto p = std::filesystem::temp_directory_path() / ("ctnn_tuner_state_" + name + "_" + std::to_string(::getpid()));
  std::filesystem::remove_all(p);
  std::filesystem::create_directories(p);
  return p;
}
json read(const std::filesystem::path& p) { return json::parse(io::read_file(p, "test")); }
void write(const std::filesystem::path& p, const json& j) { std::ofstream(p) << j.dump(1); }
void write_text(const std::filesystem::path& p, const std::string& s) { std::ofstream(p) << s; }

// The io_error message of constructing a tuner on dir, or "" when it constructs.
std::string reload_error(const std::filesystem::path& dir, std::unique_ptr<tn::oracle> o) {
  try {
    state_tuner t(space(), std::move(o), options(dir));
  } catch (const io_error& e) {
    return e.what();
  }
  return "";
}

struct corruption {
  const char* name;
  std::function<void(json&)> apply;
  const char* message;  // what the error must say after "tuner: <file>: "
};
// Writes each case's corruption of good to file: a Hyperband tuner constructed on dir is an io_error
// "tuner: <file>: ..." that says the case's message.
void check_corruptions(const std::filesystem::path& dir, const std::filesystem::path& file, const json& good,
                       const std::vector<corruption>& cases) {
  for (auto& c : cases) {
    const std::string name = c.name;
    CAPTURE(name);
    json j = good;
    c.apply(j);
    write(file, j);
    const std::string e = reload_error(dir, std::make_unique<tn::hyperband>(3, 3));
    CAPTURE(e);
    CHECK(e.find("tuner: " + file.string() + ": ") == 0);
    CHECK(e.find(c.message) != std::string::npos);
  }
}
}  // namespace

TEST_CASE("tuner state: a corrupt Hyperband oracle.json is an io_error naming the file and the key") {
  const auto dir = scratch("hb");
  {
    state_tuner t(space(), std::make_unique<tn::hyperband>(3, 3), options(dir));
    t.search(loss, train_data, val_data, 3);
    REQUIRE(t.trials().size() == 6);
  }
  const auto file = dir / "p" / "oracle.json";
  const json good = read(file);
  REQUIRE(reload_error(dir, std::make_unique<tn::hyperband>(3, 3)).empty());
  const std::vector<corruption> cases = {
      // The issue's crashes: an empty rounds list (a null vector indexed), a huge current_bracket
      // (a 48 GB resize), floats where integers belong (float-to-int UB), an integer that overflows int.
      {"empty rounds", [](json& j) { j["state"]["brackets"] = json::parse(R"([{"bracket_num": 1, "rounds": []}])"); },
       "state.brackets[0].rounds: has 0 rounds; bracket 1 has 2"},
      {"huge current_bracket", [](json& j) { j["state"]["current_bracket"] = 6000000000; },
       "state.current_bracket: 6000000000 is outside [0, 1]"},
      {"negative current_bracket", [](json& j) { j["state"]["current_bracket"] = -1; },
       "state.current_bracket: -1 is outside [0, 1]"},
      {"float current_iteration", [](json& j) { j["state"]["current_iteration"] = 1e300; },
       "state.current_iteration: expected an integer, got the number 1e+300"},
      {"huge bracket_num", [](json& j) { j["state"]["brackets"] = json::parse(R"([{"bracket_num": 2147483648, "rounds": [[]]}])"); },
       "state.brackets[0].bracket_num: 2147483648 is outside [0, 1]"},
      {"too many entries", [](json& j) {
         j["state"]["brackets"] = json::parse(R"([{"bracket_num": 0, "rounds": [[{"past_id": null, "id": "7"},
             {"past_id": null, "id": "8"}, {"past_id": null, "id": "9"}]]}])");
       }, "state.brackets[0].rounds[0]: has 3 entries, more than the 2 possible"},
      {"past_id not in the round before", [](json& j) {
         j["state"]["brackets"] = json::parse(R"([{"bracket_num": 1, "rounds": [[{"past_id": null, "id": "7"}],
             [{"past_id": "3", "id": "8"}]]}])");
       }, "state.brackets[0].rounds[1][0].past_id: trial 3 is not in round 0"},
      {"path as a bracket id", [](json& j) {
         j["state"]["brackets"] = json::parse(R"([{"bracket_num": 0, "rounds": [[{"past_id": null, "id": "x/../../../outside_dir"}]]}])");
       },
       "is not a trial id (1 to 20 decimal digits)"},
      {"negative seed_state", [](json& j) { j["state"]["seed_state"] = -3; },
       "state.seed_state: expected an integer >= 0, got the number -3"},
      {"missing seed", [](json& j) { j["state"].erase("seed"); }, "state.seed: missing"},
      {"tried_so_far of numbers", [](json& j) { j["state"]["tried_so_far"] = json::parse("[1]"); },
       "state.tried_so_far[0]: expected a string, got the number 1"},
      {"other max_epochs", [](json& j) { j["state"]["max_epochs"] = 9; }, "the project was made with max_epochs 9"},
      {"state not an object", [](json& j) { j["state"] = "x"; }, "state: expected an object, got the string \"x\""},
      {"trials not an array", [](json& j) { j["trials"] = json::object(); }, "trials: expected an array, got an object"},
      {"path as a trial id", [](json& j) { j["trials"][0] = "x/../../../outside_dir"; },
       "trials[0]: \"x/../../../outside_dir\" is not a trial id"},
      {"ids out of order", [](json& j) { std::swap(j["trials"][0], j["trials"][1]); },
       "trials[0]: trial 0001 is listed as trial number 0"},
      {"missing oracle", [](json& j) { j.erase("oracle"); }, "oracle: missing"},
      {"bad direction", [](json& j) { j["objective"]["direction"] = "up"; }, "objective.direction: the string \"up\" is not"},
      {"other direction", [](json& j) { j["objective"]["direction"] = "max"; },
       "made with another objective (Objective(name=\"val_loss\", direction=\"max\"))"},
      {"an array", [](json& j) { j = json::array(); }, "expected a JSON object, got an array"},
  };
  check_corruptions(dir, file, good, cases);
  write_text(file, "{\"oracle\": ");
  CHECK(reload_error(dir, std::make_unique<tn::hyperband>(3, 3)).find("not valid JSON") != std::string::npos);
  // current_iteration = iterations + 1 is what a finished project searched again recorded before the
  // fix: it loads, and the search is over. One more is refused.
  json j = good;
  j["state"]["current_iteration"] = 3;
  write(file, j);
  CHECK(reload_error(dir, std::make_unique<tn::hyperband>(3, 3)).find("state.current_iteration: 3 is outside [0, 2]") != std::string::npos);
  j["state"]["current_iteration"] = 2;
  write(file, j);
  state_tuner again(space(), std::make_unique<tn::hyperband>(3, 3), options(dir));
  again.search(loss, train_data, val_data, 3);
  CHECK(again.trials_run() == 0);
  CHECK(again.trials().size() == 6);
  std::filesystem::remove_all(dir);
}

TEST_CASE("tuner state: a corrupt trial.json is an io_error naming the file and the key") {
  const auto dir = scratch("trial");
  {
    state_tuner t(space(), std::make_unique<tn::hyperband>(3, 3), options(dir));
    t.search(loss, train_data, val_data, 3);
    REQUIRE(t.trials().size() == 6);
    REQUIRE(t.trials()[3].hp.get<std::int64_t>("tuner/round") == 1);
  }
  const auto file = dir / "p" / "trial_0003" / "trial.json";  // a continued trial: round 1 of bracket 1
  const json good = read(file);
  const std::vector<corruption> cases = {
      // tuner/epochs below tuner/initial_epoch: until - initial wrapped and the resumed trial never ended.
      {"epochs below initial_epoch", [](json& j) { j["hyperparameters"]["tuner/epochs"] = 1; j["hyperparameters"]["tuner/initial_epoch"] = 2; },
       "hyperparameters.tuner/initial_epoch: 2 is outside [0, 0]"},
      {"epochs above max_epochs", [](json& j) { j["hyperparameters"]["tuner/epochs"] = 4; },
       "hyperparameters.tuner/epochs: 4 is outside [1, 3]"},
      {"float epochs", [](json& j) { j["hyperparameters"]["tuner/epochs"] = 2.5; },
       "hyperparameters.tuner/epochs: expected an integer, got 2.5"},
      // A trial id that is a path: the tuner wrote trial.json (and read checkpoints) outside the project.
      {"path as trial_id", [](json& j) { j["trial_id"] = "x/../../../outside_dir"; j["status"] = "RUNNING"; },
       "trial_id: \"x/../../../outside_dir\" is not a trial id"},
      {"another trial's id", [](json& j) { j["trial_id"] = "0001"; }, "trial_id: \"0001\", but oracle.json lists this file as trial 0003"},
      {"path as tuner/trial_id", [](json& j) { j["hyperparameters"]["tuner/trial_id"] = "../../x"; },
       "hyperparameters.tuner/trial_id: ../../x is not a trial before this one"},
      {"a later trial as tuner/trial_id", [](json& j) { j["hyperparameters"]["tuner/trial_id"] = "0004"; },
       "hyperparameters.tuner/trial_id: 0004 is not a trial before this one"},
      {"learning_rate outside the space", [](json& j) { j["hyperparameters"]["learning_rate"] = 5.0; },
       "hyperparameters.learning_rate: 5.0 is not a value of this hyperparameter"},
      {"batch_size not a choice", [](json& j) { j["hyperparameters"]["batch_size"] = 0; },
       "hyperparameters.batch_size: 0 is not a value of this hyperparameter"},
      {"batch_size a string", [](json& j) { j["hyperparameters"]["batch_size"] = "16"; },
       "hyperparameters.batch_size: 16 is not a value of this hyperparameter"},
      {"a value missing", [](json& j) { j["hyperparameters"].erase("learning_rate"); }, "hyperparameters.learning_rate: missing"},
      {"an unknown value", [](json& j) { j["hyperparameters"]["units"] = 3; },
       "hyperparameters.units: not a hyperparameter of the search space"},
      {"a value that is an array", [](json& j) { j["hyperparameters"]["learning_rate"] = json::array(); },
       "hyperparameters.learning_rate: expected a boolean, number or string, got an array"},
      {"an unknown status", [](json& j) { j["status"] = "DONE"; }, "status: the string \"DONE\" is not RUNNING, COMPLETED or FAILED"},
      {"completed without a score", [](json& j) { j["score"] = nullptr; }, "score: null, but the trial is COMPLETED"},
      {"a string score", [](json& j) { j["score"] = "0.5"; }, "score: expected a number, got the string \"0.5\""},
      {"negative best_step", [](json& j) { j["best_step"] = -1; }, "best_step: -1 is outside"},
      {"metrics of strings", [](json& j) { j["metrics"]["val_loss"][0] = "x"; }, "metrics.val_loss[0]: expected a number"},
      {"missing message", [](json& j) { j.erase("message"); }, "message: missing"},
  };
  check_corruptions(dir, file, good, cases);
  // A NaN saved as null in a metric's history reads back as NaN.
  json j = good;
  j["metrics"]["val_loss"][0] = nullptr;
  write(file, j);
  state_tuner t(space(), std::make_unique<tn::hyperband>(3, 3), options(dir));
  CHECK(std::isnan(t.trials()[3].metrics.at("val_loss")[0]));
  CHECK_FALSE(std::filesystem::exists(dir / "outside_dir"));
  CHECK_FALSE(std::filesystem::exists(dir.parent_path() / "outside_dir"));
  std::filesystem::remove_all(dir);
}

TEST_CASE("tuner state: a finished search searched again trains nothing (Hyperband, random search, Bayesian)") {
  const auto dir = scratch("again");
  auto twice = [&](const std::string& name, auto make, std::size_t want) {
    CAPTURE(name);
    auto o = options(dir);
    o.project_name = name;
    state_tuner first(space(), make(), o);
    first.search(loss, train_data, val_data, 3);
    CHECK(first.trials().size() == want);
    // On the same tuner and on one constructed again on the project.
    first.search(loss, train_data, val_data, 3);
    CHECK(first.trials().size() == want);
    state_tuner again(space(), make(), o);
    again.search(loss, train_data, val_data, 3);
    CHECK(again.trials_run() == 0);
    CHECK(again.trials().size() == want);
  };
  // max_epochs 3: brackets 1 (3 + 1 trials) and 0 (2 trials). Keras Tuner's bracket counter starts a
  // new bracket when a finished project is searched again; before the fix, 2 more trials ran.
  twice("hyperband", [] { return std::make_unique<tn::hyperband>(3, 3); }, 6);
  twice("hyperband2", [] { return std::make_unique<tn::hyperband>(3, 3, 2); }, 12);
  twice("random", [] { return std::make_unique<tn::random_search>(3); }, 3);
  twice("bayesian", [] {
    return std::make_unique<tn::bayesian_optimization>(tn::bayesian_optimization::options{.max_trials = 4, .num_initial_points = 2});
  }, 4);
  std::filesystem::remove_all(dir);
}

TEST_CASE("tuner: filesystem failures of the project directory are io_errors naming the path") {
  const auto dir = scratch("fs");
  write_text(dir / "exe", "a file where a directory is wanted (an executable beside its project)");
  auto error = [&](std::filesystem::path directory, std::string project, bool overwrite) -> std::string {
    auto o = options(directory);
    o.project_name = project;
    o.overwrite = overwrite;
    try {
      state_tuner t(space(), std::make_unique<tn::random_search>(2), o);
    } catch (const io_error& e) {
      return e.what();
    } catch (const std::exception& e) {
      return std::string("another exception: ") + e.what();
    }
    return "";
  };
  // The example's failure: directory "tune_fashion_mnist" was the executable; overwrite removed
  // <it>/hyperband and std::filesystem::filesystem_error escaped.
  for (bool overwrite : {true, false}) {
    CAPTURE(overwrite);
    const std::string e = error(dir / "exe", "hyperband", overwrite);
    CHECK(e == "tuner: " + (dir / "exe" / "hyperband").string() + ": '" + (dir / "exe").string() + "' exists and is not a directory");
  }
  // The project itself a file: overwrite refuses to remove it, and no directory can be made there.
  CHECK(error(dir, "exe", true) == "tuner: " + (dir / "exe").string() + ": exists and is not a directory; refusing to remove it");
  CHECK(error(dir, "exe", false) == "tuner: " + (dir / "exe").string() + ": '" + (dir / "exe").string() + "' exists and is not a directory");
  CHECK(std::filesystem::is_regular_file(dir / "exe"));
  // A name longer than the file system allows (ENAMETOOLONG): std::filesystem threw filesystem_error.
  const std::string e = error(dir, std::string(300, 'n'), false);
  CHECK(e.find("tuner: " + (dir / std::string(300, 'n')).string() + ": ") == 0);
  CHECK(e.find("File name too long") != std::string::npos);
  // oracle.json a directory.
  std::filesystem::create_directories(dir / "q" / "oracle.json");
  CHECK(error(dir, "q", false) == "tuner: " + (dir / "q" / "oracle.json").string() + ": is a directory, not a file");
  std::filesystem::remove_all(dir);
}
