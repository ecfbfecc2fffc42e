// pruning/prune.hpp, masks.hpp, update_pruning_step.hpp: masks in the plan and
// in weight files, magnitude masks per pattern, and the guarantee that pruned
// weights are exactly 0 after every update for every optimizer and option.
#include <doctest/doctest.h>

#include <ctnn/ctnn.hpp>
#include <ctnn/pruning.hpp>

#include <cmath>
#include <filesystem>
#include <string>
#include <vector>

#include "pruning/strip_common.hpp"

using namespace ctnn;

namespace {
using sched = polynomial_sparsity<0.0, 0.75, 0, 12, 3, 3>;
using net = sequential<input<16>, prune_low_magnitude<dense<12, relu>, sched>, dense<3>>;
using dense_net = sequential<input<16>, dense<12, relu>, dense<3>>;

// 64 samples of 16 features in [-1, 1), classes i % 3
auto toy_data() { return strip_test::toy_data<16>(64, 3); }
using strip_test::xent;

template <class M>
std::size_t nonzero_kernel(M& m) {
  auto w = m.template layer_parameters<0>();
  std::size_t nz = 0;
  for (std::size_t i = 0; i < 16 * 12; ++i) nz += w[i] != 0;
  return nz;
}
// Every masked weight and every optimizer slot value of a masked weight is exactly 0.
template <class M>
void check_pruned_exactly_zero(M& m, std::size_t slots) {
  const std::uint8_t* mask = nullptr;
  m.for_each_variable([&](const variable_ref& v) {
    if (v.kind == role::mask) mask = reinterpret_cast<const std::uint8_t*>(v.data);
  });
  REQUIRE(mask);
  auto w = m.template layer_parameters<0>();
  const std::size_t off = std::size_t(w.data() - m.parameters().data()), n = m.parameters().size();
  std::size_t masked = 0;
  for (std::size_t i = 0; i < 16 * 12; ++i)
    if (!mask[i]) {
      ++masked;
      CHECK(w[i] == 0.0f);
      for (std::size_t k = 0; k < slots; ++k) CHECK(m.optimizer_slots()[k * n + off + i] == 0.0f);
    }
  CHECK(masked == 144);  // 192 * 0.75
}
}  // namespace

static_assert(net::parameter_count == dense_net::parameter_count);
static_assert(net::memory_plan(1).masks == 16 * 12);  // one byte per kernel weight, in the plan
static_assert(dense_net::memory_plan(1).masks == 0);
static_assert(net::memory_plan(1).parameters == dense_net::memory_plan(1).parameters);
static_assert(std::tuple_element_t<0, net::bound<float>>::final_nnz == 48);

TEST_CASE("prune_low_magnitude: the mask is a buffer of the layer, all ones at first, saved with the weights") {
  auto m = make_model<net>(1);
  std::size_t masks = 0;
  m.for_each_variable([&](const variable_ref& v) {
    if (v.kind != role::mask) return;
    ++masks;
    CHECK(v.layer == 0);
    CHECK(v.name == "kernel_mask");
    CHECK(v.rank == 2);
    CHECK(v.dims[0] == 16);
    CHECK(v.dims[1] == 12);
    for (std::size_t i = 0; i < v.extent; ++i) CHECK(std::to_integer<int>(v.data[i]) == 1);
  });
  CHECK(masks == 1);
  // the same initial weights as the unpruned network
  auto d = make_model<dense_net>(1);
  CHECK(std::equal(d.parameters().begin(), d.parameters().end(), m.parameters().begin()));

  sgd opt{0.1};
  fit(m, xent, opt, toy_data().batch(8), epochs{2}, update_pruning_step{});
  const auto path = std::filesystem::temp_directory_path() / "ctnn_pruned_weights.bin";
  io::save_weights(m, path);
  auto m2 = make_model<net>(9);
  io::load_weights(m2, path);
  CHECK(std::equal(m.masks().begin(), m.masks().end(), m2.masks().begin()));
  CHECK(layer_sparsities(m2)[0].second == doctest::Approx(0.75));
  std::filesystem::remove(path);
}

TEST_CASE("compute_mask: magnitude per layer, N:M along the input dimension, blocks") {
  // w[4 x 4], row-major
  const std::vector<float> w{0.1f, -0.9f, 0.3f, 0.0f,   //
                             -0.5f, 0.2f, 0.8f, -0.4f,  //
                             0.7f, 0.05f, -0.6f, 0.25f, //
                             -0.15f, 0.35f, 0.45f, -1.0f};
  std::vector<std::uint8_t> m(16);
  SUBCASE("unstructured 0.75: the 4 largest |w|") {
    pruning::compute_mask<unstructured>(w.data(), 4, 4, 0.75, m.data());
    CHECK(m == std::vector<std::uint8_t>{0, 1, 0, 0, 0, 0, 1, 0, 1, 0, 0, 0, 0, 0, 0, 1});
  }
  SUBCASE("2:4 along the rows of each column") {
    pruning::compute_mask<n_of_m<2, 4>>(w.data(), 4, 4, 0.0, m.data());
    // column 0: |0.1, 0.5, 0.7, 0.15| -> rows 1, 2; column 1: |0.9, 0.2, 0.05, 0.35| -> rows 0, 3
    // column 2: |0.3, 0.8, 0.6, 0.45| -> rows 1, 2; column 3: |0, 0.4, 0.25, 1.0| -> rows 1, 3
    CHECK(m == std::vector<std::uint8_t>{0, 1, 0, 0, 1, 0, 1, 1, 1, 0, 1, 0, 0, 1, 0, 1});
  }
  SUBCASE("2x2 blocks at 0.5: the two blocks of largest mean |w|") {
    pruning::compute_mask<block<2, 2>>(w.data(), 4, 4, 0.5, m.data());
    // sums: top-left 1.7, top-right 1.5, bottom-left 1.25, bottom-right 2.3
    CHECK(m == std::vector<std::uint8_t>{1, 1, 0, 0, 1, 1, 0, 0, 0, 0, 1, 1, 0, 0, 1, 1});
  }
}

TEST_CASE("update_pruning_step: sparsity follows the schedule and is logged per epoch") {
  auto m = make_model<net>(2);
  // 8 steps per epoch; the schedule prunes at steps 0, 3, 6, 9, 12
  sgd opt{0.05};
  auto h = fit(m, xent, opt, toy_data().batch(8), epochs{2}, update_pruning_step{});
  REQUIRE(h.contains("sparsity_layer_1"));
  CHECK_FALSE(h.contains("sparsity_layer_2"));
  // after epoch 1 (steps 0..7) the last mask is step 6's: keep_count(192, 0.75 - 0.75 * 0.5^3)
  CHECK(h["sparsity_layer_1"][0] == doctest::Approx(1.0 - double(detail::keep_count(192, sched::sparsity(6))) / 192));
  CHECK(h["sparsity_layer_1"][1] == doctest::Approx(0.75));
  CHECK(nonzero_kernel(m) <= 48);
}

TEST_CASE("update_pruning_step under gradient accumulation: the schedule reads the update count") {
  // TFMOT's UpdatePruningStep drives pruning_step from the optimizer's
  // iterations; with Keras 3's gradient accumulation those count updates
  // (_iterations // N). 8 steps, N = 2: update counts 0, 0, 1, 1, 2, 2, 3, 3,
  // so the masks of steps 0 and 3 only (the step count would reach 6).
  auto m = make_model<net>(2);
  with_options opt{sgd{0.05}, {.gradient_accumulation_steps = 2}};
  auto h = fit(m, xent, opt, toy_data().batch(8), epochs{1}, update_pruning_step{});
  CHECK(m.optimizer_iterations() == 4);
  REQUIRE(sched::sparsity(3) != sched::sparsity(6));
  CHECK(h["sparsity_layer_1"][0] == doctest::Approx(1.0 - double(detail::keep_count(192, sched::sparsity(3))) / 192));
}

// A callback checks after every batch (after the step's after_update).
struct checker {
  std::size_t slots = 0, checks = 0;
  template <class Ctx>
  void on_batch_end(Ctx& ctx) {
    const std::uint8_t* mask = nullptr;
    ctx.model.for_each_variable([&](const variable_ref& v) {
      if (v.kind == role::mask) mask = reinterpret_cast<const std::uint8_t*>(v.data);
    });
    auto w = ctx.model.template layer_parameters<0>();
    for (std::size_t i = 0; i < 16 * 12; ++i)
      if (!mask[i]) {
        ++checks;
        if (w[i] != 0.0f) FAIL("a pruned weight is " << w[i] << " after step " << ctx.step);
      }
  }
};

TEST_CASE("pruned weights are exactly 0 after every update, for every optimizer and option") {
  auto run = [&](auto opt, std::size_t n_epochs = 3) {
    const std::size_t slots = opt.slots_per_parameter();
    auto m = make_model<net>(4);
    checker c{slots};
    fit(m, xent, opt, toy_data().batch(8), epochs{n_epochs}, update_pruning_step{}, c);
    CHECK(c.checks > 0);
    check_pruned_exactly_zero(m, slots);
  };
  SUBCASE("sgd with momentum") { run(sgd{0.1, 0.9}); }
  SUBCASE("sgd with nesterov momentum") { run(sgd{0.1, 0.9, true}); }
  SUBCASE("adam's slots") { run(adam{0.01}); }
  SUBCASE("rmsprop") { run(rmsprop{0.01}); }
  SUBCASE("adagrad") { run(adagrad{0.1}); }
  SUBCASE("EMA (finalize copies the average into the weights)") {
    run(with_options{adam{0.01}, {.use_ema = true, .ema_momentum = 0.9}});
  }
  SUBCASE("EMA overwriting the weights every 2 updates") {
    run(with_options{sgd{0.1, 0.9}, {.use_ema = true, .ema_momentum = 0.5, .ema_overwrite_frequency = 2}});
  }
  SUBCASE("weight decay") { run(with_options{adam{0.01}, {.weight_decay = 0.1}}); }
  SUBCASE("gradient accumulation and clipping") {
    // the schedule reads the update count: 4 epochs of 8 steps are 16 updates, past step 12's final mask
    run(with_options{sgd{0.1, 0.9}, {.clipnorm = 0.5, .gradient_accumulation_steps = 2}}, 4);
  }
}

TEST_CASE("prune_low_magnitude<conv2d>: the mask has the kernel's shape, the filters' weights are pruned per layer") {
  using cnn = sequential<input<6, 6>, prune_low_magnitude<conv2d<4, 3, 3, 1, padding::valid, relu>, constant_sparsity<0.5>>,
                         flatten, dense<3>>;
  static_assert(cnn::memory_plan(1).masks == align_bytes(3 * 3 * 1 * 4));  // one 64-byte aligned block
  static_assert(std::tuple_element_t<0, cnn::bound<float>>::final_nnz == 18);
  auto m = make_model<cnn>(5);
  m.for_each_variable([&](const variable_ref& v) {
    if (v.kind != role::mask) return;
    CHECK(v.rank == 4);
    CHECK(v.dims[0] == 3);
    CHECK(v.dims[3] == 4);
  });
  std::vector<float> x(32 * 36);
  std::vector<std::int32_t> y(32);
  rng g(1);
  for (auto& v : x) v = float(g.uniform(0, 1));
  for (std::size_t i = 0; i < 32; ++i) y[i] = std::int32_t(i % 3);
  adam opt{0.01};
  auto h = fit(m, xent, opt, data::in_memory<shape<6, 6>, sparse_labels>{x, y}.batch(8), epochs{1}, update_pruning_step{});
  CHECK(h["sparsity_layer_1"][0] == 0.5);
  auto w = m.layer_parameters<0>();
  CHECK(std::count(w.begin(), w.begin() + 36, 0.0f) == 18);
}
