// data/fashion_mnist_arrays.hpp: Fashion-MNIST as Keras' load_data() arrays (uint8 images and
// labels), pixels_to_float, and fit on them; the files as test_fashion_mnist.cpp finds them.
#include <doctest/doctest.h>

#include <ctnn/data/fashion_mnist_arrays.hpp>
#include <ctnn/layers/dense.hpp>
#include <ctnn/layers/reshape.hpp>
#include <ctnn/losses/sparse_categorical_crossentropy.hpp>
#include <ctnn/metrics/accuracy.hpp>
#include <ctnn/optimizers/adam.hpp>
#include <ctnn/xtensor.hpp>

#include <xtensor/xview.hpp>

#include <algorithm>
#include <cstdint>
#include <filesystem>

using namespace ctnn;
namespace fm = ctnn::data::fashion_mnist;

TEST_CASE("fashion_mnist::load_data: uint8 arrays as Keras, pixels_to_float as train(), fit on them") {
  const auto dir = fm::default_dir();
  if (!std::filesystem::exists(dir / "t10k-images-idx3-ubyte.gz")) {
    MESSAGE("CTNN_SKIP: " << dir << " is missing (apt-get install dataset-fashion-mnist)");
    return;
  }
  const auto [train, test] = fm::load_data(dir);
  CHECK(train.x.shape() == std::array<std::size_t, 3>{60000, 28, 28});
  CHECK(train.y.shape() == std::array<std::size_t, 1>{60000});
  CHECK(test.x.shape() == std::array<std::size_t, 3>{10000, 28, 28});
  CHECK(*std::max_element(test.x.begin(), test.x.end()) == 255);
  CHECK(*std::max_element(test.y.begin(), test.y.end()) == 9);
  const auto x = fm::pixels_to_float(test.x);
  const auto ds = fm::test(dir);
  CHECK(std::equal(x.begin(), x.end(), ds.features()));  // the same values as the dataset's
  CHECK(std::equal(test.y.begin(), test.y.end(), ds.targets()));

  // a Keras user's first lines: x / 255, fit(x, y, validation_split), evaluate
  using net = sequential<input<28, 28>, flatten, dense<16, relu>, dense<10>>;
  auto m = make_model<net>(1);
  adam opt{0.01};
  const xt::xtensor<float, 3> xs = xt::view(x, xt::range(0, 2000), xt::all(), xt::all());
  const xt::xtensor<std::uint8_t, 1> ys = xt::view(test.y, xt::range(0, 2000));
  const auto h = fit(m, sparse_categorical_crossentropy{.from_logits = true}, opt, xs, ys, epochs{2}, batch_size{64},
                     validation_split{0.2}, accuracy{});
  CHECK(h["val_accuracy"].back() > 0.5);
}
