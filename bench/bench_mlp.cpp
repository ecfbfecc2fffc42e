// The Fashion-MNIST MLP of examples/fashion_mnist_mlp.cpp (784-256-128-10,
// relu, logits) trained with Adam and sparse categorical cross-entropy:
//   mlp/train_step: one step as fit() does it (forward, loss, backward, Adam) on
//                   a fixed batch; counter samples/s.
//   mlp/epoch:      fit() for two epochs over the 60000 training images
//                   (shuffled, batched; at batch 16 that is 7,500 Adam steps,
//                   long enough for the slots of weights whose gradient stays
//                   zero to decay into the denormal range); counter samples/s.
//   mlp/epoch_ieee: the same with ieee_denormals{} (denormals kept, not
//                   flushed to zero): on Intel cores the difference is the
//                   cost of the microcode assists.
//   mlp/infer:      forward of one image (batch 1): the latency is the time.
//   mlp/infer_images: the same over 256 images in turn (the time depends on
//                   the image: gemv skips the weights of zero inputs).
//   mlp/infer_read: no product: reads (vector loads and adds) the rows of a 784 x 256
//                   float matrix that mlp/infer's first layer reads for its image, in the
//                   gemv's order; the floor under that layer's time (its weights come
//                   from L2: docs/performance.md, "Inference at batch 1").
//   mlp/train_step_whole: the same with the update after the whole backward (per layer off).
//   mlp/fit_batch:  fit's loop body for one batch: the next shuffled batch (mlp/gather), then
//                   the step on it (mlp/train_step); counter samples/s.
//   mlp/adam_update: the step's update alone (train_step::apply_gradients: Adam over the 235,146
//                   parameters); argument: threads.
//   mlp/gather:     what fit does for a batch before its step: the next shuffled batch
//                   of `batch` training images gathered (copied) into the batch's
//                   buffer (over the pool as fit does: CTNN_NUM_THREADS threads); counter samples/s.
// Arguments: batch size, threads (kernels::cpu::set_threads).
//   mlp/width_up_to: one training step (as mlp/train_step, Adam) of 784-up_to<512>-10
//                   (relu) on a fixed random batch at the active width `width`
//                   (set_width); mlp/width_static: the same of 784-W-10 with W in the type.
//                   Arguments: width, batch, threads.
//   mlp/fused_infer*: inference with the CPU's fused small-MLP hook or through the layers
//                   (below; docs/performance.md, "Fused small MLP on the CPU").
//   mlp/fused_train*: one training step with the CPU's fused training forward and backward or through
//                   the layers (below; the same section).
#include <benchmark/benchmark.h>

#include <ctnn/ctnn.hpp>

#include <algorithm>
#include <cstdint>
#include <vector>

namespace {

using net = ctnn::sequential<ctnn::input<28, 28>, ctnn::flatten, ctnn::dense<256, ctnn::relu>,
                             ctnn::dense<128, ctnn::relu>, ctnn::dense<10>>;

const ctnn::data::fashion_mnist::dataset& train_set() {
  static const auto d = ctnn::data::fashion_mnist::train();
  return d;
}

void train_step_as(benchmark::State& s, bool per_layer) {
  const std::size_t batch = std::size_t(s.range(0));
  ctnn::kernels::cpu::set_threads(std::size_t(s.range(1)));
  const auto& d = train_set();
  auto model = ctnn::make_model<net>(42);
  ctnn::adam opt;
  const ctnn::sparse_categorical_crossentropy loss{.from_logits = true};
  // fit's training step (train/step.hpp): forward, loss, backward, update.
  ctnn::train_step step{model, loss, opt};
  step.set_per_layer_update(per_layer);
  ctnn::data::batch_of<ctnn::shape<28, 28>, ctnn::sparse_labels> b;
  auto cur = d.batch(batch).open(0);
  cur.next(b);
  std::size_t i = 0;
  for (auto _ : s) {
    const ctnn::step_result r = step.run(b.x.data(), b.y.data(), b.size, 0, i++);
    benchmark::DoNotOptimize(r.loss_sum);
  }
  s.counters["samples/s"] = benchmark::Counter(double(batch), benchmark::Counter::kIsIterationInvariantRate);
  ctnn::kernels::cpu::set_threads(1);
}
void train_step(benchmark::State& s) { train_step_as(s, true); }
// The same with every update after the whole backward (train_step::set_per_layer_update(false)).
void train_step_whole(benchmark::State& s) { train_step_as(s, false); }

template <class... Extras>
void run_epochs(benchmark::State& s, Extras... extras) {
  const std::size_t batch = std::size_t(s.range(0));
  constexpr std::size_t n_epochs = 2;
  ctnn::kernels::cpu::set_threads(std::size_t(s.range(1)));
  const auto train = train_set().shuffle(1).batch(batch);
  for (auto _ : s) {
    auto model = ctnn::make_model<net>(42);
    ctnn::adam opt;
    auto h = ctnn::fit(model, ctnn::sparse_categorical_crossentropy{.from_logits = true}, opt, train,
                       ctnn::epochs{n_epochs}, extras...);
    benchmark::DoNotOptimize(h);
  }
  s.counters["samples/s"] =
      benchmark::Counter(double(train.size() * n_epochs), benchmark::Counter::kIsIterationInvariantRate);
  ctnn::kernels::cpu::set_threads(1);
}
void epoch(benchmark::State& s) { run_epochs(s); }
void epoch_ieee(benchmark::State& s) { run_epochs(s, ctnn::ieee_denormals{}); }

void infer(benchmark::State& s) {
  ctnn::kernels::cpu::set_threads(std::size_t(s.range(1)));
  const auto& d = train_set();
  auto model = ctnn::make_model<net>(42);
  ctnn::data::batch_of<ctnn::shape<28, 28>, ctnn::sparse_labels> b;
  auto cur = d.batch(1).open(0);
  cur.next(b);
  for (auto _ : s) benchmark::DoNotOptimize(model.forward(b.x.data(), 1, false));
  ctnn::kernels::cpu::set_threads(1);
}
// The same over the first 256 training images in turn: gemv skips the rows of
// W where its input is 0 (the background, ReLU zeros), so the time depends on
// the image; this is the mean over varied ones.
void infer_images(benchmark::State& s) {
  ctnn::kernels::cpu::set_threads(std::size_t(s.range(1)));
  const auto& d = train_set();
  auto model = ctnn::make_model<net>(42);
  ctnn::data::batch_of<ctnn::shape<28, 28>, ctnn::sparse_labels> b;
  auto cur = d.batch(256).open(0);
  cur.next(b);
  std::size_t i = 0;
  for (auto _ : s) benchmark::DoNotOptimize(model.forward(b.x.data() + (i++ % 256) * 784, 1, false));
  ctnn::kernels::cpu::set_threads(1);
}

// The first layer's reads at batch 1 without the product: the rows of W (784 x 256) where
// the image is not 0, as simd::gemv chooses them, each row read whole by vector loads
// added into 8 accumulators.
void infer_read(benchmark::State& s) {
  namespace simd = ctnn::kernels::cpu::simd;
  using A = ctnn::kernels::cpu::default_arch;
  using B = xsimd::batch<float, A>;
  constexpr std::size_t K = 784, N = 256, L = B::size;
  const auto& d = train_set();
  ctnn::data::batch_of<ctnn::shape<28, 28>, ctnn::sparse_labels> b;
  auto cur = d.batch(1).open(0);
  cur.next(b);
  std::vector<float> w(K * N + L, 0.001f);
  const float* w0 = w.data();
  std::uint64_t words[simd::nonzero_words];
  const std::uint64_t* rows = simd::rows_to_read<A>(K, b.x.data(), words);
  std::size_t read = 0;
  simd::for_each_row(K, rows, [&](std::size_t) { ++read; });
  for (auto _ : s) {
    B acc[8];
    for (auto& a : acc) a = B(0.f);
    simd::for_each_row(K, rows, [&](std::size_t p) {
      const float* r = w0 + p * N;
#pragma GCC unroll 32
      for (std::size_t v = 0; v < N / L; ++v) acc[v % 8] += B::load_unaligned(r + v * L);
    });
    for (std::size_t i = 1; i < 8; ++i) acc[0] += acc[i];
    benchmark::DoNotOptimize(acc[0]);
  }
  s.counters["rows"] = double(read);
  s.counters["bytes/s"] = benchmark::Counter(double(read * N * sizeof(float)), benchmark::Counter::kIsIterationInvariantRate);
}

// The next batch of a shuffled pass into b; at the end of one, a new pass (untimed).
template <class Set, class Cursor, class Batch>
void next_batch(benchmark::State& s, const Set& train, Cursor& cur, std::size_t& epoch, Batch& b) {
  if (!cur.next(b)) {
    s.PauseTiming();
    cur = train.open(++epoch);
    cur.share_gather(true);  // as fit's loop
    s.ResumeTiming();
    cur.next(b);
  }
}

// fit's data part: the next batch of a shuffled pass (a new pass, untimed, at the end of one).
void gather(benchmark::State& s) {
  const std::size_t batch = std::size_t(s.range(0));
  const auto train = train_set().shuffle(1).batch(batch);
  ctnn::data::batch_of<ctnn::shape<28, 28>, ctnn::sparse_labels> b;
  std::size_t epoch = 0;
  auto cur = train.open(epoch);
  cur.share_gather(true);  // as fit's loop: over the pool (CTNN_NUM_THREADS)
  for (auto _ : s) {
    next_batch(s, train, cur, epoch, b);
    benchmark::DoNotOptimize(b.x.data());
  }
  s.counters["samples/s"] = benchmark::Counter(double(batch), benchmark::Counter::kIsIterationInvariantRate);
}

// fit's loop body for one batch: the next shuffled batch gathered (a new pass, untimed, at the end of
// one), then the training step on it; against mlp/train_step (the same step on one fixed batch) it
// is what fit adds per batch, in one process.
void fit_batch(benchmark::State& s) {
  const std::size_t batch = std::size_t(s.range(0));
  ctnn::kernels::cpu::set_threads(std::size_t(s.range(1)));
  const auto train = train_set().shuffle(1).batch(batch);
  auto model = ctnn::make_model<net>(42);
  ctnn::adam opt;
  ctnn::train_step step{model, ctnn::sparse_categorical_crossentropy{.from_logits = true}, opt};
  ctnn::data::batch_of<ctnn::shape<28, 28>, ctnn::sparse_labels> b;
  std::size_t epoch = 0, i = 0;
  auto cur = train.open(epoch);
  cur.share_gather(true);  // as fit's loop
  for (auto _ : s) {
    next_batch(s, train, cur, epoch, b);
    const ctnn::step_result r = step.run(b.x.data(), b.y.data(), b.size, epoch, i++);
    benchmark::DoNotOptimize(r.loss_sum);
  }
  s.counters["samples/s"] = benchmark::Counter(double(batch), benchmark::Counter::kIsIterationInvariantRate);
  ctnn::kernels::cpu::set_threads(1);
}

// The step's phases 4-6 alone (train_step::apply_gradients: Adam over the 235,146 parameters, the
// gradients of one step on a fixed batch); its share of mlp/train_step.
void adam_update(benchmark::State& s) {
  ctnn::kernels::cpu::set_threads(std::size_t(s.range(0)));
  const auto& d = train_set();
  auto model = ctnn::make_model<net>(42);
  ctnn::adam opt;
  ctnn::train_step step{model, ctnn::sparse_categorical_crossentropy{.from_logits = true}, opt};
  ctnn::data::batch_of<ctnn::shape<28, 28>, ctnn::sparse_labels> b;
  auto cur = d.batch(64).open(0);
  cur.next(b);
  step.run(b.x.data(), b.y.data(), b.size, 0, 0);
  for (auto _ : s) benchmark::DoNotOptimize(step.apply_gradients());
  s.counters["values/s"] = benchmark::Counter(double(model.parameters().size()), benchmark::Counter::kIsIterationInvariantRate);
  ctnn::kernels::cpu::set_threads(1);
}

// Adam training steps (train_step) of model on a fixed random batch of `batch` samples, timed by s,
// then one thread again.
template <class Model>
void train_steps(benchmark::State& s, Model& model, std::size_t batch) {
  using Net = typename Model::network;
  ctnn::rng g(1);
  std::vector<float> x(batch * Net::input_shape.size);
  std::vector<std::int32_t> y(batch);
  for (auto& v : x) v = float(g.uniform(0, 1));
  for (auto& v : y) v = std::int32_t(g.uniform(0, 10)) % std::int32_t(Net::output_shape.size);
  ctnn::adam opt;
  ctnn::train_step step{model, ctnn::sparse_categorical_crossentropy{.from_logits = true}, opt};
  std::size_t i = 0;
  for (auto _ : s) {
    const ctnn::step_result r = step.run(x.data(), y.data(), batch, 0, i++);
    benchmark::DoNotOptimize(r.loss_sum);
  }
  s.counters["samples/s"] = benchmark::Counter(double(batch), benchmark::Counter::kIsIterationInvariantRate);
  ctnn::kernels::cpu::set_threads(1);
}

// A training step of input<784> -> Hidden (relu) -> dense<10> on a fixed random batch.
template <class Hidden>
void width_step(benchmark::State& s) {
  using wnet = ctnn::sequential<ctnn::input<784>, Hidden, ctnn::dense<10>>;
  const std::size_t width = std::size_t(s.range(0)), batch = std::size_t(s.range(1));
  ctnn::kernels::cpu::set_threads(std::size_t(s.range(2)));
  auto model = ctnn::make_model<wnet>(42);
  if constexpr (Hidden::is_up_to) ctnn::set_width<0>(model, width);
  else if (width != Hidden::units) s.SkipWithError("mlp/width_static: the width is the type's");
  train_steps(s, model, batch);
}
void width_up_to(benchmark::State& s) { width_step<ctnn::dense<ctnn::up_to<512>, ctnn::relu>>(s); }
void width_static_128(benchmark::State& s) { width_step<ctnn::dense<128, ctnn::relu>>(s); }
void width_static_512(benchmark::State& s) { width_step<ctnn::dense<512, ctnn::relu>>(s); }

// Inference (model.forward, training off) of Net on a fixed random batch, with the CPU's fused
// small-MLP hook (fused = 1: model.fused_mlp().forward, backends/cpu/fused_mlp.hpp) or through
// the layers (fused = 0). mlp/fused_infer: the MLP above (784-256-128-10); mlp/fused_infer_mnist_small:
// 784-128-64-10 (relu, relu); mlp/fused_infer_small: 64-64-64-64 (relu, relu). Arguments: fused, batch,
// threads. Each batch's two rows run one after the other (alternating), for paired ratios on a loaded machine.
template <class Net>
void fused_infer(benchmark::State& s) {
  const bool fused = s.range(0) != 0;
  const std::size_t batch = std::size_t(s.range(1));
  ctnn::kernels::cpu::set_threads(std::size_t(s.range(2)));
  auto model = ctnn::make_model<Net>(42);
  model.fused_mlp().forward = fused;
  if (model.fused_mlp_active() != fused) s.SkipWithError("mlp/fused_infer: the hook does not take this network");
  ctnn::rng g(1);
  std::vector<float> x(batch * Net::input_shape.size);
  for (auto& v : x) v = float(g.uniform(0, 1));
  for (auto _ : s) benchmark::DoNotOptimize(model.forward(x.data(), batch, false));
  s.counters["samples/s"] = benchmark::Counter(double(batch), benchmark::Counter::kIsIterationInvariantRate);
  ctnn::kernels::cpu::set_threads(1);
}
using mnist_small = ctnn::sequential<ctnn::input<784>, ctnn::dense<128, ctnn::relu>, ctnn::dense<64, ctnn::relu>,
                                     ctnn::dense<10>>;
using small = ctnn::sequential<ctnn::input<64>, ctnn::dense<64, ctnn::relu>, ctnn::dense<64, ctnn::relu>,
                               ctnn::dense<64>>;
void fused_infer_net(benchmark::State& s) { fused_infer<net>(s); }
void fused_infer_mnist_small(benchmark::State& s) { fused_infer<mnist_small>(s); }
void fused_infer_small(benchmark::State& s) { fused_infer<small>(s); }
// One training step (train_step: forward, loss, backward, Adam) of Net on a fixed random batch,
// with the CPU's fused training passes (backends/cpu/fused_mlp.hpp) or through the layers:
// fused = 0 the layers, 1 the backward fused (model.fused_mlp().backward), 2 the forward fused
// (.training_forward), 3 both. mlp/fused_train: 784-256-128-10;
// mlp/fused_train_mnist_small: 784-128-64-10; mlp/fused_train_small: 64-64-64-64. Arguments:
// fused, batch, threads; CPU time (the machine may be loaded), each batch's two rows one after the other.
template <class Net>
void fused_train(benchmark::State& s) {
  const bool backward = (s.range(0) & 1) != 0, forward = (s.range(0) & 2) != 0;
  const std::size_t batch = std::size_t(s.range(1));
  ctnn::kernels::cpu::set_threads(std::size_t(s.range(2)));
  auto model = ctnn::make_model<Net>(42);
  model.fused_mlp().backward = backward;
  model.fused_mlp().training_forward = forward;
  if (model.fused_mlp_backward_active() != backward || model.fused_mlp_training_forward_active() != forward)
    s.SkipWithError("mlp/fused_train: the hook does not take this network");
  train_steps(s, model, batch);
}
void fused_train_net(benchmark::State& s) { fused_train<net>(s); }
void fused_train_mnist_small(benchmark::State& s) { fused_train<mnist_small>(s); }
void fused_train_small(benchmark::State& s) { fused_train<small>(s); }
void fused_train_args(benchmark::internal::Benchmark* b) {
  b->ArgNames({"fused", "batch", "threads"});
  for (long batch : {1, 4, 16, 64, 256, 1024})
    for (long fused : {0, 1, 2, 3}) b->Args({fused, batch, 1});
  b->Args({0, 1024, 2})->Args({3, 1024, 2});
}
void fused_args(benchmark::internal::Benchmark* b) {
  b->UseRealTime()->ArgNames({"fused", "batch", "threads"});
  for (long batch : {1, 16, 64, 256, 1024, 4096}) b->Args({0, batch, 1})->Args({1, batch, 1});
}

}  // namespace

BENCHMARK(fused_infer_net)->Name("mlp/fused_infer")->Apply(fused_args);
BENCHMARK(fused_infer_mnist_small)->Name("mlp/fused_infer_mnist_small")->Apply(fused_args);
BENCHMARK(fused_infer_small)->Name("mlp/fused_infer_small")->Apply(fused_args);
BENCHMARK(fused_train_net)->Name("mlp/fused_train")->Apply(fused_train_args);
BENCHMARK(fused_train_mnist_small)->Name("mlp/fused_train_mnist_small")->Apply(fused_train_args);
BENCHMARK(fused_train_small)->Name("mlp/fused_train_small")->Apply(fused_train_args);
BENCHMARK(width_up_to)->Name("mlp/width_up_to")->UseRealTime()->ArgNames({"width", "batch", "threads"})
    ->Args({128, 64, 1})->Args({512, 64, 1});
BENCHMARK(width_static_128)->Name("mlp/width_static")->UseRealTime()->ArgNames({"width", "batch", "threads"})
    ->Args({128, 64, 1});
BENCHMARK(width_static_512)->Name("mlp/width_static")->UseRealTime()->ArgNames({"width", "batch", "threads"})
    ->Args({512, 64, 1});
BENCHMARK(train_step)->Name("mlp/train_step")->UseRealTime()->ArgNames({"batch", "threads"})
    ->Args({16, 1})->Args({64, 1})->Args({256, 1})->Args({16, 2})->Args({64, 2})->Args({256, 2});
BENCHMARK(train_step_whole)->Name("mlp/train_step_whole")->UseRealTime()->ArgNames({"batch", "threads"})
    ->Args({16, 1})->Args({64, 1})->Args({256, 1})->Args({16, 2})->Args({64, 2})->Args({256, 2});
BENCHMARK(fit_batch)->Name("mlp/fit_batch")->UseRealTime()->ArgNames({"batch", "threads"})
    ->Args({64, 1})->Args({256, 1})->Args({64, 2})->Args({256, 2});
BENCHMARK(adam_update)->Name("mlp/adam_update")->UseRealTime()->ArgNames({"threads"})->Arg(1)->Arg(2);
BENCHMARK(epoch)->Name("mlp/epoch")->UseRealTime()->ArgNames({"batch", "threads"})->Unit(benchmark::kMillisecond)->Iterations(1)
    ->Args({16, 1})->Args({64, 1})->Args({256, 1})->Args({16, 2})->Args({64, 2})->Args({256, 2});
BENCHMARK(epoch_ieee)->Name("mlp/epoch_ieee")->UseRealTime()->ArgNames({"batch", "threads"})->Unit(benchmark::kMillisecond)
    ->Iterations(1)->Args({16, 1});
BENCHMARK(infer)->Name("mlp/infer")->UseRealTime()->ArgNames({"batch", "threads"})->Args({1, 1})->Args({1, 2});
BENCHMARK(infer_read)->Name("mlp/infer_read")->UseRealTime();
BENCHMARK(gather)->Name("mlp/gather")->UseRealTime()->ArgNames({"batch"})->Arg(64)->Arg(256);
BENCHMARK(infer_images)->Name("mlp/infer_images")->UseRealTime()->ArgNames({"batch", "threads"})->Args({1, 1})->Args({1, 2});
