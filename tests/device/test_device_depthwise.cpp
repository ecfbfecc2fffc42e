// depthwise_conv2d and separable_conv2d on the simulated device (simulated_device.hpp):
// the depthwise ops run where the host cannot touch the memory, and training gives cpu<>'s bits.
#include <doctest/doctest.h>

#include <ctnn/ctnn.hpp>

#include <cstdint>
#include <vector>

#include "device/simulated_device.hpp"

using namespace ctnn;

TEST_CASE("depthwise_conv2d and separable_conv2d on the simulated device: cpu<>'s bits") {
  using net = sequential<input<6, 6, 2>, depthwise_conv2d<3, 3, 1, padding::same, 2, relu>,
                         separable_conv2d<4, 3, 3, 2, padding::same, 1, ctnn::tanh>, global_average_pool, dense<2>>;
  std::vector<float> x(24 * 72);
  std::vector<std::int32_t> l(24);
  rng g(8);
  for (std::size_t i = 0; i < l.size(); ++i) {
    l[i] = std::int32_t(i % 2);
    for (std::size_t j = 0; j < 72; ++j) x[i * 72 + j] = float(g.uniform(-1, 1)) + (l[i] ? 0.3f : -0.3f);
  }
  const auto ds = data::in_memory<shape<6, 6, 2>, sparse_labels>(x, l).batch(8);
  auto d = make_model<net, float, sim::device>(2);
  auto c = make_model<net>(2);
  adam o1{0.01}, o2{0.01};
  const auto hd = fit(d, sparse_categorical_crossentropy{.from_logits = true}, o1, ds, epochs{3});
  const auto hc = fit(c, sparse_categorical_crossentropy{.from_logits = true}, o2, ds, epochs{3});
  CHECK(hd["loss"] == hc["loss"]);
  CHECK(hd["loss"].back() < hd["loss"].front());
  CHECK(predict(d, ds) == predict(c, ds));
}
