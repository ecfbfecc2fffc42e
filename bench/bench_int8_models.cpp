// Whole int8 models against ONNX Runtime's int8 inference of the same models (issue 28: "the whole
// int8 MLP and CNN at batch 1 and 64 against ONNX Runtime's int8 models of the same network"):
//   mlp: 784 -> 256 relu -> 128 relu -> 10, the Fashion-MNIST MLP (input 28x28, flatten first)
//   cnn: conv2d<32, 3x3, relu>, max_pool2d, conv2d<64, 3x3, relu>, max_pool2d, flatten,
//        dense<128, relu>, dense<10> on 28x28x1 (the deploy example's CNN without batch norm)
// Random weights (the work does not depend on them), quantized full-integer by ctnn
// (quantize_full_integer, calibrated on 64 random inputs in [0, 1)); float32 for reference.
// One thread (the forward at inference, model::forward; what predict runs per batch).
// With CTNN_INT8_ONNX_DIR set, the int8 models are also written there as ONNX QDQ files
// (int8_mlp.onnx, int8_cnn.onnx: export_onnx; docs/interop.md; and reshape_only.onnx, a Reshape
// alone, whose time is the cost of a call from Python) for the peer,
// bench/peers/ort_int8.py, which times onnxruntime on exactly these models:
//   CTNN_INT8_ONNX_DIR=/tmp/int8 CTNN_NUM_THREADS=1 taskset -c 1 build/bench/bench_int8_models
//   taskset -c 1 build/peers-venv/bin/python bench/peers/ort_int8.py /tmp/int8
#include <benchmark/benchmark.h>

#include <ctnn/ctnn.hpp>
#include <ctnn/onnx.hpp>
#include <ctnn/quantization/convert.hpp>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <vector>

namespace {

using mlp = ctnn::sequential<ctnn::input<28, 28>, ctnn::flatten, ctnn::dense<256, ctnn::relu>,
                             ctnn::dense<128, ctnn::relu>, ctnn::dense<10>>;
using cnn = ctnn::sequential<ctnn::input<28, 28, 1>, ctnn::conv2d<32, 3, 3, 1, ctnn::padding::valid, ctnn::relu>,
                             ctnn::max_pool2d<2>, ctnn::conv2d<64, 3, 3, 1, ctnn::padding::valid, ctnn::relu>,
                             ctnn::max_pool2d<2>, ctnn::flatten, ctnn::dense<128, ctnn::relu>, ctnn::dense<10>>;

std::vector<float> inputs(std::size_t batch) {
  ctnn::rng g(3);
  std::vector<float> x(batch * 784);
  for (auto& v : x) v = float(g.uniform());
  return x;
}

template <class M>
void run(benchmark::State& st, M& m) {
  ctnn::kernels::cpu::thread_pool::global().resize(1);
  const std::size_t batch = std::size_t(st.range(0));
  const auto x = inputs(batch);
  for (auto _ : st) benchmark::DoNotOptimize(m.forward(x.data(), batch, false));
  st.SetItemsProcessed(std::int64_t(st.iterations() * batch));
}

template <class Net>
auto int8_model() {
  const auto m = ctnn::make_model<Net>(1);
  const auto cal = inputs(64);
  return ctnn::quantize_full_integer(m, cal.data(), 64);
}

template <class Net>
void float32(benchmark::State& st) {
  auto m = ctnn::make_model<Net>(1);
  run(st, m);
}

template <class Net>
void int8(benchmark::State& st) {
  auto q = int8_model<Net>();
  run(st, q);
}

// The models the peer times, written once before the benchmarks run.
const bool exported = [] {
  if (const char* dir = std::getenv("CTNN_INT8_ONNX_DIR")) {
    std::filesystem::create_directories(dir);
    ctnn::export_onnx(int8_model<mlp>(), std::filesystem::path(dir) / "int8_mlp.onnx");
    ctnn::export_onnx(int8_model<cnn>(), std::filesystem::path(dir) / "int8_cnn.onnx");
    // a model that only reshapes its input: what one onnxruntime call costs from Python
    using reshape_only = ctnn::sequential<ctnn::input<28, 28>, ctnn::flatten>;
    ctnn::export_onnx(ctnn::make_model<reshape_only>(1), std::filesystem::path(dir) / "reshape_only.onnx");
    return true;
  }
  return false;
}();

}  // namespace

BENCHMARK(float32<mlp>)->Name("mlp/float32")->Arg(1)->Arg(64)->UseRealTime();
BENCHMARK(int8<mlp>)->Name("mlp/int8")->Arg(1)->Arg(64)->UseRealTime();
BENCHMARK(float32<cnn>)->Name("cnn/float32")->Arg(1)->Arg(64)->UseRealTime();
BENCHMARK(int8<cnn>)->Name("cnn/int8")->Arg(1)->Arg(64)->UseRealTime();

BENCHMARK_MAIN();
