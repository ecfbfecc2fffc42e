// fit_arrays.hpp: fit and evaluate on arrays (Keras' fit(x, y, ...)): validation_split from
// the end, shuffling, sample_weight and class_weight as Keras weighs the loss, bad arguments.
#include <doctest/doctest.h>

#include <ctnn/data/in_memory.hpp>
#include <ctnn/layers/dense.hpp>
#include <ctnn/losses/categorical_crossentropy.hpp>
#include <ctnn/losses/sparse_categorical_crossentropy.hpp>
#include <ctnn/metrics/accuracy.hpp>
#include <ctnn/optimizers/sgd.hpp>
#include <ctnn/train/fit_arrays.hpp>

#include <array>
#include <cmath>
#include <limits>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

using namespace ctnn;

namespace {
using net = sequential<input<2>, dense<2>>;  // logits z = W x + b
const sparse_categorical_crossentropy loss{.from_logits = true};

// 10 samples of 2 values, labels 0/1.
const std::vector<float> xs{0.1f, 0.9f, -0.4f, 0.3f, 0.8f, -0.7f, 0.2f, 0.2f, -0.5f, -0.1f,
                            0.6f, 0.4f, -0.3f, 0.7f, 0.9f, 0.0f, -0.8f, 0.5f, 0.3f, -0.6f};
const std::vector<int> ys{1, 0, 0, 1, 0, 1, 1, 0, 1, 0};

// Sparse crossentropy from logits of sample i, by hand: log(sum exp z) - z_label.
double ce(const std::vector<float>& logits, std::size_t i, int label) {
  const double a = logits[2 * i], b = logits[2 * i + 1];
  return std::log(std::exp(a) + std::exp(b)) - (label == 0 ? a : b);
}

std::string message_of(auto&& f) {
  try {
    f();
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "no std::invalid_argument";
}
}  // namespace

TEST_CASE("evaluate on arrays: sample_weight and class_weight weigh the loss as Keras (sum_over_batch_size)") {
  auto m = make_model<net>(3);
  const auto z = m.predict(xs.data(), 10, 10);
  std::vector<double> l(10);
  for (std::size_t i = 0; i < 10; ++i) l[i] = ce(z, i, ys[i]);
  double plain = 0;
  for (double v : l) plain += v / 10;
  CHECK(evaluate(m, loss, xs, ys)["loss"] == doctest::Approx(plain).epsilon(1e-5));

  // sum(w_i * loss_i) / n, over batches of 4, 4, 2: not divided by the sum of the weights
  const std::vector<double> w{1, 2, 0, 0, 0.5, 1, 3, 0, 1, 1};
  double weighted = 0;
  for (std::size_t i = 0; i < 10; ++i) weighted += w[i] * l[i] / 10;
  CHECK(evaluate(m, loss, xs, ys, sample_weight(w), batch_size{4})["loss"] == doctest::Approx(weighted).epsilon(1e-5));

  // all weights 0: loss 0 (Keras' divide_no_nan is not needed: the divisor is the batch)
  CHECK(evaluate(m, loss, xs, ys, sample_weight(std::vector<float>(10, 0.0f)))["loss"] == 0.0);

  // class 1 weighs 3, class 0 (not named) 1; the same as the sample weights it gives
  double by_class = 0;
  for (std::size_t i = 0; i < 10; ++i) by_class += (ys[i] == 1 ? 3.0 : 1.0) * l[i] / 10;
  CHECK(evaluate(m, loss, xs, ys, class_weight({{1, 3.0}}))["loss"] == doctest::Approx(by_class).epsilon(1e-5));
  CHECK(evaluate(m, loss, xs, ys, class_weight(std::array<double, 2>{1.0, 3.0}))["loss"] ==
        doctest::Approx(by_class).epsilon(1e-5));
  // one-hot rows: the class is the row's argmax, as Keras
  std::vector<float> one_hot(20, 0.0f);
  for (std::size_t i = 0; i < 10; ++i) one_hot[2 * i + std::size_t(ys[i])] = 1.0f;
  CHECK(evaluate(m, categorical_crossentropy{.from_logits = true}, xs, one_hot, class_weight({{1, 3.0}}))["loss"] ==
        doctest::Approx(by_class).epsilon(1e-5));
}

TEST_CASE("fit on arrays: a weight of 2 on every sample is a doubled gradient (SGD at twice the rate)") {
  auto a = make_model<net>(5), b = make_model<net>(5);
  sgd oa{0.1}, ob{0.2};
  const std::span<const float> x(xs);
  const std::span<const int> y(ys);
  fit(a, loss, oa, x, y, epochs{2}, batch_size{4}, shuffle_seed{9}, sample_weight(std::vector<double>(10, 2.0)));
  fit(b, loss, ob, x, y, epochs{2}, batch_size{4}, shuffle_seed{9});
  const auto pa = a.parameters(), pb = b.parameters();
  REQUIRE(pa.size() == pb.size());
  for (std::size_t i = 0; i < pa.size(); ++i) CHECK(pa[i] == doctest::Approx(pb[i]).epsilon(1e-5));
  // and differently weighted samples move the weights elsewhere
  auto c = make_model<net>(5);
  sgd oc{0.1};
  fit(c, loss, oc, x, y, epochs{2}, batch_size{4}, shuffle_seed{9}, class_weight({{0, 4.0}}));
  double moved = 0;
  for (std::size_t i = 0; i < pa.size(); ++i) moved += std::abs(double(c.parameters()[i]) - double(pa[i]));
  CHECK(moved > 1e-3);
}

TEST_CASE("fit on arrays: validation_split takes the last samples, before shuffling, as Keras") {
  auto m = make_model<net>(7);
  sgd opt{0.05};
  const auto h = fit(m, loss, opt, xs, ys, epochs{2}, batch_size{3}, validation_split{0.25}, accuracy{});
  // floor(10 * 0.75) = 7 for training, the last 3 for validation
  const std::vector<float> vx(xs.begin() + 14, xs.end());
  const std::vector<int> vy(ys.begin() + 7, ys.end());
  const auto r = evaluate(m, loss, vx, vy, accuracy{});
  CHECK(h["val_loss"].back() == doctest::Approx(r["loss"]).epsilon(1e-6));
  CHECK(h["val_accuracy"].back() == doctest::Approx(r["accuracy"]));
  // and its sample weights go with them
  std::vector<double> w(10, 1.0);
  w[9] = 5;
  auto m2 = make_model<net>(7);
  sgd opt2{0.05};
  const auto h2 = fit(m2, loss, opt2, xs, ys, batch_size{3}, validation_split{0.25}, sample_weight(w));
  const auto r2 = evaluate(m2, loss, vx, vy, sample_weight(std::vector<double>{1, 1, 5}));
  CHECK(h2["val_loss"].back() == doctest::Approx(r2["loss"]).epsilon(1e-6));
}

TEST_CASE("fit on arrays: the same seed trains the same, no_shuffle as the samples come") {
  auto a = make_model<net>(2), b = make_model<net>(2), c = make_model<net>(2), d = make_model<net>(2);
  sgd oa{0.1}, ob{0.1}, oc{0.1}, od{0.1};
  fit(a, loss, oa, xs, ys, epochs{3}, batch_size{2}, shuffle_seed{4});
  fit(b, loss, ob, xs, ys, epochs{3}, batch_size{2}, shuffle_seed{4});
  fit(c, loss, oc, xs, ys, epochs{3}, batch_size{2}, no_shuffle{});
  std::vector<std::int32_t> labels(ys.begin(), ys.end());
  fit(d, loss, od, data::in_memory<shape<2>, sparse_labels>(xs, labels).batch(2), epochs{3});
  double ab = 0, cd = 0, ac = 0;
  for (std::size_t i = 0; i < a.parameters().size(); ++i) {
    ab += std::abs(double(a.parameters()[i]) - double(b.parameters()[i]));
    cd += std::abs(double(c.parameters()[i]) - double(d.parameters()[i]));
    ac += std::abs(double(a.parameters()[i]) - double(c.parameters()[i]));
  }
  CHECK(ab < 1e-6);
  CHECK(cd < 1e-6);
  CHECK(ac > 1e-6);  // shuffled batches of 2 train differently
}

TEST_CASE("fit and evaluate on arrays: bad arguments are named") {
  auto m = make_model<net>(1);
  sgd opt{0.1};
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const std::vector<int> nine(ys.begin(), ys.end() - 1);
  CHECK(message_of([&] { fit(m, loss, opt, xs, nine); }) == "fit: y: 9 target values for 10 samples of x (expected 10)");
  CHECK(message_of([&] { fit(m, loss, opt, std::vector<float>(xs.begin(), xs.end() - 1), ys); }) ==
        "fit: x: 19 values are not a whole number of samples of shape 2");
  CHECK(message_of([&] { fit(m, loss, opt, xs, ys, sample_weight(std::vector<double>(9, 1.0))); }) ==
        "fit: sample_weight: 9 weights for 10 samples");
  std::vector<double> w(10, 1.0);
  w[3] = -1;
  CHECK(message_of([&] { evaluate(m, loss, xs, ys, sample_weight(w)); }) ==
        "evaluate: sample_weight: weight -1 of sample 3 is not a finite number >= 0");
  w[3] = nan;
  CHECK(message_of([&] { fit(m, loss, opt, xs, ys, sample_weight(w)); }) ==
        "fit: sample_weight: weight nan of sample 3 is not a finite number >= 0");
  CHECK(message_of([&] { fit(m, loss, opt, xs, ys, class_weight({{2, 1.0}})); }) ==
        "fit: class_weight: class 2 is outside [0, 2)");
  CHECK(message_of([&] { fit(m, loss, opt, xs, ys, class_weight({{1, -2.0}})); }) ==
        "fit: class_weight: weight -2 of class 1 is not a finite number >= 0");
  CHECK(message_of([&] { fit(m, loss, opt, xs, ys, class_weight({{1, 2.0}}), sample_weight(std::vector<double>(10, 1.0))); }) ==
        "fit: sample_weight and class_weight: give one of them, not both (as Keras)");
  CHECK(message_of([&] { (void)validation_split{1.0}; }) == "fit: validation_split: 1 is not in [0, 1)");
  CHECK(message_of([&] { (void)validation_split{nan}; }) == "fit: validation_split: nan is not in [0, 1)");
  CHECK(message_of([&] { fit(m, loss, opt, xs, ys, validation_split{0.95}); }) ==
        "fit: validation_split: 10 samples are too few to split into training and validation by 0.95");
  CHECK(message_of([&] { fit(m, loss, opt, xs, std::vector<int>{1, 0, 0, 1, 0, 1, -1, 0, 1, 0}); }) ==
        "fit: y: label -1 of sample 6 is not a class index");
  CHECK_THROWS_AS(fit(m, loss, opt, xs, std::vector<int>{1, 0, 0, 1, 0, 1, 2, 0, 1, 0}), std::out_of_range);
}
