// Sequences end to end (layers/masking.hpp, data/padded_batch.hpp, layers/recurrent.hpp):
// a masked, right-padded network equals the same weights on the unpadded steps; padded_batch
// pads variable-length sequences and refuses one longer than the network's steps; and the
// adding problem over 50 steps (Hochreiter & Schmidhuber's long-memory task) is learned.
#include <doctest/doctest.h>

#include "sanitized.hpp"

#include <ctnn/ctnn.hpp>
#include <ctnn/data/padded_batch.hpp>
#include <ctnn/layers/masking.hpp>
#include <ctnn/layers/time_distributed.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

using namespace ctnn;

namespace {
using padded_net = sequential<input<6, 2>, masking<>, lstm<4>, dense<1>>;
using short_net = sequential<input<4, 2>, lstm<4>, dense<1>>;
}  // namespace

TEST_CASE("masking: a right-padded sequence through masking and lstm equals the unpadded one") {
  auto a = make_model<padded_net>(5);
  auto b = make_model<short_net>(6);
  static_assert(padded_net::parameter_count == short_net::parameter_count);  // the kernels do not depend on the steps
  std::copy(a.parameters().begin(), a.parameters().end(), b.parameters().begin());
  rng g(3);
  std::vector<float> xs(3 * 8), xp(3 * 12, 0.0f);
  for (std::size_t s = 0; s < 3; ++s)
    for (std::size_t i = 0; i < 8; ++i) xp[s * 12 + i] = xs[s * 8 + i] = float(g.uniform(-1, 1));
  const auto ys = b.predict(xs.data(), 3), yp = a.predict(xp.data(), 3);
  for (std::size_t s = 0; s < 3; ++s) CHECK(yp[s] == doctest::Approx(ys[s]).epsilon(1e-5));
  // without the mask the two padded steps change the output (the check above has teeth)
  xp[10] = 0.5f;  // the first padded step of sample 0 no longer all zeros: no longer masked
  CHECK(std::abs(a.predict(xp.data(), 1)[0] - ys[0]) > 1e-4);
}

TEST_CASE("padded_batch: variable-length sequences right-padded to the network's steps, longer ones refused") {
  std::vector<std::vector<float>> xs{{1, 2}, {1, 2, 3, 4, 5, 6}, {7, 8, 9, 10}};
  auto ds = data::padded_batch(data::from_sequences<shape<3, 2>, dense_targets<shape<1>>>(xs, {1, 2, 3}), 2, -1.0f);
  auto c = ds.open(0);
  data::batch_of<shape<3, 2>, dense_targets<shape<1>>, float> b;
  REQUIRE(c.next(b));
  CHECK(b.size == 2);
  CHECK(b.x == std::vector<float>{1, 2, -1, -1, -1, -1, 1, 2, 3, 4, 5, 6});
  CHECK(b.y == std::vector<float>{1, 2});
  REQUIRE(c.next(b));
  CHECK(b.x == std::vector<float>{7, 8, 9, 10, -1, -1});
  CHECK(!c.next(b));

  auto too_long = data::padded_batch(data::from_sequences<shape<3, 2>, dense_targets<shape<1>>>({{1, 2, 3, 4, 5, 6, 7, 8}}, {0}), 4);
  auto t = too_long.open(0);
  try {
    t.next(b);
    FAIL("a sequence of 4 steps passed a network of 3");
  } catch (const std::exception& e) {
    CHECK(std::string(e.what()).find("padded_batch") != std::string::npos);
    CHECK(std::string(e.what()).find("4 steps") != std::string::npos);
    CHECK(std::string(e.what()).find("network's 3 steps") != std::string::npos);
  }
  auto ragged = data::padded_batch(data::from_sequences<shape<3, 2>, dense_targets<shape<1>>>({{1, 2, 3}}, {0}), 4);
  auto u = ragged.open(0);
  CHECK_THROWS_WITH(u.next(b), doctest::Contains("not a whole number of steps"));
}

// The adding problem: 50 steps of (value in [0, 1), marker); the target is the sum of the two
// marked values (one in each half). Predicting the mean (1) gives MSE 1/6; a network that
// remembers the marked values across up to 49 steps gets close to 0 (0.0014 here; 8 epochs: 0.016).
TEST_CASE("the adding problem over 50 steps: gru<16> reaches MSE < 0.01 in 448 steps (14 epochs of 32 batches)") {
  constexpr std::size_t T = 50, N = 1024;
  rng g(7);
  auto make = [&](std::size_t n, std::vector<float>& x, std::vector<float>& y) {
    x.assign(n * T * 2, 0.0f);
    y.assign(n, 0.0f);
    for (std::size_t s = 0; s < n; ++s) {
      const std::size_t a = g.below(T / 2), b = T / 2 + g.below(T / 2);
      for (std::size_t t = 0; t < T; ++t) x[(s * T + t) * 2] = float(g.uniform());
      x[(s * T + a) * 2 + 1] = x[(s * T + b) * 2 + 1] = 1.0f;
      y[s] = x[(s * T + a) * 2] + x[(s * T + b) * 2];
    }
  };
  std::vector<float> x, y, xt, yt;
  make(N, x, y);
  make(256, xt, yt);
  using net = sequential<input<T, 2>, gru<16>, dense<1>>;
  auto m = make_model<net>(1);
  adam opt{0.01};
  const data::in_memory<shape<T, 2>, dense_targets<shape<1>>> ds(x, y);
  // Under ASan/UBSan (67 s for the 14 epochs) 2 epochs: the path, not the accuracy (tests/sanitized.hpp).
  fit(m, mean_squared_error{}, opt, ds.batch(32), epochs{ctnn::test::sanitized ? 2 : 14});
  const auto p = m.predict(xt.data(), 256);
  double mse = 0;
  for (std::size_t s = 0; s < 256; ++s) mse += (p[s] - yt[s]) * (p[s] - yt[s]) / 256;
  MESSAGE("adding problem, test MSE: " << mse);
  if constexpr (ctnn::test::sanitized) CHECK(std::isfinite(mse));
  else CHECK(mse < 0.01);
}

TEST_CASE("time_distributed<dense>: Keras' Dense on every step (one kernel [F, N]), as dense on each step alone") {
  using L = time_distributed<dense<3, ctnn::tanh>>::bind<shape<4, 5>, float, cpu<>>;
  using D = dense<3, ctnn::tanh>::bind<shape<5>, float, cpu<>>;
  static_assert(L::out_shape{} == shape<4, 3>{} && L::parameter_count == 5 * 3 + 3);
  static_assert(L::buffers[0].name == "kernel" && L::buffers[0].dims[0] == 5 && L::buffers[1].name == "bias");
  constexpr std::size_t n = 3;
  rng g(4);
  std::vector<float> p(L::parameter_count), x(n * 20), y(n * 12), one(3);
  for (auto& v : p) v = float(g.uniform(-1, 1));
  for (auto& v : x) v = float(g.uniform(-1, 1));
  L::forward({p.data()}, x.data(), y.data(), run_info{n, false, nullptr});
  for (std::size_t r = 0; r < n * 4; ++r) {  // each step of each sample through dense alone
    D::forward({p.data()}, x.data() + r * 5, one.data(), run_info{1, false, nullptr});
    for (std::size_t u = 0; u < 3; ++u) CHECK(y[r * 3 + u] == doctest::Approx(one[u]).epsilon(1e-6));
  }
  CHECK(time_distributed<dense<3, ctnn::tanh>>::name() == "time_distributed<dense<3, tanh>>");
}

TEST_CASE("a per-step tagger learns: embedding (mask_zero), lstm (return_sequences), per-step dense, per-step sparse CE") {
  // Variable-length id sequences (ids 1..4, length 3..8, right-padded with 0); each step's label is the
  // previous step's id (0 at the first step): the network must remember one step. Padded steps' labels
  // (0 here) are masked out of the loss.
  constexpr std::size_t S = 8, N = 384;
  using net = sequential<input<S>, embedding<5, 8, true>, lstm<16, return_sequences>, time_distributed<dense<5>>>;
  static_assert(net::output_shape == shape<S, 5>{});
  rng g(3);
  std::vector<std::vector<float>> xs(N);
  std::vector<std::int32_t> labels(N * S, 0);
  for (std::size_t s = 0; s < N; ++s) {
    const std::size_t len = 3 + g.below(S - 2);
    for (std::size_t t = 0; t < len; ++t) {
      xs[s].push_back(float(1 + g.below(4)));
      if (t > 0) labels[s * S + t] = std::int32_t(xs[s][t - 1]);
    }
  }
  auto ds = data::padded_batch(data::from_sequences<shape<S>, step_labels<S>>(xs, labels), /*n=*/32);
  auto m = make_model<net>(5);
  adam opt{0.02};
  const auto h = fit(m, sparse_categorical_crossentropy{.from_logits = true}, opt, ds, epochs{6});
  MESSAGE("per-step tagger, loss: " << h["loss"].front() << " -> " << h["loss"].back());
  // accuracy over the real steps of the training sequences
  std::vector<float> x(N * S, 0.0f);
  for (std::size_t s = 0; s < N; ++s) std::copy(xs[s].begin(), xs[s].end(), x.begin() + std::ptrdiff_t(s * S));
  const auto y = m.predict(x.data(), N);
  std::size_t right = 0, steps = 0;
  for (std::size_t r = 0; r < N * S; ++r) {
    if (x[r] == 0) continue;
    ++steps;
    right += std::size_t(std::max_element(y.begin() + std::ptrdiff_t(r * 5), y.begin() + std::ptrdiff_t(r * 5 + 5)) -
                         (y.begin() + std::ptrdiff_t(r * 5))) == std::size_t(labels[r]);
  }
  MESSAGE("per-step tagger, accuracy over the real steps: " << double(right) / double(steps));
  CHECK(double(right) / double(steps) > 0.95);
  // the per-step metric over the padded batches counts the real steps only (Keras' mask weights): the same
  // fraction (within two steps: evaluate's batches of 32 need not round as predict's one batch does)
  const auto e = evaluate(m, sparse_categorical_crossentropy{.from_logits = true}, ds, sparse_categorical_accuracy{},
                          top_k_categorical_accuracy<5>{});
  CHECK(std::abs(e["sparse_categorical_accuracy"] - double(right) / double(steps)) <= 2.0 / double(steps));
  CHECK(e["top_k_categorical_accuracy"] == 1.0);  // 5 classes: every real step; the padded ones are not counted
  std::vector<std::int32_t> bad(labels.begin(), labels.begin() + 32 * S);
  bad[3 * S + 2] = 5;  // not in [0, 5)
  CHECK_THROWS_WITH_AS(fit(m, sparse_categorical_crossentropy{.from_logits = true}, opt,
                           data::padded_batch(data::from_sequences<shape<S>, step_labels<S>>(
                                                  std::vector<std::vector<float>>(xs.begin(), xs.begin() + 32), bad),
                                              32),
                           epochs{1}),
                       doctest::Contains("label 5 of sample 26"), std::out_of_range);
}
