// int8 against float32 for the same dense layer, batch 1 and 64 (issue 28's int8 target):
//   float_dense<K, N>/batch   the float dense layer's forward (kernels::cpu::dense_forward)
//   int8_dense<K, N, S>/batch quantized_dense's forward: quantize the input, int8 GEMM, requantize /
//                             rescale, dequantize (S: full_integer or dynamic_range)
//   int8_gemm<K, N>/batch     the int8 GEMM alone on packed weights (backends/cpu/int8.hpp, the default arch's path)
// Layers 784x256 and 256x128 of the Fashion-MNIST MLP, random weights (the values do not change
// the work). One thread:
//   CTNN_NUM_THREADS=1 taskset -c 0 build/bench/bench/bench_quant --benchmark_repetitions=3
// Build it with -march=x86-64-v3 too for the AVX2 path (docs/quantization.md has both).
#include <benchmark/benchmark.h>

#include <ctnn/ctnn.hpp>
#include <ctnn/quantization/convert.hpp>

#include <cstdint>
#include <cstdlib>
#include <vector>

namespace {

template <class T>
std::vector<T> random_values(std::size_t n, double lo, double hi, std::uint64_t seed) {
  std::vector<T> v(n);
  ctnn::rng g(seed);
  for (auto& x : v) x = T(g.uniform(lo, hi));
  return v;
}

template <std::size_t K, std::size_t N>
void float_dense(benchmark::State& st) {
  const std::size_t m = std::size_t(st.range(0));
  const auto x = random_values<float>(m * K, 0, 1, 1), w = random_values<float>(K * N, -0.05, 0.05, 2),
             b = random_values<float>(N, -0.1, 0.1, 3);
  std::vector<float> y(m * N);
  for (auto _ : st) {
    ctnn::kernels::cpu::dense_forward<K, N>(x.data(), w.data(), b.data(), y.data(), m, ctnn::fn::relu_fn{});
    benchmark::DoNotOptimize(y.data());
  }
  st.counters["samples_per_s"] = benchmark::Counter(double(m), benchmark::Counter::kIsIterationInvariantRate);
}

template <std::size_t K, std::size_t N, class Scheme>
void int8_dense(benchmark::State& st) {
  using L = ctnn::quantized_dense_layer<ctnn::quantized_dense<K, N, ctnn::relu, Scheme>, ctnn::shape<K>,
                                        ctnn::precision::float32, ctnn::cpu<>>;
  const std::size_t m = std::size_t(st.range(0));
  std::vector<std::uint64_t> mem((L::state_bytes + 7) / 8 + 8);  // the state 64-byte aligned, as in a model
  ctnn::layer_slot<float> s;
  s.state = reinterpret_cast<float*>((reinterpret_cast<std::uintptr_t>(mem.data()) + 63) / 64 * 64);
  ctnn::rng g(4);
  L::init(s, g);
  auto v = L::view(reinterpret_cast<std::byte*>(s.state));
  const auto w = random_values<int>(K * N, -127, 127, 5);
  std::vector<std::int8_t> plain(K * N);
  for (std::size_t i = 0; i < K * N; ++i) plain[i] = std::int8_t(w[i]);
  ctnn::kernels::cpu::int8::pack(K, N, plain.data(), K, v.kernel);
  ctnn::kernels::cpu::int8::packed_sums(N, K, v.kernel, v.kernel_sum);
  for (std::size_t j = 0; j < N; ++j) v.kernel_scale[j] = 0.0005f;
  if constexpr (L::full) {
    *v.in_scale = 1.0f / 255;
    *v.in_zp = -128;
    *v.out_scale = 0.05f;
    *v.out_zp = -128;
    for (std::size_t j = 0; j < N; ++j) {
      const auto q = ctnn::quantization::quantize_multiplier(double(*v.in_scale) * 0.0005 / 0.05);
      v.mult[j] = q.q;
      v.shift[j] = q.shift;
    }
  }
  const auto x = random_values<float>(m * K, 0, 1, 1);
  std::vector<float> y(m * N);
  for (auto _ : st) {
    L::forward(s, x.data(), y.data(), ctnn::run_info{m});
    benchmark::DoNotOptimize(y.data());
  }
  st.counters["samples_per_s"] = benchmark::Counter(double(m), benchmark::Counter::kIsIterationInvariantRate);
}

template <std::size_t K, std::size_t N>
void int8_gemm(benchmark::State& st) {
  const std::size_t m = std::size_t(st.range(0));
  namespace i8 = ctnn::kernels::cpu::int8;
  constexpr std::size_t kp = i8::padded_k(K);
  std::vector<std::int8_t> a(m * kp), w(K * N), packed(i8::packed_bytes(K, N));
  const auto av = random_values<int>(m * kp, -128, 127, 1), wv = random_values<int>(K * N, -127, 127, 2);
  for (std::size_t i = 0; i < a.size(); ++i) a[i] = std::int8_t(av[i]);
  for (std::size_t i = 0; i < w.size(); ++i) w[i] = std::int8_t(wv[i]);
  i8::pack(K, N, w.data(), K, packed.data());
  std::vector<std::int32_t> sums(N), c(m * N);
  i8::packed_sums(N, K, packed.data(), sums.data());
  for (auto _ : st) {
    i8::gemm_s8(m, N, K, a.data(), kp, packed.data(), sums.data(), c.data(), N);
    benchmark::DoNotOptimize(c.data());
  }
}

using fi = ctnn::quantization::full_integer;
using dr = ctnn::quantization::dynamic_range;
BENCHMARK(float_dense<784, 256>)->Arg(1)->Arg(64);
BENCHMARK(int8_dense<784, 256, fi>)->Arg(1)->Arg(64);
BENCHMARK(int8_dense<784, 256, dr>)->Arg(1)->Arg(64);
BENCHMARK(int8_gemm<784, 256>)->Arg(1)->Arg(64);
BENCHMARK(float_dense<256, 128>)->Arg(1)->Arg(64);
BENCHMARK(int8_dense<256, 128, fi>)->Arg(1)->Arg(64);
BENCHMARK(int8_dense<256, 128, dr>)->Arg(1)->Arg(64);
BENCHMARK(int8_gemm<256, 128>)->Arg(1)->Arg(64);

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  benchmark::AddCustomContext("int8 path", [] {
    const auto p = ctnn::kernels::cpu::int8::int8_path_of<ctnn::kernels::cpu::default_arch>();
    using P = ctnn::kernels::cpu::int8::int8_path;
    return p == P::vnni ? "avx512 vnni (vpdpbusd)" : p == P::avx2 ? "avx2 (vpmaddubsw + vpmaddwd)" : "scalar";
  }());
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
}
