// GFLOP/s of the dense layer's three products (backends/cpu/gemm.hpp) on the
// shapes of the 784-256-128-10 MLP at batch 1, 16, 64, 256, and of a
// 1024x1024x1024 GEMM, and of the CNN's conv2 (im2col: M 7744, K 288, N 64),
// on 1 and 2 threads; OpenBLAS cblas_sgemm on the same
// products (same operand layouts) as the peer. Counter GFLOP/s = 2*M*N*K / time.
//   fwd: Y = X W + b (+relu)   bww: dW = X^T dY   bwi: dX = dY W^T
// peak/fma, peak/fma_independent: the FMA peak the products are read against; peak/stream/*:
// the memory rate of Adam's update's traffic over the MLP's parameters (below).
#include <benchmark/benchmark.h>
#include <cblas.h>

#include <ctnn/core/rng.hpp>
#include <ctnn/backends/cpu/arch.hpp>
#include <ctnn/backends/cpu/gemm.hpp>
#include <ctnn/backends/cpu/thread_pool.hpp>
#include <ctnn/kernels/functors.hpp>

#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <new>
#include <string>
#include <type_traits>
#include <utility>
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
// conv2 of the CNN benchmark at batch 64: im2col rows 64 x 11 x 11, patch 3 x 3 x 32, 64 filters.
void conv_args(benchmark::internal::Benchmark* b) {
  for (int t : {1, 2}) b->Args({7744, t});
}
void square_args(benchmark::internal::Benchmark* b) {
  for (int t : {1, 2}) b->Args({1024, t});
}

// The FMA chains a peak loop runs: enough independent accumulators to keep
// every FMA unit busy (latency 4 cycles x 2 ports on Zen 3/4 and Skylake to
// Sapphire Rapids: 8 in flight; twice that for slack) but no more than the
// register file holds beside the loop's two constants and two spare: AVX-512
// (32 zmm) 16 chains, AVX2 and below (16 registers) 12. 16 chains on AVX2
// spill (issue 25: 52 GFLOP/s on a Zen 3 where 12 chains reach 93).
template <class Arch>
inline constexpr std::size_t vector_registers = std::is_base_of_v<xsimd::avx512f, Arch> ? 32 : 16;
inline constexpr std::size_t fma_latency = 4, fma_ports = 2;
template <class Arch>
inline constexpr std::size_t fma_chains = std::min(vector_registers<Arch> - 4, 2 * fma_latency * fma_ports);

// steps rounds of acc[c] = acc[c] * m + a over every chain (a fold: each
// accumulator is a register of its own, no loop over an array).
template <class V, class F, std::size_t... C>
void fma_rounds(V (&acc)[sizeof...(C)], V m, V a, std::size_t steps, F fma, std::index_sequence<C...>) {
  for (std::size_t k = 0; k < steps; ++k) ((acc[C] = fma(acc[C], m, a)), ...);
}

// Runs body(task) on `t` threads of the pool at once, per iteration, and sets
// GFLOP/s = 2 * lanes * chains * steps * t / time (floating-point FMAs are not
// reassociated without -ffast-math, so every one runs).
template <class Body>
void peak_loop(benchmark::State& s, std::size_t lanes, std::size_t chains, std::size_t steps, Body body) {
  const std::size_t t = std::size_t(s.range(0));
  kernels::cpu::set_threads(t);
  float sink[8] = {};
  for (auto _ : s) {
    kernels::cpu::thread_pool::global().run(t, [&](std::size_t task) { sink[task % 8] = body(task); });
    benchmark::DoNotOptimize(sink);
  }
  s.counters["GFLOP/s"] = benchmark::Counter(2.0 * double(lanes) * double(chains * steps) * double(t) * 1e-9,
                                             benchmark::Counter::kIsIterationInvariantRate);
  s.counters["threads"] = double(t);
  s.counters["chains"] = double(chains);
  kernels::cpu::set_threads(1);
}

inline constexpr std::size_t peak_steps = 1 << 16;

// The machine's measured fp32 FMA peak: fma_chains<default_arch> independent
// accumulator chains of xsimd FMAs on registers, no memory traffic, on each
// of `threads` threads of the thread pool at once. The GEMM figures are read
// against it.
void peak_fma(benchmark::State& s) {
  using B = xsimd::batch<float, kernels::cpu::default_arch>;
  constexpr std::size_t chains = fma_chains<kernels::cpu::default_arch>;
  peak_loop(s, B::size, chains, peak_steps, [](std::size_t task) {
    B acc[chains];
    for (std::size_t c = 0; c < chains; ++c) acc[c] = B(1.0f + float(c) * 1e-7f + float(task));
    fma_rounds(acc, B(0.9999999f), B(1e-7f), peak_steps, [](B x, B m, B a) { return xsimd::fma(x, m, a); },
               std::make_index_sequence<chains>{});
    B total = acc[0];
    for (std::size_t c = 1; c < chains; ++c) total += acc[c];
    return xsimd::hadd(total);
  });
}

// The independent check of peak/fma: the same measure written without xsimd,
// with the compiler's intrinsics and another chain count sized for the
// register file: 24 zmm chains with AVX-512 (of 32 registers), 10 ymm chains
// with AVX2 + FMA (of 16). Both counts keep the FMA units busy, so the two
// benchmarks agree within a few percent when neither spills or stalls; a
// larger gap means peak/fma is wrong on this CPU.
#if defined(__AVX512F__)
using peak_vector = __m512;
inline constexpr std::size_t independent_chains = 24;
inline peak_vector peak_set(float v) { return _mm512_set1_ps(v); }
inline peak_vector peak_fmadd(peak_vector x, peak_vector m, peak_vector a) { return _mm512_fmadd_ps(x, m, a); }
inline peak_vector peak_add(peak_vector x, peak_vector y) { return _mm512_add_ps(x, y); }
inline float peak_sum(peak_vector x) { return _mm512_reduce_add_ps(x); }
#elif defined(__AVX2__) && defined(__FMA__)
using peak_vector = __m256;
inline constexpr std::size_t independent_chains = 10;
inline peak_vector peak_set(float v) { return _mm256_set1_ps(v); }
inline peak_vector peak_fmadd(peak_vector x, peak_vector m, peak_vector a) { return _mm256_fmadd_ps(x, m, a); }
inline peak_vector peak_add(peak_vector x, peak_vector y) { return _mm256_add_ps(x, y); }
inline float peak_sum(peak_vector x) {
  alignas(32) float v[8];
  _mm256_store_ps(v, x);
  return v[0] + v[1] + v[2] + v[3] + v[4] + v[5] + v[6] + v[7];
}
#endif

void peak_fma_independent(benchmark::State& s) {
#if defined(__AVX512F__) || (defined(__AVX2__) && defined(__FMA__))
  constexpr std::size_t chains = independent_chains;
  peak_loop(s, sizeof(peak_vector) / sizeof(float), chains, peak_steps, [](std::size_t task) {
    peak_vector acc[chains];
    for (std::size_t c = 0; c < chains; ++c) acc[c] = peak_set(1.0f + float(c) * 1e-7f + float(task));
    fma_rounds(
        acc, peak_set(0.9999999f), peak_set(1e-7f), peak_steps,
        [](peak_vector x, peak_vector m, peak_vector a) { return peak_fmadd(x, m, a); },
        std::make_index_sequence<chains>{});
    peak_vector total = acc[0];
    for (std::size_t c = 1; c < chains; ++c) total = peak_add(total, acc[c]);
    return peak_sum(total);
  });
#else
  s.SkipWithError("peak/fma_independent needs AVX2 + FMA or AVX-512 (build with -march=x86-64-v3 or newer)");
#endif
}


// peak/stream/*: the memory rate of Adam's update's traffic on one thread: the 235,146 parameters
// of the 784-256-128-10 MLP (rounded up to whole vectors) as four arrays w, g, m, v (3.76 MB, above
// a 2 MB L2), each pass reading all four and writing w, m, v (7 streams, 6.58 MB) with xsimd
// vectors of default_arch; bytes/s = 7 x 4 x 235,146 / time. The rule: `add` one add or subtract
// per value written (m += g, v += g, w += m - v; g = 0: nothing drifts), the memory alone;
// `adam` the update's own (fn::adam_update: Keras's arithmetic, a divide and a square root a value).
// The layout: separate arrays with ordinary stores (the model's: its slots are m then v, n apart),
// the same with streaming (non-temporal) stores of w, m, v, or w, m, v interleaved a vector each
// (one array of blocks w | m | v, g apart: 4 streams instead of 7, the same bytes).
//   peak/stream/add, add_nt, add_interleaved, adam, adam_nt, adam_interleaved
inline constexpr std::size_t stream_values = 235146;
enum class stream_layout { separate, nt, interleaved };
struct stream_add {
  template <class V>
  void operator()(V& w, V g, V& m, V& v) const {
    m = m + g;
    v = v + g;
    w = w + (m - v);
  }
};
template <class B>
void stream_store(const B& x, float* p, bool nt) {
#if defined(__AVX512F__)
  if constexpr (sizeof(B) == 64)
    if (nt) return _mm512_stream_ps(p, x);
#endif
#if defined(__AVX__)
  if constexpr (sizeof(B) == 32)
    if (nt) return _mm256_stream_ps(p, x);
#endif
  x.store_aligned(p);
}
template <class Rule, stream_layout Layout>
void peak_stream(benchmark::State& s, Rule rule, bool random_g) {
  using B = xsimd::batch<float, kernels::cpu::default_arch>;
  constexpr std::size_t L = B::size, n = (stream_values + L - 1) / L * L;
  constexpr bool inter = Layout == stream_layout::interleaved, nt = Layout == stream_layout::nt;
  fvec g(n, 0.f), w(inter ? 3 * n : n), m(inter ? 0 : n), v(inter ? 0 : n);
  rng r(7);
  if (random_g)
    for (auto& e : g) e = float(r.uniform(-1, 1));
  for (auto& e : w) e = float(r.uniform(-1, 1));
  float* const pw = w.data();
  float* const pm = inter ? pw + L : m.data();
  float* const pv = inter ? pw + 2 * L : v.data();
  constexpr std::size_t step = inter ? 3 * L : L;  // between one vector of w (m, v) and the next
  for (std::size_t j = 0; j < n / L * step; j += step)  // add: m == v, so w stays
    for (std::size_t l = 0; l < L; ++l) pm[j + l] = pv[j + l] = std::abs(pw[j + l]);
  for (auto _ : s) {
    for (std::size_t i = 0, j = 0; i < n; i += L, j += step) {
      B wv = B::load_aligned(pw + j), mv = B::load_aligned(pm + j), vv = B::load_aligned(pv + j);
      rule(wv, B::load_aligned(g.data() + i), mv, vv);
      stream_store(wv, pw + j, nt);
      stream_store(mv, pm + j, nt);
      stream_store(vv, pv + j, nt);
    }
    if constexpr (nt) _mm_sfence();
    benchmark::ClobberMemory();
  }
  s.counters["bytes/s"] = benchmark::Counter(7.0 * 4.0 * double(stream_values), benchmark::Counter::kIsIterationInvariantRate);
  s.counters["values/s"] = benchmark::Counter(double(stream_values), benchmark::Counter::kIsIterationInvariantRate);
}
// Adam's rule with Keras's defaults at the first update (alpha = 1e-3 sqrt(1 - 0.999) / (1 - 0.9)).
fn::adam_update<float> stream_adam_rule() { return {float(1e-3 * 0.0316227766 / 0.1), 0.1f, 0.001f, 1e-7f}; }
void stream_add_separate(benchmark::State& s) { peak_stream<stream_add, stream_layout::separate>(s, {}, false); }
void stream_add_nt(benchmark::State& s) { peak_stream<stream_add, stream_layout::nt>(s, {}, false); }
void stream_add_interleaved(benchmark::State& s) { peak_stream<stream_add, stream_layout::interleaved>(s, {}, false); }
void stream_adam_separate(benchmark::State& s) { peak_stream<fn::adam_update<float>, stream_layout::separate>(s, stream_adam_rule(), true); }
void stream_adam_nt(benchmark::State& s) { peak_stream<fn::adam_update<float>, stream_layout::nt>(s, stream_adam_rule(), true); }
void stream_adam_interleaved(benchmark::State& s) {
  peak_stream<fn::adam_update<float>, stream_layout::interleaved>(s, stream_adam_rule(), true);
}

}  // namespace

BENCHMARK(peak_fma)->Name("peak/fma")->Arg(1)->Arg(2)->UseRealTime();
BENCHMARK(peak_fma_independent)->Name("peak/fma_independent")->Arg(1)->Arg(2)->UseRealTime();
BENCHMARK(stream_add_separate)->Name("peak/stream/add");
BENCHMARK(stream_add_nt)->Name("peak/stream/add_nt");
BENCHMARK(stream_add_interleaved)->Name("peak/stream/add_interleaved");
BENCHMARK(stream_adam_separate)->Name("peak/stream/adam");
BENCHMARK(stream_adam_nt)->Name("peak/stream/adam_nt");
BENCHMARK(stream_adam_interleaved)->Name("peak/stream/adam_interleaved");

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

#define CTNN_CONV_BENCH(K, N, OP)                                                                \
  BENCHMARK(ctnn_dense<K, N, OP>)->Name("gemm/ctnn/conv/" #OP "/" #K "x" #N)->Apply(conv_args);     \
  BENCHMARK(openblas_dense<K, N, OP>)->Name("gemm/openblas/conv/" #OP "/" #K "x" #N)->Apply(conv_args);

CTNN_CONV_BENCH(288, 64, fwd)
CTNN_CONV_BENCH(288, 64, bww)
CTNN_CONV_BENCH(288, 64, bwi)

BENCHMARK(ctnn_dense<1024, 1024, fwd>)->Name("gemm/ctnn/square/1024")->Apply(square_args);
BENCHMARK(openblas_dense<1024, 1024, fwd>)->Name("gemm/openblas/square/1024")->Apply(square_args);
