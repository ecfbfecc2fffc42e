// ctnn/tuning/oracle.hpp — trials, the objective, the oracle interface and random search.
//
// A trial is one configuration tried: its id, values, status (RUNNING,
// COMPLETED, FAILED), score (the best value of the objective over its epochs,
// as Keras Tuner's MetricsTracker), best_step (the 0-based epoch of that
// value), its metric history and, when it failed, the message. An oracle
// proposes the values of each new trial from the trials so far
// (populate(trial_id, trials): nullopt ends the search) and keeps its own
// state as JSON so a search can stop anywhere and resume. random_values()
// draws every active hyperparameter from a probability drawn from
// rng::derive(seed, seed_state++) (Keras Tuner seeds Python's random with
// seed_state and increments it per value) and redraws a configuration tried
// before, giving up after 20 collisions (Keras Tuner's _max_collisions).
// random_search is Keras Tuner's RandomSearchOracle. set_state and
// trial::from_json read a saved search back through state.hpp: a wrong type, a
// value out of range or a key missing throws state_error naming the key, and
// check_values checks a reloaded trial's values against the space.
#pragma once
#include <algorithm>
#include <cstdint>
#include <cmath>
#include <functional>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "../core/rng.hpp"
#include "hyperparameters.hpp"
#include "state.hpp"

namespace ctnn::tuning {

enum class trial_status { running, completed, failed };

inline const char* status_name(trial_status s) {
  return s == trial_status::running ? "RUNNING" : s == trial_status::completed ? "COMPLETED" : "FAILED";
}
inline trial_status status_from_name(const std::string& s) {
  if (s == "RUNNING") return trial_status::running;
  if (s == "COMPLETED") return trial_status::completed;
  if (s == "FAILED") return trial_status::failed;
  throw std::invalid_argument("tuning: unknown trial status '" + s + "'");
}

// What to optimize: a key of the epoch logs and a direction.
struct objective {
  std::string name = "val_loss";
  bool maximize = false;

  static objective max(std::string n) { return {std::move(n), true}; }
  static objective min(std::string n) { return {std::move(n), false}; }
  // Keras Tuner's inference from a name: accuracy-like names are maximized, the rest minimized.
  static objective infer(std::string n) {
    const bool acc = n.find("acc") != std::string::npos;
    return {std::move(n), acc};
  }
  bool better(double a, double b) const { return maximize ? a > b : a < b; }
  // Keras Tuner's repr: Objective(name="val_accuracy", direction="max")
  std::string repr() const { return "Objective(name=\"" + name + "\", direction=\"" + (maximize ? "max" : "min") + "\")"; }
};

struct trial {
  std::string id;
  values hp;
  trial_status status = trial_status::running;
  std::optional<double> score;
  std::size_t best_step = 0;
  std::map<std::string, std::vector<double>> metrics;  // per epoch of this trial
  std::string message;                                  // why it failed
  double seconds = 0;                                   // wall time of its training

  nlohmann::json to_json() const {
    nlohmann::json j{{"trial_id", id},
                     {"hyperparameters", hp.to_json()},
                     {"status", status_name(status)},
                     {"score", score ? nlohmann::json(*score) : nlohmann::json(nullptr)},
                     {"best_step", best_step},
                     {"metrics", metrics},
                     {"message", message},
                     {"seconds", seconds}};
    return j;
  }
  // A trial read back from its file: every key present with its JSON type, the status one of the
  // three, a COMPLETED trial with a score, metrics numbers (null: a NaN that was saved as null);
  // state_error naming the key otherwise. Keys of "hyperparameters" come back in the order
  // given by `order` (the space), then the rest sorted.
  static trial from_json(const nlohmann::json& j, const std::vector<std::string>& order) {
    namespace st = state;
    trial t;
    t.id = st::trial_id(st::at(j, "", "trial_id"), "trial_id");
    const auto& hp = st::object(st::at(j, "", "hyperparameters"), "hyperparameters");
    auto read = [&](const std::string& k, const nlohmann::json& v) {
      if (!(v.is_boolean() || v.is_number() || v.is_string()))
        st::fail(st::key("hyperparameters", k), "expected a boolean, number or string, got " + st::describe(v));
      if (v.is_number_float() && !std::isfinite(v.get<double>())) st::fail(st::key("hyperparameters", k), "not finite");
      if (v.is_number_unsigned() && v.get<std::uint64_t>() > std::uint64_t(std::numeric_limits<std::int64_t>::max()))
        st::fail(st::key("hyperparameters", k), "the integer " + v.dump() + " does not fit in 64 signed bits");
      t.hp.set(k, value_from_json(v));
    };
    for (auto& k : order)
      if (auto it = hp.find(k); it != hp.end()) read(k, *it);
    for (auto& [k, v] : hp.items())
      if (!t.hp.has(k)) read(k, v);
    const std::string& status = st::string(st::at(j, "", "status"), "status");
    if (status != "RUNNING" && status != "COMPLETED" && status != "FAILED")
      st::fail("status", st::describe(st::at(j, "", "status")) + " is not RUNNING, COMPLETED or FAILED");
    t.status = status_from_name(status);
    if (const auto& sc = st::at(j, "", "score"); !sc.is_null()) t.score = st::number(sc, "score");
    if (t.status == trial_status::completed && !t.score) st::fail("score", "null, but the trial is COMPLETED");
    t.best_step = std::size_t(st::integer(st::at(j, "", "best_step"), "best_step", 0));
    const auto& m = st::object(st::at(j, "", "metrics"), "metrics");
    for (auto& [k, v] : m.items()) {
      const std::string where = st::key("metrics", k);
      auto& out = t.metrics[k];
      std::size_t i = 0;
      for (auto& x : st::array(v, where)) {
        out.push_back(x.is_null() ? std::numeric_limits<double>::quiet_NaN() : st::number(x, st::index(where, i)));
        ++i;
      }
    }
    t.message = st::string(st::at(j, "", "message"), "message");
    if (auto it = j.find("seconds"); it != j.end()) {  // optional, as before: older files lack it
      t.seconds = st::number(*it, "seconds");
      if (t.seconds < 0) st::fail("seconds", "negative");
    }
    return t;
  }
};

// Sorts trials (pointers into one vector) best score first; ties keep their order
// (Python's sorted is stable, and Keras Tuner sorts with it).
inline void sort_best_first(std::vector<const trial*>& v, const objective& obj) {
  std::sort(v.begin(), v.end(), [&](const trial* a, const trial* b) {
    if (obj.better(*a->score, *b->score)) return true;
    if (obj.better(*b->score, *a->score)) return false;
    return std::less<const trial*>()(a, b);
  });
}

class oracle {
 public:
  virtual ~oracle() = default;
  virtual std::string kind() const = 0;
  // The values of trial `trial_id`, or nullopt when the search is over.
  virtual std::optional<values> populate(const std::string& trial_id, const std::vector<trial>& trials) = 0;
  // Whether populate can be called now although some `trials` are still RUNNING (a distributed
  // search fills a round of trials, one per process): true unless what it would propose next
  // depends on how a running trial ends (Hyperband between its rounds).
  virtual bool ready(const std::vector<trial>&) const { return true; }

  // Called by the tuner before the search (and before set_state on resume).
  void configure(search_space space, tuning::objective obj, std::uint64_t seed) {
    space_ = std::move(space);
    space_.check();
    objective_ = std::move(obj);
    seed_ = seed;
    seed_state_ = seed;
    tried_.clear();
  }
  const search_space& space() const noexcept { return space_; }
  const tuning::objective& objective() const noexcept { return objective_; }
  std::optional<std::size_t> max_trials() const noexcept { return max_trials_; }

  virtual nlohmann::json state() const {
    return {{"seed", seed_}, {"seed_state", seed_state_}, {"tried_so_far", tried_}};
  }
  // Restores state() as read back from a file; a value of the wrong type or out of range throws
  // state_error naming its key ("state.seed_state: ...").
  virtual void set_state(const nlohmann::json& j) {
    namespace st = state;
    st::object(j, "state");
    seed_ = st::unsigned_integer(st::at(j, "state", "seed"), "state.seed");
    seed_state_ = st::unsigned_integer(st::at(j, "state", "seed_state"), "state.seed_state");
    std::set<std::string> tried;
    std::size_t i = 0;
    for (auto& s : st::array(st::at(j, "state", "tried_so_far"), "state.tried_so_far"))
      tried.insert(st::string(s, st::index("state.tried_so_far", i++)));
    tried_ = std::move(tried);
  }

  // Checks the values of a trial read back from a file (at key path `where`) against what this
  // oracle proposes: every active hyperparameter of the space with a value it can take, no
  // inactive or unknown one; state_error naming the key otherwise. Hyperband adds its "tuner/..." values.
  virtual void check_values(const values& v, const std::string& where) const { check_space_values(v, where, {}); }

 protected:
  // check_values for the space, with the names in `extra` (checked by the caller) allowed besides.
  void check_space_values(const values& v, const std::string& where, const std::vector<std::string>& extra) const {
    for (auto& [k, x] : v.items()) {
      if (space_.contains(k) || std::find(extra.begin(), extra.end(), k) != extra.end()) continue;
      state::fail(state::key(where, k), "not a hyperparameter of the search space");
    }
    for (auto& h : space_.items()) {
      const std::string at = state::key(where, h.name);
      if (!space_.is_active(h, v)) {
        if (v.has(h.name)) state::fail(at, "set, but inactive (its condition on '" + h.parent + "' does not hold)");
        continue;
      }
      if (!v.has(h.name)) state::fail(at, "missing");
      if (!h.admits(v.at(h.name))) state::fail(at, to_string(v.at(h.name)) + " is not a value of this hyperparameter");
    }
  }
  // A configuration not tried before, or nullopt after 20 collisions.
  std::optional<values> random_values() {
    for (int collisions = 0; collisions <= 20; ++collisions) {
      values v = space_.sample([&] { return rng::derive(seed_, seed_state_++).uniform(); });
      if (tried_.insert(v.to_json().dump()).second) return v;
    }
    return std::nullopt;
  }
  // Completed trials sorted best first.
  std::vector<const trial*> completed(const std::vector<trial>& trials) const {
    std::vector<const trial*> r;
    for (auto& t : trials)
      if (t.status == trial_status::completed && t.score) r.push_back(&t);
    sort_best_first(r, objective_);
    return r;
  }

  search_space space_;
  tuning::objective objective_;
  std::uint64_t seed_ = 0, seed_state_ = 0;
  std::set<std::string> tried_;
  std::optional<std::size_t> max_trials_;
};

// Keras Tuner's RandomSearch: max_trials configurations drawn at random.
class random_search : public oracle {
 public:
  explicit random_search(std::size_t max_trials) {
    if (max_trials == 0) throw std::invalid_argument("random_search: max_trials must be > 0");
    max_trials_ = max_trials;
  }
  std::string kind() const override { return "random_search"; }
  std::optional<values> populate(const std::string&, const std::vector<trial>&) override { return random_values(); }
};

}  // namespace ctnn::tuning
