// Host code that reaches a model's memory only through host views and ops<B>
// (core/backend.hpp), proved on the simulated device (simulated_device.hpp),
// where a direct host access is a SIGSEGV: update_pruning_step's masks,
// gradients, weights and slots (pruning/update_pruning_step.hpp),
// sensitivity_analysis (pruning/sensitivity.hpp), the xtensor predict_sample
// (xtensor.hpp) and with_options' EMA finalize (optimizers/options.hpp), each
// with cpu<>'s bits.
#include <doctest/doctest.h>

#include <ctnn/ctnn.hpp>
#include <ctnn/pruning.hpp>
#include <ctnn/xtensor.hpp>

#include <string>
#include <vector>

#include "device/simulated_device.hpp"

namespace {
using namespace ctnn;

template <class M>
std::string variables(const M& m) {
  std::string v;
  m.for_each_variable([&](const variable_ref& r) { v.append(reinterpret_cast<const char*>(r.data), r.extent * r.element_bytes); });
  return v;
}

data::in_memory<shape<16>, sparse_labels> toy(std::size_t n, std::uint64_t seed) {
  std::vector<float> x(n * 16);
  std::vector<std::int32_t> y(n);
  rng g(seed);
  for (std::size_t i = 0; i < n; ++i) {
    y[i] = std::int32_t(i % 3);
    for (std::size_t j = 0; j < 16; ++j) x[i * 16 + j] = float(g.uniform(-1, 1)) + (j % 3 == i % 3 ? 0.5f : 0.0f);
  }
  return {x, y};
}
const sparse_categorical_crossentropy xent{.from_logits = true};

using sched = polynomial_sparsity<0.0, 0.75, 0, 12, 3, 3>;
using pruned = sequential<input<16>, prune_low_magnitude<dense<12, relu>, sched>, dense<3>>;
using global = sequential<input<16>, prune_low_magnitude<dense<12, relu>, sched, global_magnitude>,
                          prune_low_magnitude<dense<8, relu>, sched, global_magnitude>, dense<3>>;
}  // namespace

TEST_CASE("update_pruning_step on the simulated device: masks, weights and slots through host views, cpu<>'s bits") {
  auto d = make_model<pruned, float, sim::device>(5);
  auto c = make_model<pruned>(5);
  adam o1{1e-2}, o2{1e-2};
  const auto ds = toy(64, 1).batch(8);
  const auto hd = fit(d, xent, o1, ds, epochs{2}, update_pruning_step{});
  const auto hc = fit(c, xent, o2, ds, epochs{2}, update_pruning_step{});
  CHECK(hd["loss"] == hc["loss"]);
  CHECK(hd["sparsity_layer_1"] == hc["sparsity_layer_1"]);
  CHECK(hd["sparsity_layer_1"].back() > 0.7);
  CHECK(variables(d) == variables(c));
  CHECK(layer_sparsities(d) == layer_sparsities(c));
  const auto od = d.host_region(role::optimizer_slot);
  const auto oc = c.host_region(role::optimizer_slot);
  CHECK(std::string(reinterpret_cast<const char*>(od.data()), od.size()) ==
        std::string(reinterpret_cast<const char*>(oc.data()), oc.size()));
}

TEST_CASE("global_magnitude pruning on the simulated device, as on cpu<>") {
  auto d = make_model<global, float, sim::device>(6);
  auto c = make_model<global>(6);
  sgd o1{0.05}, o2{0.05};
  const auto ds = toy(64, 2).batch(16);
  fit(d, xent, o1, ds, epochs{2}, update_pruning_step{});
  fit(c, xent, o2, ds, epochs{2}, update_pruning_step{});
  CHECK(variables(d) == variables(c));
  CHECK(global_sparsities(d) == global_sparsities(c));
  CHECK(global_kept(d) == global_kept(c));
  apply_masks(d);
  apply_masks(c);
  CHECK(variables(d) == variables(c));
}

TEST_CASE("sensitivity_analysis on the simulated device, as on cpu<>") {
  using net = sequential<input<16>, dense<12, relu>, dense<3>>;
  auto d = make_model<net, float, sim::device>(7);
  auto c = make_model<net>(7);
  const auto ds = toy(40, 3).batch(40);
  const auto td = sensitivity_analysis(d, xent, ds, sparse_categorical_accuracy{}, {0.0, 0.5, 0.9});
  const auto tc = sensitivity_analysis(c, xent, ds, sparse_categorical_accuracy{}, {0.0, 0.5, 0.9});
  CHECK(td.baseline == tc.baseline);
  CHECK(td.layers == tc.layers);
  CHECK(td.value == tc.value);
  CHECK(variables(d) == variables(c));  // the model is not changed
}

TEST_CASE("xtensor predict_sample and predict on the simulated device, as on cpu<>") {
  using net = sequential<input<4, 4>, flatten, dense<8, relu>, dense<3>>;
  auto d = make_model<net, float, sim::device>(8);
  auto c = make_model<net>(8);
  xt::xtensor_fixed<float, xt::xshape<4, 4>> x;
  for (std::size_t i = 0; i < 16; ++i) x.data()[i] = float(i) / 16.0f - 0.5f;
  const auto yd = predict_sample(d, x);
  const auto yc = predict_sample(c, x);
  CHECK(yd == yc);
  xt::xtensor<float, 3> xs = xt::zeros<float>({5, 4, 4});
  for (std::size_t i = 0; i < xs.size(); ++i) xs.data()[i] = float(i % 7) / 7.0f;
  CHECK(ctnn::predict(d, xs, 2) == ctnn::predict(c, xs, 2));
}

TEST_CASE("with_options' EMA finalize on the simulated device, as on cpu<>") {
  using net = sequential<input<16>, dense<12, relu>, dense<3>>;
  auto d = make_model<net, float, sim::device>(9);
  auto c = make_model<net>(9);
  with_options o1{adam{0.01}, {.use_ema = true, .ema_momentum = 0.9}};
  with_options o2{adam{0.01}, {.use_ema = true, .ema_momentum = 0.9}};
  const auto ds = toy(32, 4).batch(8);
  fit(d, xent, o1, ds, epochs{2});
  fit(c, xent, o2, ds, epochs{2});
  CHECK(variables(d) == variables(c));
}
