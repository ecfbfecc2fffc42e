// The depthwise convolution (issue 29: depthwise_conv2d, separable_conv2d's depthwise step) on
// one thread, at MobileNet's shapes (3x3, stride 1, same padding, channels-last): forward, and
// forward + backward (dw, db and dx), per batch, for the vector path of the build's architecture
// (kernels::cpu::default_arch: -march=x86-64-v3 is cpu<fma3<avx2>>, -march=native on an AVX-512
// CPU cpu<avx512bw>) and the scalar loops (depthwise_*_scalar) beside it. Counter: GFLOP/s
// (2 flops a multiply-add; forward K^2 C OH OW a sample, backward twice that).
// Peer: bench/peers/depthwise_torch.py (torch.nn.functional.conv2d with groups = C, the same
// shapes, one thread). Also the training step of a small MobileNet-style network on 28x28 inputs.
//   build/bench/bench_depthwise --benchmark_repetitions=3
#include <benchmark/benchmark.h>

#include <ctnn/ctnn.hpp>

#include "train_step_bench.hpp"

#include <vector>

namespace {

using ctnn::kernels::conv_geometry;

template <std::size_t H, std::size_t C>
constexpr conv_geometry mobilenet = ctnn::window_geometry(H, H, C, C, 3, 3, 1, ctnn::padding::same);

template <conv_geometry G>
struct tensors {
  std::size_t batch;
  std::vector<float> x, w, b, y, dz, dw, db, dx;
  explicit tensors(std::size_t n)
      : batch(n), x(n * G.in_size()), w(G.kh * G.kw * G.f), b(G.f), y(n * G.out_size()), dz(y.size()), dw(w.size()),
        db(G.f), dx(x.size()) {
    ctnn::rng g(3);
    for (auto* v : {&x, &w, &b, &dz})
      for (auto& e : *v) e = float(g.uniform(-1, 1));
  }
};

template <conv_geometry G>
void flops(benchmark::State& st, double per_sample) {
  st.counters["GFLOP/s"] = benchmark::Counter(double(st.iterations()) * double(st.range(0)) * per_sample * 1e-9,
                                              benchmark::Counter::kIsRate);
}

template <conv_geometry G, bool Scalar>
void depthwise_forward(benchmark::State& st) {
  ctnn::kernels::cpu::thread_pool::global().resize(1);
  tensors<G> t(std::size_t(st.range(0)));
  for (auto _ : st) {
    if constexpr (Scalar)
      ctnn::kernels::cpu::depthwise_forward_scalar<G, 1>(t.x.data(), t.w.data(), t.b.data(), t.y.data(), 0, t.batch);
    else
      ctnn::kernels::cpu::depthwise_forward<G, 1>(t.x.data(), t.w.data(), t.b.data(), t.y.data(), t.batch);
    benchmark::DoNotOptimize(t.y.data());
  }
  flops<G>(st, 2.0 * G.kh * G.kw * G.out_size());
}

template <conv_geometry G, bool Scalar>
void depthwise_train(benchmark::State& st) {
  ctnn::kernels::cpu::thread_pool::global().resize(1);
  tensors<G> t(std::size_t(st.range(0)));
  for (auto _ : st) {
    if constexpr (Scalar) {
      ctnn::kernels::cpu::depthwise_forward_scalar<G, 1>(t.x.data(), t.w.data(), t.b.data(), t.y.data(), 0, t.batch);
      ctnn::kernels::cpu::depthwise_backward_weights_scalar<G, 1>(t.x.data(), t.dz.data(), t.dw.data(), t.db.data(),
                                                                  t.batch, 0, G.f);
      ctnn::kernels::cpu::depthwise_backward_input_scalar<G, 1>(t.dz.data(), t.w.data(), t.dx.data(), 0, t.batch);
    } else {
      ctnn::kernels::cpu::depthwise_forward<G, 1>(t.x.data(), t.w.data(), t.b.data(), t.y.data(), t.batch);
      ctnn::kernels::cpu::depthwise_backward<G, 1>(t.x.data(), t.dz.data(), t.w.data(), t.dw.data(), t.db.data(),
                                                   t.dx.data(), t.batch);
    }
    benchmark::DoNotOptimize(t.dx.data());
  }
  flops<G>(st, 6.0 * G.kh * G.kw * G.out_size());
}

// a MobileNet-style network on 28x28 images: strided conv, then depthwise / pointwise pairs
using mobile = ctnn::sequential<ctnn::input<28, 28>, ctnn::conv2d<32, 3, 3, 2, ctnn::padding::same, ctnn::relu>,
                                ctnn::depthwise_conv2d<3, 3, 1, ctnn::padding::same, 1, ctnn::relu>,
                                ctnn::conv2d<64, 1, 1, 1, ctnn::padding::valid, ctnn::relu>,
                                ctnn::separable_conv2d<128, 3, 3, 2, ctnn::padding::same, 1, ctnn::relu>,
                                ctnn::global_average_pool, ctnn::dense<10>>;
void mobile_train_step(benchmark::State& st) {
  ctnn::kernels::cpu::thread_pool::global().resize(1);
  ctnn_bench::train_step<mobile>(st, ctnn::adam{1e-3});
}

constexpr auto g56 = mobilenet<56, 128>;
constexpr auto g14 = mobilenet<14, 512>;
}  // namespace

BENCHMARK(depthwise_forward<g56, false>)->Name("depthwise/forward/56x56x128")->Arg(1)->Arg(16)->UseRealTime();
BENCHMARK(depthwise_forward<g56, true>)->Name("depthwise/forward_scalar/56x56x128")->Arg(1)->Arg(16)->UseRealTime();
BENCHMARK(depthwise_forward<g14, false>)->Name("depthwise/forward/14x14x512")->Arg(1)->Arg(16)->UseRealTime();
BENCHMARK(depthwise_forward<g14, true>)->Name("depthwise/forward_scalar/14x14x512")->Arg(1)->Arg(16)->UseRealTime();
BENCHMARK(depthwise_train<g56, false>)->Name("depthwise/train/56x56x128")->Arg(16)->UseRealTime();
BENCHMARK(depthwise_train<g56, true>)->Name("depthwise/train_scalar/56x56x128")->Arg(16)->UseRealTime();
BENCHMARK(depthwise_train<g14, false>)->Name("depthwise/train/14x14x512")->Arg(16)->UseRealTime();
BENCHMARK(depthwise_train<g14, true>)->Name("depthwise/train_scalar/14x14x512")->Arg(16)->UseRealTime();
BENCHMARK(mobile_train_step)->Name("mobile/train_step")->Arg(64)->Unit(benchmark::kMillisecond)->UseRealTime();

BENCHMARK_MAIN();
