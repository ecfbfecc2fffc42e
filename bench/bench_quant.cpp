// int8 against float32 for the same dense layer, batch 1 and 64 (issue 28's int8 target):
//   float_dense<K, N>/batch   the float dense layer's forward (kernels::cpu::dense_forward), x, W, b
//                             and y on 64-byte boundaries as a model's plan places them
//   float_dense_at<K, N>/batch/w_off/xy_off  the same with W (x and y) w_off (xy_off) bytes past a line
//   int8_dense<K, N, S>/batch quantized_dense's forward: quantize the input, int8 GEMM, requantize /
//                             rescale, dequantize (S: full_integer or dynamic_range, or either as
//                             reduce_range<S>: weights in [-64, 64], the avx2_u8 product on AVX2); <..., 500>:
//                             an output scale at which no output saturates (saturation counts: their fast path)
//   int8_gemm<K, N, R>/batch  the int8 GEMM alone on packed weights (backends/cpu/int8.hpp, the default
//                             arch's path; R: int8::weight_range, reduced: weights in [-64, 64])
//   float_conv/batch          conv2d<64, 3, 3, valid, relu>'s forward on 13x13x32 (the Fashion-MNIST
//                             CNN's second convolution: 121 im2col rows of K = 288 per sample)
//   int8_conv<S>/batch        quantized_conv2d's forward on the same shape: quantize the input, int8
//                             im2col, int8 GEMM, requantize / rescale, dequantize
//   float_pool<Avg>/batch     the float max (Avg false) or average pooling, 2x2, on 26x26x32 (the
//                             Fashion-MNIST CNN's first convolution's output)
//   int8_avg_pool<Arch>/batch int8::average_pool_s8<G, Arch> on the same shape (the int8 pass between
//   int8_max_pool<Arch>/batch two full-integer layers), Arch avx512bw, fma3<avx2>, or sse2 (the scalar
//                             loops); each compiled in where the build's -march allows it
//   peak_fma256, peak_madd256, peak_tile_s16<W>   (AVX2 builds) one core's ceilings for the float
//                             FMA and the avx2 int8 path's instruction mix, registers / L1 only
//                             (docs/quantization.md "The AVX2 bound"); GMAC/s on every product
//                             case: multiply-adds per CPU second
//   peak_fma512, peak_dpbusd512, peak_dpbusd256  (AVX-512 / VNNI builds) the same for the float FMA on
//                             zmm and vpdpbusd on zmm and ymm (docs/quantization.md "The VNNI bound")
//   int8_gemm<256, 16>/6      one tile_s16 column pass on L1 data
// Layers 784x256 and 256x128 of the Fashion-MNIST MLP, random weights (the values do not change
// the work). One thread:
//   CTNN_NUM_THREADS=1 taskset -c 0 build/bench/bench/bench_quant --benchmark_repetitions=3
// Build it with -march=x86-64-v3 too for the AVX2 path (docs/quantization.md has both).
#include <benchmark/benchmark.h>

#include <ctnn/ctnn.hpp>
#include <ctnn/backends/cpu/int8_pool.hpp>
#include <ctnn/layers/quantized_conv2d.hpp>
#include <ctnn/quantization/convert.hpp>

#include <algorithm>
#include <cstddef>
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

// The float layer's x, W, b and y as a model's plan places a dense layer's (core/plan.hpp: the
// backend's memory and every layer's region of a role on a 64-byte boundary, the kernel first; a
// layer's activations per sample, N floats a row): each here in one allocation on a 64-byte
// boundary, plus w_off bytes for W and xy_off bytes for x and y (float_dense_at). Taken from
// std::vectors they sat where the heap left them: W of 256x128 (128 KiB) at a page + 16 bytes or at
// whatever 16-byte offset the earlier benchmarks' allocations left, and the layer's time moved with
// the binary (1.13 against 1.83 us at batch 1, bench/results/2026-12-07-s33-fb33-float-dense-placement.md).
template <std::size_t K, std::size_t N>
void float_dense_placed(benchmark::State& st, std::size_t w_off, std::size_t xy_off) {
  const std::size_t m = std::size_t(st.range(0));
  const auto xv = random_values<float>(m * K, 0, 1, 1), wv = random_values<float>(K * N, -0.05, 0.05, 2),
             bv = random_values<float>(N, -0.1, 0.1, 3);
  auto line = [](std::size_t bytes) { return (bytes + 63) / 64 * 64; };
  const std::size_t w_at = w_off, b_at = line(w_at + wv.size() * 4), x_at = line(b_at + bv.size() * 4) + xy_off,
                    y_at = line(x_at + xv.size() * 4) + xy_off, bytes = line(y_at + m * N * 4);
  std::vector<std::byte> mem(bytes + 64);
  std::byte* base = mem.data() + (64 - reinterpret_cast<std::uintptr_t>(mem.data()) % 64) % 64;
  float *w = reinterpret_cast<float*>(base + w_at), *b = reinterpret_cast<float*>(base + b_at),
        *x = reinterpret_cast<float*>(base + x_at), *y = reinterpret_cast<float*>(base + y_at);
  std::copy(wv.begin(), wv.end(), w);
  std::copy(bv.begin(), bv.end(), b);
  std::copy(xv.begin(), xv.end(), x);
  for (auto _ : st) {
    ctnn::kernels::cpu::dense_forward<K, N>(x, w, b, y, m, ctnn::fn::relu_fn{});
    benchmark::DoNotOptimize(y);
  }
  st.counters["samples_per_s"] = benchmark::Counter(double(m), benchmark::Counter::kIsIterationInvariantRate);
  st.counters["GMAC/s"] = benchmark::Counter(double(m * K * N) * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
}

template <std::size_t K, std::size_t N>
void float_dense(benchmark::State& st) { float_dense_placed<K, N>(st, 0, 0); }

// float_dense_at<K, N>/batch/w_off/xy_off: W w_off bytes and x, y xy_off bytes past a line
template <std::size_t K, std::size_t N>
void float_dense_at(benchmark::State& st) { float_dense_placed<K, N>(st, std::size_t(st.range(1)), std::size_t(st.range(2))); }

// OutScale: the full-integer output scale: 0.05 (the default) saturates 46 % of the random layer's
// 784x256 outputs at batch 64 (the saturation count's slow path: docs/quantization.md), 0.5 none
template <std::size_t K, std::size_t N, class Scheme, int OutScaleMilli = 50>
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
  const auto w = random_values<int>(K * N, -Scheme::weight_max, Scheme::weight_max, 5);
  std::vector<std::int8_t> plain(K * N);
  for (std::size_t i = 0; i < K * N; ++i) plain[i] = std::int8_t(w[i]);
  ctnn::kernels::cpu::int8::pack(K, N, plain.data(), K, v.kernel);
  ctnn::kernels::cpu::int8::packed_sums(N, K, v.kernel, v.kernel_sum);
  for (std::size_t j = 0; j < N; ++j) v.kernel_scale[j] = 0.0005f;
  if constexpr (L::full) {
    *v.in_scale = 1.0f / 255;
    *v.in_zp = -128;
    *v.out_scale = float(OutScaleMilli) / 1000;
    *v.out_zp = -128;
    for (std::size_t j = 0; j < N; ++j) {
      const auto q = ctnn::quantization::quantize_multiplier(double(*v.in_scale) * 0.0005 / double(*v.out_scale));
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
  st.counters["GMAC/s"] = benchmark::Counter(double(m * K * N) * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
}

template <std::size_t K, std::size_t N,
          ctnn::kernels::cpu::int8::weight_range R = ctnn::kernels::cpu::int8::weight_range::full>
void int8_gemm(benchmark::State& st) {
  const std::size_t m = std::size_t(st.range(0));
  namespace i8 = ctnn::kernels::cpu::int8;
  constexpr std::size_t kp = i8::padded_k(K);
  constexpr int wm = R == i8::weight_range::reduced ? i8::reduced_weight_max : 127;
  std::vector<std::int8_t> a(m * kp), w(K * N), packed(i8::packed_bytes(K, N));
  const auto av = random_values<int>(m * kp, -128, 127, 1), wv = random_values<int>(K * N, -wm, wm, 2);
  for (std::size_t i = 0; i < a.size(); ++i) a[i] = std::int8_t(av[i]);
  for (std::size_t i = 0; i < w.size(); ++i) w[i] = std::int8_t(wv[i]);
  i8::pack(K, N, w.data(), K, packed.data());
  std::vector<std::int32_t> sums(N), c(m * N);
  i8::packed_sums(N, K, packed.data(), sums.data());
  for (auto _ : st) {
    i8::gemm_s8<ctnn::kernels::cpu::default_arch, R>(m, N, K, a.data(), kp, packed.data(), sums.data(), c.data(), N);
    benchmark::DoNotOptimize(c.data());
  }
  st.counters["GMAC/s"] = benchmark::Counter(double(m * K * N) * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
}

#if defined(__AVX2__) && defined(__FMA__) && defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
// One core's ceilings for the 256-bit products (docs/quantization.md "The AVX2 bound"), each an
// asm loop the compiler cannot fold (the integer chains it would otherwise reassociate and hoist),
// 12 independent accumulators, GMAC/s on CPU time:
//   peak_fma256    vfmadd231ps ymm: 8 float multiply-adds an instruction (two FMA ports)
//   peak_madd256   vpmaddwd ymm + vpaddd: 16 int8 (as int16) multiply-adds a pair, the avx2
//                  path's step (int8.hpp tile_s16)
//   peak_tile_s16<false> tile_s16's group on 6 rows from L1: 2 vpmovsxbw weight loads, 6 vpbroadcastq
//                  activation loads, 12 vpmaddwd + 12 vpaddd (192 multiply-adds)
//   peak_tile_s16<true>  the same without the 2 vpmovsxbw (weights already int16: vmovdqu loads)
#define CTNN_BQ_ACC12 "+x"(a[0]), "+x"(a[1]), "+x"(a[2]), "+x"(a[3]), "+x"(a[4]), "+x"(a[5]), \
                      "+x"(a[6]), "+x"(a[7]), "+x"(a[8]), "+x"(a[9]), "+x"(a[10]), "+x"(a[11])
#define CTNN_BQ_MADD(i, t) "vpmaddwd %13, %12, %%ymm" #t "\n\tvpaddd %%ymm" #t ", %" #i ", %" #i "\n\t"
// tile_s16 rows: ymm12, ymm13 the weights; ymm14 a row's broadcast; ymm15 a product
#define CTNN_BQ_ROW(o, i, j) "vpbroadcastq " #o "(%13), %%ymm14\n\tvpmaddwd %%ymm12, %%ymm14, %%ymm15\n\tvpaddd %%ymm15, %" #i ", %" #i "\n\t" \
                             "vpmaddwd %%ymm13, %%ymm14, %%ymm15\n\tvpaddd %%ymm15, %" #j ", %" #j "\n\t"
#define CTNN_BQ_ROWS CTNN_BQ_ROW(0, 0, 1) CTNN_BQ_ROW(8, 2, 3) CTNN_BQ_ROW(16, 4, 5) CTNN_BQ_ROW(24, 6, 7) \
                     CTNN_BQ_ROW(32, 8, 9) CTNN_BQ_ROW(40, 10, 11)
constexpr std::size_t peak_rounds = 1 << 14;
// (Each keeps its accumulators in an array local to the timed iteration and copies them out after
// it, as the VNNI ceilings below do: with the array escaping to DoNotOptimize, GCC stored all 12
// after every round, and on an AMD Zen 3, one 256-bit store a cycle, peak_fma256 read 15.5 GMAC/s
// where the FMA ports give about 45.)
void peak_fma256(benchmark::State& st) {
  const __m256 m = _mm256_set1_ps(0.9999999f), x = _mm256_set1_ps(1e-7f);
  __m256 out[12];
  for (auto _ : st) {
    __m256 a[12];
    for (int c = 0; c < 12; ++c) a[c] = _mm256_set1_ps(1.0f + float(c) * 1e-7f);
    for (std::size_t r = 0; r < peak_rounds; ++r)
      __asm__ volatile(
          "vfmadd231ps %12, %13, %0\n\tvfmadd231ps %12, %13, %1\n\tvfmadd231ps %12, %13, %2\n\t"
          "vfmadd231ps %12, %13, %3\n\tvfmadd231ps %12, %13, %4\n\tvfmadd231ps %12, %13, %5\n\t"
          "vfmadd231ps %12, %13, %6\n\tvfmadd231ps %12, %13, %7\n\tvfmadd231ps %12, %13, %8\n\t"
          "vfmadd231ps %12, %13, %9\n\tvfmadd231ps %12, %13, %10\n\tvfmadd231ps %12, %13, %11"
          : CTNN_BQ_ACC12
          : "x"(m), "x"(x));
    for (int c = 0; c < 12; ++c) out[c] = a[c];
    benchmark::DoNotOptimize(out);
  }
  st.counters["GMAC/s"] = benchmark::Counter(double(peak_rounds * 12 * 8) * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
}
void peak_madd256(benchmark::State& st) {
  const __m256i x = _mm256_set1_epi16(3), w = _mm256_set1_epi16(-5);
  __m256i out[12];
  for (auto _ : st) {
    __m256i a[12];
    for (int c = 0; c < 12; ++c) a[c] = _mm256_set1_epi32(c);
    for (std::size_t r = 0; r < peak_rounds; ++r)
      __asm__ volatile(
          CTNN_BQ_MADD(0, 14) CTNN_BQ_MADD(1, 15) CTNN_BQ_MADD(2, 14) CTNN_BQ_MADD(3, 15) CTNN_BQ_MADD(4, 14)
          CTNN_BQ_MADD(5, 15) CTNN_BQ_MADD(6, 14) CTNN_BQ_MADD(7, 15) CTNN_BQ_MADD(8, 14) CTNN_BQ_MADD(9, 15)
          CTNN_BQ_MADD(10, 14) CTNN_BQ_MADD(11, 15)
          : CTNN_BQ_ACC12
          : "x"(x), "x"(w)
          : "xmm14", "xmm15");
    for (int c = 0; c < 12; ++c) out[c] = a[c];
    benchmark::DoNotOptimize(out);
  }
  st.counters["GMAC/s"] = benchmark::Counter(double(peak_rounds * 12 * 16) * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
}
// Wide: the weights are int16 already (two 32-byte loads), else two vpmovsxbw of 16 bytes.
template <bool Wide>
void peak_tile_s16(benchmark::State& st) {
  __m256i out[12];
  alignas(64) std::int16_t w[32] = {}, x[32] = {};
  for (int i = 0; i < 32; ++i) w[i] = std::int16_t(i - 16), x[i] = std::int16_t(3 - i);
  // (w and x as "m" operands: read by the asm; a "memory" clobber instead made GCC store and reload
  // the 12 accumulators around every round, a[] having escaped to DoNotOptimize)
  const std::int16_t* pw = w;
  const std::int16_t* px = x;
  for (auto _ : st) {
    __m256i a[12];
    for (int c = 0; c < 12; ++c) a[c] = _mm256_set1_epi32(c);
    for (std::size_t r = 0; r < peak_rounds; ++r) {
      if constexpr (Wide)
        __asm__ volatile("vmovdqu (%12), %%ymm12\n\tvmovdqu 32(%12), %%ymm13\n\t" CTNN_BQ_ROWS
                         : CTNN_BQ_ACC12
                         : "r"(pw), "r"(px), "m"(w), "m"(x)
                         : "xmm12", "xmm13", "xmm14", "xmm15");
      else
        __asm__ volatile("vpmovsxbw (%12), %%ymm12\n\tvpmovsxbw 16(%12), %%ymm13\n\t" CTNN_BQ_ROWS
                         : CTNN_BQ_ACC12
                         : "r"(pw), "r"(px), "m"(w), "m"(x)
                         : "xmm12", "xmm13", "xmm14", "xmm15");
    }
    for (int c = 0; c < 12; ++c) out[c] = a[c];
    benchmark::DoNotOptimize(out);
  }
  st.counters["GMAC/s"] = benchmark::Counter(double(peak_rounds * 192) * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
}
#undef CTNN_BQ_ACC12
#undef CTNN_BQ_MADD
#undef CTNN_BQ_ROW
#undef CTNN_BQ_ROWS
#endif

// The VNNI builds' ceilings (docs/quantization.md "The VNNI bound"), the same form: 12 independent
// chains, GMAC/s on CPU time (int8 multiply-adds, or float for the FMA):
//   peak_fma512      vfmadd231ps zmm: 16 float multiply-adds an instruction
//   peak_dpbusd512   vpdpbusd zmm: 64 u8 x s8 multiply-adds (the vnni path's step)
//   peak_dpbusd256   vpdpbusd ymm (the VEX form under -mavxvnni, else EVEX): 32 (the vnni256 path's)
#define CTNN_BQ_V12 "+v"(a[0]), "+v"(a[1]), "+v"(a[2]), "+v"(a[3]), "+v"(a[4]), "+v"(a[5]), \
                    "+v"(a[6]), "+v"(a[7]), "+v"(a[8]), "+v"(a[9]), "+v"(a[10]), "+v"(a[11])
#define CTNN_BQ_12(op) op " %12, %13, %0\n\t" op " %12, %13, %1\n\t" op " %12, %13, %2\n\t" op " %12, %13, %3\n\t" \
                       op " %12, %13, %4\n\t" op " %12, %13, %5\n\t" op " %12, %13, %6\n\t" op " %12, %13, %7\n\t" \
                       op " %12, %13, %8\n\t" op " %12, %13, %9\n\t" op " %12, %13, %10\n\t" op " %12, %13, %11"
#if defined(__AVX512F__) && defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
constexpr std::size_t peak_rounds512 = 1 << 14;
void peak_fma512(benchmark::State& st) {
  const __m512 m = _mm512_set1_ps(0.9999999f), x = _mm512_set1_ps(1e-7f);
  __m512 out[12];
  for (auto _ : st) {
    __m512 a[12];  // (local: had the array escaped, GCC would store it after every round)
    for (int c = 0; c < 12; ++c) a[c] = _mm512_set1_ps(1.0f + float(c) * 1e-7f);
    for (std::size_t r = 0; r < peak_rounds512; ++r) __asm__ volatile(CTNN_BQ_12("vfmadd231ps") : CTNN_BQ_V12 : "v"(m), "v"(x));
    for (int c = 0; c < 12; ++c) out[c] = a[c];
    benchmark::DoNotOptimize(out);
  }
  st.counters["GMAC/s"] = benchmark::Counter(double(peak_rounds512 * 12 * 16) * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
}
#if defined(__AVX512VNNI__)
void peak_dpbusd512(benchmark::State& st) {
  const __m512i x = _mm512_set1_epi8(3), w = _mm512_set1_epi8(-5);
  __m512i out[12];
  for (auto _ : st) {
    __m512i a[12];
    for (int c = 0; c < 12; ++c) a[c] = _mm512_set1_epi32(c);
    for (std::size_t r = 0; r < peak_rounds512; ++r) __asm__ volatile(CTNN_BQ_12("vpdpbusd") : CTNN_BQ_V12 : "v"(w), "v"(x));
    for (int c = 0; c < 12; ++c) out[c] = a[c];
    benchmark::DoNotOptimize(out);
  }
  st.counters["GMAC/s"] = benchmark::Counter(double(peak_rounds512 * 12 * 64) * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
}
#endif
#endif
#if (defined(__AVXVNNI__) || (defined(__AVX512VNNI__) && defined(__AVX512VL__))) && defined(__GNUC__) && \
    (defined(__x86_64__) || defined(__i386__))
void peak_dpbusd256(benchmark::State& st) {
  const __m256i x = _mm256_set1_epi8(3), w = _mm256_set1_epi8(-5);
  __m256i out[12];
  for (auto _ : st) {
    __m256i a[12];
    for (int c = 0; c < 12; ++c) a[c] = _mm256_set1_epi32(c);
    for (std::size_t r = 0; r < (std::size_t(1) << 14); ++r)
#if defined(__AVXVNNI__)
      __asm__ volatile(CTNN_BQ_12("%{vex%} vpdpbusd") : CTNN_BQ_V12 : "x"(w), "x"(x));
#else
      __asm__ volatile(CTNN_BQ_12("vpdpbusd") : CTNN_BQ_V12 : "v"(w), "v"(x));
#endif
    for (int c = 0; c < 12; ++c) out[c] = a[c];
    benchmark::DoNotOptimize(out);
  }
  st.counters["GMAC/s"] = benchmark::Counter(double((std::size_t(1) << 14) * 12 * 32) * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
}
#endif
#undef CTNN_BQ_V12
#undef CTNN_BQ_12

// the state (or parameters) of a layer L in memory 64-byte aligned, as in a model
struct aligned_block {
  std::vector<std::uint64_t> mem;
  explicit aligned_block(std::size_t bytes) : mem(bytes / 8 + 16) {}
  float* get() { return reinterpret_cast<float*>((reinterpret_cast<std::uintptr_t>(mem.data()) + 63) / 64 * 64); }
};

using conv_in = ctnn::shape<13, 13, 32>;
using float_conv_layer = ctnn::conv2d_layer<ctnn::conv2d<64, 3, 3, 1, ctnn::padding::valid, ctnn::relu>, conv_in,
                                            ctnn::precision::policy_of_t<ctnn::precision::float32>, ctnn::cpu<>>;

void float_conv(benchmark::State& st) {
  using L = float_conv_layer;
  const std::size_t m = std::size_t(st.range(0));
  auto params = random_values<float>(L::kernel_count + L::F, -0.05, 0.05, 2);
  std::vector<float> cache(m * L::cache_per_sample), y(m * L::out_shape::size);
  const auto x = random_values<float>(m * conv_in::size, 0, 1, 1);
  ctnn::layer_slot<float> s;
  s.params = params.data();
  s.cache = cache.data();
  for (auto _ : st) {
    L::forward(s, x.data(), y.data(), ctnn::run_info{m});
    benchmark::DoNotOptimize(y.data());
  }
  st.counters["samples_per_s"] = benchmark::Counter(double(m), benchmark::Counter::kIsIterationInvariantRate);
}

template <class Scheme>
void int8_conv(benchmark::State& st) {
  using L = ctnn::quantized_conv2d_layer<ctnn::quantized_conv2d<64, 3, 3, 1, ctnn::padding::valid, ctnn::relu, Scheme>,
                                         conv_in, ctnn::precision::float32, ctnn::cpu<>>;
  const std::size_t m = std::size_t(st.range(0));
  aligned_block block(L::state_bytes);
  ctnn::layer_slot<float> s;
  s.state = block.get();
  ctnn::rng g(4);
  L::init(s, g);
  auto v = L::view(reinterpret_cast<std::byte*>(s.state));
  const auto w = random_values<int>(L::K * L::F, -Scheme::weight_max, Scheme::weight_max, 5);
  std::vector<std::int8_t> plain(L::K * L::F);
  for (std::size_t i = 0; i < plain.size(); ++i) plain[i] = std::int8_t(w[i]);
  ctnn::kernels::cpu::int8::pack(L::K, L::F, plain.data(), L::K, v.kernel);
  ctnn::kernels::cpu::int8::packed_sums(L::F, L::K, v.kernel, v.kernel_sum);
  for (std::size_t j = 0; j < L::F; ++j) v.kernel_scale[j] = 0.0005f;
  if constexpr (L::full) {
    *v.in_scale = 1.0f / 255;
    *v.in_zp = -128;
    *v.out_scale = 0.05f;
    *v.out_zp = -128;
    for (std::size_t j = 0; j < L::F; ++j) {
      const auto q = ctnn::quantization::quantize_multiplier(double(*v.in_scale) * 0.0005 / 0.05);
      v.mult[j] = q.q;
      v.shift[j] = q.shift;
    }
  }
  const auto x = random_values<float>(m * conv_in::size, 0, 1, 1);
  std::vector<float> y(m * L::out_shape::size);
  for (auto _ : st) {
    L::forward(s, x.data(), y.data(), ctnn::run_info{m});
    benchmark::DoNotOptimize(y.data());
  }
  st.counters["samples_per_s"] = benchmark::Counter(double(m), benchmark::Counter::kIsIterationInvariantRate);
}

// 2x2 pooling of 26x26x32 (the CNN's first convolution's output), one call per iteration.
constexpr auto pool_g = ctnn::window_geometry(26, 26, 32, 32, 2, 2, 2, ctnn::padding::valid);
template <bool Avg>
void float_pool(benchmark::State& st) {
  const std::size_t m = std::size_t(st.range(0));
  const auto x = random_values<float>(m * pool_g.in_size(), -1, 1, 1);
  std::vector<float> y(m * pool_g.out_size());
  std::vector<unsigned char> idx(m * pool_g.out_size() * 4);
  for (auto _ : st) {
    if constexpr (Avg)
      ctnn::kernels::cpu::average_pool_forward<pool_g>(x.data(), y.data(), m);
    else
      ctnn::kernels::cpu::max_pool_forward<pool_g>(x.data(), y.data(), idx.data(), m);
    benchmark::DoNotOptimize(y.data());
  }
  st.counters["samples_per_s"] = benchmark::Counter(double(m), benchmark::Counter::kIsIterationInvariantRate);
}
template <bool Avg, class Arch>
void int8_pool(benchmark::State& st) {
  if (!ctnn::kernels::cpu::arch_available<Arch>()) {
    st.SkipWithError("this CPU lacks the architecture");
    return;
  }
  const std::size_t m = std::size_t(st.range(0));
  const auto v = random_values<int>(m * pool_g.in_size(), -128, 127, 1);
  std::vector<std::int8_t> x(v.begin(), v.end()), y(m * pool_g.out_size());
  for (auto _ : st) {
    if constexpr (Avg)
      ctnn::kernels::cpu::int8::average_pool_s8<pool_g, Arch>(x.data(), y.data(), m);
    else
      ctnn::kernels::cpu::int8::max_pool_s8<pool_g, Arch>(x.data(), y.data(), m);
    benchmark::DoNotOptimize(y.data());
  }
  st.counters["samples_per_s"] = benchmark::Counter(double(m), benchmark::Counter::kIsIterationInvariantRate);
}
template <class Arch>
void int8_avg_pool(benchmark::State& st) { int8_pool<true, Arch>(st); }
template <class Arch>
void int8_max_pool(benchmark::State& st) { int8_pool<false, Arch>(st); }

using fi = ctnn::quantization::full_integer;
using dr = ctnn::quantization::dynamic_range;
BENCHMARK(float_dense<784, 256>)->Arg(1)->Arg(64);
BENCHMARK(int8_dense<784, 256, fi>)->Arg(1)->Arg(64);
BENCHMARK(int8_dense<784, 256, fi, 500>)->Arg(64);  // no output saturates
BENCHMARK(int8_dense<784, 256, dr>)->Arg(1)->Arg(64);
BENCHMARK(int8_gemm<784, 256>)->Arg(1)->Arg(64);
BENCHMARK(float_dense<256, 128>)->Arg(1)->Arg(64);
// the same layers with W, or x and y, off a cache line by 16 or 32 bytes (a caller's std::vector)
BENCHMARK(float_dense_at<256, 128>)->ArgNames({"", "w_off", "xy_off"})
    ->Args({1, 16, 0})->Args({1, 32, 0})->Args({1, 0, 16})->Args({64, 16, 0})->Args({64, 32, 0})->Args({64, 0, 16});
BENCHMARK(float_dense_at<784, 256>)->ArgNames({"", "w_off", "xy_off"})->Args({1, 16, 0})->Args({64, 16, 0});
BENCHMARK(int8_dense<256, 128, fi>)->Arg(1)->Arg(64);
BENCHMARK(int8_dense<256, 128, dr>)->Arg(1)->Arg(64);
BENCHMARK(int8_gemm<256, 128>)->Arg(1)->Arg(64);
// reduce_range (7-bit weights: the avx2_u8 product on AVX2 without VNNI)
using rfi = ctnn::quantization::reduce_range<fi>;
using rdr = ctnn::quantization::reduce_range<dr>;
constexpr auto reduced = ctnn::kernels::cpu::int8::weight_range::reduced;
BENCHMARK(int8_dense<784, 256, rfi>)->Arg(1)->Arg(64);
BENCHMARK(int8_dense<784, 256, rdr>)->Arg(1)->Arg(64);
BENCHMARK(int8_gemm<784, 256, reduced>)->Arg(1)->Arg(64);
BENCHMARK(int8_dense<256, 128, rfi>)->Arg(1)->Arg(64);
BENCHMARK(int8_dense<256, 128, rdr>)->Arg(1)->Arg(64);
BENCHMARK(int8_gemm<256, 128, reduced>)->Arg(1)->Arg(64);
BENCHMARK(int8_conv<rfi>)->Arg(1)->Arg(64);
BENCHMARK(int8_conv<rdr>)->Arg(1)->Arg(64);
#if defined(__AVX2__) && defined(__FMA__) && defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
BENCHMARK(peak_fma256);
BENCHMARK(peak_madd256);
BENCHMARK(peak_tile_s16<false>);
BENCHMARK(peak_tile_s16<true>);
#endif
#if defined(__AVX512F__) && defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
BENCHMARK(peak_fma512);
#if defined(__AVX512VNNI__)
BENCHMARK(peak_dpbusd512);
#endif
#endif
#if (defined(__AVXVNNI__) || (defined(__AVX512VNNI__) && defined(__AVX512VL__))) && defined(__GNUC__) && \
    (defined(__x86_64__) || defined(__i386__))
BENCHMARK(peak_dpbusd256);
#endif
BENCHMARK(int8_gemm<256, 16>)->Arg(6)->Arg(64);  // 6 rows: one tile_s16 column pass on L1 data
BENCHMARK(float_conv)->Arg(1)->Arg(64);
BENCHMARK(int8_conv<fi>)->Arg(1)->Arg(64);
BENCHMARK(int8_conv<dr>)->Arg(1)->Arg(64);
BENCHMARK(float_pool<true>)->Arg(1)->Arg(64);
BENCHMARK(float_pool<false>)->Arg(1)->Arg(64);
#if defined(__AVX512BW__)
BENCHMARK(int8_avg_pool<xsimd::avx512bw>)->Arg(1)->Arg(64);
BENCHMARK(int8_max_pool<xsimd::avx512bw>)->Arg(1)->Arg(64);
#endif
#if defined(__AVX2__) && defined(__FMA__)
BENCHMARK(int8_avg_pool<xsimd::fma3<xsimd::avx2>>)->Arg(1)->Arg(64);
BENCHMARK(int8_max_pool<xsimd::fma3<xsimd::avx2>>)->Arg(1)->Arg(64);
#endif
BENCHMARK(int8_avg_pool<xsimd::sse2>)->Arg(1)->Arg(64);
BENCHMARK(int8_max_pool<xsimd::sse2>)->Arg(1)->Arg(64);

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  benchmark::AddCustomContext("int8 path", [] {
    const auto p = ctnn::kernels::cpu::int8::int8_path_of<ctnn::kernels::cpu::default_arch>();
    using P = ctnn::kernels::cpu::int8::int8_path;
    return p == P::vnni      ? "avx512 vnni (vpdpbusd)"
           : p == P::vnni256 ? "256-bit vnni (vpdpbusd on ymm)"
           : p == P::avx2    ? "avx2 (vpmaddubsw + vpmaddwd; reduce_range: avx2_u8, vpmaddubsw on a + 128)"
                             : "scalar";
  }());
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
}
