// Three steps of each optimizer on one parameter (w0 = 1), checked against
// values computed by hand (Python, double precision) from Keras 3's published
// update rules; the expected numbers are written out, not recomputed here.
// Covers sgd.hpp, adam.hpp (and adam::prepare), rmsprop.hpp, adagrad.hpp.
#include <doctest/doctest.h>

#include <ctnn/core/rng.hpp>
#include <ctnn/backends/cpu/ops.hpp>
#include <ctnn/backends/cpu/thread_pool.hpp>
#include <ctnn/optimizers/adagrad.hpp>
#include <ctnn/optimizers/adam.hpp>
#include <ctnn/optimizers/rmsprop.hpp>
#include <ctnn/optimizers/sgd.hpp>
#include <ctnn/schedules/exponential_decay.hpp>

#include <algorithm>
#include <array>
#include <cstring>
#include <limits>
#include <stdexcept>
#include <vector>

using namespace ctnn;

// One update at update count `it` with the schedule's rate, as the training step calls it.
template <class O, class T>
void apply(const O& opt, T* w, const T* g, T* slots, std::size_t n, std::int64_t it) {
  opt.template update<cpu<>>(update_args<T>{w, g, slots, n, it, opt.learning_rate(it)});
}

template <class O>
std::vector<double> run(O opt, std::array<double, 3> gs = {0.5, -0.3, 0.2}) {
  double w = 1.0;
  std::vector<double> slots(opt.slots_per_parameter(), 0.0), out;
  opt.init_slots(slots.data(), 1);
  std::int64_t it = 0;
  for (double g : gs) {
    apply(opt, &w, &g, slots.data(), 1, it++);
    out.push_back(w);
  }
  return out;
}

void expect(const std::vector<double>& got, std::array<double, 3> want) {
  for (std::size_t i = 0; i < 3; ++i) CHECK(got[i] == doctest::Approx(want[i]).epsilon(1e-10));
}

TEST_CASE("sgd: plain, momentum, nesterov") {
  expect(run(sgd{0.1}), {0.95, 0.98, 0.96});
  expect(run(sgd{0.1, 0.9}), {0.95, 0.935, 0.9015});
  expect(run(sgd{0.1, 0.9, true}), {0.905, 0.9215, 0.87135});
  CHECK(sgd<>{}.learning_rate(0) == 0.01);
}

TEST_CASE("adam: defaults and amsgrad") {
  expect(run(adam{}), {0.999000006325, 0.998808509328, 0.998461083421});
  expect(run(adam{0.01}, {2.0, 0.01, 0.01}), {0.990000015811, 0.983262302775, 0.978022124504});
  expect(run(adam{0.01, 0.9, 0.999, 1e-7, true}, {2.0, 0.01, 0.01}), {0.990000015811, 0.983265588206, 0.978030519036});
  const adam<> a;
  CHECK(a.epsilon == 1e-7);
  CHECK(a.beta_1 == 0.9);
  CHECK(a.beta_2 == 0.999);
  CHECK(a.learning_rate(0) == 0.001);
}

TEST_CASE("rmsprop: plain and centered with momentum") {
  expect(run(rmsprop{}), {0.996837728664, 0.998528034491, 0.997416066766});
  expect(run(rmsprop{0.01, 0.8, 0.5, 1e-7, true}), {0.97500003125, 0.975000036024, 0.96616673136});
}

TEST_CASE("adagrad: the initial accumulator is 0.1") {
  expect(run(adagrad{}), {0.999154845866, 0.999607112831, 0.999318437727});
  expect(run(adagrad{0.1, 0.5}), {0.94226497693, 0.974997658517, 0.953677588093});
}

TEST_CASE("optimizers take the learning rate from their schedule at the update count") {
  sgd opt{exponential_decay{0.1, 1, 0.5, true}};
  double w = 0, g = 1;
  std::vector<double> slot(1);
  for (int i = 0; i < 3; ++i) apply(opt, &w, &g, slot.data(), 1, i);
  CHECK(w == doctest::Approx(-(0.1 + 0.05 + 0.025)));
}

TEST_CASE("optimizers reject invalid hyperparameters, naming them") {
  CHECK_THROWS_WITH_AS(adam(0.001, 1.0), "adam: beta_1 must be in [0, 1), got 1", std::invalid_argument);
  CHECK_THROWS_WITH_AS(adam(0.001, 0.9, 0.999, -1.0), "adam: epsilon must be finite and > 0, got -1",
                       std::invalid_argument);
  CHECK_THROWS_WITH_AS(sgd(0.1, 1.5), "sgd: momentum must be in [0, 1], got 1.5", std::invalid_argument);
  CHECK_THROWS_AS(rmsprop(0.001, -0.1), std::invalid_argument);
  CHECK_THROWS_AS(adagrad(0.001, -1.0), std::invalid_argument);
  CHECK_THROWS_WITH_AS(sgd(-0.1), "constant_schedule: the learning rate must be finite and > 0, got -0.1", std::invalid_argument);
}

namespace {
// One update of n parameters by opt on `threads` threads; returns w and the slots.
template <class Opt>
std::vector<float> update_on(const Opt& opt, std::size_t n, std::size_t threads) {
  const std::size_t before = kernels::cpu::threads();
  kernels::cpu::set_threads(threads);
  rng gen(n);
  std::vector<float> w(n), g(n), slots(3 * n, 0.0f);
  for (auto& e : w) e = float(gen.uniform(-1, 1));
  for (auto& e : g) e = float(gen.uniform(-1, 1));
  opt.template init_slots<float>(slots.data(), n);
  for (std::int64_t it = 0; it < 3; ++it) apply(opt, w.data(), g.data(), slots.data(), n, it);
  kernels::cpu::set_threads(before);
  w.insert(w.end(), slots.begin(), slots.end());
  return w;
}
template <class Opt>
void same_bits_on_1_2_3_threads(const Opt& opt) {
  const std::size_t n = 3 * (std::size_t(1) << 15) + 77;  // four chunks of kernels::cpu::for_chunks, a scalar tail
  const auto one = update_on(opt, n, 1);
  CHECK(update_on(opt, n, 2) == one);
  CHECK(update_on(opt, n, 3) == one);
}
}  // namespace

TEST_CASE("optimizer updates of large networks run on the thread pool with the same bits for 1, 2, 3 threads") {
  same_bits_on_1_2_3_threads(adam{1e-3});
  same_bits_on_1_2_3_threads(adam{1e-3, 0.9, 0.999, 1e-7, true});
  same_bits_on_1_2_3_threads(rmsprop{1e-3, 0.9, 0.5, 1e-7, true});
  same_bits_on_1_2_3_threads(sgd{0.01, 0.9, true});
  same_bits_on_1_2_3_threads(sgd{0.01});
  same_bits_on_1_2_3_threads(adagrad{0.01});
}

// adam::prepare: the coefficients of one update count and rate, run on any part of the region (the
// training step's per-layer update prepares them once a step): the bits of update on the same region,
// whole or in parts (a part's vector tail is where the partition puts it: on AVX2 its scalar lanes may
// round m and v differently from a vector's, so parts are compared with update over the same parts).
TEST_CASE("adam: prepare(iteration, rate).run has the bits of update, over the whole and over parts") {
  for (const bool ams : {false, true}) {
    const adam<> opt{1e-3, 0.9, 0.999, 1e-7, ams};
    const std::size_t n = 1000, S = opt.slots_per_parameter();
    rng r(7);
    std::vector<float> w(n), g(n), slots(S * n);
    for (auto& x : w) x = float(r.uniform(-1, 1));
    for (auto& x : slots) x = float(r.uniform()) * 0.01f;
    std::vector<float> w2 = w, slots2 = slots, w3 = w, slots3 = slots, w4 = w, slots4 = slots;
    for (std::int64_t it : {0, 1, 7, 1000}) {
      for (auto& x : g) x = float(r.uniform(-1, 1));
      const double lr = opt.learning_rate(it);
      const auto p = opt.prepare<float>(it, lr);
      // the whole region: update against run
      CHECK(opt.update<cpu<>>(update_args<float>{w.data(), g.data(), slots.data(), n, it, lr}));
      CHECK(p.run<cpu<>>(update_args<float>{w2.data(), g.data(), slots2.data(), n, it, lr}));
      // parts of 333, 333, 333, 1 (vector tails included), slots strided by the whole's n
      for (std::size_t lo = 0; lo < n; lo += 333) {
        const std::size_t hi = std::min(n, lo + 333);
        CHECK(opt.update<cpu<>>(update_args<float>{w3.data() + lo, g.data() + lo, slots3.data() + lo, hi - lo, it, lr, n}));
        CHECK(p.run<cpu<>>(update_args<float>{w4.data() + lo, g.data() + lo, slots4.data() + lo, hi - lo, it, lr, n}));
      }
      CHECK(std::memcmp(w.data(), w2.data(), n * sizeof(float)) == 0);
      CHECK(std::memcmp(slots.data(), slots2.data(), S * n * sizeof(float)) == 0);
      CHECK(std::memcmp(w3.data(), w4.data(), n * sizeof(float)) == 0);
      CHECK(std::memcmp(slots3.data(), slots4.data(), S * n * sizeof(float)) == 0);
      // the parts' slots sit where the whole's do: the same values to float rounding
      for (std::size_t i = 0; i < S * n; ++i) REQUIRE(slots3[i] == doctest::Approx(slots[i]).epsilon(1e-5));
      for (std::size_t i = 0; i < n; ++i) REQUIRE(w3[i] == doctest::Approx(w[i]).epsilon(1e-5));
    }
    // a non-finite new weight is reported by run as by update
    std::vector<float> inf_g(n, std::numeric_limits<float>::infinity());
    const auto p = opt.prepare<float>(2, 1e-3);
    CHECK_FALSE(p.run<cpu<>>(update_args<float>{w2.data(), inf_g.data(), slots2.data(), n, 2, 1e-3}));
  }
}
