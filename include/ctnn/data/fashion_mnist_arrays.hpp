// ctnn/data/fashion_mnist_arrays.hpp — Fashion-MNIST as arrays, as keras.datasets.fashion_mnist.
//
// fashion_mnist::load_data(dir): Keras' ((x_train, y_train), (x_test, y_test)) as
// {train, test}, each {x, y}: x an xt::xtensor<std::uint8_t, 3> of (n, 28, 28) pixels
// 0..255, y an xt::xtensor<std::uint8_t, 1> of n labels 0..9 (60000 and 10000 samples).
// pixels_to_float<T = float>(x): the values / 255 as T (Keras' x / 255.0), any rank.
// dir and the checks as fashion_mnist.hpp (idx_error naming the file). Needs xtensor
// (ctnn::xtensor). Docs: docs/interop.md ("Fashion-MNIST as arrays").
#pragma once
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <filesystem>

#include <xtensor/xtensor.hpp>

#include "fashion_mnist.hpp"

namespace ctnn::data::fashion_mnist {

struct arrays {
  xt::xtensor<std::uint8_t, 3> x;  // (n, 28, 28)
  xt::xtensor<std::uint8_t, 1> y;  // (n)
};
struct splits {
  arrays train, test;
};

namespace detail {
inline arrays read_arrays(const std::filesystem::path& dir, const char* prefix) {
  const files f = read(dir, prefix);
  const std::size_t n = f.images.dims[0];
  arrays a;
  a.x = xt::xtensor<std::uint8_t, 3>::from_shape({n, 28, 28});
  a.y = xt::xtensor<std::uint8_t, 1>::from_shape({n});
  std::copy(f.images.bytes.begin(), f.images.bytes.end(), a.x.data());
  std::copy(f.labels.bytes.begin(), f.labels.bytes.end(), a.y.data());
  return a;
}
}  // namespace detail

inline splits load_data(const std::filesystem::path& dir = default_dir()) {
  return {detail::read_arrays(dir, "train"), detail::read_arrays(dir, "t10k")};
}

// Pixels 0..255 as T in [0, 1]: x / 255 (the float values Keras' tutorials compute).
template <class T = float, std::size_t R>
xt::xtensor<T, R> pixels_to_float(const xt::xtensor<std::uint8_t, R>& x) {
  xt::xtensor<T, R> out = xt::xtensor<T, R>::from_shape(x.shape());
  for (std::size_t i = 0; i < x.size(); ++i) out.data()[i] = T(double(x.data()[i]) * (1.0 / 255.0));  // as train()
  return out;
}

}  // namespace ctnn::data::fashion_mnist
