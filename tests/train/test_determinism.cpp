// Determinism and precision through the whole stack: fit gives the same bits
// on 1 and 2 threads (every layer kind in one network), the benchmarks' CNN at batch 64 (its reductions
// on the pool) the same bits on 1, 2 and 3 threads, and a double-precision
// model trains, saves, loads and predicts.
#include <doctest/doctest.h>

#include <ctnn/ctnn.hpp>

#include <algorithm>
#include <filesystem>
#include <vector>

using namespace ctnn;

namespace {
using cnn = sequential<input<8, 8, 1>, conv2d<4, 3, 3, 1, padding::same, relu>, max_pool2d<2>, batch_norm,
                       conv2d<8, 3, 3, 1, padding::valid, ctnn::tanh>, average_pool2d<2>, dropout<0.25>, flatten,
                       dense<16, leaky_relu<>>, dense<3>>;
data::in_memory<shape<8, 8, 1>, sparse_labels> images(std::size_t n) {
  std::vector<float> x(n * 64);
  std::vector<std::int32_t> y(n);
  rng g(17);
  for (auto& v : x) v = float(g.uniform(-1, 1));
  for (std::size_t i = 0; i < n; ++i) y[i] = std::int32_t(i % 3);
  return {x, y};
}
template <class T>
std::vector<T> train_on(std::size_t threads) {
  const std::size_t before = kernels::cpu::threads();
  kernels::cpu::set_threads(threads);
  auto m = make_model<cnn, T>(5);
  adam opt{0.01};
  fit(m, sparse_categorical_crossentropy{.from_logits = true}, opt, images(96).shuffle(3).batch(32), epochs{2});
  kernels::cpu::set_threads(before);
  std::vector<T> out(m.parameters().begin(), m.parameters().end());
  out.insert(out.end(), m.state().begin(), m.state().end());
  return out;
}
}  // namespace

namespace {
// evaluate on threads: 300 samples of 16 x 16 in batches of 256 and 44 through dense<2>; the logs,
// and how many of its pool runs went to the workers beyond those of the model's forward passes of
// the same batches alone (the copy of the batch of 256, 64 Ki values, is one; the 44 samples' copy
// is below for_samples' 2^14 values).
std::pair<std::vector<double>, std::size_t> evaluate_on(std::size_t threads) {
  const std::size_t before = kernels::cpu::threads();
  kernels::cpu::set_threads(threads);
  std::vector<float> x(300 * 256);
  std::vector<std::int32_t> y(300);
  rng g(9);
  for (auto& v : x) v = float(g.uniform(-1, 1));
  for (std::size_t i = 0; i < y.size(); ++i) y[i] = std::int32_t(i % 2);
  const data::in_memory<shape<16, 16>, sparse_labels> ds(x, y);
  auto m = make_model<sequential<input<16, 16>, flatten, dense<2>>>(4);
  auto shared_runs = [](auto&& f) {
    kernels::cpu::thread_pool::probe p;
    p.records.reserve(256);
    kernels::cpu::thread_pool::global().attach(&p);
    f();
    kernels::cpu::thread_pool::global().attach(nullptr);
    return std::size_t(std::count_if(p.records.begin(), p.records.end(), [](const auto& r) { return r.shared; }));
  };
  const std::size_t forwards = shared_runs([&] {
    m.forward(x.data(), 256, false);
    m.forward(x.data() + 256 * 256, 44, false);
  });
  logs l;
  const std::size_t all = shared_runs([&] {
    l = evaluate(m, sparse_categorical_crossentropy{.from_logits = true}, ds.shuffle(1).batch(256),
                 sparse_categorical_accuracy{});
  });
  kernels::cpu::set_threads(before);
  return {{l["loss"], l["sparse_categorical_accuracy"]}, all - forwards};
}
}  // namespace

TEST_CASE("evaluate copies an in-memory dataset's batches over the pool, with the same logs on 1 and 2 threads") {
  const auto one = evaluate_on(1), two = evaluate_on(2);
  CHECK(one.second == 0);
  CHECK(two.second == 1);  // the copy of the batch of 256
  CHECK(one.first == two.first);
}

TEST_CASE("fit gives the same bits on 1 and 2 threads, for a network with every layer kind") {
  const auto one = train_on<float>(1);
  const auto two = train_on<float>(2);
  CHECK(one == two);
  CHECK(train_on<float>(3) == one);
}

namespace {
// The benchmarks' CNN (bench/bench_nets.hpp) at batch 64, where the per-channel reductions run on the
// pool (batch norm's sums in chunks of rows, conv2's Winograd dW and db in chunks of samples, the
// transforms of its kernels): three training steps, then every parameter and state value.
using bench_cnn = sequential<input<28, 28>, conv2d<32, 3, 3, 1, padding::valid, relu>, max_pool2d<2>, batch_norm,
                             conv2d<64, 3, 3, 1, padding::valid, relu>, max_pool2d<2>, batch_norm, flatten,
                             dense<128, relu>, dropout<0.5f>, dense<10>>;
std::vector<float> cnn_steps(std::size_t threads) {
  const std::size_t before = kernels::cpu::threads();
  kernels::cpu::set_threads(threads);
  auto m = make_model<bench_cnn>(1);
  rng g(2);
  std::vector<float> x(64 * 784);
  std::vector<std::int32_t> y(64);
  for (auto& v : x) v = float(g.uniform());
  for (auto& v : y) v = std::int32_t(g.below(10));
  adam opt{1e-3};
  train_step step{m, sparse_categorical_crossentropy{.from_logits = true}, opt};
  for (std::size_t i = 0; i < 3; ++i) step.run(x.data(), y.data(), 64, 0, i);
  kernels::cpu::set_threads(before);
  std::vector<float> out(m.parameters().begin(), m.parameters().end());
  out.insert(out.end(), m.state().begin(), m.state().end());
  return out;
}
}  // namespace

TEST_CASE("the benchmarks' CNN at batch 64: three training steps give the same bits on 1, 2 and 3 threads") {
  const auto one = cnn_steps(1);
  CHECK(cnn_steps(2) == one);
  CHECK(cnn_steps(3) == one);
}

TEST_CASE("a double-precision model trains, is saved, loaded and predicts as before") {
  using net = sequential<input<4>, dense<8, ctnn::tanh, l2<0.001>>, dense<3>>;
  std::vector<double> x(60 * 4);
  std::vector<std::int32_t> y(60);
  rng g(2);
  for (auto& v : x) v = g.uniform(-1, 1);
  for (std::size_t i = 0; i < 60; ++i) y[i] = std::int32_t((x[i * 4] > 0) + (x[i * 4 + 1] > 0));
  const data::in_memory<shape<4>, sparse_labels, double> ds(x, y);
  auto m = make_model<net, double>(1);
  static_assert(std::is_same_v<decltype(m)::variable_type, double>);
  adam opt{0.05};
  const auto h = fit(m, sparse_categorical_crossentropy{.from_logits = true}, opt, ds.batch(20), epochs{40},
                     sparse_categorical_accuracy{});
  CHECK(h["loss"].back() < h["loss"].front());
  CHECK(h["sparse_categorical_accuracy"].back() > 0.8);
  const auto path = std::filesystem::temp_directory_path() / "ctnn_double_model.ctnn";
  io::save_weights(m, path);
  auto back = make_model<net, double>(9);
  io::load_weights(back, path);
  std::filesystem::remove(path);
  CHECK(m.predict(x.data(), 60) == back.predict(x.data(), 60));
  // the regularization factor is the double 0.001, not 0.001f (whose relative difference, 4.7e-8, is far
  // outside the tolerance; the tolerance allows the compiler to contract either sum's x * x + s into an FMA)
  double sq = 0;
  for (std::size_t i = 0; i < 4 * 8; ++i) sq += m.parameters()[i] * m.parameters()[i];
  CHECK(m.penalty() == doctest::Approx(0.001 * sq).epsilon(1e-12));
  CHECK(m.penalty() != doctest::Approx(double(0.001f) * sq).epsilon(1e-12));
}
