// dropout, dynamic_dropout and batch_norm on cuda<90> (the generic layers through
// ops<cuda<SM>>'s has_layer_ops), and the generic model / fit / evaluate /
// predict (train/) on cuda<90> through its feeder and runner, against the CPU
// model of the same seed.
#include "cuda_test.hpp"

// The headers under test, by name (cuda_test.hpp includes them all through ctnn/backends/cuda/cuda.cuh).
#include <ctnn/backends/cuda/feeder.cuh>
#include <ctnn/backends/cuda/ops.cuh>
#include <ctnn/backends/cuda/runner.cuh>

#include <filesystem>
#include <limits>
#include <cmath>

using namespace ctnn_test;
using dev = ctnn::cuda<90>;
using ctnn::layer_slot;
using ctnn::run_info;

static_assert(ctnn::Backend<dev>, "cuda<90> is a complete backend where the CUDA headers are included");
// its policies (core/backend.hpp): the model takes them from the tag
static_assert(std::is_same_v<ctnn::host_view_t<dev>, ctnn::cuda_host_view>);
static_assert(std::is_same_v<ctnn::feeder_t<dev>, ctnn::cuda_feeder>);
static_assert(std::is_same_v<ctnn::model<ctnn::sequential<ctnn::input<4>, ctnn::dense<2>>, float, dev>::runner_type,
                             ctnn::cuda_runner>);
// the layers are the generic ones (strip, onnx and the plan read their traits)
static_assert(std::is_same_v<ctnn::batch_norm::bind<ctnn::shape<4, 3>, ctnn::precision::float32, dev>::kind,
                             ctnn::layer_kind::batch_norm>);
static_assert(ctnn::dropout<0.5f>::bind<ctnn::shape<4>, ctnn::precision::float32, dev>::keeps_channels);

TEST_CASE("dropout on the device: the rate, the scale, backward through the same mask, identity at inference") {
  CTNN_REQUIRE_DEVICE();
  using L = ctnn::dropout<0.25f>::bind<ctnn::shape<1000>, ctnn::precision::float32, dev>;
  const std::size_t batch = 20, n = batch * 1000;
  const auto x = random_values(n, 90, 0.5f, 1.5f), dy = random_values(n, 91);
  auto gx = to_device<float>(x), gdy = to_device<float>(dy);
  ctnn::device_buffer<float> gy(n), gdx(n), mask(n);
  layer_slot<float> s;
  s.cache = mask.data();
  ctnn::rng gen(7);
  L::forward(s, gx.data(), gy.data(), run_info{batch, true, &gen});
  L::backward(s, gx.data(), gy.data(), gdy.data(), gdx.data(), run_info{batch, true, &gen});
  const auto y = to_host(gy, n), m = to_host(mask, n), dx = to_host(gdx, n);
  std::size_t dropped = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const bool kept = m[i] != 0.0f;
    dropped += !kept;
    if (kept) REQUIRE(m[i] == doctest::Approx(1.0 / 0.75));
    REQUIRE(y[i] == doctest::Approx(x[i] * m[i]));
    REQUIRE(dx[i] == doctest::Approx(dy[i] * m[i]));
  }
  // 20000 Bernoulli(0.25) draws: the count is within 5 standard deviations (~61) of 5000
  CHECK(std::abs(double(dropped) - 5000.0) < 310.0);
  // another forward draws another mask
  L::forward(s, gx.data(), gy.data(), run_info{batch, true, &gen});
  CHECK(to_host(mask, n) != m);
  // inference: the identity, forward and backward
  L::forward(s, gx.data(), gy.data(), run_info{batch, false, &gen});
  CHECK(to_host(gy, n) == x);
  L::backward(s, gx.data(), gy.data(), gdy.data(), gdx.data(), run_info{batch, false, &gen});
  CHECK(to_host(gdx, n) == dy);
}

TEST_CASE("dynamic_dropout on the device reads its rate from device memory: the rate, the scale, the same mask backward") {
  CTNN_REQUIRE_DEVICE();
  using L = ctnn::dynamic_dropout::bind<ctnn::shape<1000>, ctnn::precision::float32, dev>;
  const std::size_t batch = 20, n = batch * 1000;
  const auto x = random_values(n, 92, 0.5f, 1.5f), dy = random_values(n, 93);
  auto gx = to_device<float>(x), gdy = to_device<float>(dy), rate = to_device<float>(std::vector<float>{0.25f});
  ctnn::device_buffer<float> gy(n), gdx(n), mask(n);
  layer_slot<float> s;
  s.cache = mask.data();
  s.metadata = reinterpret_cast<std::byte*>(rate.data());
  ctnn::rng gen(8);
  L::forward(s, gx.data(), gy.data(), run_info{batch, true, &gen});
  L::backward(s, gx.data(), gy.data(), gdy.data(), gdx.data(), run_info{batch, true, &gen});
  const auto y = to_host(gy, n), m = to_host(mask, n), dx = to_host(gdx, n);
  std::size_t dropped = 0;
  for (std::size_t i = 0; i < n; ++i) {
    dropped += m[i] == 0.0f;
    if (m[i] != 0.0f) REQUIRE(m[i] == doctest::Approx(1.0 / 0.75));
    REQUIRE(y[i] == doctest::Approx(x[i] * m[i]));
    REQUIRE(dx[i] == doctest::Approx(dy[i] * m[i]));
  }
  CHECK(std::abs(double(dropped) - 5000.0) < 310.0);  // within 5 standard deviations
  L::forward(s, gx.data(), gy.data(), run_info{batch, false, &gen});
  CHECK(to_host(gy, n) == x);
}

TEST_CASE("dynamic_dropout on the device: a rate not in 0 <= r < 1 in device memory makes every output NaN, not a silent mask") {
  CTNN_REQUIRE_DEVICE();
  using L = ctnn::dynamic_dropout::bind<ctnn::shape<100>, ctnn::precision::float32, dev>;
  const std::size_t n = 3 * 100;
  const auto x = random_values(n, 94, 0.5f, 1.5f);
  for (float bad : {1.0f, 1.5f, -0.25f, std::numeric_limits<float>::quiet_NaN()}) {
    INFO("rate = " << bad);
    auto gx = to_device<float>(x), rate = to_device<float>(std::vector<float>{bad});
    ctnn::device_buffer<float> gy(n), mask(n);
    layer_slot<float> s;
    s.cache = mask.data();
    s.metadata = reinterpret_cast<std::byte*>(rate.data());
    ctnn::rng gen(9);
    L::forward(s, gx.data(), gy.data(), run_info{3, true, &gen});
    for (float v : to_host(gy, n)) REQUIRE(std::isnan(v));
  }
  // a rate given as a value is checked on the host, as ops<cpu<>> does
  using O = ctnn::ops<dev>;
  ctnn::device_buffer<float> a(4), b(4), m(4);
  ctnn::rng gen(10);
  CHECK_THROWS_WITH(O::dropout_forward(a.data(), b.data(), m.data(), 4, 1.0, gen),
                    "the dropout rate must be in [0, 1), got 1");
}

TEST_CASE("batch_norm on the device matches the CPU layer (training and inference, forward and backward)") {
  CTNN_REQUIRE_DEVICE();
  using In = ctnn::shape<5, 4, 6>;
  using spec = ctnn::batch_normalization<0.9, 1e-3>;
  using LC = spec::bind<In, ctnn::precision::float32, ctnn::cpu<>>;
  using LG = spec::bind<In, ctnn::precision::float32, dev>;
  constexpr std::size_t C = 6;
  const std::size_t batch = 7, n = batch * In::size;
  const auto x = random_values(n, 100, -2.0f, 3.0f), dy = random_values(n, 101);
  for (bool training : {true, false}) {
    INFO("training = " << training);
    // parameters gamma, beta; state moving mean, variance; cache 2C (the CPU layer uses 2C of it)
    std::vector<float> params = random_values(2 * C, 102, 0.5f, 1.5f), state = random_values(2 * C, 103, 0.1f, 1.0f),
                       grads(2 * C), cache(2 * C), y(n), dx(n);
    auto gp = to_device<float>(params), gs = to_device<float>(state);
    ctnn::device_buffer<float> gg(2 * C), gc(2 * C), gy(n), gdx(n);
    auto gx = to_device<float>(x), gdy = to_device<float>(dy);
    layer_slot<float> sc{params.data(), grads.data(), state.data(), cache.data()};
    layer_slot<float> sg{gp.data(), gg.data(), gs.data(), gc.data()};
    const run_info r{batch, training, nullptr};
    LC::forward(sc, x.data(), y.data(), r);
    LG::forward(sg, gx.data(), gy.data(), r);
    CHECK_CLOSE(float, to_host(gy, n), y);
    CHECK_CLOSE(float, to_host(gs, 2 * C), state);
    auto d = dy;
    LC::backward(sc, x.data(), y.data(), d.data(), dx.data(), r);
    LG::backward(sg, gx.data(), gy.data(), gdy.data(), gdx.data(), r);
    CHECK_CLOSE(float, to_host(gg, 2 * C), grads);
    CHECK_CLOSE(float, to_host(gdx, n), dx);
  }
}

namespace {
using mlp = ctnn::sequential<ctnn::input<12>, ctnn::dense<16, ctnn::relu>, ctnn::dense<8, ctnn::tanh>, ctnn::dense<4>>;
using cnn = ctnn::sequential<ctnn::input<8, 8, 2>, ctnn::conv2d<4, 3, 3, 1, ctnn::padding::same, ctnn::relu>, ctnn::max_pool2d<2>, ctnn::flatten,
                             ctnn::dense<5, ctnn::sigmoid>, ctnn::dense<3>>;
// depthwise_conv2d and separable_conv2d (issue 29): the depthwise ops and the pointwise products
using mobile = ctnn::sequential<ctnn::input<8, 8, 2>, ctnn::depthwise_conv2d<3, 3, 1, ctnn::padding::same, 2, ctnn::relu>,
                                ctnn::separable_conv2d<4, 3, 3, 2, ctnn::padding::same, 1, ctnn::tanh>, ctnn::flatten,
                                ctnn::dense<3>>;

// Region r of a model's memory as float values on the host (a host view: core/backend.hpp).

template <class Net>
auto dataset(std::size_t n, std::uint32_t seed) {
  constexpr std::size_t K = Net::output_type::size;
  std::vector<std::int32_t> labels(n);
  for (std::size_t i = 0; i < n; ++i) labels[i] = std::int32_t((i * 5 + seed) % K);
  return ctnn::data::in_memory<typename Net::input_type, ctnn::sparse_labels, float>(
      random_values(n * Net::input_type::size, seed), labels);
}
}  // namespace

TEST_CASE_TEMPLATE("a device model starts from the CPU model's bits and its forward and backward match", Net, mlp, cnn, mobile) {
  CTNN_REQUIRE_DEVICE();
  auto cm = ctnn::make_model<Net>(3);
  auto gm = ctnn::make_model<Net, ctnn::precision::float32, dev>(3);
  const auto cp = std::vector<float>(cm.parameters().begin(), cm.parameters().end());
  CHECK(download(gm, ctnn::role::parameter) == cp);
  constexpr std::size_t in = Net::input_type::size, out = Net::output_type::size;
  const std::size_t batch = 9;
  const auto x = random_values(batch * in, 110);
  const auto want = cm.predict(x.data(), batch);
  CHECK_CLOSE(float, gm.predict(x.data(), batch), want);
  // inference replayed as captured CUDA graphs (runner.cuh, keyed by the feeder's buffer and the batch):
  // the same bits as the uncaptured forward, and a graph reads the new values fed into its buffer
  {
    ctnn::logs before;
    gm.log_epoch(before);  // restarts the runner's counts
    std::vector<float> first;
    for (int k = 0; k < 6; ++k) {  // two staging buffers, each run uncaptured at most once, then captured, replayed
      gm.forward(x.data(), batch, false);
      if (k == 0) first = values(gm.host_outputs(batch));
      else CHECK(values(gm.host_outputs(batch)) == first);
    }
    ctnn::logs l;
    gm.log_epoch(l);
    CHECK(l["graph_steps"] >= 4);
    const auto x2 = random_values(batch * in, 112);
    gm.forward(x2.data(), batch, false);
    CHECK_CLOSE(float, values(gm.host_outputs(batch)), cm.predict(x2.data(), batch));
  }
  // one backward from the same output gradient
  const auto dy = random_values(batch * out, 111);
  cm.forward(x.data(), batch, true);
  std::copy(dy.begin(), dy.end(), cm.output_gradient());
  cm.backward();
  gm.forward(x.data(), batch, true);
  ctnn::cuda_device_memory::copy(gm.output_gradient(), dy.data(), dy.size() * sizeof(float));
  gm.backward();
  CHECK_CLOSE(float, download(gm, ctnn::role::gradient),
              std::vector<float>(cm.gradients().begin(), cm.gradients().end()));
}

TEST_CASE_TEMPLATE("a uniform 16-bit model on the device predicts as the float CPU model", H, ctnn::float16_t,
                   ctnn::bfloat16_t) {
  CTNN_REQUIRE_DEVICE();
  // Every layer in H (weights, activations; float32 inside the GEMMs and
  // kernels): the parameters are the float model's draws rounded to H;
  // inputs and outputs are float (the 16-bit policies' io type).
  auto cm = ctnn::make_model<mlp>(3);
  auto hm = ctnn::make_model<mlp, ctnn::precision::policy<H>, dev>(3);
  const std::size_t batch = 16;
  const auto x = rounded<H>(random_values(batch * 12, 140));
  const auto want = cm.predict(x.data(), batch);
  const auto got = hm.predict(x.data(), batch);
  // three layers of rounding (weights, each activation): 8 units of the significand at the largest output
  const double tol = std::is_same_v<H, ctnn::float16_t> ? 8.0 / 1024 : 8.0 / 128;
  const double e = relative_error(got, want);
  INFO(ctnn::storage<H>::name << " model: relative error " << e);
  CHECK(e <= tol);
}

TEST_CASE_TEMPLATE("fit on the device follows the CPU fit (every optimizer, with_options' phases), with the same update count", Net, mlp, cnn, mobile) {
  CTNN_REQUIRE_DEVICE();
  const auto data = dataset<Net>(100, 120).batch(16);  // 7 steps, the last of 4 samples
  const ctnn::sparse_categorical_crossentropy loss{.from_logits = true};
  auto run = [&](auto make_opt, const char* what) {
    INFO(what);
    auto cm = ctnn::make_model<Net>(5);
    auto gm = ctnn::make_model<Net, ctnn::precision::float32, dev>(5);
    auto o1 = make_opt();
    auto o2 = make_opt();
    const auto hc = ctnn::fit(cm, loss, o1, data, ctnn::epochs{2}, ctnn::sparse_categorical_accuracy{});
    const auto hg = ctnn::fit(gm, loss, o2, data, ctnn::epochs{2}, ctnn::sparse_categorical_accuracy{});
    CHECK(gm.optimizer_iterations() == cm.optimizer_iterations());
    // 14 updates from the same start: float32 round-off of another summation order, not more
    const double e = relative_error(download(gm, ctnn::role::parameter),
                                    std::vector<float>(cm.parameters().begin(), cm.parameters().end()));
    INFO("parameters' relative error " << e);
    CHECK(e < 1e-4);
    for (std::size_t k = 0; k < 2; ++k)
      CHECK(hg.values.at("loss")[k] == doctest::Approx(hc.values.at("loss")[k]).epsilon(1e-4));
    const auto ec = ctnn::evaluate(cm, loss, data);
    const auto eg = ctnn::evaluate(gm, loss, data);
    CHECK(eg["loss"] == doctest::Approx(ec["loss"]).epsilon(1e-4));
    for (std::size_t k = 0; k < 2; ++k)
      CHECK(hg.values.at("sparse_categorical_accuracy")[k] == doctest::Approx(hc.values.at("sparse_categorical_accuracy")[k]));
    // the generic fit's figures, and the CUDA feeder's and runner's (model::log_epoch)
    for (const char* k : {"data_seconds", "compute_seconds", "device_wait_seconds", "device_compute_seconds", "graph_steps"})
      CHECK(hg.values.count(k) == 1);
  };
  run([] { return ctnn::adam{1e-2}; }, "adam");
  run([] { return ctnn::sgd{0.05, 0.9, true}; }, "sgd nesterov");
  run([] {
    return ctnn::with_options{ctnn::adam{1e-2}, {.clipnorm = 0.05, .weight_decay = 0.01, .gradient_accumulation_steps = 2,
                                                 .use_ema = true, .ema_overwrite_frequency = 3}};
  }, "adam with clipnorm, weight decay, accumulation, EMA");
  run([] { return ctnn::with_options{ctnn::rmsprop{1e-2}, {.global_clipnorm = 0.1, .count_micro_steps = false}}; },
      "rmsprop with global_clipnorm");
  run([] { return ctnn::with_options{ctnn::adagrad{0.1}, {.clipvalue = 0.01}}; }, "adagrad with clipvalue");
}

TEST_CASE("fit on the device stops with the CPU's errors: a non-finite loss, a label out of range") {
  CTNN_REQUIRE_DEVICE();
  const ctnn::sparse_categorical_crossentropy loss{.from_logits = true};
  auto xs = random_values(40 * 12, 130);
  xs[5 * 12 + 3] = std::nanf("");
  std::vector<std::int32_t> labels(40, 1);
  const auto bad_x = ctnn::data::in_memory<ctnn::shape<12>, ctnn::sparse_labels, float>(xs, labels).batch(8);
  auto gm = ctnn::make_model<mlp, ctnn::precision::float32, dev>(1);
  ctnn::adam opt{1e-3};
  CHECK_THROWS_WITH_AS(ctnn::fit(gm, loss, opt, bad_x, ctnn::epochs{1}), doctest::Contains("epoch 1, step 1"),
                       ctnn::numeric_error);
  labels[30] = 4;
  const auto bad_y =
      ctnn::data::in_memory<ctnn::shape<12>, ctnn::sparse_labels, float>(random_values(40 * 12, 131), labels).batch(8);
  auto gm2 = ctnn::make_model<mlp, ctnn::precision::float32, dev>(1);
  CHECK_THROWS_AS(ctnn::fit(gm2, loss, opt, bad_y, ctnn::epochs{1}), std::out_of_range);
}

TEST_CASE("the Fashion-MNIST MLP (784-256-128-10) trained on the device reaches 0.88 test accuracy") {
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
  auto m = ctnn::make_model<net, ctnn::precision::float32, dev>(42);
  ctnn::adam opt{ctnn::exponential_decay{1e-3, 5000, 0.7, false}};
  const ctnn::sparse_categorical_crossentropy loss{.from_logits = true};
  const auto h = ctnn::fit(m, loss, opt, train, ctnn::epochs{10});
  const auto r = ctnn::evaluate(m, loss, test, ctnn::sparse_categorical_accuracy{});
  MESSAGE("device MLP: test accuracy " << r["sparse_categorical_accuracy"] << ", last epoch " << h.values.at("seconds").back()
                                       << " s (compute " << h.values.at("compute_seconds").back() << " s, data "
                                       << h.values.at("data_seconds").back() << " s, device wait "
                                       << h.values.at("device_wait_seconds").back() << " s)");
  CHECK(r["sparse_categorical_accuracy"] >= 0.88);
}

TEST_CASE("embedding on the device: the gather and the scatter-add (repeated ids) match the CPU, a bad id a NaN row") {
  CTNN_REQUIRE_DEVICE();
  constexpr std::size_t V = 11, D = 5, n = 40;
  std::vector<float> ids(n);
  for (std::size_t i = 0; i < n; ++i) ids[i] = float((i * 7) % V % 6);  // ids 0..5 repeated, 6..10 unused
  const auto table = random_values(V * D, 120), dy = random_values(n * D, 121);
  std::vector<float> y(n * D), dt(V * D, 0.0f);
  ctnn::ops<ctnn::cpu<>>::gather_rows<D>(ids.data(), table.data(), y.data(), n, V);
  ctnn::ops<ctnn::cpu<>>::scatter_add_rows<D>(ids.data(), dy.data(), dt.data(), n, V);
  auto gids = to_device<float>(ids), gt = to_device<float>(table), gdy = to_device<float>(dy);
  ctnn::device_buffer<float> gy(n * D), gdt(V * D);
  ctnn::ops<dev>::fill_zero(gdt.data(), V * D);
  ctnn::ops<dev>::gather_rows<D>(gids.data(), gt.data(), gy.data(), n, V);
  ctnn::ops<dev>::scatter_add_rows<D>(gids.data(), gdy.data(), gdt.data(), n, V);
  CHECK(to_host(gy, n * D) == y);  // a copy: the same bits
  CHECK_CLOSE(float, to_host(gdt, V * D), dt);  // atomics: the sums' order varies
  ids[3] = 11.0f, ids[4] = 2.5f;  // out of range, not an integer
  auto bad = to_device<float>(ids);
  ctnn::ops<dev>::gather_rows<D>(bad.data(), gt.data(), gy.data(), n, V);
  const auto yb = to_host(gy, n * D);
  for (std::size_t d = 0; d < D; ++d) CHECK((std::isnan(yb[3 * D + d]) && std::isnan(yb[4 * D + d]) && yb[5 * D + d] == y[5 * D + d]));
}

TEST_CASE("an embedding model (embedding, flatten, dense) on the device follows the CPU model's fit") {
  CTNN_REQUIRE_DEVICE();
  using net = ctnn::sequential<ctnn::input<6>, ctnn::embedding<9, 4>, ctnn::flatten, ctnn::dense<3>>;
  std::vector<float> x(64 * 6);
  std::vector<std::int32_t> y(64);
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = float((i * 5 + i / 7) % 9);
  for (std::size_t i = 0; i < y.size(); ++i) y[i] = std::int32_t(x[i * 6] / 3);
  const ctnn::data::in_memory<ctnn::shape<6>, ctnn::sparse_labels> ds{x, y};
  auto cm = ctnn::make_model<net>(5);
  auto gm = ctnn::make_model<net, ctnn::precision::float32, dev>(5);
  ctnn::adam o1{0.01}, o2{0.01};
  const ctnn::sparse_categorical_crossentropy loss{.from_logits = true};
  const auto hc = ctnn::fit(cm, loss, o1, ds.batch(16), ctnn::epochs{3});
  const auto hg = ctnn::fit(gm, loss, o2, ds.batch(16), ctnn::epochs{3});
  CHECK_CLOSE(float, std::vector<float>(hg["loss"].begin(), hg["loss"].end()),
              std::vector<float>(hc["loss"].begin(), hc["loss"].end()));
  CHECK(hg["loss"].back() < hg["loss"].front());
}
