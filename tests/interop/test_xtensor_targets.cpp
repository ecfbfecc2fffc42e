// xtensor.hpp: evaluate(x, y) given the wrong loss for its targets names the
// loss to use (class labels: sparse_categorical_crossentropy; one-hot rows:
// categorical_crossentropy), as the compile-time checks of fit do.
#include <doctest/doctest.h>

#include <ctnn/layers/dense.hpp>
#include <ctnn/layers/reshape.hpp>
#include <ctnn/losses/categorical_crossentropy.hpp>
#include <ctnn/losses/sparse_categorical_crossentropy.hpp>
#include <ctnn/optimizers/adam.hpp>
#include <ctnn/xtensor.hpp>

#include <xtensor/xview.hpp>

#include <cmath>
#include <cstdint>
#include <stdexcept>
#include <string>

using namespace ctnn;

namespace {
using net = sequential<input<2, 2>, flatten, dense<5, ctnn::tanh>, dense<3>>;

std::string message_of(auto&& f) {
  try {
    f();
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "no std::invalid_argument";
}
}  // namespace

TEST_CASE("evaluate(x, y) with the wrong loss for y names the loss to use") {
  auto m = make_model<net>(4);
  xt::xtensor<float, 3> x = xt::xtensor<float, 3>::from_shape({6, 2, 2});
  for (std::size_t i = 0; i < x.size(); ++i) x.data()[i] = std::sin(float(i) * 0.7f);
  const xt::xtensor<int, 1> labels{0, 1, 2, 2, 1, 0};
  xt::xtensor<int, 2> one_hot = xt::zeros<int>({6, 3});
  for (std::size_t i = 0; i < 6; ++i) one_hot(i, std::size_t(labels(i))) = 1;

  CHECK(message_of([&] { evaluate(m, categorical_crossentropy{.from_logits = true}, x, labels); }) ==
        "evaluate: y holds one value per sample (class labels) but categorical_crossentropy takes 3 target values "
        "per sample: use sparse_categorical_crossentropy instead");
  CHECK(message_of([&] { evaluate(m, sparse_categorical_crossentropy{.from_logits = true}, x, one_hot); }) ==
        "evaluate: y holds 6 rows of 3 values (one-hot or soft targets) but sparse_categorical_crossentropy takes "
        "one class label per sample: use categorical_crossentropy instead");

  // the right pairs: the same loss, by either spelling of the targets
  const auto sparse = evaluate(m, sparse_categorical_crossentropy{.from_logits = true}, x, labels);
  const auto dense = evaluate(m, categorical_crossentropy{.from_logits = true}, x, one_hot);
  CHECK(dense["loss"] == doctest::Approx(sparse["loss"]).epsilon(1e-5));
}

TEST_CASE("fit(x, y) on xtensor arrays: uint8 inputs converted, validation_split from the end, sample_weight") {
  auto m = make_model<net>(4);
  adam opt{0.05};
  xt::xtensor<std::uint8_t, 3> x = xt::xtensor<std::uint8_t, 3>::from_shape({8, 2, 2});
  for (std::size_t i = 0; i < x.size(); ++i) x.data()[i] = std::uint8_t((i * 37) % 256);
  const xt::xtensor<std::int64_t, 2> labels{{0}, {1}, {2}, {2}, {1}, {0}, {1}, {2}};  // (n, 1), as Keras
  const auto h = fit(m, sparse_categorical_crossentropy{.from_logits = true}, opt, x, labels, epochs{3},
                     batch_size{2}, validation_split{0.25}, sample_weight(std::vector<float>(8, 0.5f)));
  CHECK(h.epochs() == 3);
  // validation: the last 2 samples, weighted 0.5
  const xt::xtensor<std::uint8_t, 3> vx = xt::view(x, xt::range(6, 8), xt::all(), xt::all());
  const xt::xtensor<std::int64_t, 2> vy{{1}, {2}};
  const auto r = evaluate(m, sparse_categorical_crossentropy{.from_logits = true}, vx, vy,
                          sample_weight(std::vector<float>{0.5f, 0.5f}));
  CHECK(h["val_loss"].back() == doctest::Approx(r["loss"]).epsilon(1e-6));
  CHECK(message_of([&] {
          fit(m, categorical_crossentropy{.from_logits = true}, opt, x, xt::xtensor<int, 1>{0, 1, 2, 2, 1, 0, 1, 2});
        }) == "fit: y holds one value per sample (class labels) but categorical_crossentropy takes 3 target values per "
              "sample: use sparse_categorical_crossentropy instead");
  CHECK(message_of([&] { fit(m, sparse_categorical_crossentropy{}, opt, x, xt::xtensor<int, 1>{0, 1}); }) ==
        "fit: y: 8 samples but targets of shape (2,)");
}
