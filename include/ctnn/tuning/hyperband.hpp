// ctnn/tuning/hyperband.hpp — Keras Tuner's HyperbandOracle.
//
// Brackets b = B-1, ..., 0 with B = the number of times max_epochs can be
// divided by factor and stay >= 1 (min_epochs); bracket b has b + 1 rounds;
// round r of bracket b holds size(b, r) = ceil(ceil(1 + log_factor(max_epochs))
// / (b + 1) * factor^(b - r)) trials trained to epochs(b, r) =
// ceil(max_epochs / factor^(b - r)) epochs. Round 0 is random; a trial of
// round r > 0 continues the best not yet promoted COMPLETED trial of round
// r - 1 from its best checkpoint (values "tuner/trial_id", "tuner/epochs",
// "tuner/initial_epoch", "tuner/bracket", "tuner/round"), once more trials of
// round r - 1 are ready than will be dropped (candidates > size(b, r-1) -
// size(b, r)). After bracket 0 of the last iteration the search stops. This is
// keras_tuner/tuners/hyperband.py (populate_space and its helpers) line for
// line, with trials run one at a time, so "IDLE" never arises; "tuner/bracket"
// holds the current bracket as Keras Tuner writes it.
#pragma once
#include <cmath>
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "oracle.hpp"

namespace ctnn::tuning {

class hyperband : public oracle {
 public:
  struct round_entry {
    std::string past_id;  // empty in round 0
    std::string id;
  };
  struct bracket {
    int number = 0;
    std::vector<std::vector<round_entry>> rounds;
  };

  explicit hyperband(std::int64_t max_epochs, std::int64_t factor = 3, std::int64_t iterations = 1)
      : max_epochs_(max_epochs), factor_(factor), iterations_(iterations) {
    if (max_epochs < 1) throw std::invalid_argument("hyperband: max_epochs must be >= 1, got " + std::to_string(max_epochs));
    if (factor < 2) throw std::invalid_argument("hyperband: factor needs to be an integer larger than 1, got " + std::to_string(factor));
    if (iterations < 1) throw std::invalid_argument("hyperband: iterations must be >= 1, got " + std::to_string(iterations));
    current_bracket_ = num_brackets() - 1;  // start with the most aggressively halving bracket
    start_new_bracket();
  }
  std::string kind() const override { return "hyperband"; }

  // Keras Tuner's _get_size, _get_epochs, _get_num_brackets.
  std::int64_t size(int b, int r) const {
    const double end0 = std::ceil(1 + std::log(double(max_epochs_)) / std::log(double(factor_)));
    const double end = end0 / double(b + 1);
    return std::int64_t(std::ceil(end * std::pow(double(factor_), b - r)));
  }
  std::int64_t epochs(int b, int r) const {
    return std::int64_t(std::ceil(double(max_epochs_) / std::pow(double(factor_), b - r)));
  }
  int num_brackets() const {
    double e = double(max_epochs_);
    int n = 0;
    while (e >= 1) {
      e /= double(factor_);
      ++n;
    }
    return n;
  }
  const std::vector<bracket>& brackets() const noexcept { return brackets_; }

  std::optional<values> populate(const std::string& trial_id, const std::vector<trial>& trials) override {
    remove_completed_brackets();
    for (auto& br : brackets_) {
      const int b = br.number;
      auto& rounds = br.rounds;
      if (std::int64_t(rounds[0].size()) < size(b, 0)) return random_trial(trial_id, br);
      for (int r = 1; r < int(rounds.size()); ++r) {
        auto& round_info = rounds[r];
        const auto& past = rounds[r - 1];
        const std::int64_t sz = size(b, r), past_sz = size(b, r - 1);
        std::vector<const trial*> candidates;
        for (auto& info : past) {
          bool selected = false;
          for (auto& x : round_info) selected = selected || x.past_id == info.id;
          if (selected) continue;
          const trial* t = find(trials, info.id);
          if (t && t->status == trial_status::completed && t->score) candidates.push_back(t);
        }
        if (std::int64_t(candidates.size()) > past_sz - sz) {
          sort_best_first(candidates, objective_);
          const trial* best = candidates.front();
          values v = best->hp;
          v.set("tuner/trial_id", best->id);
          v.set("tuner/epochs", epochs(b, r));
          v.set("tuner/initial_epoch", epochs(b, r - 1));
          v.set("tuner/bracket", std::int64_t(current_bracket_));
          v.set("tuner/round", std::int64_t(r));
          round_info.push_back({best->id, trial_id});
          return v;
        }
      }
    }
    if (current_bracket_ == 0 && current_iteration_ + 1 >= iterations_) {
      increment_bracket();
      return std::nullopt;  // no trial runs alongside: Keras Tuner's STOPPED
    }
    increment_bracket();
    start_new_bracket();
    return random_trial(trial_id, brackets_.back());
  }

  nlohmann::json state() const override {
    nlohmann::json j = oracle::state();
    nlohmann::json bs = nlohmann::json::array();
    for (auto& br : brackets_) {
      nlohmann::json rounds = nlohmann::json::array();
      for (auto& r : br.rounds) {
        nlohmann::json entries = nlohmann::json::array();
        for (auto& e : r)
          entries.push_back({{"past_id", e.past_id.empty() ? nlohmann::json(nullptr) : nlohmann::json(e.past_id)}, {"id", e.id}});
        rounds.push_back(entries);
      }
      bs.push_back({{"bracket_num", br.number}, {"rounds", rounds}});
    }
    j["max_epochs"] = max_epochs_;
    j["factor"] = factor_;
    j["hyperband_iterations"] = iterations_;
    j["brackets"] = bs;
    j["current_bracket"] = current_bracket_;
    j["current_iteration"] = current_iteration_;
    return j;
  }
  void set_state(const nlohmann::json& j) override {
    oracle::set_state(j);
    if (j.at("max_epochs").get<std::int64_t>() != max_epochs_ || j.at("factor").get<std::int64_t>() != factor_ ||
        j.at("hyperband_iterations").get<std::int64_t>() != iterations_)
      throw std::invalid_argument("hyperband: the project was made with max_epochs " + j.at("max_epochs").dump() +
                                  ", factor " + j.at("factor").dump() + ", iterations " +
                                  j.at("hyperband_iterations").dump() + "; this oracle differs");
    brackets_.clear();
    for (auto& b : j.at("brackets")) {
      bracket br{b.at("bracket_num").get<int>(), {}};
      for (auto& r : b.at("rounds")) {
        std::vector<round_entry> entries;
        for (auto& e : r)
          entries.push_back({e.at("past_id").is_null() ? std::string() : e.at("past_id").get<std::string>(),
                             e.at("id").get<std::string>()});
        br.rounds.push_back(std::move(entries));
      }
      brackets_.push_back(std::move(br));
    }
    current_bracket_ = j.at("current_bracket").get<int>();
    current_iteration_ = j.at("current_iteration").get<std::int64_t>();
  }

 private:
  static const trial* find(const std::vector<trial>& trials, const std::string& id) {
    for (auto& t : trials)
      if (t.id == id) return &t;
    return nullptr;
  }
  void start_new_bracket() {
    bracket br{current_bracket_, {}};
    br.rounds.resize(std::size_t(current_bracket_ + 1));
    brackets_.push_back(std::move(br));
  }
  void increment_bracket() {
    --current_bracket_;
    if (current_bracket_ < 0) {
      current_bracket_ = num_brackets() - 1;
      ++current_iteration_;
      if (current_iteration_ > iterations_) current_bracket_ = 0;
    }
  }
  void remove_completed_brackets() {
    std::erase_if(brackets_, [&](const bracket& br) {
      const int last = int(br.rounds.size()) - 1;
      return std::int64_t(br.rounds[last].size()) == size(br.number, last);
    });
  }
  std::optional<values> random_trial(const std::string& trial_id, bracket& br) {
    std::optional<values> v = random_values();
    if (!v) return std::nullopt;
    v->set("tuner/epochs", epochs(br.number, 0));
    v->set("tuner/initial_epoch", std::int64_t(0));
    v->set("tuner/bracket", std::int64_t(current_bracket_));
    v->set("tuner/round", std::int64_t(0));
    br.rounds[0].push_back({std::string(), trial_id});
    return v;
  }

  std::int64_t max_epochs_, factor_, iterations_;
  std::int64_t current_iteration_ = 0;
  int current_bracket_ = 0;
  std::vector<bracket> brackets_;
};

}  // namespace ctnn::tuning
