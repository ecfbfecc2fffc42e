// The search space (Keras Tuner's sampling rules), Hyperband's bracket schedule
// and the Gaussian process of Bayesian optimisation: no model is trained here.
#include <doctest/doctest.h>

#include <cmath>
#include <string>
#include <vector>

#include <ctnn/tuning/bayesian.hpp>
#include <ctnn/tuning/gaussian_process.hpp>
#include <ctnn/tuning/hyperband.hpp>
#include <ctnn/tuning/hyperparameters.hpp>
#include <ctnn/tuning/oracle.hpp>

using namespace ctnn::tuning;

TEST_CASE("hyperparameters: integer with a step maps probabilities to min + floor(p * n) * step") {
  search_space s;
  auto& h = s.integer("units", 32, 512, 32);  // 16 values: 32, 64, ..., 512
  CHECK(h.count() == 16);
  CHECK(std::get<std::int64_t>(h.from_prob(0.0)) == 32);
  CHECK(std::get<std::int64_t>(h.from_prob(0.0624)) == 32);
  CHECK(std::get<std::int64_t>(h.from_prob(0.0626)) == 64);
  CHECK(std::get<std::int64_t>(h.from_prob(0.999)) == 512);
  CHECK(std::get<std::int64_t>(h.from_prob(1.0)) == 512);
  CHECK(h.to_prob(std::int64_t(64)) == doctest::Approx(1.5 / 16));
  CHECK(std::get<std::int64_t>(h.default_value()) == 32);
  // Log sampling with a step multiplies: 1, 2, 4, 8, 16.
  auto& l = s.integer("filters", 1, 16, 2, sampling::log);
  CHECK(l.count() == 5);
  CHECK(std::get<std::int64_t>(l.from_prob(0.45)) == 4);
}

TEST_CASE("hyperparameters: real, linear and log, continuous and stepped") {
  search_space s;
  auto& lin = s.real("dropout", 0.0, 0.5);
  CHECK(std::get<double>(lin.from_prob(0.5)) == 0.25);
  auto& lg = s.real("learning_rate", 1e-4, 1e-2, 0, sampling::log);
  CHECK(std::get<double>(lg.from_prob(0.5)) == doctest::Approx(1e-3).epsilon(1e-12));
  CHECK(lg.to_prob(1e-3) == doctest::Approx(0.5));
  auto& st = s.real("momentum", 0.0, 0.9, 0.3);  // 0, 0.3, 0.6, 0.9 (0.9 // 0.3 is 3 in Python)
  CHECK(st.count() == 4);
  CHECK(std::get<double>(st.from_prob(0.6)) == doctest::Approx(0.6));
  // Keras Tuner counts with Python's 0.5 // 0.1, which is 4: the values are 0, 0.1, ..., 0.4.
  auto& dr = s.real("rate", 0.0, 0.5, 0.1);
  CHECK(dr.count() == 5);
  CHECK(std::get<double>(dr.from_prob(0.99)) == 0.4);
  CHECK(python_floordiv(0.5, 0.25) == 2);
}

TEST_CASE("hyperparameters: choice, boolean and a conditional value") {
  search_space s;
  s.choice("optimizer", {std::string("adam"), std::string("sgd")});
  s.boolean("use_dropout");
  s.real("dropout", 0.1, 0.5).when("use_dropout", {true});
  s.real("momentum", 0.0, 0.9).when("optimizer", {std::string("sgd")});
  CHECK(std::get<bool>(s["use_dropout"].from_prob(0.49)) == false);
  CHECK(std::get<bool>(s["use_dropout"].from_prob(0.5)) == true);
  CHECK(s["optimizer"].to_prob(std::string("sgd")) == 0.75);
  // Probabilities in order: optimizer, use_dropout, dropout, momentum.
  std::vector<double> p{0.9, 0.2, 0.5, 0.5};
  std::size_t i = 0;
  values v = s.sample([&] { return p[i++]; });
  CHECK(v.get<std::string>("optimizer") == "sgd");
  CHECK(v.get<bool>("use_dropout") == false);
  CHECK_FALSE(v.has("dropout"));  // inactive: no value
  CHECK(v.has("momentum"));
  CHECK_THROWS_WITH(v.get<double>("dropout"), doctest::Contains("no value 'dropout'"));
  values d = s.defaults();
  CHECK(d.get<std::string>("optimizer") == "adam");
  CHECK_FALSE(d.has("momentum"));
}

TEST_CASE("hyperparameters: invalid definitions are refused, naming the hyperparameter") {
  search_space s;
  CHECK_THROWS_WITH(s.integer("u", 5, 1), doctest::Contains("integer 'u': min 5 > max 1"));
  CHECK_THROWS_WITH(s.real("lr", 0.0, 1.0, 0, sampling::log), doctest::Contains("real 'lr': log sampling needs min > 0"));
  CHECK_THROWS_WITH(s.choice("c", {}), doctest::Contains("choice 'c': no values"));
  CHECK_THROWS_WITH(s.choice("c", {std::int64_t(1), std::string("a")}), doctest::Contains("different types"));
  s.boolean("b");
  CHECK_THROWS_WITH(s.boolean("b"), doctest::Contains("'b' is defined twice"));
  s.real("x", 0.0, 1.0).when("later", {true});
  CHECK_THROWS_WITH(s.check(), doctest::Contains("'x' is conditional on 'later', which is not defined before it"));
}

TEST_CASE("hyperparameters: values print as Python's repr, as Keras Tuner's summaries") {
  CHECK(python_repr(1.0) == "1.0");
  CHECK(python_repr(0.001) == "0.001");
  CHECK(python_repr(0.0001) == "0.0001");
  CHECK(python_repr(1e-05) == "1e-05");
  CHECK(python_repr(0.8923333287239075) == "0.8923333287239075");
  CHECK(python_repr(123.5) == "123.5");
  CHECK(python_repr(1e16) == "1e+16");
  CHECK(to_string(value(true)) == "True");
  CHECK(to_string(value(std::int64_t(64))) == "64");
}

namespace {
// Runs a Hyperband oracle without training: every trial completes at once with score f(values).
template <class F>
std::vector<trial> drive(hyperband& o, F score) {
  std::vector<trial> trials;
  for (int guard = 0; guard < 1000; ++guard) {
    std::string id = std::to_string(trials.size());
    auto v = o.populate(id, trials);
    if (!v) break;
    trial t;
    t.id = id;
    t.hp = *v;
    t.status = trial_status::completed;
    t.score = score(t);
    trials.push_back(t);
  }
  return trials;
}
}  // namespace

TEST_CASE("hyperband: max_epochs 9, factor 3 gives Keras Tuner's brackets, rounds and epochs") {
  // By hand from keras_tuner/tuners/hyperband.py: 3 brackets (9, 3, 1 >= min_epochs 1);
  // bracket0_end_size = ceil(1 + log3(9)) = 3; size(b, r) = ceil(3 / (b + 1) * 3^(b - r)),
  // epochs(b, r) = ceil(9 / 3^(b - r)).
  //   bracket 2: 9 trials x 1 epoch, 3 x 3 (from epoch 1), 1 x 9 (from epoch 3)
  //   bracket 1: ceil(1.5 * 3) = 5 trials x 3 epochs, ceil(1.5) = 2 x 9 (from epoch 3)
  //   bracket 0: 3 trials x 9 epochs
  hyperband o(9, 3);
  search_space s;
  s.real("x", 0.0, 1.0);
  o.configure(s, objective::max("val_accuracy"), 7);
  CHECK(o.num_brackets() == 3);
  const auto trials = drive(o, [](const trial& t) { return t.hp.get<double>("x"); });
  REQUIRE(trials.size() == 23);
  struct row {
    std::int64_t bracket, round, epochs, initial;
  };
  std::vector<row> want;
  for (int i = 0; i < 9; ++i) want.push_back({2, 0, 1, 0});
  for (int i = 0; i < 3; ++i) want.push_back({2, 1, 3, 1});
  want.push_back({2, 2, 9, 3});
  for (int i = 0; i < 5; ++i) want.push_back({1, 0, 3, 0});
  for (int i = 0; i < 2; ++i) want.push_back({1, 1, 9, 3});
  for (int i = 0; i < 3; ++i) want.push_back({0, 0, 9, 0});
  for (std::size_t i = 0; i < trials.size(); ++i) {
    CAPTURE(i);
    const values& v = trials[i].hp;
    CHECK(v.get<std::int64_t>("tuner/bracket") == want[i].bracket);
    CHECK(v.get<std::int64_t>("tuner/round") == want[i].round);
    CHECK(v.get<std::int64_t>("tuner/epochs") == want[i].epochs);
    CHECK(v.get<std::int64_t>("tuner/initial_epoch") == want[i].initial);
    CHECK(v.has("tuner/trial_id") == (want[i].round > 0));
  }
  // Round 1 of bracket 2 continues the three best of its round 0, best first, with their values.
  std::vector<std::size_t> order{0, 1, 2, 3, 4, 5, 6, 7, 8};
  std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
    return *trials[a].score != *trials[b].score ? *trials[a].score > *trials[b].score : a < b;
  });
  for (std::size_t k = 0; k < 3; ++k) {
    CHECK(trials[9 + k].hp.get<std::string>("tuner/trial_id") == trials[order[k]].id);
    CHECK(trials[9 + k].hp.get<double>("x") == trials[order[k]].hp.get<double>("x"));
  }
  // Round 2 continues the best of round 1.
  CHECK(trials[12].hp.get<std::string>("tuner/trial_id") == trials[9].id);
}

TEST_CASE("hyperband: max_epochs 10 (log3(10) not whole) and the state survives a JSON round trip") {
  // 3 brackets (10, 3.3, 1.1); end size ceil(1 + 2.0959) = 4; bracket 2: ceil(4/3 * 9) = 12 x 2 epochs,
  // ceil(4/3 * 3) = 4 x 4, ceil(4/3) = 2 x 10; bracket 1: 6 x 4, 2 x 10; bracket 0: 4 x 10.
  hyperband o(10, 3);
  search_space s;
  s.real("x", 0.0, 1.0);
  o.configure(s, objective::min("val_loss"), 3);
  CHECK(o.size(2, 0) == 12);
  CHECK(o.size(2, 1) == 4);
  CHECK(o.size(2, 2) == 2);
  CHECK(o.size(1, 0) == 6);
  CHECK(o.size(1, 1) == 2);
  CHECK(o.size(0, 0) == 4);
  CHECK(o.epochs(2, 0) == 2);
  CHECK(o.epochs(2, 1) == 4);
  CHECK(o.epochs(2, 2) == 10);
  CHECK(o.epochs(1, 0) == 4);
  CHECK(o.epochs(0, 0) == 10);
  auto score = [](const trial& t) { return t.hp.get<double>("x"); };
  const auto all = drive(o, score);
  CHECK(all.size() == 12 + 4 + 2 + 6 + 2 + 4);

  // Stop after 15 trials, save the state as JSON, restore into a fresh oracle: the rest is the same.
  hyperband a(10, 3), b(10, 3);
  a.configure(s, objective::min("val_loss"), 3);
  b.configure(s, objective::min("val_loss"), 3);
  std::vector<trial> trials;
  for (int i = 0; i < 15; ++i) {
    trial t;
    t.id = std::to_string(i);
    t.hp = *a.populate(t.id, trials);
    t.status = trial_status::completed;
    t.score = score(t);
    trials.push_back(t);
  }
  b.set_state(nlohmann::json::parse(a.state().dump()));
  for (;;) {
    trial t;
    t.id = std::to_string(trials.size());
    auto v = b.populate(t.id, trials);
    if (!v) break;
    t.hp = *v;
    t.status = trial_status::completed;
    t.score = score(t);
    trials.push_back(t);
  }
  REQUIRE(trials.size() == all.size());
  for (std::size_t i = 0; i < all.size(); ++i) CHECK(trials[i].hp == all[i].hp);
  CHECK_THROWS_WITH(hyperband(9, 1), doctest::Contains("factor needs to be an integer larger than 1"));
}

TEST_CASE("gaussian_process: the posterior of a two-point fit matches values computed by hand") {
  // x = {0, 1}, y = {1, 3}: normalized y = {-1, 1} (mean 2, std 1); K = [[1 + a, k(1)], [k(1), 1 + a]],
  // a = 1e-4, k(d) = (1 + sqrt5 d + 5 d^2 / 3) exp(-sqrt5 d). Mean and std at 0.25, 0.5 and 2 from the
  // closed-form 2x2 inverse (computed separately in double precision).
  CHECK(matern52({0.0}, {0.25}) == doctest::Approx(0.950959921678633).epsilon(1e-14));
  gaussian_process gp(1e-4);
  gp.fit({{0.0}, {1.0}}, {1.0, 3.0});
  auto [m1, s1] = gp.predict({0.25});
  CHECK(m1 == doctest::Approx(1.4217418293555162).epsilon(1e-12));
  CHECK(s1 == doctest::Approx(0.22889070680480555).epsilon(1e-10));
  auto [m2, s2] = gp.predict({0.5});
  CHECK(m2 == doctest::Approx(2.0).epsilon(1e-12));
  CHECK(s2 == doctest::Approx(0.31452793064109513).epsilon(1e-10));
  auto [m3, s3] = gp.predict({2.0});
  CHECK(m3 == doctest::Approx(2.809344931119957).epsilon(1e-12));
  CHECK(s3 == doctest::Approx(0.8366658060438363).epsilon(1e-10));
  // At a training point the mean is the target (up to alpha) and the deviation small.
  auto [m0, s0] = gp.predict({0.0});
  CHECK(m0 == doctest::Approx(1.0).epsilon(1e-3));
  CHECK(s0 < 0.02);
}

TEST_CASE("bayesian_optimization: after the random points the GP proposals approach the optimum") {
  // A smooth objective of one log-sampled value, minimized at 1e-3; no training.
  search_space s;
  s.real("learning_rate", 1e-5, 1e-1, 0, sampling::log);
  for (auto acq : {acquisition::upper_confidence_bound, acquisition::expected_improvement}) {
    CAPTURE(int(acq));
    bayesian_optimization o({.max_trials = 12, .num_initial_points = 3, .acquisition = acq});
    o.configure(s, objective::min("val_loss"), 11);
    std::vector<trial> trials;
    auto f = [](double lr) { const double d = std::log10(lr) + 3; return d * d; };
    double best_random = 1e9, best = 1e9;
    for (int i = 0; i < 12; ++i) {
      trial t;
      t.id = std::to_string(i);
      t.hp = *o.populate(t.id, trials);
      t.status = trial_status::completed;
      t.score = f(t.hp.get<double>("learning_rate"));
      if (i < 3) best_random = std::min(best_random, *t.score);
      best = std::min(best, *t.score);
      trials.push_back(t);
    }
    CHECK(best < 0.01);  // within 10^0.1 of the optimum
    CHECK(best <= best_random);
  }
}
