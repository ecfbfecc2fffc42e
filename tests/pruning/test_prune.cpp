// pruning/prune.hpp, masks.hpp, update_pruning_step.hpp: masks in the plan and
// in weight files, magnitude masks per pattern, the guarantee that pruned
// weights are exactly 0 after every update for every optimizer and option, and
// the recurrent layers' kernel and recurrent_kernel pruned each on its own.
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

namespace {
// simple_rnn, gru and lstm pruned in one network (one model type): kernel and recurrent_kernel
// each get a mask; the schedule reaches 0.5 at step 8 (masks at steps 0, 2, ..., 8)
using rnn_sched = polynomial_sparsity<0.0, 0.5, 0, 8, 3, 2>;
using rnn_net = sequential<input<6, 4>, prune_low_magnitude<simple_rnn<8, ctnn::tanh, return_sequences>, rnn_sched>,
                           prune_low_magnitude<gru<8, return_sequences>, rnn_sched>, prune_low_magnitude<lstm<8>, rnn_sched>,
                           dense<3>>;
using rnn_plain = sequential<input<6, 4>, simple_rnn<8, ctnn::tanh, return_sequences>, gru<8, return_sequences>, lstm<8>, dense<3>>;
using rnn_bound = rnn_net::bound<float>;
// [rows x cols] of each pruned weight: simple_rnn 4 x 8 and 8 x 8, gru 8 x 24 twice, lstm 8 x 32 twice
constexpr std::size_t rnn_weights[3][2][2] = {{{4, 8}, {8, 8}}, {{8, 24}, {8, 24}}, {{8, 32}, {8, 32}}};
static_assert(rnn_net::parameter_count == rnn_plain::parameter_count);
static_assert(rnn_net::memory_plan(1).masks == align_bytes(32 + 64) + align_bytes(2 * 192) + align_bytes(2 * 256));
static_assert(std::tuple_element_t<1, rnn_bound>::pruned.size() == 2);
static_assert(std::tuple_element_t<1, rnn_bound>::pruned[1].at == 8 * 24);  // recurrent_kernel after the kernel
static_assert(std::tuple_element_t<2, rnn_bound>::masked_count == 2 * 8 * 32);  // not the bias
// final_nnz: each weight's own top-k (keep_count per weight, not of the two together)
static_assert(std::tuple_element_t<0, rnn_bound>::final_nnz == 16 + 32);
static_assert(std::tuple_element_t<2, rnn_bound>::final_nnz == 128 + 128);
static_assert(std::is_same_v<stripped_t<rnn_net>, rnn_plain>);  // no sparse recurrent layer: the dense one

// On a sequence of 6 steps of 4 features: the class of the sign pattern of two features' sums.
auto rnn_data() {
  std::vector<float> x(96 * 24);
  std::vector<std::int32_t> y(96);
  rng g(3);
  for (auto& v : x) v = float(g.uniform(-1, 1));
  for (std::size_t i = 0; i < 96; ++i) {
    double a = 0, b = 0;
    for (std::size_t t = 0; t < 6; ++t) a += x[i * 24 + t * 4], b += x[i * 24 + t * 4 + 1];
    y[i] = a > 0 ? (b > 0 ? 0 : 1) : 2;
  }
  return data::in_memory<shape<6, 4>, sparse_labels>{x, y};
}

// After every batch: every masked weight of every pruned layer is exactly 0.
struct rnn_checker {
  std::size_t checks = 0;
  template <class Ctx>
  void on_batch_end(Ctx& ctx) {
    pruning::detail::for_each_pruned(ctx.model, pruning::detail::kernel_bit | pruning::detail::mask_bit, 0,
                                     [&]<std::size_t I, class L>(auto* w, auto*, const std::uint8_t* mask, std::size_t, auto*) {
                                       for (std::size_t i = 0; i < L::masked_count; ++i)
                                         if (!mask[i]) {
                                           ++checks;
                                           if (w[i] != 0.0f) FAIL("layer " << I + 1 << ": pruned weight " << i << " is " << w[i]);
                                         }
                                     });
  }
};
}  // namespace

TEST_CASE("prune_low_magnitude<simple_rnn / gru / lstm>: kernel and recurrent_kernel pruned each to the final sparsity") {
  auto m = make_model<rnn_net>(6);
  std::vector<std::string> names;
  m.for_each_variable([&](const variable_ref& v) {
    if (v.kind != role::mask) return;
    names.push_back(std::to_string(v.layer) + " " + std::string(v.name));
    const auto& d = rnn_weights[v.layer][v.name == "kernel_mask" ? 0 : 1];
    CHECK(v.rank == 2);
    CHECK(v.dims[0] == d[0]);
    CHECK(v.dims[1] == d[1]);
  });
  CHECK(names == std::vector<std::string>{"0 kernel_mask", "0 recurrent_kernel_mask", "1 kernel_mask",
                                          "1 recurrent_kernel_mask", "2 kernel_mask", "2 recurrent_kernel_mask"});
  adam opt{0.01};
  rnn_checker c;
  auto h = fit(m, xent, opt, rnn_data().batch(8), epochs{2}, update_pruning_step{}, c);
  CHECK(c.checks > 0);
  // every pruned weight reaches 0.5 on its own (12 steps, the last mask at step 8)
  std::size_t layer = 0;
  m.for_each_variable([&](const variable_ref& v) {
    if (v.kind != role::mask) return;
    const auto& d = rnn_weights[v.layer][v.name == "kernel_mask" ? 0 : 1];
    std::size_t kept = 0;
    for (std::size_t i = 0; i < v.extent; ++i) kept += std::to_integer<int>(v.data[i]);
    CHECK_MESSAGE(kept == detail::keep_count(d[0] * d[1], 0.5), "layer " << v.layer + 1 << " " << v.name);
    layer = v.layer;
  });
  CHECK(layer == 2);
  for (const char* k : {"sparsity_layer_1", "sparsity_layer_2", "sparsity_layer_3"}) CHECK(h[k].back() == 0.5);
  CHECK_FALSE(h.contains("sparsity_layer_4"));
  CHECK(std::isfinite(h["loss"].back()));
  CHECK(h["loss"].back() < h["loss"].front());
  auto lstm_w = m.layer_parameters<2>();
  CHECK(std::count(lstm_w.begin(), lstm_w.begin() + 2 * 8 * 32, 0.0f) >= 256);
  CHECK(std::count(lstm_w.begin() + 2 * 8 * 32, lstm_w.end(), 0.0f) == 0);  // the bias is not pruned

  SUBCASE("sensitivity_analysis prunes the recurrent layers' two kernels too") {
    const auto t = sensitivity_analysis(m, xent, rnn_data().batch(32), sparse_categorical_accuracy{}, {0.0, 0.99});
    REQUIRE(t.layers == std::vector<std::size_t>{1, 2, 3, 4});
    CHECK(t.value[2][0] == t.baseline);
    CHECK(t.value[2][1] < t.baseline);  // the lstm with 1 % of each kernel left
  }
  SUBCASE("the weights file carries both masks of each layer") {
    const auto path = std::filesystem::temp_directory_path() / "ctnn_pruned_rnn_weights.bin";
    io::save_weights(m, path);
    auto m2 = make_model<rnn_net>(9);
    io::load_weights(m2, path);
    CHECK(std::equal(m.masks().begin(), m.masks().end(), m2.masks().begin()));
    CHECK(std::equal(m.parameters().begin(), m.parameters().end(), m2.parameters().begin()));
    std::filesystem::remove(path);
  }
  SUBCASE("strip_pruning: the plain recurrent layers with the zeros, the same predictions") {
    auto s = strip_pruning(m);
    static_assert(std::is_same_v<decltype(s), model<rnn_plain>>);
    auto sw = s.layer_parameters<1>();
    auto mw = m.layer_parameters<1>();
    CHECK(std::equal(sw.begin(), sw.end(), mw.begin()));
    CHECK(std::count(sw.begin(), sw.begin() + 2 * 8 * 24, 0.0f) >= 2 * 96);
    const auto xs = strip_test::random_inputs(10 * 24, 4);
    CHECK(strip_test::worst_difference(m, s, xs, 10) <= 1e-6);
  }
}
