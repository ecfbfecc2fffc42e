// layers/zero_padding2d.hpp and layers/up_sampling2d.hpp: output shapes as
// Keras' ZeroPadding2D / UpSampling2D, forward and backward values written by
// hand, in a network (sequential, parameter count, fit).
// (Gradients by finite differences: tests/gradcheck/test_gradcheck_conv_layers.cpp.)
#include <doctest/doctest.h>

#include <ctnn/backends/cpu/resize.hpp>  // the kernels under test, by name

#include <ctnn/layers/up_sampling2d.hpp>
#include <ctnn/layers/zero_padding2d.hpp>

#include <ctnn/ctnn.hpp>  // sequential, make_model, fit

#include <vector>

using namespace ctnn;

static_assert(std::is_same_v<zero_padding2d<1>::bind<shape<4, 5, 3>, float, cpu<>>::out_shape, shape<6, 7, 3>>);
static_assert(std::is_same_v<zero_padding2d<1, 2, 0, 3>::bind<shape<4, 5, 3>, float, cpu<>>::out_shape, shape<7, 8, 3>>);
static_assert(std::is_same_v<up_sampling2d<>::bind<shape<4, 5, 3>, float, cpu<>>::out_shape, shape<8, 10, 3>>);
static_assert(std::is_same_v<up_sampling2d<3, 1>::bind<shape<4, 5, 3>, float, cpu<>>::out_shape, shape<12, 5, 3>>);

TEST_CASE("zero_padding2d: x placed at (top, left) in zeros, the gradient read back") {
  using L = zero_padding2d<1, 0, 0, 2>::bind<shape<2, 2, 1>, float, cpu<>>;  // out 3 x 4 x 1
  const std::vector<float> x{1, 2, 3, 4, 5, 6, 7, 8};                       // 2 samples
  std::vector<float> y(24, -1.0f);
  L::forward({}, x.data(), y.data(), run_info{2, false, nullptr});
  CHECK(y == std::vector<float>{0, 0, 0, 0, 1, 2, 0, 0, 3, 4, 0, 0,   //
                                0, 0, 0, 0, 5, 6, 0, 0, 7, 8, 0, 0});
  std::vector<float> dy(24), dx(8);
  for (std::size_t i = 0; i < dy.size(); ++i) dy[i] = float(i);
  L::backward({}, x.data(), y.data(), dy.data(), dx.data(), run_info{2, true, nullptr});
  CHECK(dx == std::vector<float>{4, 5, 8, 9, 16, 17, 20, 21});
  CHECK(zero_padding2d<1, 0, 0, 2>::name() == "zero_padding2d<1, 0, 0, 2>");
}

TEST_CASE("up_sampling2d: nearest repetition, the gradient summed over each block") {
  using L = up_sampling2d<2, 3>::bind<shape<1, 2, 2>, float, cpu<>>;  // out 2 x 6 x 2
  const std::vector<float> x{1, -1, 2, -2};
  std::vector<float> y(24);
  L::forward({}, x.data(), y.data(), run_info{1, false, nullptr});
  const std::vector<float> row{1, -1, 1, -1, 1, -1, 2, -2, 2, -2, 2, -2};
  std::vector<float> want = row;
  want.insert(want.end(), row.begin(), row.end());
  CHECK(y == want);
  std::vector<float> dy(24), dx(4);
  for (std::size_t i = 0; i < dy.size(); ++i) dy[i] = float(i);
  L::backward({}, x.data(), y.data(), dy.data(), dx.data(), run_info{1, true, nullptr});
  // channel 0 of the first block: rows 0-1, columns 0-2: 0 + 2 + 4 + 12 + 14 + 16
  CHECK(dx == std::vector<float>{48, 54, 84, 90});
  CHECK(up_sampling2d<2, 3>::name() == "up_sampling2d<2, 3>");
}

TEST_CASE("zero_padding2d and up_sampling2d in a network: shapes, no parameters, training") {
  using net = sequential<input<6, 6, 1>, conv2d<4, 3, 3>, up_sampling2d<2>, zero_padding2d<1>, max_pool2d<2>,
                         flatten, dense<2>>;
  static_assert(net::output_shape == shape<2>{});
  static_assert(net::parameter_count == (9 + 1) * 4 + (5 * 5 * 4) * 2 + 2);  // 4x4 -> 8x8 -> 10x10 -> 5x5
  auto m = make_model<net>(3);
  std::vector<float> x(32 * 36);
  std::vector<std::int32_t> l(32);
  rng g(4);
  for (std::size_t i = 0; i < l.size(); ++i) {
    l[i] = std::int32_t(i % 2);
    for (std::size_t j = 0; j < 36; ++j) x[i * 36 + j] = float(g.uniform(-1, 1)) + (l[i] ? 0.5f : -0.5f);
  }
  adam opt{0.01};
  const auto h = fit(m, sparse_categorical_crossentropy{.from_logits = true}, opt,
                     data::in_memory<shape<6, 6, 1>, sparse_labels>(x, l).batch(8), epochs{10});
  CHECK(h["loss"].back() < h["loss"].front());
}
