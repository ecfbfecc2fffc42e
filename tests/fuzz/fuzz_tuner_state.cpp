// libFuzzer target: a tuner's saved state. Input: byte 0 picks the oracle (random search, Hyperband,
// Bayesian optimisation), byte 1 the file (0: oracle.json, k > 0: the trial.json of trial (k - 1) mod n),
// the rest is that file's content, written into a valid project of n trials (made without training).
// Constructing a tuner on the project reloads it; a bad file must throw io_error. When it loads, the
// oracle proposes a few more trials (populate, no training), the best trials are sorted and the
// summary printed: none of this may crash, allocate without bound or loop.
// CTNN_FUZZ_WRITE_SEED=dir writes the seed corpus into dir when the target starts (valid states of
// each oracle and, as regress_*, the inputs that crashed before the state was validated);
// CTNN_FUZZ_VERBOSE=1 prints each io_error.
#include <ctnn/ctnn.hpp>
#include <ctnn/tuning/bayesian.hpp>
#include <ctnn/tuning/hyperband.hpp>
#include <ctnn/tuning/tuner.hpp>

#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

namespace {
namespace tn = ctnn::tuning;
using json = nlohmann::json;
using net = ctnn::sequential<ctnn::input<2>, ctnn::dense<2>>;
using fuzz_tuner = tn::tuner<tn::architectures<net>, tn::optimizers<ctnn::sgd<>>>;

tn::search_space space() {
  tn::search_space s;
  s.real("learning_rate", 1e-3, 1e-1, 0, tn::sampling::log);
  s.choice("batch_size", {std::int64_t(16), std::int64_t(32)});
  s.real("l2", 1e-4, 1e-2).when("batch_size", {std::int64_t(32)});
  return s;
}
std::unique_ptr<tn::oracle> make_oracle(int kind) {
  if (kind == 0) return std::make_unique<tn::random_search>(10);
  if (kind == 1) return std::make_unique<tn::hyperband>(9, 3);
  return std::make_unique<tn::bayesian_optimization>(tn::bayesian_optimization::options{.max_trials = 10, .num_initial_points = 2});
}
tn::objective objective() { return tn::objective::max("val_accuracy"); }
std::string pad(std::size_t i, int kind) {
  const std::string s = std::to_string(i);
  const std::size_t width = kind == 1 ? 4 : 1;  // the tuner's ids: the width of max_trials - 1, 4 without max_trials
  return std::string(s.size() < width ? width - s.size() : 0, '0') + s;
}
// Completes populate's trials at once, scored from their values.
void drive(tn::oracle& o, std::vector<tn::trial>& trials, std::size_t count, int kind) {
  for (std::size_t k = 0; k < count; ++k) {
    tn::trial t;
    t.id = pad(trials.size(), kind);
    auto v = o.populate(t.id, trials);
    if (!v) return;
    t.hp = *v;
    t.status = tn::trial_status::completed;
    t.score = t.hp.get<double>("learning_rate");
    t.metrics["val_accuracy"] = {*t.score};
    trials.push_back(std::move(t));
  }
}

// A valid project of one oracle: its oracle.json and the trial.json of each trial.
struct project {
  std::filesystem::path dir;
  std::string oracle_json;
  std::vector<std::string> ids, trial_json;
};
project make_project(int kind) {
  project p;
  p.dir = std::filesystem::temp_directory_path() /
          ("ctnn_fuzz_tuner_state_" + std::to_string(::getpid()) + "_" + std::to_string(kind));
  auto o = make_oracle(kind);
  o->configure(space(), objective(), 3);
  std::vector<tn::trial> trials;
  drive(*o, trials, kind == 1 ? 12 : 4, kind);  // Hyperband: round 0 of bracket 2 (9 trials), then 3 promoted
  json ids = json::array();
  for (auto& t : trials) {
    ids.push_back(t.id);
    p.ids.push_back(t.id);
    p.trial_json.push_back(t.to_json().dump(1));
  }
  p.oracle_json = json{{"oracle", o->kind()},
                       {"objective", {{"name", "val_accuracy"}, {"direction", "max"}}},
                       {"space", o->space().to_json()},
                       {"state", o->state()},
                       {"trials", ids}}
                      .dump(1);
  return p;
}
void put(const std::filesystem::path& p, const std::string& bytes) {
  std::filesystem::create_directories(p.parent_path());
  std::ofstream(p, std::ios::binary | std::ios::trunc).write(bytes.data(), std::streamsize(bytes.size()));
}
std::filesystem::path file_of(const project& p, std::size_t which) {
  return which == 0 ? p.dir / "p" / "oracle.json" : p.dir / "p" / ("trial_" + p.ids[(which - 1) % p.ids.size()]) / "trial.json";
}
void restore(const project& p) {
  put(p.dir / "p" / "oracle.json", p.oracle_json);
  for (std::size_t i = 0; i < p.ids.size(); ++i) put(p.dir / "p" / ("trial_" + p.ids[i]) / "trial.json", p.trial_json[i]);
}

void write_seeds(const std::filesystem::path& out, const std::vector<project>& projects) {
  auto seed = [&](const std::string& name, int kind, std::size_t which, const std::string& bytes) {
    std::string s{char(kind), char(which)};
    put(out / name, s + bytes);
  };
  const char* names[] = {"random_search", "hyperband", "bayesian"};
  for (int kind = 0; kind < 3; ++kind) {
    const project& p = projects[std::size_t(kind)];
    seed(std::string("valid_") + names[kind] + "_oracle", kind, 0, p.oracle_json);
    seed(std::string("valid_") + names[kind] + "_trial", kind, 1, p.trial_json[0]);
  }
  const project& hb = projects[1];
  auto hb_state = [&](auto edit) {
    json j = json::parse(hb.oracle_json);
    edit(j);
    return j.dump(1);
  };
  // The states that crashed or misbehaved before they were validated (issue 24, item 3).
  seed("regress_empty_rounds", 1, 0, hb_state([](json& j) { j["state"]["brackets"][0]["rounds"] = json::array(); }));
  seed("regress_huge_current_bracket", 1, 0, hb_state([](json& j) { j["state"]["current_bracket"] = 6000000000; }));
  seed("regress_float_current_iteration", 1, 0, hb_state([](json& j) { j["state"]["current_iteration"] = 1e300; }));
  seed("regress_wrong_types", 1, 0, hb_state([](json& j) { j["state"]["seed"] = "7"; j["trials"] = json::object(); }));
  seed("regress_path_trial_id", 1, 0, hb_state([](json& j) { j["trials"][0] = "x/../../../outside_dir"; }));
  json promoted = json::parse(hb.trial_json[9]);  // round 1: continues a trial of round 0
  promoted["hyperparameters"]["tuner/epochs"] = 1;
  promoted["hyperparameters"]["tuner/initial_epoch"] = 2;
  promoted["status"] = "RUNNING";
  seed("regress_epochs_below_initial_epoch", 1, 10, promoted.dump(1));
  json traversal = json::parse(hb.trial_json[0]);
  traversal["trial_id"] = "x/../../../outside_dir";
  traversal["status"] = "RUNNING";
  seed("regress_path_in_trial_json", 1, 1, traversal.dump(1));
  json missing = json::parse(projects[0].trial_json[0]);
  missing.erase("status");
  missing["best_step"] = 1.5;
  seed("regress_missing_key", 0, 1, missing.dump(1));
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const std::vector<project> projects = [] {
    std::vector<project> v;
    for (int kind = 0; kind < 3; ++kind) {
      v.push_back(make_project(kind));
      restore(v.back());
    }
    if (const char* out = std::getenv("CTNN_FUZZ_WRITE_SEED")) write_seeds(out, v);
    return v;
  }();
  if (size < 2) return 0;
  const int kind = data[0] % 3;
  const project& p = projects[std::size_t(kind)];
  const auto file = file_of(p, data[1]);
  put(file, std::string(reinterpret_cast<const char*>(data + 2), size - 2));
  auto o = make_oracle(kind);
  tn::oracle* raw = o.get();  // the tuner owns it; populate is driven below without training
  tn::tuner_options opt;
  opt.directory = p.dir;
  opt.project_name = "p";
  opt.objective = objective();
  opt.seed = 3;
  try {
    fuzz_tuner t(space(), std::move(o), opt);
    std::vector<tn::trial> trials = t.trials();
    drive(*raw, trials, kind == 2 ? 1 : 16, kind);  // Bayesian optimisation: one GP proposal (the costly one)
    (void)t.best_trials(3);
    std::ostringstream summary;
    t.results_summary(summary, 3);
  } catch (const ctnn::io_error& e) {
    if (std::getenv("CTNN_FUZZ_VERBOSE")) std::fprintf(stderr, "%s\n", e.what());
  }
  put(file, data[1] == 0 ? p.oracle_json : p.trial_json[(data[1] - 1) % p.ids.size()]);
  return 0;
}
