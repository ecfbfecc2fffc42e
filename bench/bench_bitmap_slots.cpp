// The padded zero-slot candidate for the bitmap layout's AVX2 batch-1 kernel (issue 28),
// measured against the library's kernel and the dense MLP in one binary; not used by the library.
//
// Slots: a kernel-private copy of a bitmap layer (layers/sparse_dense.hpp) in which each chunk's
// two 8-column halves are streams; a stream lists the inputs k whose 8-column block keeps a
// weight (uint32 each) and, per listed k, the block's 8 values at their lane positions with zeros
// in the pruned slots (32 bytes). One sample: per block one index load, one broadcast of x[k] and
// one FMA with a memory operand; no expansion, no permutation. Empty blocks are skipped; the
// copy's size is 36 bytes per non-empty block (random 80 % masks keep 1 - 0.8^8 = 83 % of the
// blocks: 753 KB for the MLP's 784 x 256 layer, where the dense kernel is 802 KB).
// Benchmarks (batch 1, the MLP of bench_pruning.cpp: 784 -> 256 relu -> 128 relu -> 10, both hidden
// layers pruned to 80 %, random masks through the library's pack):
//   dense:           the dense MLP (make_model<dense_mlp>).forward, batch 1;
//   stripped_80:     the bitmap MLP (strip_pruning<layout::bitmap>).forward, batch 1;
//   bitmap_layers:   the library's kernel (sparse::forward<K, N, Arch>) for the two sparse layers;
//   slots_layers:    the same two layers from their slots, 4 accumulators a stream;
//   slots2_layers:   the same, a chunk's two streams interleaved (8 accumulators).
// A stripped MLP on slots would take about stripped_80 - bitmap_layers + slots_layers.
//   g++-12 -std=c++20 -O3 -march=x86-64-v3 -DNDEBUG -Iinclude bench/bench_bitmap_slots.cpp -lbenchmark -lpthread -lz
//   CTNN_NUM_THREADS=1 taskset -c 1 ./a.out --benchmark_repetitions=3
// Figures and the conclusion: docs/pruning.md ("The padded zero-slot copy").
#include <benchmark/benchmark.h>

#include <ctnn/ctnn.hpp>
#include <ctnn/pruning.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <vector>

#if defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>

namespace {

namespace sparse = ctnn::kernels::cpu::sparse;
using arch = xsimd::fma3<xsimd::avx2>;

// Streams s = 2 c + h (chunk c, half h): rows[start[s] .. start[s + 1]) and their 8-value blocks.
struct slots {
  std::vector<std::uint32_t> start, rows;
  std::vector<float> w;
};

slots make_slots(const float* values, const std::uint32_t* offsets, const std::uint16_t* bitmap, std::size_t K,
                 std::size_t N) {
  const std::size_t streams = 2 * sparse::chunks(N);
  std::vector<std::vector<std::uint32_t>> rows(streams);
  std::vector<std::vector<float>> w(streams);
  for (std::size_t c = 0; c < sparse::chunks(N); ++c) {
    const float* v = values + offsets[c];
    for (std::size_t k = 0; k < K; ++k)
      for (std::size_t h = 0; h < 2; ++h) {
        const unsigned g = bitmap[c * K + k] >> (8 * h) & 0xFFu;
        if (!g) continue;
        rows[2 * c + h].push_back(std::uint32_t(k));
        for (unsigned l = 0; l < 8; ++l) w[2 * c + h].push_back(g >> l & 1u ? *v++ : 0.0f);
      }
  }
  slots s;
  s.start.push_back(0);
  for (std::size_t q = 0; q < streams; ++q) {
    s.rows.insert(s.rows.end(), rows[q].begin(), rows[q].end());
    s.w.insert(s.w.end(), w[q].begin(), w[q].end());
    s.start.push_back(std::uint32_t(s.rows.size()));
  }
  return s;
}

// One stream's 8 outputs: bias + sum over its blocks of x[k] * block, 4 accumulators.
inline __m256 stream(const float* x, const std::uint32_t* r, const std::uint32_t* re, const float* w, __m256 bias) {
  __m256 a0 = bias, a1 = _mm256_setzero_ps(), a2 = a1, a3 = a1;
  for (; r + 4 <= re; r += 4, w += 32) {
    a0 = _mm256_fmadd_ps(_mm256_broadcast_ss(x + r[0]), _mm256_loadu_ps(w), a0);
    a1 = _mm256_fmadd_ps(_mm256_broadcast_ss(x + r[1]), _mm256_loadu_ps(w + 8), a1);
    a2 = _mm256_fmadd_ps(_mm256_broadcast_ss(x + r[2]), _mm256_loadu_ps(w + 16), a2);
    a3 = _mm256_fmadd_ps(_mm256_broadcast_ss(x + r[3]), _mm256_loadu_ps(w + 24), a3);
  }
  for (; r < re; ++r, w += 8) a0 = _mm256_fmadd_ps(_mm256_broadcast_ss(x + r[0]), _mm256_loadu_ps(w), a0);
  return _mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3));
}

// y[N] = relu(x slots + bias); N a multiple of 16 (the MLP's layers).
__attribute__((noinline)) void slots_forward(const float* x, const slots& s, const float* bias, float* y) {
  const std::size_t streams = s.start.size() - 1;
  for (std::size_t q = 0; q < streams; ++q) {
    const __m256 t = stream(x, s.rows.data() + s.start[q], s.rows.data() + s.start[q + 1],
                            s.w.data() + 8 * std::size_t(s.start[q]), _mm256_loadu_ps(bias + 8 * q));
    _mm256_storeu_ps(y + 8 * q, _mm256_max_ps(t, _mm256_setzero_ps()));
  }
}

// The same, a chunk's two streams interleaved while both have 4 blocks left (8 FMA chains).
__attribute__((noinline)) void slots2_forward(const float* x, const slots& s, const float* bias, float* y) {
  const std::size_t streams = s.start.size() - 1;
  for (std::size_t q = 0; q + 1 < streams; q += 2) {
    const std::uint32_t *r = s.rows.data() + s.start[q], *re = s.rows.data() + s.start[q + 1];
    const std::uint32_t *t = re, *te = s.rows.data() + s.start[q + 2];
    const float *w = s.w.data() + 8 * std::size_t(s.start[q]), *u = s.w.data() + 8 * std::size_t(s.start[q + 1]);
    __m256 a0 = _mm256_loadu_ps(bias + 8 * q), a1 = _mm256_setzero_ps(), a2 = a1, a3 = a1;
    __m256 b0 = _mm256_loadu_ps(bias + 8 * q + 8), b1 = a1, b2 = a1, b3 = a1;
    for (; r + 4 <= re && t + 4 <= te; r += 4, t += 4, w += 32, u += 32) {
      a0 = _mm256_fmadd_ps(_mm256_broadcast_ss(x + r[0]), _mm256_loadu_ps(w), a0);
      b0 = _mm256_fmadd_ps(_mm256_broadcast_ss(x + t[0]), _mm256_loadu_ps(u), b0);
      a1 = _mm256_fmadd_ps(_mm256_broadcast_ss(x + r[1]), _mm256_loadu_ps(w + 8), a1);
      b1 = _mm256_fmadd_ps(_mm256_broadcast_ss(x + t[1]), _mm256_loadu_ps(u + 8), b1);
      a2 = _mm256_fmadd_ps(_mm256_broadcast_ss(x + r[2]), _mm256_loadu_ps(w + 16), a2);
      b2 = _mm256_fmadd_ps(_mm256_broadcast_ss(x + t[2]), _mm256_loadu_ps(u + 16), b2);
      a3 = _mm256_fmadd_ps(_mm256_broadcast_ss(x + r[3]), _mm256_loadu_ps(w + 24), a3);
      b3 = _mm256_fmadd_ps(_mm256_broadcast_ss(x + t[3]), _mm256_loadu_ps(u + 24), b3);
    }
    const __m256 sa = _mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3));
    const __m256 sb = _mm256_add_ps(_mm256_add_ps(b0, b1), _mm256_add_ps(b2, b3));
    _mm256_storeu_ps(y + 8 * q, _mm256_max_ps(stream(x, r, re, w, sa), _mm256_setzero_ps()));
    _mm256_storeu_ps(y + 8 * q + 8, _mm256_max_ps(stream(x, t, te, u, sb), _mm256_setzero_ps()));
  }
}

// One pruned layer: random weights, each kept with probability 1 - sparsity, packed by the library.
template <std::size_t K, std::size_t N>
struct layer {
  std::vector<float> values, bias;
  std::vector<std::uint32_t> offsets;
  std::vector<std::uint16_t> bitmap;
  slots s;
  layer(double sparsity, std::uint64_t seed) : values(K * N), bias(N, 0.01f), offsets(sparse::chunks(N) + 1),
                                                bitmap(sparse::chunks(N) * K) {
    ctnn::rng g(seed);
    std::vector<float> w(K * N);
    std::vector<std::uint8_t> keep(K * N);
    for (std::size_t i = 0; i < K * N; ++i) {
      w[i] = float(g.uniform(-1.0, 1.0));
      keep[i] = g.uniform() >= sparsity;
    }
    sparse::pack(w.data(), keep.data(), K, N, values.data(), K * N, offsets.data(), bitmap.data());
    s = make_slots(values.data(), offsets.data(), bitmap.data(), K, N);
  }
  void bitmap_forward(const float* x, float* y) const {
    sparse::forward<K, N, arch>(x, values.data(), offsets.data(), bitmap.data(), bias.data(), y, 1, true);
  }
};

const layer<784, 256>& l1() {
  static const layer<784, 256> l(0.8, 1);
  return l;
}
const layer<256, 128>& l2() {
  static const layer<256, 128> l(0.8, 2);
  return l;
}
std::vector<float> input() {
  ctnn::rng g(3);
  std::vector<float> x(784);
  for (auto& v : x) v = float(g.uniform());
  return x;
}

using dense_mlp = ctnn::sequential<ctnn::input<784>, ctnn::dense<256, ctnn::relu>, ctnn::dense<128, ctnn::relu>,
                                   ctnn::dense<10>>;
using pruned_mlp =
    ctnn::sequential<ctnn::input<784>, ctnn::prune_low_magnitude<ctnn::dense<256, ctnn::relu>, ctnn::constant_sparsity<0.8>>,
                     ctnn::prune_low_magnitude<ctnn::dense<128, ctnn::relu>, ctnn::constant_sparsity<0.8>>,
                     ctnn::dense<10>>;

void dense(benchmark::State& st) {
  auto m = ctnn::make_model<dense_mlp>(1);
  const auto x = input();
  for (auto _ : st) benchmark::DoNotOptimize(m.forward(x.data(), 1, false));
}
void stripped_80(benchmark::State& st) {
  auto p = ctnn::make_model<pruned_mlp>(1);
  ctnn::prune_at_step(p, 0);
  auto m = ctnn::strip_pruning<ctnn::layout::bitmap>(p);
  const auto x = input();
  for (auto _ : st) benchmark::DoNotOptimize(m.forward(x.data(), 1, false));
}
template <class F>
void layers(benchmark::State& st, F f) {
  const auto x = input();
  alignas(32) float h[256], y[128];
  for (auto _ : st) {
    f(x.data(), h, y);
    benchmark::DoNotOptimize(y);
    benchmark::ClobberMemory();
  }
}
void bitmap_layers(benchmark::State& st) {
  layers(st, [](const float* x, float* h, float* y) { l1().bitmap_forward(x, h), l2().bitmap_forward(h, y); });
}
void slots_layers(benchmark::State& st) {
  layers(st, [](const float* x, float* h, float* y) {
    slots_forward(x, l1().s, l1().bias.data(), h), slots_forward(h, l2().s, l2().bias.data(), y);
  });
}
void slots2_layers(benchmark::State& st) {
  layers(st, [](const float* x, float* h, float* y) {
    slots2_forward(x, l1().s, l1().bias.data(), h), slots2_forward(h, l2().s, l2().bias.data(), y);
  });
}

}  // namespace

BENCHMARK(dense);
BENCHMARK(stripped_80);
BENCHMARK(bitmap_layers);
BENCHMARK(slots_layers);
BENCHMARK(slots2_layers);

int main(int argc, char** argv) {
  // the slots compute what the library's kernel does (up to the order of the sums)
  const auto x = input();
  float h[256], y[128], hs[256], ys[128], hs2[256], ys2[128];
  l1().bitmap_forward(x.data(), h), l2().bitmap_forward(h, y);
  slots_forward(x.data(), l1().s, l1().bias.data(), hs), slots_forward(hs, l2().s, l2().bias.data(), ys);
  slots2_forward(x.data(), l1().s, l1().bias.data(), hs2), slots2_forward(hs2, l2().s, l2().bias.data(), ys2);
  float err = 0;
  for (std::size_t j = 0; j < 128; ++j) err = std::max({err, std::abs(ys[j] - y[j]), std::abs(ys2[j] - y[j])});
  const std::size_t blocks = l1().s.rows.size();
  std::printf("slots: 784 x 256 at 80 %%: %zu of %d blocks kept, %zu bytes (dense kernel %d); max |slots - bitmap| %g\n",
              blocks, 784 * 32, blocks * 36, 784 * 256 * 4, double(err));
  if (err > 1e-3f) return 1;
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
}
#else
int main() { std::puts("bench_bitmap_slots: an AVX2 + FMA build only (-march=x86-64-v3 or newer)"); }
#endif
