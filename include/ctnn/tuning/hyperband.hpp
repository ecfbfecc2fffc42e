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
// holds the current bracket as Keras Tuner writes it. Unlike Keras Tuner, a
// finished search (the last bracket of the last iteration over) proposes nothing
// more when searched again. set_state validates the whole state before taking any of it.
#pragma once
#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <variant>
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
    // The last bracket of the last iteration is over (the stop below moved current_iteration_ to
    // iterations_): a finished search stays finished. Keras Tuner's _increment_bracket_num resets the
    // bracket here, so searching a finished project again starts a new bracket; ctnn does not.
    if (current_iteration_ >= iterations_) return std::nullopt;
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

  // Ready when populate would start a trial of a first round or promote a completed trial; not
  // while it would open a new bracket or stop only because trials of these brackets still run.
  bool ready(const std::vector<trial>& trials) const override {
    if (current_iteration_ >= iterations_) return true;
    bool running = false;
    for (auto& br : brackets_) {
      const int b = br.number, last = int(br.rounds.size()) - 1;
      if (std::int64_t(br.rounds[last].size()) == size(b, last)) continue;  // removed by populate
      if (std::int64_t(br.rounds[0].size()) < size(b, 0)) return true;
      for (int r = 1; r < int(br.rounds.size()); ++r) {
        std::int64_t candidates = 0;
        for (auto& info : br.rounds[r - 1]) {
          bool selected = false;
          for (auto& x : br.rounds[r]) selected = selected || x.past_id == info.id;
          const trial* t = find(trials, info.id);
          if (t && t->status == trial_status::running) running = true;
          if (!selected && t && t->status == trial_status::completed && t->score) ++candidates;
        }
        for (auto& x : br.rounds[r])
          if (const trial* t = find(trials, x.id); t && t->status == trial_status::running) running = true;
        if (candidates > size(b, r - 1) - size(b, r)) return true;
      }
    }
    return !running;
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
  // Validates the whole state before taking any of it (state_error naming the key): the settings
  // equal this oracle's; at most num_brackets() x iterations brackets, each numbered in
  // [0, num_brackets()), with bracket_num + 1 rounds, round r holding at most size(b, r) entries;
  // every id a trial id seen once; past_id null in round 0 and, in round r > 0, an id of round
  // r - 1 promoted once; current_bracket in [0, num_brackets()), current_iteration in [0, iterations + 1].
  void set_state(const nlohmann::json& j) override {
    namespace st = state;
    oracle::set_state(j);
    const std::int64_t me = st::integer(st::at(j, "state", "max_epochs"), "state.max_epochs", 1);
    const std::int64_t f = st::integer(st::at(j, "state", "factor"), "state.factor", 2);
    const std::int64_t it = st::integer(st::at(j, "state", "hyperband_iterations"), "state.hyperband_iterations", 1);
    if (me != max_epochs_ || f != factor_ || it != iterations_)
      throw state_error("state: the project was made with max_epochs " + std::to_string(me) + ", factor " +
                        std::to_string(f) + ", iterations " + std::to_string(it) + "; this oracle has " +
                        std::to_string(max_epochs_) + ", " + std::to_string(factor_) + ", " + std::to_string(iterations_));
    const int nb = num_brackets();
    const std::size_t max_brackets =
        std::uint64_t(iterations_) > std::uint64_t(1) << 32 ? std::size_t(-1) : std::size_t(nb) * std::size_t(iterations_);
    std::vector<bracket> brackets;
    std::set<std::string> ids;
    const auto& bs = st::array(st::at(j, "state", "brackets"), "state.brackets", max_brackets);
    for (std::size_t i = 0; i < bs.size(); ++i) {
      const std::string wb = st::index("state.brackets", i);
      bracket br{int(st::integer(st::at(bs[i], wb, "bracket_num"), wb + ".bracket_num", 0, nb - 1)), {}};
      const std::string wr = wb + ".rounds";
      const auto& rounds = st::array(st::at(bs[i], wb, "rounds"), wr);
      if (rounds.size() != std::size_t(br.number) + 1)
        st::fail(wr, "has " + std::to_string(rounds.size()) + " rounds; bracket " + std::to_string(br.number) + " has " +
                         std::to_string(br.number + 1));
      for (std::size_t r = 0; r < rounds.size(); ++r) {
        const std::string we = st::index(wr, r);
        const auto& entries = st::array(rounds[r], we, std::size_t(size(br.number, int(r))));
        std::vector<round_entry> out;
        for (std::size_t k = 0; k < entries.size(); ++k) {
          const std::string w = st::index(we, k);
          round_entry e;
          e.id = st::trial_id(st::at(entries[k], w, "id"), w + ".id");
          if (!ids.insert(e.id).second) st::fail(w + ".id", "trial " + e.id + " appears twice");
          const auto& past = st::at(entries[k], w, "past_id");
          if (r == 0) {
            if (!past.is_null()) st::fail(w + ".past_id", "expected null in round 0, got " + st::describe(past));
          } else {
            e.past_id = st::trial_id(past, w + ".past_id");
            bool in_past = false, promoted = false;
            for (auto& x : br.rounds[r - 1]) in_past = in_past || x.id == e.past_id;
            for (auto& x : out) promoted = promoted || x.past_id == e.past_id;
            if (!in_past) st::fail(w + ".past_id", "trial " + e.past_id + " is not in round " + std::to_string(r - 1));
            if (promoted) st::fail(w + ".past_id", "trial " + e.past_id + " is promoted twice");
          }
          out.push_back(std::move(e));
        }
        br.rounds.push_back(std::move(out));
      }
      brackets.push_back(std::move(br));
    }
    const int cb = int(st::integer(st::at(j, "state", "current_bracket"), "state.current_bracket", 0, nb - 1));
    // iterations + 1: a finished project searched again before this was fixed counted one more iteration.
    const std::int64_t max_iteration = iterations_ < std::numeric_limits<std::int64_t>::max() ? iterations_ + 1 : iterations_;
    const std::int64_t ci = st::integer(st::at(j, "state", "current_iteration"), "state.current_iteration", 0, max_iteration);
    brackets_ = std::move(brackets);
    current_bracket_ = cb;
    current_iteration_ = ci;
  }

  // The space's values plus "tuner/epochs" in [1, max_epochs], "tuner/initial_epoch" in [0,
  // tuner/epochs), "tuner/bracket" and "tuner/round" in [0, num_brackets()), and "tuner/trial_id"
  // (a string) exactly when the round is > 0.
  void check_values(const values& v, const std::string& where) const override {
    check_space_values(v, where, {"tuner/epochs", "tuner/initial_epoch", "tuner/bracket", "tuner/round", "tuner/trial_id"});
    auto integer = [&](const char* name, std::int64_t lo, std::int64_t hi) {
      const std::string at = state::key(where, name);
      if (!v.has(name)) state::fail(at, "missing");
      const auto* x = std::get_if<std::int64_t>(&v.at(name));
      if (!x) state::fail(at, "expected an integer, got " + to_string(v.at(name)));
      if (*x < lo || *x > hi)
        state::fail(at, std::to_string(*x) + " is outside [" + std::to_string(lo) + ", " + std::to_string(hi) + "]");
      return *x;
    };
    const std::int64_t e = integer("tuner/epochs", 1, max_epochs_);
    integer("tuner/initial_epoch", 0, e - 1);
    integer("tuner/bracket", 0, num_brackets() - 1);
    const std::int64_t r = integer("tuner/round", 0, num_brackets() - 1);
    const std::string at = state::key(where, "tuner/trial_id");
    if (r == 0 && v.has("tuner/trial_id")) state::fail(at, "set in round 0, which trains from scratch");
    if (r > 0 && !v.has("tuner/trial_id")) state::fail(at, "missing (round " + std::to_string(r) + " continues a trial)");
    if (r > 0 && !std::holds_alternative<std::string>(v.at("tuner/trial_id")))
      state::fail(at, "expected a string, got " + to_string(v.at("tuner/trial_id")));
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
