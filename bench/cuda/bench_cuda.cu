// bench/cuda/bench_cuda.cu — the CUDA backend's figures, one line each:
//   <name> <value> <unit>
// No Google Benchmark (the device machine has none): CUDA events time the
// device work, steady_clock the host loops; each figure is the median of
// repeats after a warm-up. Sections (argv[1], default all):
//   gemm   ctnn's dense_forward (bias + relu fused, ops<cuda<90>>) against a
//          plain cuBLASLt matmul of the same shape and type (heuristic's first
//          algorithm, no epilogue): TFLOP/s each and the ratio
//   train  one epoch (60000 synthetic 28x28 samples, after a warm-up epoch) of
//          the Fashion-MNIST MLP (784-256-128-10) and CNN (examples/fashion_mnist_cnn.cpp)
//          through fit on cuda<90>, float32, batch 256 and 8192: samples/s;
//          mixed_float16 / mixed_bfloat16 at batch 8192 (against float32)
//   infer  batch-1 MLP inference latency (forward + stream synchronize), median of
//          2000: the model's forward, which its runner replays as a captured CUDA
//          graph after two passes per staging buffer; a 64-128-128-10 MLP at
//          batch 1 and 1024 (float32 and float16) through the same path
#include <ctnn/backends/cuda/cuda.cuh>

#include "../bench_nets.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

namespace {

using dev = ctnn::cuda<90>;
using G = ctnn::ops<dev>;

void figure(const std::string& name, double value, const char* unit) {
  std::printf("%s %.6g %s\n", name.c_str(), value, unit);
  std::fflush(stdout);
}

template <class F>
double median_ms(F&& f, int reps) {
  cudaStream_t s = ctnn::cuda_context::get().compute();
  cudaEvent_t a, b;
  CTNN_CUDA_CHECK(cudaEventCreate(&a));
  CTNN_CUDA_CHECK(cudaEventCreate(&b));
  for (int i = 0; i < 3; ++i) f();
  std::vector<double> t;
  for (int r = 0; r < reps; ++r) {
    CTNN_CUDA_CHECK(cudaEventRecord(a, s));
    f();
    CTNN_CUDA_CHECK(cudaEventRecord(b, s));
    CTNN_CUDA_CHECK(cudaEventSynchronize(b));
    float ms = 0;
    CTNN_CUDA_CHECK(cudaEventElapsedTime(&ms, a, b));
    t.push_back(ms);
  }
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

template <class T>
ctnn::device_buffer<T> filled(std::size_t n, float scale) {
  std::mt19937 g(1);
  std::uniform_real_distribution<float> d(-scale, scale);
  std::vector<T> h(n);
  for (auto& v : h) v = ctnn::cuda_detail::store<T>(d(g));
  ctnn::device_buffer<T> b(n);
  b.upload(h.data(), n);
  return b;
}

template <class T, std::size_t K, std::size_t N>
void gemm(std::size_t m) {
  auto x = filled<T>(m * K, 1.0f), w = filled<T>(K * N, 0.05f), b = filled<T>(N, 0.1f);
  ctnn::device_buffer<T> y(m * N);
  const double flop = 2.0 * double(m) * K * N;
  // 10 calls per timed repeat, so launch gaps do not dominate small shapes
  const double ctnn_ms = median_ms([&] {
    for (int i = 0; i < 10; ++i) G::dense_forward<K, N, ctnn::fn::relu_fn>(x.data(), w.data(), b.data(), y.data(), m);
  }, 20) / 10;
  const double lt_ms = median_ms([&] {
    for (int i = 0; i < 10; ++i)
      ctnn::lt_matmul<T>(false, false, int(N), int(m), int(K), w.data(), int(N), x.data(), int(K), y.data(), int(N),
                         nullptr, ctnn::lt_epilogue::none);
  }, 20) / 10;
  const std::string name = std::string("gemm_") + ctnn::storage<T>::name + "_" + std::to_string(m) + "x" +
                           std::to_string(K) + "x" + std::to_string(N);
  figure(name + "_ctnn_bias_relu", flop / ctnn_ms * 1e-9, "TFLOP/s");
  figure(name + "_cublaslt_plain", flop / lt_ms * 1e-9, "TFLOP/s");
  figure(name + "_ratio", lt_ms / ctnn_ms, "x");
}

template <class T>
void gemms() {
  for (std::size_t m : {256, 8192}) {
    gemm<T, 784, 256>(m);
    gemm<T, 256, 128>(m);
  }
  gemm<T, 4096, 4096>(4096);
}

using ctnn_bench::cnn;  // bench_nets.hpp: the benchmarks' networks
using ctnn_bench::mlp;

auto synthetic(std::size_t n) {
  std::mt19937 g(7);
  std::uniform_real_distribution<float> d(0.0f, 1.0f);
  std::vector<float> x(n * 784);
  for (auto& v : x) v = d(g);
  std::vector<std::int32_t> y(n);
  for (auto& v : y) v = std::int32_t(g() % 10);
  return ctnn::data::in_memory<ctnn::shape<28, 28>, ctnn::sparse_labels, float>(std::move(x), std::move(y));
}

// One timed epoch of Net under policy P (after a warm-up on 2 batches' worth
// of samples, at least 6000: allocations, cuBLASLt plans, the captured graphs).
template <class Net, class P = ctnn::precision::float32>
void train(const char* what, std::size_t batch) {
  const auto data = synthetic(60000).shuffle(1).batch(batch);
  const auto warm = synthetic(std::max<std::size_t>(6000, 2 * batch)).batch(batch);
  auto m = ctnn::make_model<Net, P, dev>(42);
  ctnn::adam opt{1e-3};
  const ctnn::sparse_categorical_crossentropy loss{.from_logits = true};
  ctnn::fit(m, loss, opt, warm, ctnn::epochs{1});
  const auto h = ctnn::fit(m, loss, opt, data, ctnn::epochs{1});
  const std::string name = std::string("train_") + what + "_" + ctnn::precision::name_of<P>() + "_batch" +
                           std::to_string(batch);
  figure(name + "_samples_per_s", 60000.0 / h.values.at("seconds")[0], "samples/s");
  figure(name + "_compute_s", h.values.at("compute_seconds")[0], "s");
  figure(name + "_data_s", h.values.at("data_seconds")[0], "s");
  figure(name + "_device_wait_s", h.values.at("device_wait_seconds")[0], "s");
  figure(name + "_device_compute_s", h.values.at("device_compute_seconds")[0], "s");
  figure(name + "_graph_steps", h.values.at("graph_steps")[0], "steps");
}

// A small MLP's inference latency (forward + synchronize), median of 1000
// (the fused small-MLP kernel becomes a backend hook of the generic model: cudahooks).
using small_mlp = ctnn::sequential<ctnn::input<64>, ctnn::dense<128, ctnn::relu>, ctnn::dense<128, ctnn::relu>,
                                   ctnn::dense<10>>;
template <class Net, class P>
double latency_us(std::size_t in, std::size_t batch, int reps) {
  auto m = ctnn::make_model<Net, P, dev>(42);
  const std::vector<float> x(in * batch, 0.5f);
  std::vector<double> t;
  for (int i = 0; i < reps + reps / 10; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    m.forward(x.data(), batch, false);
    G::synchronize();
    if (i >= reps / 10) t.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count());
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

void infer() {
  figure("infer_mlp_batch1_latency", latency_us<mlp, ctnn::precision::float32>(784, 1, 2000), "us");
  for (std::size_t b : {1, 1024}) {
    figure("infer_small_mlp_float32_batch" + std::to_string(b) + "_latency",
           latency_us<small_mlp, ctnn::precision::float32>(64, b, 1000), "us");
    figure("infer_small_mlp_float16_batch" + std::to_string(b) + "_latency",
           latency_us<small_mlp, ctnn::precision::float16>(64, b, 1000), "us");
  }
}

}  // namespace

int main(int argc, char** argv) try {
  const std::string what = argc > 1 ? argv[1] : "all";
  if (ctnn::device_count() == 0) {
    std::printf("CTNN_SKIP: %s\n", ctnn::device_status().c_str());
    return 0;
  }
  std::printf("# device: %s\n", ctnn::device_status().c_str());
  if (what == "all" || what == "gemm") {
    gemms<float>();
    gemms<__half>();
    gemms<__nv_bfloat16>();
  }
  if (what == "all" || what == "train") {
    for (std::size_t b : {256, 8192}) {
      train<mlp>("mlp", b);
      train<cnn>("cnn", b);
    }
    // mixed precision against float32 at a large batch
    train<mlp, ctnn::precision::mixed_float16>("mlp", 8192);
    train<mlp, ctnn::precision::mixed_bfloat16>("mlp", 8192);
    train<cnn, ctnn::precision::mixed_float16>("cnn", 8192);
  }
  if (what == "all" || what == "infer") infer();
  return 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "bench_cuda: %s\n", e.what());
  return 1;
}
