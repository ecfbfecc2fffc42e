// ctnn/tuning/tuner.hpp — a Keras Tuner search over run-time values and compile-time architectures.
//
// tuner<architectures<Net...>, optimizers<O...>>(space, oracle, options)
// runs trials the oracle proposes (oracle.hpp, hyperband.hpp, bayesian.hpp).
// Each network and optimizer type is instantiated once, when the tuner is
// compiled; a trial picks among them ("architecture", "optimizer") and sets
// run-time values: "learning_rate", "batch_size" (default 32), "dropout"
// (every dynamic_dropout), "l2", "l1" (every dynamic_l2 / dynamic_l1), "units"
// (the active width of every dense<up_to<Max>>, train/widths.hpp); other
// hyperparameters are recorded and searched but not applied.
// search(loss, train, validation, epochs, extras...) fits each trial's model
// (seeded from (seed, trial number)) with fresh copies of the extras, records
// the metrics after every epoch and the best weights as the trial's
// checkpoint; a trial that throws is FAILED with its message and the search
// goes on. The project directory <directory>/<project_name>/ (oracle.json,
// trial_<id>/trial.json, trial_<id>/checkpoint.ctnn) is written atomically,
// so a tuner constructed on it resumes (a RUNNING trial runs again from its
// start; overwrite = true starts afresh); everything read back is validated
// and a corrupt file is a ctnn::io_error naming the file and the key.
// Hyperband trials start from "tuner/trial_id"'s checkpoint.
// Unless options.progress is nullptr (default &std::cout), rank 0 prints Keras Tuner's display:
// "Search: Running Trial #N", the values beside the best so far, "Trial N Complete [00h 00m 12s]",
// the objective, the best so far and the elapsed time.
// tuner(comm, space, oracle, options) with a distributed::Communicator searches on
// every process of comm (Keras Tuner's chief/worker mode): rank 0 is the oracle and
// the only writer of the JSON state and hands out a trial whenever a process is free
// (rank 0 trains too, answering between its batches; oracle::ready says when a trial may
// start beside running ones; a communicator without point-to-point messages searches in
// rounds of one trial per process); a trial left RUNNING by a killed process runs again when the
// project is searched again, on any number of processes. The project directory must
// be shared by the processes (checkpoints are written by the process that trains).
// Details: docs/tuning.md, docs/distributed.md.
#pragma once
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstddef>
#include <cstdio>
#include <deque>
#include <exception>
#include <filesystem>
#include <functional>
#include <iostream>
#include <memory>
#include <optional>
#include <span>
#include <ostream>
#include <set>
#include <stdexcept>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

#include <nlohmann/json.hpp>

#include "../core/compile_message.hpp"
#include "../core/rng.hpp"
#include "../distributed/communicator.hpp"
#include "../io/atomic_file.hpp"
#include "../io/directories.hpp"
#include "../io/read_file.hpp"
#include "../io/weights.hpp"
#include "../train/fit.hpp"
#include "../train/model.hpp"
#include "../train/runtime_factors.hpp"
#include "../train/widths.hpp"
#include "hyperparameters.hpp"
#include "oracle.hpp"
#include "state.hpp"

namespace ctnn::tuning {

namespace detail {
// "tuning::architectures: type 2 (ctnn::dense<3>) is not a network; give ctnn::sequential<input<...>, layers...>"
template <std::size_t I, class T>
constexpr diag::message not_a_network_in_list_text() {
  diag::message m;
  m << "tuning::architectures: type " << I << " (";
  m.type<T>() << ") is not a network; give ctnn::sequential<input<...>, layers...>";
  return m;
}
// "tuning::optimizers: type 2 (double) is not an optimizer (ctnn::Optimizer: adam<>, sgd<>, ...)"
template <std::size_t I, class T>
constexpr diag::message not_an_optimizer_in_list_text() {
  diag::message m;
  m << "tuning::optimizers: type " << I << " (";
  m.type<T>() << ") is not an optimizer (ctnn::Optimizer: adam<>, sgd<>, ...)";
  return m;
}
template <std::size_t I, class T>
constexpr diag::message optimizer_without_rate_text() {
  diag::message m;
  m << "tuning::optimizers: type " << I << " (";
  m.type<T>() << ") cannot be constructed from a learning rate (a double)";
  return m;
}
template <class... Nets>
constexpr bool check_architecture_list() {
  constexpr bool located = []<std::size_t... I>(std::index_sequence<I...>) {
    return (diag::require<Network<Nets>, &not_a_network_in_list_text<I + 1, Nets>>() && ...);
  }(std::index_sequence_for<Nets...>{});
  static_assert((Network<Nets> && ...), "tuning::architectures: every type must be a network (ctnn::sequential<input<...>, ...>)");
  return located;
}
template <class... Os>
constexpr bool check_optimizer_list() {
  constexpr bool located = []<std::size_t... I>(std::index_sequence<I...>) {
    return (diag::require<Optimizer<Os>, &not_an_optimizer_in_list_text<I + 1, Os>>() && ...);
  }(std::index_sequence_for<Os...>{});
  static_assert((Optimizer<Os> && ...), "tuning::optimizers: every type must satisfy ctnn::Optimizer (adam<>, sgd<>, ...)");
  if constexpr ((Optimizer<Os> && ...)) {
    constexpr bool rate = []<std::size_t... I>(std::index_sequence<I...>) {
      return (diag::require<std::is_constructible_v<Os, double>, &optimizer_without_rate_text<I + 1, Os>>() && ...);
    }(std::index_sequence_for<Os...>{});
    static_assert((std::is_constructible_v<Os, double> && ...),
                  "tuning::optimizers: every optimizer must be constructible from a learning rate (a double)");
    return located && rate;
  } else {
    return located;
  }
}
}  // namespace detail

template <class... Nets>
struct architectures {
  static_assert(sizeof...(Nets) > 0, "tuning::architectures: give at least one network type");
  static_assert(detail::check_architecture_list<Nets...>());
  static constexpr std::size_t size = sizeof...(Nets);
};
template <class... Os>
struct optimizers {
  static_assert(sizeof...(Os) > 0, "tuning::optimizers: give at least one optimizer type");
  static_assert(detail::check_optimizer_list<Os...>());
  static constexpr std::size_t size = sizeof...(Os);
};

// The processes a search runs on: a distributed::Communicator seen through its rank, size
// and byte broadcast (the tuner is not a template on it), and, where the communicator has
// point-to-point messages (distributed::has_messages), send and receive: then rank 0 hands out
// a trial whenever a process is free; without them the search runs in rounds. Default: one
// process.
struct workers {
  int rank = 0, size = 1;
  std::function<void(std::span<unsigned char>, int root)> broadcast;
  std::function<void(const std::string& bytes, int to)> send;
  // The next message to this process (source, bytes): waits when asked to, else nullopt when none.
  std::function<std::optional<distributed::message>(bool wait)> receive;
};
// The MPI tag of the tuner's messages.
inline constexpr int tuner_message_tag = 0x6374;
template <distributed::Communicator C>
workers workers_of(C& comm) {
  workers w{int(comm.rank()), int(comm.size()), [&comm](std::span<unsigned char> s, int root) { comm.broadcast(s, root); }, {}, {}};
  if constexpr (distributed::has_messages<C>) {
    w.send = [&comm](const std::string& b, int to) {
      comm.send_message(std::span<const unsigned char>(reinterpret_cast<const unsigned char*>(b.data()), b.size()), to,
                        tuner_message_tag);
    };
    w.receive = [&comm](bool wait) { return comm.receive_message(tuner_message_tag, wait); };
  }
  return w;
}

struct tuner_options {
  std::filesystem::path directory = "tuning";
  std::string project_name = "project";
  tuning::objective objective = objective::min("val_loss");
  std::uint64_t seed = 0;
  bool overwrite = false;
  std::vector<std::string> architecture_names;  // default "0", "1", ...
  std::vector<std::string> optimizer_names;     // default "0", "1", ...
  std::ostream* log = nullptr;                  // one line per trial when set
  // Keras Tuner's display (verbose=1): "Search: Running Trial #N" and the table of values before
  // each trial, "Trial N Complete [00h 00m 12s]", the objective, the best so far and the total
  // time after it; on rank 0 only. nullptr: quiet.
  std::ostream* progress = &std::cout;
};

namespace detail {
inline nlohmann::json read_json(const std::filesystem::path& p) {
  const auto text = ctnn::io::read_file<std::string, ctnn::io_error>(p, "tuner");
  try {
    return nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    throw ctnn::io_error("tuner", p, std::string("not valid JSON (") + e.what() + ")");
  }
}
// Runs f, reporting what it finds wrong in the file p (state_error, a value or JSON error) as io_error.
template <class F>
void as_io_error(const std::filesystem::path& p, F&& f) {
  try {
    f();
  } catch (const state_error& e) {
    throw ctnn::io_error("tuner", p, e.what());
  } catch (const nlohmann::json::exception& e) {
    throw ctnn::io_error("tuner", p, std::string("unexpected JSON (") + e.what() + ")");
  } catch (const std::invalid_argument& e) {
    throw ctnn::io_error("tuner", p, e.what());
  } catch (const std::out_of_range& e) {
    throw ctnn::io_error("tuner", p, e.what());
  }
}
inline void write_json(const std::filesystem::path& p, const nlohmann::json& j) {
  ctnn::io::write_file_atomically(p, j.dump(2) + "\n");
}
inline std::vector<std::string> names_or_indices(std::vector<std::string> names, std::size_t n, const char* what) {
  if (names.empty())
    for (std::size_t i = 0; i < n; ++i) names.push_back(std::to_string(i));
  if (names.size() != n)
    throw std::invalid_argument(std::string("tuner: ") + what + "_names has " + std::to_string(names.size()) +
                                " names for " + std::to_string(n) + " types");
  return names;
}

// Records a trial's epochs and saves its best weights (a Callback of fit).
struct trial_recorder {
  trial* t;
  const tuning::objective* obj;
  std::filesystem::path checkpoint, trial_file;  // trial_file empty: not written (a worker process)
  std::size_t initial_epoch = 0;

  template <class Ctx>
  void on_epoch_end(Ctx& ctx) {
    for (auto& [k, v] : ctx.epoch_logs.items) t->metrics[k].push_back(v);
    if (!ctx.epoch_logs.contains(obj->name)) {
      std::string have;
      for (auto& [k, v] : ctx.epoch_logs.items) have += (have.empty() ? "" : ", ") + k;
      throw std::invalid_argument("tuner: the objective '" + obj->name + "' is not in the epoch logs (they have: " + have + ")");
    }
    const double v = ctx.epoch_logs[obj->name];
    if (std::isfinite(v) && (!t->score || obj->better(v, *t->score))) {
      t->score = v;
      t->best_step = initial_epoch + ctx.epoch;
      ctnn::io::save_weights(ctx.model, checkpoint);
    }
    if (!trial_file.empty()) write_json(trial_file, t->to_json());
  }
};
// Calls `serve` after every batch: rank 0 answers the other processes while it trains.
struct serve_between_batches {
  const std::function<void()>* serve;
  template <class Ctx>
  void on_batch_end(Ctx&) {
    (*serve)();
  }
};
// "tuner: architecture 2 of architectures<...> is not a network; ...": checked where the
// tuner is instantiated (architectures<...>'s own static_assert fires only if it is completed).
template <std::size_t I, class T>
constexpr diag::message not_a_network_text() {
  diag::message m;
  m << "tuner: architecture " << I << " (";
  m.type<T>() << ") of architectures<...> is not a network; give ctnn::sequential<input<...>, layers...>";
  return m;
}
template <class... Nets>
constexpr bool check_architectures() {
  return []<std::size_t... I>(std::index_sequence<I...>) {
    return (diag::require<Network<Nets>, &not_a_network_text<I + 1, Nets>>() && ...);
  }(std::index_sequence_for<Nets...>{});
}
}  // namespace detail

template <class Archs, class Opts>
class tuner;

template <class... Nets, class... Os>
class tuner<architectures<Nets...>, optimizers<Os...>> {
  static_assert(detail::check_architectures<Nets...>());

 public:
  tuner(search_space space, std::unique_ptr<tuning::oracle> o, tuner_options opt)
      : tuner(std::move(space), std::move(o), std::move(opt), workers{}) {}
  // Every process of comm constructs its tuner on the same space, oracle kind and options; comm
  // must outlive the tuner. Rank 0 reads or resets the project and hands its state to the others.
  template <distributed::Communicator C>
  tuner(C& comm, search_space space, std::unique_ptr<tuning::oracle> o, tuner_options opt)
      : tuner(std::move(space), std::move(o), std::move(opt), workers_of(comm)) {}

  tuner(search_space space, std::unique_ptr<tuning::oracle> o, tuner_options opt, workers w)
      : oracle_(std::move(o)), opt_(std::move(opt)), workers_(std::move(w)) {
    if (workers_.size < 1 || workers_.rank < 0 || workers_.rank >= workers_.size)
      throw std::invalid_argument("tuner: rank " + std::to_string(workers_.rank) + " of " + std::to_string(workers_.size) +
                                  " processes is not a rank");
    if (workers_.size > 1 && !workers_.broadcast) throw std::invalid_argument("tuner: workers without a broadcast");
    if (!oracle_) throw std::invalid_argument("tuner: no oracle");
    arch_names_ = detail::names_or_indices(opt_.architecture_names, sizeof...(Nets), "architecture");
    opt_names_ = detail::names_or_indices(opt_.optimizer_names, sizeof...(Os), "optimizer");
    search_space full;
    auto strings = [](const std::vector<std::string>& n) {
      std::vector<value> v;
      for (auto& s : n) v.push_back(s);
      return v;
    };
    if (sizeof...(Nets) > 1) full.choice("architecture", strings(arch_names_));
    if (sizeof...(Os) > 1) full.choice("optimizer", strings(opt_names_));
    for (auto& h : space.items()) {
      if (full.contains(h.name))
        throw std::invalid_argument("tuner: '" + h.name + "' is set by the tuner from its type list; do not define it");
      auto& added = h.type == hyperparameter::kind::integer ? full.integer(h.name, std::int64_t(h.min), std::int64_t(h.max), std::int64_t(h.step), h.scale)
                    : h.type == hyperparameter::kind::real  ? full.real(h.name, h.min, h.max, h.step, h.scale)
                    : h.type == hyperparameter::kind::choice ? full.choice(h.name, h.choices)
                    : h.type == hyperparameter::kind::boolean ? full.boolean(h.name)
                                                              : full.fixed(h.name, h.choices.front());
      if (!h.parent.empty()) added.when(h.parent, h.parent_values);
    }
    oracle_->configure(std::move(full), opt_.objective, opt_.seed);
    project_ = opt_.directory / opt_.project_name;
    from_chief([&] {
      if (opt_.overwrite) ctnn::io::remove_all(project_, "tuner");
      ctnn::io::create_directories(project_, "tuner");
      if (ctnn::io::exists(project_ / "oracle.json", "tuner")) reload();
    });
  }

  const std::filesystem::path& project_dir() const noexcept { return project_; }
  const std::vector<trial>& trials() const noexcept { return trials_; }
  const tuning::oracle& oracle() const noexcept { return *oracle_; }
  // How many trials this process has trained (resumed trials included, kept ones not).
  std::size_t trials_run() const noexcept { return run_count_; }
  int rank() const noexcept { return workers_.rank; }
  int processes() const noexcept { return workers_.size; }

  // Runs the search until the oracle stops or max_trials trials exist.
  template <class Loss, class Train, class Val, class... Extras>
  void search(const Loss& loss, const Train& train, const Val& validation, std::size_t epochs, const Extras&... extras) {
    if (epochs == 0) throw std::invalid_argument("tuner: epochs must be > 0");
    search_start_ = std::chrono::steady_clock::now();
    if (workers_.size > 1) {
      if (workers_.send && workers_.receive) return search_dynamic(loss, train, validation, epochs, extras...);
      return search_rounds(loss, train, validation, epochs, extras...);
    }
    for (auto& t : trials_)
      if (t.status == trial_status::running) run_trial(t, loss, train, validation, epochs, extras...);
    for (;;) {
      if (oracle_->max_trials() && trials_.size() >= *oracle_->max_trials()) break;
      trial* t = new_trial();
      if (!t) break;
      run_trial(*t, loss, train, validation, epochs, extras...);
    }
    save_oracle();
  }

  // COMPLETED trials, best first (Keras Tuner's oracle.get_best_trials).
  std::vector<trial> best_trials(std::size_t n = 1) const {
    std::vector<const trial*> p;
    for (auto& t : trials_)
      if (t.status == trial_status::completed && t.score) p.push_back(&t);
    sort_best_first(p, opt_.objective);
    std::vector<trial> r;
    for (std::size_t i = 0; i < p.size() && i < n; ++i) r.push_back(*p[i]);
    return r;
  }
  std::vector<values> best_hyperparameters(std::size_t n = 1) const {
    std::vector<values> r;
    for (auto& t : best_trials(n)) r.push_back(t.hp);
    return r;
  }

  // Keras Tuner's results_summary(num_trials).
  void results_summary(std::ostream& out = std::cout, std::size_t num_trials = 10) const {
    out << "Results summary\n";
    out << "Results in " << project_.string() << "\n";
    out << "Showing " << num_trials << " best trials\n";
    out << opt_.objective.repr() << "\n";
    for (auto& t : best_trials(num_trials)) {
      out << "\n";
      out << "Trial " << t.id << " summary\n";
      out << "Hyperparameters:\n";
      for (auto& [k, v] : t.hp.items()) out << k << ": " << to_string(v) << "\n";
      if (t.score) out << "Score: " << python_repr(*t.score) << "\n";
      if (!t.message.empty()) out << t.message << "\n";
    }
  }

  // Builds what a trial with values v trains: the model of v's architecture (weights drawn from
  // `seed`, dropout and regularization factors set from v) and v's optimizer at v's learning
  // rate, and calls f(model, optimizer, batch_size) (Keras Tuner's hypermodel.build(hp), e.g. to
  // retrain the best values on more data).
  template <class F>
  void build(const values& v, std::uint64_t seed, F&& f) const {
    const std::size_t batch = std::size_t(v.get_or<std::int64_t>("batch_size", 32));
    if (batch == 0) throw std::invalid_argument("tuner: batch_size must be > 0");
    visit_architecture(arch_index(v), [&]<class Net>() {
      auto m = make_model<Net, float>(seed);
      configure_values(m, v);
      visit_optimizer(opt_index(v), [&]<class O>() {
        O opt = v.has("learning_rate") ? O(v.get<double>("learning_rate")) : O{};
        f(m, opt, batch);
      });
    });
  }

  // Calls f(model, trial) with the best trial's model, its checkpoint (best epoch) loaded.
  template <class F>
  void with_best_model(F&& f, std::size_t rank = 0) const {
    const auto best = best_trials(rank + 1);
    if (best.size() <= rank) throw std::runtime_error("tuner: no completed trial with a score yet");
    const trial& t = best[rank];
    visit_architecture(arch_index(t.hp), [&]<class Net>() {
      auto m = make_model<Net, float>(trial_seed(t.id));
      configure_values(m, t.hp);
      ctnn::io::load_weights(m, trial_dir(t.id) / "checkpoint.ctnn");
      f(m, t);
    });
  }
  // The best model when its network is Net (else std::runtime_error naming the best architecture).
  template <class Net>
  model<Net, float> load_best_model() const {
    std::optional<model<Net, float>> r;
    with_best_model([&]<class M>(M& m, const trial& t) {
      if constexpr (std::is_same_v<typename M::network, Net>) r.emplace(std::move(m));
      else throw std::runtime_error("tuner: the best trial " + t.id + " uses architecture '" + arch_names_[arch_index(t.hp)] + "'");
    });
    return std::move(*r);
  }

 private:
  std::filesystem::path trial_dir(const std::string& id) const { return project_ / ("trial_" + id); }
  std::string trial_id(std::size_t i) const {
    std::size_t width = 4;
    if (oracle_->max_trials()) width = std::to_string(*oracle_->max_trials() - 1).size();
    std::string s = std::to_string(i);
    return std::string(s.size() < width ? width - s.size() : 0, '0') + s;
  }
  std::uint64_t trial_seed(const std::string& id) const { return rng::derive(opt_.seed, std::stoull(id)).next(); }

  std::size_t index_in(const values& v, const char* key, const std::vector<std::string>& names) const {
    if (names.size() == 1) return 0;
    const std::string n = v.get<std::string>(key);
    for (std::size_t i = 0; i < names.size(); ++i)
      if (names[i] == n) return i;
    throw std::invalid_argument(std::string("tuner: unknown ") + key + " '" + n + "'");
  }
  std::size_t arch_index(const values& v) const { return index_in(v, "architecture", arch_names_); }
  std::size_t opt_index(const values& v) const { return index_in(v, "optimizer", opt_names_); }

  template <class F>
  static void visit_architecture(std::size_t i, F&& f) {
    std::size_t k = 0;
    (void)((k++ == i ? (f.template operator()<Nets>(), true) : false) || ...);
  }
  template <class F>
  static void visit_optimizer(std::size_t i, F&& f) {
    std::size_t k = 0;
    (void)((k++ == i ? (f.template operator()<Os>(), true) : false) || ...);
  }

  template <class M>
  void configure_values(M& m, const values& v) const {
    if (v.has("dropout")) {
      const double r = v.get<double>("dropout");
      if (set_dropout_rate(m, r) == 0)
        throw std::invalid_argument("tuner: 'dropout' is set but network " + M::architecture() + " has no dynamic_dropout");
    }
    if (v.has("units")) {
      const std::int64_t n = v.get<std::int64_t>("units");
      if (n < 1) throw std::invalid_argument("tuner: 'units' is " + std::to_string(n) + ", not a width >= 1");
      if (set_units(m, std::size_t(n)) == 0)
        throw std::invalid_argument("tuner: 'units' is set but network " + M::architecture() + " has no dense<up_to<Max>> layer");
    }
    for (const char* k : {"l2", "l1"})
      if (v.has(k) && set_regularization(m, k, v.get<double>(k)) == 0)
        throw std::invalid_argument(std::string("tuner: '") + k + "' is set but network " + M::architecture() +
                                    " has no dynamic_" + k + " regularizer");
  }

  // Trains trial t; `record`: write its trial.json and the oracle's state and log it (rank 0).
  template <class Loss, class Train, class Val, class... Extras>
  void run_trial(trial& t, const Loss& loss, const Train& train, const Val& validation, std::size_t epochs,
                 const Extras&... extras) {
    train_trial(t, true, loss, train, validation, epochs, extras...);
  }
  template <class Loss, class Train, class Val, class... Extras>
  void train_trial(trial& t, bool record, const Loss& loss, const Train& train, const Val& validation, std::size_t epochs,
                   const Extras&... extras) {
    if (record) show_trial_begin(t);  // a worker's trial is shown by rank 0 (search_rounds, search_dynamic)
    ++run_count_;
    t.status = trial_status::running;
    t.score.reset();
    t.best_step = 0;
    t.metrics.clear();
    t.message.clear();
    const auto start = std::chrono::steady_clock::now();
    const std::filesystem::path dir = trial_dir(t.id);
    ctnn::io::create_directories(dir, "tuner");
    ctnn::io::remove_file(dir / "checkpoint.ctnn", "tuner");
    try {
      std::size_t initial = 0, until = epochs;
      if (t.hp.has("tuner/epochs")) {
        until = std::size_t(t.hp.get<std::int64_t>("tuner/epochs"));
        initial = std::size_t(t.hp.get<std::int64_t>("tuner/initial_epoch"));
        if (initial >= until)  // checked on reload too; a wrapped until - initial would never end
          throw std::invalid_argument("tuner: tuner/initial_epoch " + std::to_string(initial) + " is not below tuner/epochs " +
                                      std::to_string(until));
      }
      const std::size_t batch = std::size_t(t.hp.get_or<std::int64_t>("batch_size", 32));
      build(t.hp, trial_seed(t.id), [&](auto& m, auto& opt, std::size_t) {
        if (t.hp.has("tuner/trial_id"))
          ctnn::io::load_weights(m, trial_dir(t.hp.get<std::string>("tuner/trial_id")) / "checkpoint.ctnn");
        detail::trial_recorder rec{&t, &opt_.objective, dir / "checkpoint.ctnn", record ? dir / "trial.json" : std::filesystem::path{},
                                   initial};
        auto copies = std::make_tuple(extras...);
        const auto tb = train.batch(batch);
        std::apply(
            [&](auto&... x) {
              ctnn::fit(m, loss, opt, tb, ctnn::epochs{until - initial}, ctnn::validation_data(validation), x..., rec);
            },
            copies);
      });
      t.status = t.score ? trial_status::completed : trial_status::failed;
      if (!t.score) t.message = "the objective '" + opt_.objective.name + "' was never finite";
    } catch (const std::exception& e) {
      t.status = trial_status::failed;
      t.message = e.what();
    }
    t.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (record) record_trial(t);
  }

  // Writes a finished trial's file and the oracle's state, and logs its line.
  void record_trial(const trial& t) const {
    detail::write_json(trial_dir(t.id) / "trial.json", t.to_json());
    save_oracle();
    if (opt_.log) {
      *opt_.log << "Trial " << t.id << " " << status_name(t.status);
      if (t.score) *opt_.log << " - " << opt_.objective.name << ": " << python_repr(*t.score);
      if (!t.message.empty()) *opt_.log << " - " << t.message;
      char buf[32];
      std::snprintf(buf, sizeof buf, " - %.1fs", t.seconds);
      *opt_.log << buf << " - ";
      bool first = true;
      for (auto& [k, v] : t.hp.items()) {
        *opt_.log << (first ? "" : ", ") << k << "=" << to_string(v);
        first = false;
      }
      *opt_.log << std::endl;
    }
    show_trial_end(t);
  }

  // Keras Tuner's Display (keras_tuner/engine/tuner_utils.py): numbers as "{:.5g}", other values
  // cut to 18 characters ("..." ending), "?" before any trial completed, "None" for a value the
  // best trial does not have; times as "%Hh %Mm %Ss".
  static std::string display_value(const std::optional<value>& v) {
    if (!v) return "None";
    char buf[64];
    if (auto* i = std::get_if<std::int64_t>(&*v)) {
      std::snprintf(buf, sizeof buf, "%.5g", double(*i));
      return buf;
    }
    if (auto* d = std::get_if<double>(&*v)) {
      std::snprintf(buf, sizeof buf, "%.5g", *d);
      return buf;
    }
    std::string s = to_string(*v);
    if (s.size() > 18) s = s.substr(0, 15) + "...";
    return s;
  }
  static std::string display_time(double seconds) {
    const auto s = static_cast<long long>(seconds);
    char buf[32];
    std::snprintf(buf, sizeof buf, "%02lldh %02lldm %02llds", (s / 3600) % 24, (s / 60) % 60, s % 60);
    return buf;
  }
  static std::string display_row(const std::string& a, const std::string& b, const std::string& c) {
    auto pad = [](std::string x) { return x.size() < 18 ? x + std::string(18 - x.size(), ' ') : x; };
    return pad(a) + "|" + pad(b) + "|" + c + "\n";
  }
  static std::size_t trial_number(const trial& t) { return std::size_t(std::stoull(t.id)) + 1; }
  void show_trial_begin(const trial& t) const {
    if (!opt_.progress || workers_.rank != 0) return;
    std::string text = "\nSearch: Running Trial #" + std::to_string(trial_number(t)) + "\n\n";
    const auto best = best_trials(1);
    if (t.hp.items().empty()) text += "default configuration\n";
    else text += display_row("Value", "Best Value So Far", "Hyperparameter");
    for (auto& [k, v] : t.hp.items()) {
      const std::string b = best.empty() ? "?" : display_value(best[0].hp.has(k) ? std::optional<value>(best[0].hp.at(k)) : std::nullopt);
      text += display_row(display_value(v), b, k);
    }
    *opt_.progress << text << std::endl;
  }
  void show_trial_end(const trial& t) const {
    if (!opt_.progress || workers_.rank != 0) return;
    const bool failed = t.status == trial_status::failed;
    std::string text = "Trial " + std::to_string(trial_number(t)) + (failed ? " Failed [" : " Complete [") +
                       display_time(t.seconds) + "]\n";
    if (t.score) text += opt_.objective.name + ": " + python_repr(*t.score) + "\n";
    if (failed && !t.message.empty()) text += t.message + "\n";
    const auto best = best_trials(1);
    text += "\nBest " + opt_.objective.name + " So Far: " + (best.empty() ? std::string("None") : python_repr(*best[0].score)) +
            "\nTotal elapsed time: " +
            display_time(std::chrono::duration<double>(std::chrono::steady_clock::now() - search_start_).count());
    *opt_.progress << text << std::endl;
  }

  // The oracle's next trial, RUNNING, its file and the oracle's state written; nullptr when the
  // oracle has nothing more to propose.
  trial* new_trial() {
    const std::string id = trial_id(trials_.size());
    std::optional<values> v = oracle_->populate(id, trials_);
    if (!v) return nullptr;
    trial t;
    t.id = id;
    t.hp = std::move(*v);
    trials_.push_back(std::move(t));
    ctnn::io::create_directories(trial_dir(id), "tuner");
    detail::write_json(trial_dir(id) / "trial.json", trials_.back().to_json());
    save_oracle();
    return &trials_.back();
  }

  // `text` from process `root` to every process (its length first).
  std::string share(std::string text, int root) const {
    std::uint64_t n = text.size();
    workers_.broadcast(std::span<unsigned char>(reinterpret_cast<unsigned char*>(&n), sizeof n), root);
    text.resize(std::size_t(n));
    workers_.broadcast(std::span<unsigned char>(reinterpret_cast<unsigned char*>(text.data()), text.size()), root);
    return text;
  }
  // Rank 0's message to every process: `make()`'s JSON, or {"error": what} when make throws
  // there (rethrown on rank 0; the others throw "tuner: rank 0 failed: ...").
  template <class Make>
  nlohmann::json from_rank0(Make&& make) const {
    std::string msg;
    std::exception_ptr err;
    if (workers_.rank == 0) {
      try {
        msg = make().dump();
      } catch (const std::exception& e) {
        err = std::current_exception();
        msg = nlohmann::json{{"error", e.what()}}.dump();
      }
    }
    msg = share(std::move(msg), 0);
    if (err) std::rethrow_exception(err);
    nlohmann::json j = nlohmann::json::parse(msg);
    if (j.contains("error")) throw std::runtime_error("tuner: rank 0 failed: " + j["error"].get<std::string>());
    return j;
  }
  // Runs f on rank 0, then hands its oracle state and trials to the other processes.
  template <class F>
  void from_chief(F&& f) {
    if (workers_.size == 1) return f();
    const nlohmann::json j = from_rank0([&] {
      f();
      nlohmann::json ts = nlohmann::json::array();
      for (auto& t : trials_) ts.push_back(t.to_json());
      return nlohmann::json{{"state", oracle_->state()}, {"trials", ts}};
    });
    if (workers_.rank == 0) return;
    oracle_->set_state(j.at("state"));
    trials_.clear();
    const auto order = oracle_->space().names();
    for (auto& t : j.at("trials")) trials_.push_back(trial::from_json(t, order));
  }
  trial& trial_named(const std::string& id) {
    for (auto& t : trials_)
      if (t.id == id) return t;
    throw std::logic_error("tuner: no trial " + id);
  }

  // A search on several processes, a trial to each process whenever it is free (Keras Tuner's
  // chief/worker mode, with the chief training too). Every other process sends rank 0
  // {"result": its last trial or null} and gets {"trial": ...}, {"done": true} or {"error": what}.
  // Rank 0 first gives each process a trial, then trains its own, answering between batches;
  // it hands out the trials left RUNNING by an earlier run first, then the oracle's new ones
  // while oracle::ready allows (a process asking while the oracle waits on running trials waits
  // too), and records each result. An error on rank 0 (recording, proposing) is every other
  // process's "tuner: rank 0 failed: ..." at its next request.
  template <class Loss, class Train, class Val, class... Extras>
  void search_dynamic(const Loss& loss, const Train& train, const Val& validation, std::size_t epochs,
                      const Extras&... extras) {
    const auto order = oracle_->space().names();
    if (workers_.rank != 0) {
      nlohmann::json last = nullptr;
      for (;;) {
        workers_.send(nlohmann::json{{"result", last}}.dump(), 0);
        const auto m = workers_.receive(true);
        const nlohmann::json j = nlohmann::json::parse(m->bytes.begin(), m->bytes.end());
        if (j.contains("error")) throw std::runtime_error("tuner: rank 0 failed: " + j["error"].get<std::string>());
        if (j.contains("done")) break;
        trial t = trial::from_json(j.at("trial"), order);
        try {
          train_trial(t, false, loss, train, validation, epochs, extras...);
        } catch (const std::exception& e) {  // outside fit (the trial's directory): the trial fails, not the search
          t.status = trial_status::failed;
          t.message = e.what();
        }
        last = t.to_json();
      }
      from_chief([] {});
      return;
    }
    std::deque<int> waiting;         // processes that asked for a trial
    std::set<std::string> assigned;  // trials being trained now, here or elsewhere
    int active = workers_.size - 1;  // processes not yet told that the search is over
    bool over = false;
    std::exception_ptr error;
    auto failed = [&] { return error != nullptr; };
    // The next trial to train, marked assigned; nullopt when the search is over or the oracle
    // waits on running trials (`over` tells which).
    auto next = [&]() -> std::optional<trial> {
      for (auto& t : trials_)
        if (t.status == trial_status::running && !assigned.count(t.id)) {
          assigned.insert(t.id);
          return t;
        }
      if (over) return std::nullopt;
      if (oracle_->max_trials() && trials_.size() >= *oracle_->max_trials()) {
        over = true;
        return std::nullopt;
      }
      if (!assigned.empty() && !oracle_->ready(trials_)) return std::nullopt;
      const trial* t = new_trial();
      if (!t) {
        over = true;
        return std::nullopt;
      }
      assigned.insert(t->id);
      return *t;
    };
    auto send = [&](int to, const nlohmann::json& j) { workers_.send(j.dump(), to); };
    auto record = [&](const nlohmann::json& result) {
      if (failed()) return;
      try {
        trial t = trial::from_json(result, order);
        trial& kept = trial_named(t.id);
        t.hp = std::move(kept.hp);  // its values in the oracle's order (JSON sorts the tuner/ keys)
        kept = std::move(t);
        assigned.erase(kept.id);
        record_trial(kept);
      } catch (const std::exception&) {
        error = std::current_exception();
      }
    };
    auto dispatch = [&] {
      while (!waiting.empty()) {
        const int to = waiting.front();
        std::optional<trial> t;
        if (!failed()) try {
            t = next();
          } catch (const std::exception&) {
            error = std::current_exception();
          }
        if (failed()) {
          try {
            std::rethrow_exception(error);
          } catch (const std::exception& e) {
            send(to, {{"error", e.what()}});
          }
        } else if (t) {
          show_trial_begin(*t);
          send(to, {{"trial", t->to_json()}});
        } else if (over) {
          send(to, {{"done", true}});
        } else {
          break;  // the oracle waits on running trials
        }
        if (!t) --active;
        waiting.pop_front();
      }
    };
    auto take = [&](const distributed::message& m) {
      const nlohmann::json j = nlohmann::json::parse(m.bytes.begin(), m.bytes.end());
      if (!j.at("result").is_null()) record(j.at("result"));
      waiting.push_back(m.source);
    };
    // Every message that has arrived (and, when `wait`, at least one), then the answers.
    auto poll = [&](bool wait) {
      for (auto m = workers_.receive(wait); m; m = workers_.receive(false)) take(*m);
      dispatch();
    };
    const std::function<void()> serve = [&] { poll(false); };
    for (int k = 1; k < workers_.size; ++k) take(*workers_.receive(true));
    dispatch();
    for (bool own = true;;) {
      if (own && !failed()) {
        std::optional<trial> t;
        try {
          t = next();
        } catch (const std::exception&) {
          error = std::current_exception();
        }
        if (t) {
          show_trial_begin(*t);
          try {
            train_trial(*t, false, loss, train, validation, epochs, extras..., detail::serve_between_batches{&serve});
          } catch (const std::exception& e) {
            t->status = trial_status::failed;
            t->message = e.what();
          }
          record(t->to_json());
          poll(false);  // the processes that asked meanwhile get the next trials before rank 0 does
          continue;
        }
        if (over || failed()) own = false;
      } else {
        own = false;
      }
      if (active == 0) {
        if (!own) break;
        throw std::logic_error("tuner: the oracle waits on running trials but none runs");
      }
      dispatch();  // an error or the search's end reaches the processes already waiting
      if (active > 0) poll(true);
    }
    if (failed()) std::rethrow_exception(error);
    from_chief([&] { save_oracle(); });
  }

  // A search on several processes, in rounds: rank 0 fills a round with the trials left RUNNING
  // (a process stopped while training them), then new ones while the oracle is ready, one per
  // process; every process trains its trial; rank 0 records each result. An error on rank 0
  // reaches the others with the next round.
  template <class Loss, class Train, class Val, class... Extras>
  void search_rounds(const Loss& loss, const Train& train, const Val& validation, std::size_t epochs,
                     const Extras&... extras) {
    const auto n = std::size_t(workers_.size), me = std::size_t(workers_.rank);
    const auto order = oracle_->space().names();
    bool over = false;
    std::exception_ptr pending;  // rank 0: recording a result failed
    for (;;) {
      const nlohmann::json j = from_rank0([&] {
        if (pending) std::rethrow_exception(pending);
        nlohmann::json round = nlohmann::json::array();
        for (auto& t : trials_)
          if (t.status == trial_status::running && round.size() < n) round.push_back(t.to_json());
        while (!over && round.size() < n) {
          if ((oracle_->max_trials() && trials_.size() >= *oracle_->max_trials())) over = true;
          if (over || !oracle_->ready(trials_)) break;
          const trial* t = new_trial();
          if (!t) {
            over = true;
            break;
          }
          round.push_back(t->to_json());
        }
        for (auto& r : round) show_trial_begin(trial::from_json(r, order));
        return nlohmann::json{{"round", round}};
      });
      const auto& round = j.at("round");
      if (round.empty()) break;
      std::string mine;
      if (me < round.size()) {
        trial t = trial::from_json(round[me], order);
        try {
          train_trial(t, false, loss, train, validation, epochs, extras...);
        } catch (const std::exception& e) {  // outside fit (the trial's directory): the trial fails, not the search
          t.status = trial_status::failed;
          t.message = e.what();
        }
        mine = t.to_json().dump();
      }
      for (std::size_t r = 0; r < round.size(); ++r) {
        const std::string result = r == 0 ? mine : share(me == r ? mine : std::string{}, int(r));
        if (me != 0 || pending) continue;
        try {
          trial t = trial::from_json(nlohmann::json::parse(result), order);
          trial& kept = trial_named(t.id);
          t.hp = std::move(kept.hp);  // its values in the oracle's order (JSON sorts the tuner/ keys)
          kept = std::move(t);
          record_trial(kept);
        } catch (const std::exception&) {
          pending = std::current_exception();
        }
      }
    }
    from_chief([&] { save_oracle(); });
  }

  void save_oracle() const {
    nlohmann::json ids = nlohmann::json::array();
    for (auto& t : trials_) ids.push_back(t.id);
    detail::write_json(project_ / "oracle.json", {{"oracle", oracle_->kind()},
                                                  {"objective", {{"name", opt_.objective.name},
                                                                 {"direction", opt_.objective.maximize ? "max" : "min"}}},
                                                  {"space", oracle_->space().to_json()},
                                                  {"state", oracle_->state()},
                                                  {"trials", ids}});
  }

  // Reads oracle.json and the trials it lists, validating all of it (state.hpp) before the search
  // resumes: io_error naming the file and the key of the first thing wrong.
  void reload() {
    namespace st = state;
    const auto path = project_ / "oracle.json";
    const nlohmann::json j = detail::read_json(path);
    std::vector<std::string> ids;
    detail::as_io_error(path, [&] {
      auto mismatch = [&](const std::string& what) {
        throw state_error("the project was made with another " + what + " (give another project_name or overwrite = true)");
      };
      if (!j.is_object()) throw state_error("expected a JSON object, got " + st::describe(j));
      const std::string& kind = st::string(st::at(j, "", "oracle"), "oracle");
      if (kind != oracle_->kind()) mismatch("oracle (" + kind + ")");
      if (st::at(j, "", "space") != oracle_->space().to_json()) mismatch("search space");
      const auto& o = st::at(j, "", "objective");
      const std::string& name = st::string(st::at(o, "objective", "name"), "objective.name");
      const std::string& direction = st::string(st::at(o, "objective", "direction"), "objective.direction");
      if (direction != "max" && direction != "min")
        st::fail("objective.direction", st::describe(o.at("direction")) + " is not \"max\" or \"min\"");
      if (name != opt_.objective.name || (direction == "max") != opt_.objective.maximize)
        mismatch("objective (" + tuning::objective{name, direction == "max"}.repr() + ")");
      oracle_->set_state(st::at(j, "", "state"));
      const auto& listed = st::array(st::at(j, "", "trials"), "trials");
      for (std::size_t i = 0; i < listed.size(); ++i) {
        const std::string w = st::index("trials", i);
        const std::string& id = st::trial_id(listed[i], w);
        const std::size_t digits = id.find_first_not_of('0');
        if ((digits == std::string::npos ? std::string("0") : id.substr(digits)) != std::to_string(i))
          st::fail(w, "trial " + id + " is listed as trial number " + std::to_string(i) + " (ids count the trials from 0)");
        ids.push_back(id);
      }
    });
    const auto order = oracle_->space().names();
    for (std::size_t i = 0; i < ids.size(); ++i) {
      const auto p = trial_dir(ids[i]) / "trial.json";
      const nlohmann::json tj = detail::read_json(p);
      detail::as_io_error(p, [&] {
        trial t = trial::from_json(tj, order);
        if (t.id != ids[i]) st::fail("trial_id", "\"" + t.id + "\", but oracle.json lists this file as trial " + ids[i]);
        oracle_->check_values(t.hp, "hyperparameters");
        if (t.hp.has("tuner/trial_id")) {  // the trial whose checkpoint this one continues
          const auto* from = std::get_if<std::string>(&t.hp.at("tuner/trial_id"));
          if (!from || std::find(ids.begin(), ids.begin() + std::ptrdiff_t(i), *from) == ids.begin() + std::ptrdiff_t(i))
            st::fail("hyperparameters.tuner/trial_id", to_string(t.hp.at("tuner/trial_id")) + " is not a trial before this one");
        }
        trials_.push_back(std::move(t));
      });
    }
  }

  std::unique_ptr<tuning::oracle> oracle_;
  tuner_options opt_;
  std::vector<std::string> arch_names_, opt_names_;
  workers workers_;
  std::filesystem::path project_;
  std::vector<trial> trials_;
  std::size_t run_count_ = 0;
  std::chrono::steady_clock::time_point search_start_ = std::chrono::steady_clock::now();
};

}  // namespace ctnn::tuning
