// zero_padding2d and up_sampling2d on the simulated device (simulated_device.hpp):
// the ops run where the host cannot touch the memory, and training gives cpu<>'s bits.
#include <doctest/doctest.h>

#include <ctnn/ctnn.hpp>

#include <cstdint>
#include <string>
#include <vector>

#include "device/simulated_device.hpp"

using namespace ctnn;

TEST_CASE("zero_padding2d and up_sampling2d on the simulated device: cpu<>'s bits") {
  using net = sequential<input<5, 5, 2>, up_sampling2d<2, 1>, zero_padding2d<1, 0, 2, 1>, conv2d<3, 3, 3, 2>, flatten,
                         dense<2>>;
  std::vector<float> x(24 * 50);
  std::vector<std::int32_t> l(24);
  rng g(8);
  for (std::size_t i = 0; i < l.size(); ++i) {
    l[i] = std::int32_t(i % 2);
    for (std::size_t j = 0; j < 50; ++j) x[i * 50 + j] = float(g.uniform(-1, 1)) + (l[i] ? 0.3f : -0.3f);
  }
  const auto ds = data::in_memory<shape<5, 5, 2>, sparse_labels>(x, l).batch(8);
  auto d = make_model<net, float, sim::device>(2);
  auto c = make_model<net>(2);
  adam o1{0.01}, o2{0.01};
  const auto hd = fit(d, sparse_categorical_crossentropy{.from_logits = true}, o1, ds, epochs{3});
  const auto hc = fit(c, sparse_categorical_crossentropy{.from_logits = true}, o2, ds, epochs{3});
  CHECK(hd["loss"] == hc["loss"]);
  CHECK(hd["loss"].back() < hd["loss"].front());
  CHECK(predict(d, ds) == predict(c, ds));
}
