// The generic model on the device under the mixed policies (the plan's
// float32 variables and compute-type parameter copy), loss scaling, fit's
// extras (callbacks, metrics, validation data, regularizers) and the
// runner's captured inference graphs inside fit, each against the CPU model
// of the same seed.
#include "cuda_test.hpp"

#include <cmath>
#include <cstdint>
#include <filesystem>

using namespace ctnn_test;
using dev = ctnn::cuda<90>;

namespace {
using mlp = ctnn::sequential<ctnn::input<12>, ctnn::dense<16, ctnn::relu>, ctnn::dense<8, ctnn::tanh>, ctnn::dense<4>>;
using reg_mlp = ctnn::sequential<ctnn::input<12>, ctnn::dense<16, ctnn::relu, ctnn::l2<0.01f>>,
                                 ctnn::dense<8, ctnn::sigmoid, ctnn::l1<0.001f>>, ctnn::dense<4>>;
using drop_mlp = ctnn::sequential<ctnn::input<12>, ctnn::dense<16, ctnn::relu>, ctnn::dropout<0.25f>, ctnn::dense<4>>;
using wide_mlp = ctnn::sequential<ctnn::input<100>, ctnn::dense<128, ctnn::relu>, ctnn::dense<128, ctnn::sigmoid>,
                                  ctnn::dense<10>>;
using flat_mlp = ctnn::sequential<ctnn::input<4, 8>, ctnn::flatten, ctnn::dense<32, ctnn::relu>, ctnn::dense<5>>;
using cnn = ctnn::sequential<ctnn::input<8, 8, 2>, ctnn::conv2d<4, 3, 3, 1, ctnn::padding::same, ctnn::relu>,
                             ctnn::max_pool2d<2>, ctnn::flatten, ctnn::dense<5, ctnn::sigmoid>, ctnn::dense<3>>;
using too_wide = ctnn::sequential<ctnn::input<784>, ctnn::dense<128, ctnn::relu>, ctnn::dense<10>>;

// The fused kernel's fit is decided at compile time from the bound layers (the model's hook is cudahooks').
static_assert(ctnn::fused_mlp_fits<ctnn::model<mlp, ctnn::precision::float32, dev>::layers>());
static_assert(ctnn::fused_mlp_fits<ctnn::model<wide_mlp, ctnn::precision::mixed_float16, dev>::layers>());
static_assert(ctnn::fused_mlp_fits<ctnn::model<flat_mlp, ctnn::precision::float32, dev>::layers>());
static_assert(!ctnn::fused_mlp_fits<ctnn::model<cnn, ctnn::precision::float32, dev>::layers>());
static_assert(!ctnn::fused_mlp_fits<ctnn::model<too_wide, ctnn::precision::float32, dev>::layers>());
static_assert(!ctnn::fused_mlp_fits<ctnn::model<drop_mlp, ctnn::precision::float32, dev>::layers>());
// The mixed policies through the plan, as on the CPU: float32 variables, a 16-bit compute type (the host's
// names of the bits: float16_t, bfloat16_t; the CUDA ops take them as __half, __nv_bfloat16), float io.
static_assert(std::is_same_v<ctnn::model<mlp, ctnn::precision::mixed_float16, dev>::variable_type, float>);
static_assert(std::is_same_v<ctnn::model<mlp, ctnn::precision::mixed_float16, dev>::compute_type, ctnn::float16_t>);
static_assert(std::is_same_v<ctnn::model<mlp, ctnn::precision::mixed_bfloat16, dev>::compute_type, ctnn::bfloat16_t>);
static_assert(std::is_same_v<ctnn::model<mlp, ctnn::precision::mixed_float16, dev>::value_type, float>);
static_assert(ctnn::model<mlp, ctnn::precision::mixed_float16, dev>::plan::copies[0]);
static_assert(!ctnn::model<mlp, ctnn::precision::float32, dev>::plan::copies[0]);
// the 16-bit activations take less memory than float32's, and the device plan is the CPU's, so
// memory_saved (core/precision_memory.hpp) holds for a device model as it is
static_assert(ctnn::model<mlp, ctnn::precision::mixed_float16, dev>::plan::layout(64, 0).bytes(ctnn::role::activation) <
              ctnn::model<mlp, ctnn::precision::float32, dev>::plan::layout(64, 0).bytes(ctnn::role::activation));
static_assert(ctnn::model<mlp, ctnn::precision::mixed_float16, dev>::plan::layout(256, 2).total ==
              ctnn::model<mlp, ctnn::precision::mixed_float16>::plan::layout(256, 2).total);
static_assert(ctnn::memory_saved<mlp, ctnn::precision::mixed_float16>(256, 2).activations > 0);
static_assert(std::tuple_element_t<1, ctnn::model<drop_mlp, ctnn::precision::float32, dev>::layers>::draws_random);

// batch_norm's moving statistics on the device: float32 under the mixed
// policies (as Keras and the CPU mixed model keep them: the layer's S,
// precision::state_type_t), the variables' type otherwise. 16 channels: 32
// statistics take 128 bytes in float32 and 64 in 16 bits, so the plan's
// state region tells them apart too.
using bn_mlp = ctnn::sequential<ctnn::input<16>, ctnn::batch_normalization<0.999, 1e-3>, ctnn::dense<8, ctnn::relu>,
                                ctnn::dense<4>>;
template <class P>
using bn_model = ctnn::model<bn_mlp, P, dev>;
template <class P>
using bn_layer = std::tuple_element_t<0, typename bn_model<P>::layers>;
template <class P>
constexpr bool float32_statistics() {
  using L = bn_layer<P>;
  return L::buffers[2].name == "moving_mean" && L::buffers[3].name == "moving_variance" &&
         std::is_same_v<typename L::S, float> &&
         bn_model<P>::plan::layout(1, 0).bytes(ctnn::role::state) == 32 * sizeof(float);
}
static_assert(float32_statistics<ctnn::precision::mixed_float16>());
static_assert(float32_statistics<ctnn::precision::mixed_bfloat16>());
static_assert(std::is_same_v<bn_layer<ctnn::precision::mixed_float16>::compute_type, ctnn::float16_t>);
static_assert(std::is_same_v<bn_layer<ctnn::precision::float16>::S, ctnn::float16_t>);
static_assert(bn_model<ctnn::precision::float16>::plan::layout(1, 0).bytes(ctnn::role::state) == 32 * sizeof(ctnn::float16_t));
// and the CPU layer's traits (onnx and strip read kind)
static_assert(std::is_same_v<bn_layer<ctnn::precision::mixed_float16>::kind, ctnn::layer_kind::batch_norm>);
static_assert(std::is_same_v<bn_layer<ctnn::precision::float32>::S, float>);

template <class Net>
auto dataset(std::size_t n, std::uint32_t seed, float scale = 1.0f) {
  constexpr std::size_t K = Net::output_type::size;
  std::vector<std::int32_t> labels(n);
  for (std::size_t i = 0; i < n; ++i) labels[i] = std::int32_t((i * 5 + seed) % K);
  return ctnn::data::in_memory<typename Net::input_type, ctnn::sparse_labels, float>(
      random_values(n * Net::input_type::size, seed, -scale, scale), labels);
}

template <class P>
using half_of = typename P::compute_type;


}  // namespace

namespace ctnn_test {
// Counts the hooks fit calls; stops training at the end of epoch stop_at (1-based; 0: never).
struct counting_callback {
  int train_begin = 0, train_end = 0, epoch_begin = 0, epoch_end = 0, batch_begin = 0, batch_end = 0;
  std::size_t stop_at = 0;
  double last_batch_loss = 0;
  template <class C>
  void on_train_begin(C&) { ++train_begin; }
  template <class C>
  void on_train_end(C&) { ++train_end; }
  template <class C>
  void on_epoch_begin(C&) { ++epoch_begin; }
  template <class C>
  void on_epoch_end(C& c) {
    ++epoch_end;
    if (stop_at && c.epoch + 1 == stop_at) c.stop_training = true;
  }
  template <class C>
  void on_batch_begin(C&) { ++batch_begin; }
  template <class C>
  void on_batch_end(C& c) {
    ++batch_end;
    last_batch_loss = c.batch_loss;
  }
};
}  // namespace ctnn_test

TEST_CASE_TEMPLATE("a mixed model on the device starts from the float32 bits and predicts as the CPU mixed model", P,
                   ctnn::precision::mixed_float16, ctnn::precision::mixed_bfloat16) {
  CTNN_REQUIRE_DEVICE();
  using H = half_of<P>;
  auto cm = ctnn::make_model<mlp, P>(3);  // CPU: float32 variables, 16-bit activations
  auto gm = ctnn::make_model<mlp, P, dev>(3);
  CHECK(download(gm, ctnn::role::parameter) == std::vector<float>(cm.parameters().begin(), cm.parameters().end()));
  const std::size_t batch = 37;
  const auto x = random_values(batch * 12, 140);
  const auto want = cm.predict(x.data(), batch);
  const auto got = gm.predict(x.data(), batch);
  // weights, inputs and each activation rounded to H: 8 units of the significand at the largest output
  const double tol = std::is_same_v<H, ctnn::float16_t> ? 8.0 / 1024 : 8.0 / 128;
  const double e = relative_error(got, want);
  INFO(ctnn::storage<H>::name << ": relative error " << e);
  CHECK(e <= tol);
}

TEST_CASE_TEMPLATE("a mixed model's float32 gradients match the CPU mixed model's", P, ctnn::precision::mixed_float16,
                   ctnn::precision::mixed_bfloat16) {
  CTNN_REQUIRE_DEVICE();
  using H = half_of<P>;
  auto cm = ctnn::make_model<mlp, P>(4);
  auto gm = ctnn::make_model<mlp, P, dev>(4);
  const std::size_t batch = 9;
  const auto x = rounded<H>(random_values(batch * 12, 150));
  const auto dy = rounded<H>(random_values(batch * 4, 151));
  cm.forward(x.data(), batch, true);
  std::copy(dy.begin(), dy.end(), cm.output_gradient());
  cm.backward();
  gm.forward(x.data(), batch, true);
  // dL/dy is io (float); backward widens the compute-type gradients into the float32 ones
  ctnn::cuda_device_memory::copy(gm.output_gradient(), dy.data(), dy.size() * sizeof(float));
  gm.backward();
  const double tol = std::is_same_v<H, ctnn::float16_t> ? 8.0 / 1024 : 8.0 / 128;
  const double e = relative_error(download(gm, ctnn::role::gradient),
                                  std::vector<float>(cm.gradients().begin(), cm.gradients().end()));
  INFO(ctnn::storage<H>::name << ": gradients' relative error " << e);
  CHECK(e <= tol);
  CHECK(ctnn::ops<dev>::all_finite(gm.gradients().data(), gm.gradients().size()));
}

TEST_CASE_TEMPLATE("batch_norm's moving statistics under a mixed policy on the device are float32, as the CPU mixed model's",
                   P, ctnn::precision::mixed_float16, ctnn::precision::mixed_bfloat16) {
  CTNN_REQUIRE_DEVICE();
  using H = half_of<P>;
  auto cm = ctnn::make_model<bn_mlp, P>(6);
  auto gm = ctnn::make_model<bn_mlp, P, dev>(6);
  // batch_norm is the first layer and its input is exact in H, so both sides
  // compute the batch statistics in float32 from the same values. Momentum
  // 0.999 moves the statistics by about one 16-bit unit per step: 16-bit
  // statistics would be off by far more than the float32 tolerance below.
  const std::size_t batch = 24;
  for (std::uint32_t step = 0; step < 12; ++step) {
    const auto x = rounded<H>(random_values(batch * 16, 180 + step, -2.0f, 3.0f));
    cm.forward(x.data(), batch, true);
    gm.forward(x.data(), batch, true);
  }
  const auto got = download(gm, ctnn::role::state);
  const std::vector<float> want(cm.state().begin(), cm.state().end());
  REQUIRE(got.size() == want.size());
  const double e = relative_error(got, want);
  INFO("moving statistics' relative error " << e);
  CHECK(e <= 1e-5);
  // and they go back unchanged through a host view of the variables (what load_weights writes through)
  gm.for_each_variable([](const ctnn::variable_ref&) {});
  CHECK(download(gm, ctnn::role::state) == got);
}

TEST_CASE_TEMPLATE("fit under a mixed policy on the device follows the CPU mixed fit", P, ctnn::precision::mixed_float16,
                   ctnn::precision::mixed_bfloat16) {
  CTNN_REQUIRE_DEVICE();
  const auto data = dataset<mlp>(100, 160).batch(16);
  const ctnn::sparse_categorical_crossentropy loss{.from_logits = true};
  auto cm = ctnn::make_model<mlp, P>(5);
  auto gm = ctnn::make_model<mlp, P, dev>(5);
  ctnn::adam o1{1e-2}, o2{1e-2};
  ctnn::loss_scale s1, s2;
  const auto hc = ctnn::fit(cm, loss, o1, data, ctnn::epochs{2}, s1);
  const auto hg = ctnn::fit(gm, loss, o2, data, ctnn::epochs{2}, s2);
  CHECK(gm.optimizer_iterations() == cm.optimizer_iterations());
  for (std::size_t k = 0; k < 2; ++k) {
    CHECK(hg.values.at("loss")[k] == doctest::Approx(hc.values.at("loss")[k]).epsilon(2e-2));
    CHECK(hg.values.at("loss_scale")[k] == hc.values.at("loss_scale")[k]);
    CHECK(hg.values.at("skipped_steps")[k] == 0);
  }
  // 14 Adam updates from one start, 16-bit activations: within a few units of the 16-bit significand
  const double e = relative_error(download(gm, ctnn::role::parameter),
                                  std::vector<float>(cm.parameters().begin(), cm.parameters().end()));
  INFO("parameters' relative error " << e);
  CHECK(e < (std::is_same_v<P, ctnn::precision::mixed_float16> ? 1e-2 : 5e-2));
  const auto ec = ctnn::evaluate(cm, loss, data);
  const auto eg = ctnn::evaluate(gm, loss, data);
  CHECK(eg["loss"] == doctest::Approx(ec["loss"]).epsilon(2e-2));
}

TEST_CASE("mixed_float16 fit with a loss_scale on the device: Keras' scale, an overflow skips the step and halves it") {
  CTNN_REQUIRE_DEVICE();
  const auto data = dataset<mlp>(100, 170).batch(16);  // 7 steps
  const ctnn::sparse_categorical_crossentropy loss{.from_logits = true};
  {
    // the generic fit scales when given a loss_scale (train/loss_scale.hpp), as on the CPU
    auto m = ctnn::make_model<mlp, ctnn::precision::mixed_float16, dev>(6);
    ctnn::adam opt{1e-3};
    ctnn::loss_scale ls;
    const auto h = ctnn::fit(m, loss, opt, data, ctnn::epochs{1}, ls);
    CHECK(h.values.at("loss_scale")[0] == 32768.0);  // Keras' 2^15, no overflow in 7 steps
    CHECK(h.values.at("skipped_steps")[0] == 0);
    CHECK(m.optimizer_iterations() == 7);
  }
  {
    // 2^40 / 16 overflows float16 in dL/dy: every step is skipped, the scale halves each time
    auto m = ctnn::make_model<mlp, ctnn::precision::mixed_float16, dev>(6);
    const auto before = download(m, ctnn::role::parameter);
    ctnn::adam opt{1e-3};
    ctnn::loss_scale ls(ctnn::loss_scale_options{.initial_scale = std::ldexp(1.0, 40)});
    const auto h = ctnn::fit(m, loss, opt, data, ctnn::epochs{1}, ls);
    CHECK(h.values.at("skipped_steps")[0] == 7);
    CHECK(h.values.at("loss_scale")[0] == std::ldexp(1.0, 33));
    CHECK(m.optimizer_iterations() == 0);
    CHECK(m.optimizer_state().steps == 0);
    CHECK(download(m, ctnn::role::parameter) == before);
    const auto slots = m.optimizer_slots();
    std::vector<float> hs(slots.size());
    ctnn::cuda_device_memory::copy(hs.data(), slots.data(), hs.size() * sizeof(float));
    CHECK(std::all_of(hs.begin(), hs.end(), [](float v) { return v == 0.0f; }));
  }
  {
    // the scale doubles after dynamic_growth_steps finite steps
    auto m = ctnn::make_model<mlp, ctnn::precision::mixed_float16, dev>(6);
    ctnn::adam opt{1e-3};
    ctnn::loss_scale ls(ctnn::loss_scale_options{.initial_scale = 1024, .dynamic_growth_steps = 3});
    const auto h = ctnn::fit(m, loss, opt, data, ctnn::epochs{1}, ls);
    CHECK(h.values.at("loss_scale")[0] == 4096.0);
    CHECK(h.values.at("skipped_steps")[0] == 0);
  }
  {
    // a NaN in the data is not skipped: the loss is NaN and fit stops with its error
    auto xs = random_values(40 * 12, 171);
    xs[5 * 12 + 3] = std::nanf("");
    const auto bad = ctnn::data::in_memory<ctnn::shape<12>, ctnn::sparse_labels, float>(
                         xs, std::vector<std::int32_t>(40, 1)).batch(8);
    auto m = ctnn::make_model<mlp, ctnn::precision::mixed_float16, dev>(6);
    ctnn::adam opt{1e-3};
    CHECK_THROWS_WITH_AS(ctnn::fit(m, loss, opt, bad, ctnn::epochs{1}), doctest::Contains("epoch 1, step 1"),
                         ctnn::numeric_error);
  }
}

TEST_CASE("fit on the device takes callbacks, metrics, validation data and regularizers as the CPU fit") {
  CTNN_REQUIRE_DEVICE();
  const auto train = dataset<reg_mlp>(100, 180).batch(16);
  const auto val = dataset<reg_mlp>(50, 181).batch(20);
  const ctnn::sparse_categorical_crossentropy loss{.from_logits = true};
  auto cm = ctnn::make_model<reg_mlp>(7);
  auto gm = ctnn::make_model<reg_mlp, ctnn::precision::float32, dev>(7);
  CHECK(gm.penalty() == doctest::Approx(cm.penalty()).epsilon(1e-5));
  ctnn::sgd o1{0.05, 0.9}, o2{0.05, 0.9};
  counting_callback c1, c2;
  c1.stop_at = c2.stop_at = 2;  // of 3 epochs
  const auto hc = ctnn::fit(cm, loss, o1, train, ctnn::epochs{3}, ctnn::sparse_categorical_accuracy{},
                            ctnn::validation_data(val), c1);
  const auto hg = ctnn::fit(gm, loss, o2, train, ctnn::epochs{3}, ctnn::sparse_categorical_accuracy{},
                            ctnn::validation_data(val), c2);
  REQUIRE(hg.values.at("loss").size() == 2);
  REQUIRE(hc.values.at("loss").size() == 2);
  for (std::size_t e = 0; e < 2; ++e) {
    INFO("epoch " << e + 1);
    for (const char* k : {"loss", "val_loss"})
      CHECK(hg.values.at(k)[e] == doctest::Approx(hc.values.at(k)[e]).epsilon(1e-4));
    // accuracies: one argmax near a tie may flip (one sample of 100 or 50)
    CHECK(std::abs(hg.values.at("sparse_categorical_accuracy")[e] - hc.values.at("sparse_categorical_accuracy")[e]) <= 0.011);
    CHECK(std::abs(hg.values.at("val_sparse_categorical_accuracy")[e] - hc.values.at("val_sparse_categorical_accuracy")[e]) <=
          0.021);
  }
  CHECK(c2.train_begin == 1);
  CHECK(c2.train_end == 1);
  CHECK(c2.epoch_begin == 2);
  CHECK(c2.epoch_end == 2);
  CHECK(c2.batch_begin == 14);
  CHECK(c2.batch_end == 14);
  CHECK(c2.last_batch_loss == doctest::Approx(c1.last_batch_loss).epsilon(1e-4));
  const double e = relative_error(download(gm, ctnn::role::parameter),
                                  std::vector<float>(cm.parameters().begin(), cm.parameters().end()));
  INFO("parameters' relative error " << e);
  CHECK(e < 1e-4);
  const auto eg = ctnn::evaluate(gm, loss, val, ctnn::sparse_categorical_accuracy{});
  const auto ec = ctnn::evaluate(cm, loss, val, ctnn::sparse_categorical_accuracy{});
  CHECK(eg["loss"] == doctest::Approx(ec["loss"]).epsilon(1e-4));
  CHECK(std::abs(eg["sparse_categorical_accuracy"] - ec["sparse_categorical_accuracy"]) <= 0.021);
}

TEST_CASE("fit's training steps and validation passes replay captured graphs without changing training, dropout trains uncaptured") {
  CTNN_REQUIRE_DEVICE();
  const auto data = dataset<mlp>(100, 190).batch(16);
  const auto val = dataset<mlp>(60, 192).batch(20);  // 3 validation passes of 20 per epoch
  const ctnn::sparse_categorical_crossentropy loss{.from_logits = true};
  const auto file = std::filesystem::temp_directory_path() / "ctnn_cuda_graphs.ctnn";
  auto run = [&](bool validate) {
    auto m = ctnn::make_model<mlp, ctnn::precision::float32, dev>(8);
    ctnn::adam opt{1e-2};
    auto h = validate ? ctnn::fit(m, loss, opt, data, ctnn::epochs{3}, ctnn::validation_data(val))
                      : ctnn::fit(m, loss, opt, data, ctnn::epochs{3});
    if (validate) ctnn::io::save_weights(m, file);
    return std::pair{download(m, ctnn::role::parameter), h};
  };
  const auto [with, hw] = run(true);
  const auto [without, hn] = run(false);
  CHECK(with == without);
  // training steps (phases 1-3, model::train_pass): each (staging buffers, batch) pair runs uncaptured once,
  // is captured the next time, then replayed: by the third epoch every full batch of 16 (six) is a replay
  CHECK(hn.values.at("graph_steps")[0] >= 1);
  CHECK(hn.values.at("graph_steps")[2] >= 6);
  // validation the same (three passes of 20 in the third epoch), besides the training steps
  CHECK(hw.values.at("graph_steps")[2] >= 6 + 3);
  // the replayed passes give the CPU model's validation loss for the same weights
  auto c = ctnn::make_model<mlp>(9);
  ctnn::io::load_weights(c, file);
  std::filesystem::remove(file);
  CHECK(hw.values.at("val_loss")[2] == doctest::Approx(ctnn::evaluate(c, loss, val)["loss"]).epsilon(1e-5));
  // dropout draws random numbers: its training passes are never captured
  auto dm = ctnn::make_model<drop_mlp, ctnn::precision::float32, dev>(8);
  ctnn::adam od{1e-2};
  const auto hd = ctnn::fit(dm, loss, od, dataset<drop_mlp>(100, 191).batch(16), ctnn::epochs{1});
  CHECK(hd.values.at("graph_steps")[0] == 0);
}

TEST_CASE("the Fashion-MNIST MLP (784-256-128-10) trained under mixed_float16 on the device reaches 0.88 test accuracy") {
  CTNN_REQUIRE_DEVICE();
  const std::filesystem::path dir = CTNN_FASHION_MNIST_DIR;
  if (!std::filesystem::exists(dir / "train-images-idx3-ubyte.gz")) {
    MESSAGE("CTNN_SKIP: " << dir.string() << " has no Fashion-MNIST files");
    return;
  }
  using net = ctnn::sequential<ctnn::input<28, 28>, ctnn::flatten, ctnn::dense<256, ctnn::relu>,
                               ctnn::dense<128, ctnn::relu>, ctnn::dense<10>>;
  const auto train = ctnn::data::fashion_mnist::train(dir).shuffle(1).batch(64);
  const auto test = ctnn::data::fashion_mnist::test(dir).batch(1000);
  auto m = ctnn::make_model<net, ctnn::precision::mixed_float16, dev>(42);
  ctnn::adam opt{ctnn::exponential_decay{1e-3, 5000, 0.7, false}};
  const ctnn::sparse_categorical_crossentropy loss{.from_logits = true};
  ctnn::loss_scale ls;
  const auto h = ctnn::fit(m, loss, opt, train, ctnn::epochs{10}, ls);
  const auto r = ctnn::evaluate(m, loss, test, ctnn::sparse_categorical_accuracy{});
  MESSAGE("device MLP mixed_float16: test accuracy " << r["sparse_categorical_accuracy"] << ", last epoch "
                                                     << h.values.at("seconds").back() << " s, loss scale "
                                                     << h.values.at("loss_scale").back() << ", skipped steps "
                                                     << h.values.at("skipped_steps").back() << ", graph steps "
                                                     << h.values.at("graph_steps").back());
  CHECK(r["sparse_categorical_accuracy"] >= 0.88);
}
