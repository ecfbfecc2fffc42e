// embedding.hpp: the forward pass is a table lookup, the gradient a scatter-add (repeated ids
// add up; finite differences in double), ids that are not integers in [0, Vocab) are an error
// naming the layer, mask_zero publishes the step mask that the recurrent layers read, the
// variable's name, shape and init (Keras'), a weights file, a small model that learns; and the
// per-step loss under that mask (Keras 3's weights, losses/loss.hpp step_loss_into), and the
// per-step class losses on <S, K> (step_labels, one-hot rows).
#include <doctest/doctest.h>

#include <ctnn/ctnn.hpp>
#include <ctnn/backends/cpu/gather.hpp>
#include <ctnn/layers/embedding.hpp>
#include <ctnn/layers/lstm.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <limits>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "gradcheck/gradcheck.hpp"

using namespace ctnn;

TEST_CASE("embedding: forward is a table lookup, backward a scatter-add (gradcheck with repeated ids)") {
  using L = embedding<5, 3>::bind<shape<4>, double, cpu<>>;
  static_assert(std::is_same_v<L::out_shape, shape<4, 3>> && L::parameter_count == 15 && L::cache_per_sample == 0);
  CHECK(L::buffers[0].name == std::string_view("embeddings"));
  constexpr std::size_t n = 2;
  rng g(5);
  std::vector<double> p(15), gr(15, 7.0);  // stale gradient values: backward overwrites them
  L::init(layer_slot<double>{p.data(), gr.data()}, g);
  for (double v : p) CHECK((v >= -0.05 && v < 0.05));  // Keras' "uniform": RandomUniform(-0.05, 0.05)
  const std::vector<double> ids{3, 1, 3, 0, 4, 4, 4, 1};  // repeated ids within and across samples; 2 unused
  std::vector<double> y(n * 12), r(n * 12);
  for (auto& v : r) v = g.uniform(-1, 1);
  const layer_slot<double> s{p.data(), gr.data()};
  const run_info ri{n, true, nullptr};
  L::forward(s, ids.data(), y.data(), ri);
  for (std::size_t i = 0; i < ids.size(); ++i)
    for (std::size_t d = 0; d < 3; ++d) CHECK(y[i * 3 + d] == p[std::size_t(ids[i]) * 3 + d]);
  std::vector<double> dy = r, dx(ids.size(), 9.0);
  L::backward(s, ids.data(), y.data(), dy.data(), dx.data(), ri);
  for (double v : dx) CHECK(v == 0.0);  // ids get no gradient
  double worst = 0;
  for (std::size_t i = 0; i < p.size(); ++i) {  // f = sum(r * y): central differences on every table entry
    auto f = [&] {
      L::forward(s, ids.data(), y.data(), ri);
      double sum = 0;
      for (std::size_t k = 0; k < y.size(); ++k) sum += r[k] * y[k];
      return sum;
    };
    const double keep = p[i], eps = 1e-6;
    p[i] = keep + eps;
    const double fp = f();
    p[i] = keep - eps;
    const double fm = f();
    p[i] = keep;
    worst = std::max(worst, gradcheck::rel_err((fp - fm) / (2 * eps), gr[i]));
  }
  CHECK(worst < 1e-8);
  for (std::size_t d = 0; d < 3; ++d) {
    CHECK(gr[2 * 3 + d] == 0.0);                                    // id 2 unused
    CHECK(gr[4 * 3 + d] == doctest::Approx(r[12 + d] + r[15 + d] + r[18 + d]));  // id 4 three times
  }
}

TEST_CASE("embedding: an id that is not an integer from 0 to Vocab - 1 is an error naming the layer, the id and where") {
  using L = embedding<5, 2>::bind<shape<3>, float, cpu<>>;
  std::vector<float> p(10), y(12);
  const layer_slot<float> s{p.data(), nullptr};
  const run_info ri{2, false, nullptr};
  auto message = [&](std::vector<float> ids) {
    try {
      L::forward(s, ids.data(), y.data(), ri);
    } catch (const std::invalid_argument& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  CHECK(message({0, 1, 2, 3, 4, 0}) == "no error");
  CHECK(message({0, 1, 2, 3, 5, 0}) ==
        "embedding<5, 2>: id 5 at input position 4 is not an integer in [0, 5) (position = sample * 3 + step)");
  CHECK(message({0, -1, 2, 3, 4, 0}).find("id -1 at input position 1") != std::string::npos);
  CHECK(message({0, 1, 2.5f, 3, 4, 0}).find("id 2.5 at input position 2") != std::string::npos);
  CHECK(message({0, 1, 2, std::numeric_limits<float>::quiet_NaN(), 4, 0}).find("at input position 3") != std::string::npos);
}

TEST_CASE("embedding<..., mask_zero>: id 0 masks its step, as masking<> (the recurrent layer skips it)") {
  using L = embedding<6, 2, true>::bind<shape<4>, float, cpu<>>;
  static_assert(L::cache_per_sample == 4);
  std::vector<float> p(12), y(16), c(8);
  const std::vector<float> ids{2, 5, 0, 0, 0, 1, 0, 3};
  sequence_mask mask{};
  const run_info ri{2, false, nullptr, nullptr, &mask};
  L::forward(layer_slot<float>{p.data(), nullptr, nullptr, c.data()}, ids.data(), y.data(), ri);
  REQUIRE(mask.data == c.data());
  CHECK(mask.steps == 4);
  CHECK(c == std::vector<float>{1, 1, 0, 0, 0, 1, 0, 1});

  // in a model: with mask_zero the padded steps' row (id 0) cannot change the lstm's output
  using masked = sequential<input<4>, embedding<6, 3, true>, lstm<4>>;
  using unmasked = sequential<input<4>, embedding<6, 3>, lstm<4>>;
  auto changes_with_row0 = [&](auto m) {
    const std::vector<float> x{2, 5, 0, 0};
    const auto a = m.predict(x.data(), 1);
    for (std::size_t d = 0; d < 3; ++d) m.parameters()[d] += 0.5f;  // embeddings[0]
    return m.predict(x.data(), 1) != a;
  };
  CHECK(!changes_with_row0(make_model<masked>(3)));
  CHECK(changes_with_row0(make_model<unmasked>(3)));
}

TEST_CASE("embedding -> lstm -> dense: summary, it learns which id opened the sequence, a weights file") {
  using net = sequential<input<6>, embedding<8, 4>, lstm<8>, dense<2>>;
  static_assert(net::parameter_count == 8 * 4 + 4 * (8 * (4 + 8) + 8) + 8 * 2 + 2);
  std::ostringstream os;
  summary<net>(os);
  CHECK(os.str().find("embedding<8, 4>") != std::string::npos);
  rng g(2);
  std::vector<float> x(128 * 6);
  std::vector<std::int32_t> y(128);
  for (std::size_t i = 0; i < 128; ++i) {
    for (std::size_t t = 0; t < 6; ++t) x[i * 6 + t] = float(std::size_t(g.uniform() * 8));
    y[i] = x[i * 6] < 4 ? 0 : 1;  // the first id decides: kept over 5 steps
  }
  const data::in_memory<shape<6>, sparse_labels> ds{x, y};
  auto m = make_model<net>(4);
  adam opt{0.02};
  const sparse_categorical_crossentropy loss{.from_logits = true};
  const auto h = fit(m, loss, opt, ds.batch(32), epochs{12});
  CHECK(h["loss"].back() < 0.3 * h["loss"].front());

  const auto path = std::filesystem::temp_directory_path() / "ctnn_test_embedding.weights";
  io::save_weights(m, path);
  auto m2 = make_model<net>(99);
  io::load_weights(m2, path);
  std::filesystem::remove(path);
  CHECK(m.predict(x.data(), 8) == m2.predict(x.data(), 8));
}

TEST_CASE("a per-step loss under a step mask: Keras' weights (masked steps 0, the mean over the unmasked steps)") {
  // the loss phase alone: y, t [3 samples, 4 steps, 2 units], 5 unmasked steps of 12
  const std::vector<float> m{1, 1, 0, 0, 1, 1, 1, 0, 0, 0, 0, 0};
  std::vector<float> y(24), t(24), dy(24, 9.0f);
  rng g(8);
  for (auto& v : y) v = float(g.uniform(-1, 1));
  for (auto& v : t) v = float(g.uniform(-1, 1));
  const sequence_mask mask{m.data(), 4, sizeof(float)};
  step_scalars s;
  s.loss_scale = 4;  // dy carries it, the loss does not
  detail::step_loss_into<shape<4, 2>, cpu<>>(mean_squared_error{}, y.data(), t.data(), dy.data(), 3, &mask, &s);
  double want = 0;
  for (std::size_t r = 0; r < 12; ++r)
    if (m[r] != 0) want += ((y[2 * r] - t[2 * r]) * (y[2 * r] - t[2 * r]) + (y[2 * r + 1] - t[2 * r + 1]) * (y[2 * r + 1] - t[2 * r + 1])) / 2;
  want /= 5;  // Keras: sum over the unmasked steps / their count
  CHECK(s.loss_sum / 3 == doctest::Approx(want).epsilon(1e-6));  // the trainer divides loss_sum by the batch
  for (std::size_t i = 0; i < 24; ++i)
    CHECK(dy[i] == doctest::Approx(m[i / 2] * 4 * 2 * (y[i] - t[i]) / 2 / 5).epsilon(1e-6));
  step_scalars none;  // no unmasked step: loss 0 and no gradient (Keras' divide_no_nan)
  const std::vector<float> zeros(12, 0.0f);
  const sequence_mask all_masked{zeros.data(), 4, sizeof(float)};
  detail::step_loss_into<shape<4, 2>, cpu<>>(mean_squared_error{}, y.data(), t.data(), dy.data(), 3, &all_masked, &none);
  CHECK(none.loss_sum == 0.0);
  CHECK(std::count(dy.begin(), dy.end(), 0.0f) == 24);
}

TEST_CASE("per-step metrics on <S, K>: every step a sample, masked steps skipped (Keras' mask weights)") {
  // 3 samples, 4 steps, 3 classes (sparse labels and one-hot rows); a regression output <4, 2> for the element-wise
  std::vector<float> y(36), onehot(36, 0.0f), yr(24), tr(24);
  std::vector<std::int32_t> labels(12);
  rng g(21);
  for (auto& v : y) v = float(g.uniform(-2, 2));
  for (std::size_t r = 0; r < 12; ++r) {
    labels[r] = std::int32_t(g.below(3));
    onehot[r * 3 + std::size_t(labels[r])] = 1.0f;
  }
  for (auto& v : yr) v = float(g.uniform(0, 1));
  for (auto& v : tr) v = float(g.below(2));
  const std::vector<float> m{1, 1, 0, 0, 1, 1, 1, 1, 0, 1, 0, 0};  // 7 unmasked steps of 12, a padded batch
  for (bool masked : {false, true}) {
    CAPTURE(masked);
    const sequence_mask mask{masked ? m.data() : nullptr, 4, sizeof(float)};
    double right = 0, top2 = 0, abs_err = 0, bin = 0, steps = 0;
    for (std::size_t r = 0; r < 12; ++r) {
      if (masked && m[r] == 0) continue;
      ++steps;
      const float* row = y.data() + r * 3;
      const std::size_t best = std::size_t(std::max_element(row, row + 3) - row);
      right += best == std::size_t(labels[r]);
      top2 += std::size_t(std::count_if(row, row + 3, [&](float v) { return v > row[labels[r]]; })) < 2;
      for (std::size_t u = 0; u < 2; ++u) {
        abs_err += std::abs(yr[r * 2 + u] - tr[r * 2 + u]) / 2;
        bin += (yr[r * 2 + u] > 0.5f ? 1.0f : 0.0f) == tr[r * 2 + u] ? 0.5 : 0.0;
      }
    }
    sparse_categorical_accuracy sca;
    accuracy acc;
    top_k_categorical_accuracy<2> tk;
    mean_absolute_error mae;
    binary_accuracy ba;
    for (int pass = 0; pass < 2; ++pass) {  // streaming: two batches of the same values give the same means
      detail::update_metric<shape<4, 3>, cpu<>>(sca, y.data(), labels.data(), 3, &mask);
      detail::update_metric<shape<4, 3>, cpu<>>(acc, y.data(), onehot.data(), 3, &mask);
      detail::update_metric<shape<4, 3>, cpu<>>(tk, y.data(), labels.data(), 3, &mask);
      detail::update_metric<shape<4, 2>, cpu<>>(mae, yr.data(), tr.data(), 3, &mask);
      detail::update_metric<shape<4, 2>, cpu<>>(ba, yr.data(), tr.data(), 3, &mask);
    }
    CHECK(sca.result() == doctest::Approx(right / steps));
    CHECK(acc.result() == doctest::Approx(right / steps));
    CHECK(tk.result() == doctest::Approx(top2 / steps));
    CHECK(mae.result() == doctest::Approx(abs_err / steps));
    CHECK(ba.result() == doctest::Approx(bin / steps));
  }
}

TEST_CASE("embedding<..., mask_zero> -> lstm (return_sequences): evaluate and fit weight the steps as Keras") {
  using net = sequential<input<4>, embedding<6, 3, true>, lstm<2, return_sequences>>;
  const std::vector<float> x{2, 5, 0, 0, 1, 3, 4, 0, 0, 0, 0, 0};  // lengths 2, 3, 0
  std::vector<float> t(24);
  rng g(9);
  for (auto& v : t) v = float(g.uniform(-1, 1));
  auto m = make_model<net>(6);
  const auto y = m.predict(x.data(), 3);
  double want = 0;
  for (std::size_t r = 0; r < 12; ++r)
    if (x[r] != 0) want += ((y[2 * r] - t[2 * r]) * (y[2 * r] - t[2 * r]) + (y[2 * r + 1] - t[2 * r + 1]) * (y[2 * r + 1] - t[2 * r + 1])) / 2;
  want /= 5;
  const data::in_memory<shape<4>, dense_targets<shape<4, 2>>> ds{x, t};
  CHECK(evaluate(m, mean_squared_error{}, ds.batch(3))["loss"] == doctest::Approx(want).epsilon(1e-6));

  // the padded steps' targets do not change the gradient: the same weights after a step ...
  auto trained = [&](const std::vector<float>& targets) {
    auto mm = make_model<net>(6);
    sgd opt{0.5};
    const data::in_memory<shape<4>, dense_targets<shape<4, 2>>> d{x, targets};
    fit(mm, mean_squared_error{}, opt, d.batch(3), epochs{1});
    return std::vector<float>(mm.parameters().begin(), mm.parameters().end());
  };
  auto padded = t, real = t;
  for (std::size_t r = 0; r < 12; ++r) (x[r] == 0 ? padded : real)[2 * r] += 5.0f;
  const auto base = trained(t);
  CHECK(trained(padded) == base);
  CHECK(trained(real) != base);  // ... while a real step's target does
}

TEST_CASE("a per-step class loss on <S, K>: every step's K scores, Keras' mean over the steps (and the mask's weights)") {
  // 3 samples, 4 steps, 3 classes; sparse labels per step, and the same as one-hot rows
  std::vector<float> y(36), dy(36), dyc(36), onehot(36, 0.0f);
  std::vector<std::int32_t> labels(12);
  rng g(13);
  for (auto& v : y) v = float(g.uniform(-2, 2));
  for (std::size_t r = 0; r < 12; ++r) {
    labels[r] = std::int32_t(g.below(3));
    onehot[r * 3 + std::size_t(labels[r])] = 1.0f;
  }
  const std::vector<float> m{1, 1, 0, 0, 1, 1, 1, 1, 0, 1, 0, 0};  // 7 unmasked steps of 12
  // Keras: -log softmax of the label's score per step; dL/dy = softmax - onehot
  std::vector<double> loss(12), grad(36);
  for (std::size_t r = 0; r < 12; ++r) {
    double mx = std::max({y[r * 3], y[r * 3 + 1], y[r * 3 + 2]}), z = 0;
    for (std::size_t k = 0; k < 3; ++k) z += std::exp(y[r * 3 + k] - mx);
    loss[r] = -(y[r * 3 + std::size_t(labels[r])] - mx - std::log(z));
    for (std::size_t k = 0; k < 3; ++k) grad[r * 3 + k] = std::exp(y[r * 3 + k] - mx) / z - onehot[r * 3 + k];
  }
  for (bool masked : {false, true}) {
    CAPTURE(masked);
    const sequence_mask mask{masked ? m.data() : nullptr, 4, sizeof(float)};
    double want = 0, valid = masked ? 7 : 12;
    for (std::size_t r = 0; r < 12; ++r) want += (masked ? m[r] : 1.0) * loss[r] / valid;
    step_scalars s, c;
    s.loss_scale = c.loss_scale = 2;
    detail::step_loss_into<shape<4, 3>, cpu<>>(sparse_categorical_crossentropy{.from_logits = true}, y.data(),
                                               labels.data(), dy.data(), 3, &mask, &s);
    detail::step_loss_into<shape<4, 3>, cpu<>>(categorical_crossentropy{.from_logits = true}, y.data(), onehot.data(),
                                               dyc.data(), 3, &mask, &c);
    CHECK(s.loss_sum / 3 == doctest::Approx(want).epsilon(1e-6));  // the trainer divides loss_sum by the batch
    CHECK(c.loss_sum / 3 == doctest::Approx(want).epsilon(1e-6));
    for (std::size_t i = 0; i < 36; ++i) {
      const double w = masked ? m[i / 3] : 1.0;
      CHECK(dy[i] == doctest::Approx(2 * w * grad[i] / valid).epsilon(1e-5));
      CHECK(dyc[i] == doctest::Approx(2 * w * grad[i] / valid).epsilon(1e-5));
    }
  }
  std::vector<std::int32_t> bad = labels;
  bad[6] = 3;  // sample 1, step 2
  auto check = [&] { detail::check_loss_targets<shape<4, 3>>(sparse_categorical_crossentropy{}, bad.data(), 3); };
  CHECK_THROWS_WITH_AS(check(),
                       "sparse_categorical_crossentropy: label 3 of sample 6 in the batch is outside [0, 3) (labels per "
                       "step: that index is sample * 4 + step)",
                       std::out_of_range);
}
