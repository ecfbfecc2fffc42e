// GFLOP/s of the dense layer's three products (backends/cpu/gemm.hpp) on the
// shapes of the 784-256-128-10 MLP at batch 1, 16, 64, 256, and of a
// 1024x1024x1024 GEMM, on 1 and 2 threads; OpenBLAS cblas_sgemm on the same
// products (same operand layouts) as the peer. Counter GFLOP/s = 2*M*N*K / time.
//   fwd: Y = X W + b (+relu)   bww: dW = X^T dY   bwi: dX = dY W^T
#include <benchmark/benchmark.h>
#include <cblas.h>

#include <ctnn/core/rng.hpp>
#include <ctnn/backends/cpu/arch.hpp>
#include <ctnn/backends/cpu/gemm.hpp>
#include <ctnn/backends/cpu/thread_pool.hpp>

#include <new>
#include <string>
#include <vector>

namespace {

using namespace ctnn;

enum op { fwd, bww, bwi };

// 64-byte aligned, as a model's arena aligns every parameter and activation
// (an unaligned 64-byte load spans two cache lines).
template <class T>
struct aligned_allocator {
  using value_type = T;
  aligned_allocator() = default;
  template <class U>
  aligned_allocator(const aligned_allocator<U>&) {}
  T* allocate(std::size_t n) { return static_cast<T*>(::operator new(n * sizeof(T), std::align_val_t{64})); }
  void deallocate(T* p, std::size_t) { ::operator delete(p, std::align_val_t{64}); }
  bool operator==(const aligned_allocator&) const { return true; }
};
using fvec = std::vector<float, aligned_allocator<float>>;

struct operands {
  fvec x, w, b, y, dy, dw, db, dx;
  operands(std::size_t m, std::size_t k, std::size_t n)
      : x(m * k), w(k * n), b(n), y(m * n), dy(m * n), dw(k * n), db(n), dx(m * k) {
    rng g(m + k + n);
    for (auto* v : {&x, &w, &b, &dy})
      for (auto& e : *v) e = float(g.uniform(-1, 1));
  }
};

void counters(benchmark::State& s, std::size_t m, std::size_t k, std::size_t n, int threads) {
  s.counters["GFLOP/s"] = benchmark::Counter(2.0 * double(m) * double(k) * double(n) * 1e-9,
                                             benchmark::Counter::kIsIterationInvariantRate);
  s.counters["threads"] = threads;
}

template <std::size_t K, std::size_t N, op Op>
void ctnn_dense(benchmark::State& s) {
  const std::size_t m = std::size_t(s.range(0));
  const int t = int(s.range(1));
  kernels::cpu::set_threads(std::size_t(t));
  operands o(m, K, N);
  for (auto _ : s) {
    if constexpr (Op == fwd)
      kernels::cpu::dense_forward<K, N, ctnn::fn::relu_fn>(o.x.data(), o.w.data(), o.b.data(), o.y.data(), m);
    else if constexpr (Op == bww)
      kernels::cpu::dense_backward_weights<K, N>(o.x.data(), o.dy.data(), o.dw.data(), o.db.data(), m);
    else
      kernels::cpu::dense_backward_input<K, N>(o.dy.data(), o.w.data(), o.dx.data(), m);
    benchmark::ClobberMemory();
  }
  counters(s, m, K, N, t);
  kernels::cpu::set_threads(1);
}

template <std::size_t K, std::size_t N, op Op>
void openblas_dense(benchmark::State& s) {
  const std::size_t m = std::size_t(s.range(0));
  const int t = int(s.range(1));
  openblas_set_num_threads(t);
  operands o(m, K, N);
  const int M = int(m), Ki = int(K), Ni = int(N);
  for (auto _ : s) {
    if constexpr (Op == fwd)
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, M, Ni, Ki, 1.f, o.x.data(), Ki, o.w.data(), Ni, 0.f, o.y.data(), Ni);
    else if constexpr (Op == bww)
      cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, Ki, Ni, M, 1.f, o.x.data(), Ki, o.dy.data(), Ni, 0.f, o.dw.data(), Ni);
    else
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, M, Ki, Ni, 1.f, o.dy.data(), Ni, o.w.data(), Ni, 0.f, o.dx.data(), Ki);
    benchmark::ClobberMemory();
  }
  counters(s, m, K, N, t);
}

void mlp_args(benchmark::internal::Benchmark* b) {
  for (int t : {1, 2})
    for (int m : {1, 16, 64, 256}) b->Args({m, t});
}
void square_args(benchmark::internal::Benchmark* b) {
  for (int t : {1, 2}) b->Args({1024, t});
}

// The machine's measured fp32 FMA peak: 16 independent accumulator chains
// of xsimd FMAs on registers (default_arch), no memory traffic, on each of
// `threads` threads of the thread pool at once. GFLOP/s = 2 * lanes * FMAs /
// time, summed over the threads (floating-point FMAs are not reassociated
// without -ffast-math, so every one runs). The GEMM figures are read against it.
void peak_fma(benchmark::State& s) {
  using B = xsimd::batch<float, kernels::cpu::default_arch>;
  constexpr std::size_t chains = 16, steps = 1 << 16;
  const std::size_t t = std::size_t(s.range(0));
  kernels::cpu::set_threads(t);
  float sink[8] = {};
  for (auto _ : s) {
    kernels::cpu::thread_pool::global().run(t, [&](std::size_t task) {
      B acc[chains];
      for (std::size_t c = 0; c < chains; ++c) acc[c] = B(1.0f + float(c) * 1e-7f + float(task));
      const B m(0.9999999f), a(1e-7f);
      for (std::size_t k = 0; k < steps; ++k) {
#pragma GCC unroll 16
        for (std::size_t c = 0; c < chains; ++c) acc[c] = xsimd::fma(acc[c], m, a);
      }
      B total = acc[0];
      for (std::size_t c = 1; c < chains; ++c) total += acc[c];
      sink[task % 8] = xsimd::hadd(total);
    });
    benchmark::DoNotOptimize(sink);
  }
  s.counters["GFLOP/s"] = benchmark::Counter(2.0 * double(B::size) * double(chains * steps) * double(t) * 1e-9,
                                             benchmark::Counter::kIsIterationInvariantRate);
  s.counters["threads"] = double(t);
  kernels::cpu::set_threads(1);
}

}  // namespace

BENCHMARK(peak_fma)->Name("peak/fma")->Arg(1)->Arg(2)->UseRealTime();

#define CTNN_GEMM_BENCH(K, N, OP)                                                               \
  BENCHMARK(ctnn_dense<K, N, OP>)->Name("gemm/ctnn/" #OP "/" #K "x" #N)->Apply(mlp_args);         \
  BENCHMARK(openblas_dense<K, N, OP>)->Name("gemm/openblas/" #OP "/" #K "x" #N)->Apply(mlp_args);

CTNN_GEMM_BENCH(784, 256, fwd)
CTNN_GEMM_BENCH(784, 256, bww)
CTNN_GEMM_BENCH(784, 256, bwi)
CTNN_GEMM_BENCH(256, 128, fwd)
CTNN_GEMM_BENCH(256, 128, bww)
CTNN_GEMM_BENCH(256, 128, bwi)
CTNN_GEMM_BENCH(128, 10, fwd)
CTNN_GEMM_BENCH(128, 10, bww)
CTNN_GEMM_BENCH(128, 10, bwi)

BENCHMARK(ctnn_dense<1024, 1024, fwd>)->Name("gemm/ctnn/square/1024")->Apply(square_args);
BENCHMARK(openblas_dense<1024, 1024, fwd>)->Name("gemm/openblas/square/1024")->Apply(square_args);
