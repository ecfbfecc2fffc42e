// The generic model, step, fit, evaluate, predict, callbacks and weights files
// on a device backend whose memory the host cannot touch (sim::device,
// simulated_device.hpp): every run gives the same bits as cpu<>, and a host
// access that bypasses the backend's policies would have been a SIGSEGV.
#include <doctest/doctest.h>

#include <ctnn/ctnn.hpp>
#include <ctnn/mixed_precision.hpp>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "device/simulated_device.hpp"

namespace {
using namespace ctnn;

static_assert(Backend<sim::device>);
static_assert(!sim::device::memory::host_accessible);
static_assert(std::is_same_v<host_view_t<sim::device>, host_mirror<sim::memory>>);
static_assert(std::is_same_v<feeder_t<sim::device>, staging_feeder<sim::memory>>);
static_assert(std::is_same_v<host_view_t<cpu<>>, zero_copy_view>);
static_assert(std::is_same_v<feeder_t<cpu<>>, zero_copy_feeder>);
// The CPU ops are a private base of ops<sim::device>: one the simulated device does not wrap (here
// dense_forward_active, dense<up_to<N>>'s) cannot be reached from outside, so a new CPU op cannot run
// on device memory with the arena closed; a wrapped one can.
template <class O>
constexpr bool reaches_active_forward = requires(const float* x, float* y) {
  O::template dense_forward_active<4, 4>(x, x, x, y, std::size_t{1}, std::size_t{4});
};
template <class O>
constexpr bool reaches_forward = requires(const float* x, float* y) {
  O::template dense_forward<4, 4>(x, x, x, y, std::size_t{1});
};
static_assert(reaches_active_forward<ops<cpu<>>> && !reaches_active_forward<ops<sim::device>>);
static_assert(reaches_forward<ops<sim::device>>);

// The demo MLP (examples/fashion_mnist_mlp.cpp) and the CNN of tests/train/test_cnn.cpp.
using mlp = sequential<input<28, 28>, flatten, dense<256, relu>, dense<128, relu>, dense<10>>;
using cnn = sequential<input<8, 8>, conv2d<4, 3, 3, 1, padding::same, relu>, max_pool2d<2>, batch_norm,
                       conv2d<8, 3, 3, 1, padding::valid, relu>, dropout<0.25f>, global_average_pool, dense<2>>;

template <std::size_t H, std::size_t W, std::size_t Classes>
data::in_memory<shape<H, W>, sparse_labels> images(std::size_t n, std::uint64_t seed) {
  std::vector<float> x(n * H * W);
  std::vector<std::int32_t> y(n);
  rng g(seed);
  for (std::size_t i = 0; i < n; ++i) {
    y[i] = std::int32_t(g.below(Classes));
    for (std::size_t j = 0; j < H * W; ++j)
      x[i * H * W + j] = float(g.uniform(0, 0.5)) + (j % Classes == std::size_t(y[i]) ? 0.5f : 0.0f);
  }
  return {x, y};
}

// The bytes of every variable (parameters, state) as the host sees them through for_each_variable.
template <class M>
std::string variables(const M& m) {
  std::string v;
  m.for_each_variable([&](const variable_ref& r) {
    v.append(reinterpret_cast<const char*>(r.data), r.extent * r.element_bytes);
  });
  return v;
}

std::string slurp(const std::filesystem::path& p) {
  std::ifstream f(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}
}  // namespace

TEST_CASE("the simulated device's memory faults on a host access outside the backend") {
  void* p = sim::memory::allocate(100);
  REQUIRE(p != nullptr);
  CHECK(sim::faults_on_read(p));
  {
    const sim::scope open;
    CHECK_FALSE(sim::faults_on_read(p));  // the backend's own calls may read it
  }
  CHECK(sim::faults_on_read(p));
  const std::vector<float> in{1.5f, -2.0f, 3.25f};
  std::vector<float> out(3);
  sim::memory::copy(p, in.data(), 12);
  sim::memory::copy(out.data(), p, 12);
  CHECK(out == in);
  sim::memory::deallocate(p, 100);

  // a model's regions are the arena's: parameters() is a device pointer
  auto m = make_model<mlp, float, sim::device>(1);
  CHECK(sim::faults_on_read(m.parameters().data()));
  CHECK(sim::faults_on_read(m.output()));
}

TEST_CASE("the runner keeps the arena closed: host code in a phase faults, the ops it calls do not") {
  float* p = static_cast<float*>(sim::memory::allocate(16 * sizeof(float)));
  REQUIRE(p != nullptr);
  auto phase = [p] {
    const bool host_read_faults = sim::faults_on_read(p);  // a layer's host loop would read like this
    ops<sim::device>::fill(p, 16, 2.0f);                     // an op opens the arena for itself
    ops<sim::device>::scale(p, 16, 1.5f);
    return host_read_faults && sim::faults_on_read(p);
  };
  CHECK(sim::runner::run(phase));
  CHECK(sim::runner::run(phase, true));  // the denormal-guarded form, as the model calls it
  std::vector<float> out(16);
  sim::memory::copy(out.data(), p, out.size() * sizeof(float));
  CHECK(out == std::vector<float>(16, 3.0f));
  sim::memory::deallocate(p, 16 * sizeof(float));
}

TEST_CASE("the demo MLP trains, evaluates and predicts on the simulated device with cpu<>'s bits") {
  auto d = make_model<mlp, float, sim::device>(42);
  auto c = make_model<mlp>(42);
  // cpu<>'s layers, as the device runs them: the CPU's fused small-MLP passes (inference and training's
  // backward on by default) sum in their own order where the layer's GEMM plan differs (the 10-wide layer
  // transposed on AVX2); test_fused_mlp compares them with the layers within 2e-5
  c.fused_mlp() = {false, false, false};
  CHECK(variables(d) == variables(c));  // initialize() through a host view

  const auto train = images<28, 28, 10>(256, 1).batch(32);
  const auto test = images<28, 28, 10>(64, 2).batch(32);
  adam o1{1e-3}, o2{1e-3};
  const sparse_categorical_crossentropy loss{.from_logits = true};
  const auto hd = fit(d, loss, o1, train, epochs{2}, sparse_categorical_accuracy{}, validation_data(test));
  const auto hc = fit(c, loss, o2, train, epochs{2}, sparse_categorical_accuracy{}, validation_data(test));
  CHECK(hd["loss"] == hc["loss"]);
  CHECK(hd["sparse_categorical_accuracy"] == hc["sparse_categorical_accuracy"]);
  CHECK(hd["val_loss"] == hc["val_loss"]);
  CHECK(hd["sparse_categorical_accuracy"].back() > 0.5);
  CHECK(variables(d) == variables(c));
  CHECK(d.optimizer_iterations() == c.optimizer_iterations());

  const auto ed = evaluate(d, loss, test, sparse_categorical_accuracy{});
  const auto ec = evaluate(c, loss, test, sparse_categorical_accuracy{});
  CHECK(ed["loss"] == ec["loss"]);
  CHECK(ed["sparse_categorical_accuracy"] == ec["sparse_categorical_accuracy"]);
  CHECK(predict(d, test) == predict(c, test));
  // model::predict above the batch capacity (scratch memory in the arena)
  const std::vector<float> x(100 * 784, 0.25f);
  CHECK(d.predict(x.data(), 100, 100) == c.predict(x.data(), 100, 100));

  // weights files: the device model's file is the CPU model's, and loads both ways
  const auto dir = std::filesystem::temp_directory_path();
  const auto pd = dir / "ctnn_sim_device.ctnn", pc = dir / "ctnn_sim_cpu.ctnn";
  io::save_weights(d, pd);
  io::save_weights(c, pc);
  CHECK(slurp(pd) == slurp(pc));
  auto d2 = make_model<mlp, float, sim::device>(7);
  io::load_weights(d2, pc);
  CHECK(variables(d2) == variables(c));
  CHECK(d2.predict(x.data(), 4) == c.predict(x.data(), 4));
  auto c2 = make_model<mlp>(7);
  io::load_weights(c2, pd);
  CHECK(variables(c2) == variables(c));
  std::filesystem::remove(pd);
  std::filesystem::remove(pc);
}

TEST_CASE("a CNN with batch_norm and dropout trains on the simulated device with cpu<>'s bits") {
  auto d = make_model<cnn, float, sim::device>(3);
  auto c = make_model<cnn>(3);
  const auto train = images<8, 8, 2>(96, 4).batch(16);
  const auto test = images<8, 8, 2>(32, 5).batch(16);
  sgd o1{0.05, 0.9}, o2{0.05, 0.9};
  const sparse_categorical_crossentropy loss{.from_logits = true};
  const auto hd = fit(d, loss, o1, train, epochs{3}, sparse_categorical_accuracy{}, validation_data(test));
  const auto hc = fit(c, loss, o2, train, epochs{3}, sparse_categorical_accuracy{}, validation_data(test));
  CHECK(hd["loss"] == hc["loss"]);
  CHECK(hd["val_sparse_categorical_accuracy"] == hc["val_sparse_categorical_accuracy"]);
  CHECK(variables(d) == variables(c));  // parameters and batch_norm's moving statistics
  CHECK(predict(d, test) == predict(c, test));
}

TEST_CASE("callbacks on the simulated device: early_stopping restores the best weights, model_checkpoint saves") {
  const auto dir = std::filesystem::temp_directory_path() / "ctnn_sim_callbacks";
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  auto run = [&](auto& m, const std::string& tag) {
    const auto train = images<28, 28, 10>(128, 6).batch(32);
    const auto val = images<28, 28, 10>(32, 7).batch(32);
    adam o{3e-2};  // large: val_loss rises, so the best epoch is an early one
    early_stopping es{.monitor = "val_loss", .patience = 1, .restore_best_weights = true, .verbose = 0};
    model_checkpoint ck{.filepath = (dir / (tag + "-{epoch:02d}.ctnn")).string(), .monitor = "val_loss",
                        .save_best_only = true};
    const auto h = fit(m, sparse_categorical_crossentropy{.from_logits = true}, o, train, epochs{6},
                       validation_data(val), es, ck);
    return std::pair{h["val_loss"], es.best_epoch};
  };
  auto d = make_model<mlp, float, sim::device>(11);
  auto c = make_model<mlp>(11);
  c.fused_mlp() = {false, false, false};  // cpu<>'s layers (see the demo MLP's case)
  const auto [vd, bd] = run(d, "device");
  const auto [vc, bc] = run(c, "cpu");
  CHECK(vd == vc);
  CHECK(bd == bc);
  CHECK(variables(d) == variables(c));  // the best epoch's weights, restored through a host view
  // the checkpoint of the best epoch holds the restored weights, the same file from both backends
  char name[16];
  std::snprintf(name, sizeof name, "-%02zu.ctnn", bc + 1);
  const auto fd = dir / ("device" + std::string(name)), fc = dir / ("cpu" + std::string(name));
  REQUIRE(std::filesystem::exists(fd));
  CHECK(slurp(fd) == slurp(fc));
  auto back = make_model<mlp, float, sim::device>(0);
  io::load_weights(back, fd);
  CHECK(variables(back) == variables(c));
  std::filesystem::remove_all(dir);
}

TEST_CASE("mixed_float16 with loss scaling on the simulated device gives cpu<>'s bits") {
  using small = sequential<input<28, 28>, flatten, dense<64, relu>, dense<10>>;
  auto d = make_model<small, precision::mixed_float16, sim::device>(5);
  auto c = make_model<small, precision::mixed_float16>(5);
  const auto train = images<28, 28, 10>(128, 8).batch(32);
  adam o1{1e-3}, o2{1e-3};
  loss_scale l1, l2;
  const sparse_categorical_crossentropy loss{.from_logits = true};
  const auto hd = fit(d, loss, o1, train, epochs{2}, sparse_categorical_accuracy{}, l1);
  const auto hc = fit(c, loss, o2, train, epochs{2}, sparse_categorical_accuracy{}, l2);
  CHECK(hd["loss"] == hc["loss"]);
  CHECK(hd["loss_scale"] == hc["loss_scale"]);
  CHECK(l1.scale() == l2.scale());
  CHECK(variables(d) == variables(c));
  const auto test = images<28, 28, 10>(32, 9).batch(32);
  CHECK(predict(d, test) == predict(c, test));
}

TEST_CASE("the losses' batched kernels through the simulated device's ops give cpu<>'s values") {
  // logits, labels, one-hot targets and outputs in the arena; the kernels run inside the backend
  constexpr std::size_t rows = 5, n = 7;
  std::vector<float> z(rows * n), t(rows * n, 0.0f);
  std::vector<std::int32_t> labels(rows);
  rng g(12);
  for (auto& v : z) v = float(g.uniform(-3, 3));
  for (std::size_t i = 0; i < rows; ++i) t[i * n + (labels[i] = std::int32_t(g.below(n)))] = 1.0f;
  auto put = [](const auto& host) {
    void* p = sim::memory::allocate(host.size() * sizeof(host[0]));
    sim::memory::copy(p, host.data(), host.size() * sizeof(host[0]));
    return p;
  };
  auto* dz = static_cast<const float*>(put(z));
  auto* dt = static_cast<const float*>(put(t));
  auto* dl = static_cast<const std::int32_t*>(put(labels));
  auto* dd = static_cast<float*>(sim::memory::allocate(rows * n * sizeof(float)));
  std::vector<float> d(rows * n), ref(rows * n);
  auto back = [&] {
    sim::memory::copy(d.data(), dd, d.size() * sizeof(float));
    return d;
  };
  using dev = ops<sim::device>;
  using host = ops<cpu<>>;
  CHECK(dev::sparse_crossentropy_logits(dz, dl, rows, n, dd, 0.2) ==
        host::sparse_crossentropy_logits(z.data(), labels.data(), rows, n, ref.data(), 0.2));
  CHECK(back() == ref);
  CHECK(dev::categorical_crossentropy_logits(dz, dt, rows, n, dd, 0.2) ==
        host::categorical_crossentropy_logits(z.data(), t.data(), rows, n, ref.data(), 0.2));
  CHECK(back() == ref);
  CHECK(dev::squared_error(dz, dt, rows * n, dd, 0.5) == host::squared_error(z.data(), t.data(), rows * n, ref.data(), 0.5));
  CHECK(back() == ref);
  // the sparse and categorical kernels agree on one-hot targets
  CHECK(host::sparse_crossentropy_logits(z.data(), labels.data(), rows, n, d.data(), 1.0) ==
        doctest::Approx(host::categorical_crossentropy_logits(z.data(), t.data(), rows, n, ref.data(), 1.0)));
  for (void* p : {(void*)dz, (void*)dt, (void*)dl, (void*)dd}) sim::memory::deallocate(p, 1);
}
