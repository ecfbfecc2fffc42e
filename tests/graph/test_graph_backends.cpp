// The graph layers (a dag included) on a backend whose memory the host cannot touch (tests/device's
// simulated device: every access goes through ops<B> and memory::copy, so a graph layer
// that read its memory on the host would fault) and under mixed_float16 (the children
// compute in float16 on the compute-type copy of their parameters).
#include <doctest/doctest.h>

#include <ctnn/ctnn.hpp>
#include <ctnn/layers/dag.hpp>
#include <ctnn/mixed_precision.hpp>

#include <cmath>
#include <vector>

#include "device/simulated_device.hpp"

using namespace ctnn;

namespace {
using net = sequential<input<6, 6, 2>, residual<conv2d<4, 3, 3, 1, padding::same, relu>, batch_norm, conv2d<4, 3, 3, 1, padding::same>>,
                       concatenate<-1, conv2d<2, 1, 1>, branch<>>, global_average_pool, add<branch<>, dense<6, ctnn::tanh>>,
                       dag<node<"a", dense<6, ctnn::tanh>>, node<"b", dense<6>, "a">, node<"s", add_join, "b", "a", "in">,
                           node<"c", concatenate_join<-1>, "s", "in">>,
                       dense<2>>;

data::in_memory<shape<6, 6, 2>, sparse_labels> images(std::size_t n, std::uint64_t seed) {
  std::vector<float> x(n * 72);
  std::vector<std::int32_t> y(n);
  rng g(seed);
  for (std::size_t i = 0; i < n; ++i) {
    y[i] = std::int32_t(g.below(2));
    for (std::size_t j = 0; j < 72; ++j) x[i * 72 + j] = float(g.uniform(0, 0.5)) + (j % 2 == std::size_t(y[i]) ? 0.5f : 0.0f);
  }
  return {x, y};
}
}  // namespace

TEST_CASE("graph layers on the simulated device: cpu<>'s bits, no host access") {
  auto d = make_model<net, float, sim::device>(3);
  auto c = make_model<net>(3);
  const auto train = images(48, 4).batch(16);
  sgd o1{0.05, 0.9}, o2{0.05, 0.9};
  const sparse_categorical_crossentropy loss{.from_logits = true};
  const auto hd = fit(d, loss, o1, train, epochs{2});
  const auto hc = fit(c, loss, o2, train, epochs{2});
  CHECK(hd["loss"] == hc["loss"]);
  CHECK(predict(d, train) == predict(c, train));
}

TEST_CASE("graph layers under mixed_float16: trains, the loss stays finite and falls") {
  auto m = make_model<net, precision::mixed_float16>(3);
  adam opt{0.01};
  const auto h = fit(m, sparse_categorical_crossentropy{.from_logits = true}, opt, images(48, 4).batch(16), epochs{6});
  for (double v : h["loss"]) CHECK(std::isfinite(v));
  CHECK(h["loss"].back() < h["loss"].front());
}
