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
// random_search is Keras Tuner's RandomSearchOracle.
#pragma once
#include <algorithm>
#include <cstdint>
#include <functional>
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
  static trial from_json(const nlohmann::json& j, const std::vector<std::string>& order) {
    trial t;
    t.id = j.at("trial_id").get<std::string>();
    t.hp = values::from_json(j.at("hyperparameters"), order);
    t.status = status_from_name(j.at("status").get<std::string>());
    if (!j.at("score").is_null()) t.score = j.at("score").get<double>();
    t.best_step = j.at("best_step").get<std::size_t>();
    t.metrics = j.at("metrics").get<std::map<std::string, std::vector<double>>>();
    t.message = j.at("message").get<std::string>();
    t.seconds = j.value("seconds", 0.0);
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
  virtual void set_state(const nlohmann::json& j) {
    seed_ = j.at("seed").get<std::uint64_t>();
    seed_state_ = j.at("seed_state").get<std::uint64_t>();
    tried_ = j.at("tried_so_far").get<std::set<std::string>>();
  }

 protected:
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
