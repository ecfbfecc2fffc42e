// pruning/global.hpp and the global step of pruning/update_pruning_step.hpp:
// one magnitude threshold across the layers pruned with global_magnitude,
// the group's kept count exact and constexpr, the per-layer counts reported,
// pruned weights exactly 0 after every update, and stripping.
#include <doctest/doctest.h>

#include <ctnn/ctnn.hpp>
#include <ctnn/pruning.hpp>

#include <algorithm>
#include <cmath>
#include <functional>
#include <type_traits>
#include <vector>

#include "pruning/strip_common.hpp"

using namespace ctnn;
using strip_test::toy_data;
using strip_test::worst_difference;
using strip_test::xent;

namespace {
using at50 = constant_sparsity<0.5>;
using tiny = sequential<input<4>, prune_low_magnitude<dense<3, relu>, at50, global_magnitude>,
                        prune_low_magnitude<dense<2>, at50, global_magnitude>>;

using sched = polynomial_sparsity<0.0, 0.75, 0, 12, 3, 3>;
using gnet = sequential<input<16>, prune_low_magnitude<dense<12, relu>, sched, global_magnitude>,
                        prune_low_magnitude<dense<8, relu>, sched, global_magnitude>, dense<3>>;

// A callback that runs f after every batch (after the step's after_update).
struct every_batch {
  std::function<void()> f;
  template <class Ctx>
  void on_batch_end(Ctx&) {
    f();
  }
};

// (mask, kernel, kernel size, kernel offset in the parameters) of every pruned layer
template <class M>
struct pruned_view {
  std::vector<const std::uint8_t*> masks;
  std::vector<float*> kernels;
  std::vector<std::size_t> sizes, offsets;
};
template <class M>
pruned_view<M> view(M& m) {
  pruned_view<M> v;
  m.for_each_variable([&](const variable_ref& r) {
    if (r.kind == role::mask) {
      v.masks.push_back(reinterpret_cast<const std::uint8_t*>(r.data));
      v.sizes.push_back(r.extent);
    }
    if (r.kind == role::parameter && r.name == "kernel" && r.layer < 2) {
      v.kernels.push_back(reinterpret_cast<float*>(r.data));
      v.offsets.push_back(std::size_t(reinterpret_cast<float*>(r.data) - m.parameters().data()));
    }
  });
  return v;
}
}  // namespace

// The group's sizes are compile-time constants; each layer strips with the bound min(its kernel, the group's total).
static_assert(pruning::global_weights<tiny> == 12 + 6);
static_assert(pruning::global_nnz<tiny> == 9);
static_assert(pruning::global_weights<gnet> == 16 * 12 + 12 * 8);
static_assert(pruning::global_nnz<gnet> == 72);  // keep_count(288, 0.75)
static_assert(std::is_same_v<stripped_t<tiny, layout::bitmap>, sequential<input<4>, sparse_dense<4, 3, 9, relu>, sparse_dense<3, 2, 6>>>);
static_assert(std::is_same_v<stripped_t<gnet, layout::bitmap>, sequential<input<16>, sparse_dense<16, 12, 72, relu>,
                                                                          sparse_dense<12, 8, 72, relu>, dense<3>>>);
// csc and rows take a global group that keeps at most 1 weight in 9 (the group's share: a layer's own
// is known only after training): 29 of 288 here, each layer up to 29
using gnet90 = sequential<input<16>, prune_low_magnitude<dense<12, relu>, constant_sparsity<0.9>, global_magnitude>,
                          prune_low_magnitude<dense<8, relu>, constant_sparsity<0.9>, global_magnitude>, dense<3>>;
static_assert(std::is_same_v<stripped_t<gnet90, layout::csc>, sequential<input<16>, sparse_dense_csc<16, 12, 29, relu>,
                                                                          sparse_dense_csc<12, 8, 29, relu>, dense<3>>>);

TEST_CASE("global_magnitude: one threshold across the layers, equal to the hand-computed one") {
  auto m = make_model<tiny>(1);
  // layer 1: |w| = 0.1 ... 1.2 (signs alternate); layer 2: small weights and one large one
  auto w1 = m.layer_parameters<0>();
  for (std::size_t i = 0; i < 12; ++i) w1[i] = float(0.1 * double(i + 1)) * (i % 2 ? -1.0f : 1.0f);
  const std::vector<float> small{0.05f, -0.15f, 0.25f, -0.35f, 0.45f, -1.5f};
  auto w2 = m.layer_parameters<1>();
  std::copy(small.begin(), small.end(), w2.begin());
  prune_at_step(m, 0);
  // 9 of 18 kept: |w| sorted 1.5, 1.2, 1.1, ..., 0.5 -> the threshold is 0.5 (by hand)
  const double threshold = 0.5;
  auto v = view(m);
  std::size_t kept = 0;
  for (std::size_t l = 0; l < 2; ++l)
    for (std::size_t i = 0; i < v.sizes[l]; ++i) {
      const double a = std::abs(double(l == 0 ? w1[i] : w2[i]));
      kept += v.masks[l][i];
      if (v.masks[l][i]) CHECK(a >= threshold - 1e-6);
      else CHECK(a < threshold - 1e-6);
    }
  CHECK(kept == 9);
  // the small-magnitude layer is pruned more: 1 of 6 kept against 8 of 12
  const auto sp = global_sparsities(m);
  REQUIRE(sp.size() == 2);
  CHECK(sp[0].first == 1);
  CHECK(sp[0].second == doctest::Approx(4.0 / 12));
  CHECK(sp[1].first == 2);
  CHECK(sp[1].second == doctest::Approx(5.0 / 6));
  const auto k = global_kept(m);
  CHECK(k[0].second == 8);
  CHECK(k[1].second == 1);
  // the masked weights are 0, the kept ones unchanged
  CHECK(w1[0] == 0.0f);
  CHECK(w1[11] == doctest::Approx(-1.2f));
  CHECK(w2[5] == -1.5f);
  CHECK(w2[4] == 0.0f);
}

TEST_CASE("global_magnitude: training keeps the group's total exactly, the small layer loses more, pruned weights stay 0") {
  auto run = [](auto opt) {
    auto m = make_model<gnet>(4);
    // layer 2's weights 10x smaller than layer 1's
    auto w2 = m.template layer_parameters<1>();
    for (std::size_t i = 0; i < 12 * 8; ++i) w2[i] *= 0.1f;
    auto n = m.parameters().size();
    std::size_t checks = 0;
    every_batch cb{[&] {
      auto v = view(m);
      for (std::size_t l = 0; l < 2; ++l)
        for (std::size_t i = 0; i < v.sizes[l]; ++i)
          if (!v.masks[l][i]) {
            ++checks;
            if (v.kernels[l][i] != 0.0f) FAIL("a pruned weight of layer " << l + 1 << " is " << v.kernels[l][i]);
          }
    }};
    auto h = fit(m, xent, opt, toy_data<16>(64, 3).batch(8), epochs{3}, update_pruning_step{}, cb);
    CHECK(checks > 0);
    auto v = view(m);
    const std::size_t slots = opt.slots_per_parameter();
    std::size_t kept = 0;
    for (std::size_t l = 0; l < 2; ++l)
      for (std::size_t i = 0; i < v.sizes[l]; ++i) {
        kept += v.masks[l][i];
        if (!v.masks[l][i])
          for (std::size_t s = 0; s < slots; ++s) CHECK(m.optimizer_slots()[s * n + v.offsets[l] + i] == 0.0f);
      }
    CHECK(kept == pruning::global_nnz<gnet>);
    const auto sp = global_sparsities(m);
    CHECK(sp[1].second > sp[0].second);
    CHECK(h["sparsity_layer_2"][2] == doctest::Approx(sp[1].second));
    // stripped with the bound, and with NNZs chosen from global_kept: the same predictions
    auto s = strip_pruning(m);
    const auto xs = strip_test::random_inputs(40 * 16, 6);
    CHECK(worst_difference(m, s, xs, 40) < 1e-5);
    const auto k = global_kept(m);
    CHECK(k[0].second + k[1].second == pruning::global_nnz<gnet>);
  };
  SUBCASE("adam") { run(adam{0.01}); }
  SUBCASE("sgd with momentum") { run(sgd{0.1, 0.9}); }
  SUBCASE("EMA and weight decay") { run(with_options{adam{0.01}, {.weight_decay = 0.1, .use_ema = true, .ema_momentum = 0.9}}); }
}

TEST_CASE("global_magnitude: strip_pruning_to with the per-layer counts written into the type") {
  // a fixed pruning: layer 1 keeps 8, layer 2 keeps 1 (first test case)
  auto m = make_model<tiny>(1);
  auto w1 = m.layer_parameters<0>();
  for (std::size_t i = 0; i < 12; ++i) w1[i] = float(0.1 * double(i + 1));
  auto w2 = m.layer_parameters<1>();
  for (std::size_t i = 0; i < 6; ++i) w2[i] = i == 5 ? 1.5f : 0.05f;
  prune_at_step(m, 0);
  using tight = sequential<input<4>, sparse_dense<4, 3, 8, relu>, sparse_dense<3, 2, 1>>;
  static_assert(tight::parameter_count < stripped_t<tiny>::parameter_count);
  auto s = strip_pruning_to<tight>(m);
  const auto xs = strip_test::random_inputs(10 * 4, 1);
  CHECK(worst_difference(m, s, xs, 10) < 1e-6);
  using too_tight = sequential<input<4>, sparse_dense<4, 3, 7, relu>, sparse_dense<3, 2, 1>>;
  CHECK_THROWS_WITH(strip_pruning_to<too_tight>(m), doctest::Contains("strip_pruning: layer 1 keeps 8 weights, more than the 7"));
}
