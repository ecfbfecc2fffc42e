// Inference time of the Fashion-MNIST MLP (784 -> 256 relu -> 128 relu -> 10)
// dense and stripped after pruning its two hidden layers to 50 %, 80 %, 90 %
// (unstructured, by magnitude) and 2:4, at every batch 1..16 and 64, in one
// run, in each stripped layout: bitmap (layers/sparse_dense.hpp), csc (layers/sparse_dense_csc.hpp)
// and rows (layers/sparse_dense_rows.hpp) at 88.9 % and 90 % (strip_pruning takes them from 88.9 %
// on), and, for 2:4, nm (layers/sparse_dense_nm.hpp: values and 2-bit indices). The weights
// are random (the work does not depend on their values, only on the mask).
// Run on one thread (the sparse kernels are single-threaded; the dense GEMM and the
// sparse layouts' expansion into its panels (backends/cpu/sparse_expand.hpp) are with
// CTNN_NUM_THREADS=1):
//   CTNN_NUM_THREADS=1 build/bench/bench/bench_pruning --benchmark_repetitions=3
// The figure to read is the ratio stripped / dense in the same run.
// undecoded_80: bitmap 80 % stripped to layout::undecoded<layout::bitmap> (no decoded weights: its own kernels).
// Training (issue 28, docs/pruning.md "Decoded weights"): train_dense / train_bitmap_80 /
// train_nm_2of4 one SGD step at 16 and 64; decode_bitmap_80 / decode_nm_2of4 the decode alone
// (both layers, through the model), decode_nm_2of4_784 the 784 x 256 2:4 layer's decode kernel;
// gather_nm_2of4 the values' gradient of the 784 x 256 2:4 layer gathered from a dense dW.
// int8 (issue 28, docs/quantization.md "Block-sparse int8"): int8_dense is the dense MLP
// quantized full-integer (quantized_dense), int8_block_80 / _90 and int8_block4x4_80 / _90 the
// block-pruned, stripped MLP quantized full-integer (quantized_dense_block; 1 x the float vector's
// lanes, as block_80: 1x16 on AVX-512, 1x8 on AVX2), calibrated on 64 random inputs.
#include <benchmark/benchmark.h>

#include <ctnn/ctnn.hpp>
#include <ctnn/pruning.hpp>
#include <ctnn/layers/sparse_dense_nm.hpp>
#include <ctnn/layers/sparse_dense_rows.hpp>
#include <ctnn/pruning/strip_csc.hpp>
#include <ctnn/quantization/convert.hpp>

#include <algorithm>
#include <cstdint>
#include <stdexcept>
#include <string_view>
#include <tuple>
#include <vector>

namespace {

template <class Sched, class Pattern = ctnn::unstructured>
using pruned_mlp = ctnn::sequential<ctnn::input<784>,
                                    ctnn::prune_low_magnitude<ctnn::dense<256, ctnn::relu>, Sched, Pattern>,
                                    ctnn::prune_low_magnitude<ctnn::dense<128, ctnn::relu>, Sched, Pattern>,
                                    ctnn::dense<10>>;
using dense_mlp = ctnn::sequential<ctnn::input<784>, ctnn::dense<256, ctnn::relu>, ctnn::dense<128, ctnn::relu>, ctnn::dense<10>>;

std::vector<float> inputs(std::size_t batch) {
  ctnn::rng g(3);
  std::vector<float> x(batch * 784);
  for (auto& v : x) v = float(g.uniform());
  return x;
}

template <class M>
void run(benchmark::State& st, M& m) {
  const std::size_t batch = std::size_t(st.range(0));
  const auto x = inputs(batch);
  for (auto _ : st) benchmark::DoNotOptimize(m.forward(x.data(), batch, false));
  st.SetItemsProcessed(std::int64_t(st.iterations() * batch));
}

void dense(benchmark::State& st) {
  auto m = ctnn::make_model<dense_mlp>(1);
  run(st, m);
}

// Net made, pruned at step 0 (constant_sparsity prunes there to its final sparsity) and stripped
// to Layout (named: strip_pruning's default depends on the arch).
template <class Layout, class Net>
auto pruned_stripped() {
  auto p = ctnn::make_model<Net>(1);
  ctnn::prune_at_step(p, 0);
  return ctnn::strip_pruning<Layout>(p);
}

template <class Net>
void stripped(benchmark::State& st) {
  auto m = pruned_stripped<ctnn::layout::bitmap, Net>();
  run(st, m);
}

template <class Net>
void stripped_csc(benchmark::State& st) {
  auto p = ctnn::make_model<Net>(1);
  ctnn::prune_at_step(p, 0);
  auto m = ctnn::strip_pruning_csc(p);
  run(st, m);
}

template <class Layout, class Net>
void stripped_to(benchmark::State& st) {
  auto m = pruned_stripped<Layout, Net>();
  run(st, m);
}

void int8_dense(benchmark::State& st) {
  const auto m = ctnn::make_model<dense_mlp>(1);
  const auto cal = inputs(64);
  auto q = ctnn::quantize_full_integer(m, cal.data(), 64);
  run(st, q);
}

template <class Layout, class Net>
void int8_stripped(benchmark::State& st) {
  const auto s = pruned_stripped<Layout, Net>();
  const auto cal = inputs(64);
  auto q = ctnn::quantize_full_integer(s, cal.data(), 64);
  run(st, q);
}

// Training a stripped model (issue 28: the decode's cost a step). train_step: one SGD step of
// mean squared error at the batch (forward, backward, update, and for a stripped layer that
// decodes, the decode before the next forward); decode: refresh_compute_parameters() alone,
// which rewrites every decoded buffer (784 x 256 and 256 x 128 floats), as each step's update
// makes the model do.
template <class M>
void train(benchmark::State& st, M& m) {
  const std::size_t batch = std::size_t(st.range(0));
  const auto x = inputs(batch);
  std::vector<float> y(batch * 10);
  for (std::size_t i = 0; i < y.size(); ++i) y[i] = float(i % 10 == i / 10 % 10);
  ctnn::sgd opt{0.001};
  ctnn::train_step step(m, ctnn::mean_squared_error{}, opt);
  step.run(x.data(), y.data(), batch, 0, 0);  // the slots and the batch's buffers made outside the loop
  std::size_t k = 1;
  for (auto _ : st) benchmark::DoNotOptimize(step.run(x.data(), y.data(), batch, 0, k++));
  st.SetItemsProcessed(std::int64_t(st.iterations() * batch));
}
void train_dense(benchmark::State& st) {
  auto m = ctnn::make_model<dense_mlp>(1);
  train(st, m);
}
template <class Layout, class Net>
void train_stripped(benchmark::State& st) {
  auto m = pruned_stripped<Layout, Net>();
  train(st, m);
}
template <class Layout, class Net>
void decode(benchmark::State& st) {
  auto m = pruned_stripped<Layout, Net>();
  for (auto _ : st) m.refresh_compute_parameters();
  st.counters["decoded_bytes"] = double(decltype(m)::network::memory_plan(1).derived);
}

// A 784 x 256 2:4 layer packed (gather_nm, decode_nm): its dense weights w, kept values and meta.
struct nm_784x256 {
  static constexpr std::size_t K = 784, N = 256, cap = ctnn::kernels::cpu::nm::capacity(K, N, 2, 4);
  std::vector<float> w = std::vector<float>(K * N), values = std::vector<float>(cap);
  std::vector<std::uint8_t> meta = std::vector<std::uint8_t>(ctnn::kernels::cpu::nm::meta_bytes(K, N, 2, 4));
  nm_784x256() {
    std::vector<std::uint8_t> keep(K * N, 0);
    for (std::size_t i = 0; i < K * N; ++i) w[i] = float(i % 13) * 0.25f - 1.5f;
    for (std::size_t k = 0; k < K; ++k)
      for (std::size_t j = 0; j < N; ++j) keep[k * N + j] = (k % 4 == (j * 7) % 4) || (k % 4 == (j * 7 + 1 + j % 3) % 4);
    ctnn::kernels::cpu::nm::pack<2, 4>(w.data(), keep.data(), K, N, values.data(), meta.data());
  }
};

// The values' gradient of the 784 x 256 2:4 layer gathered from a dense dW (as each training step's
// backward does for a decoding layer: ops<cpu<>>::sparse_dense_gather, sparse_nm.hpp).
void gather_nm(benchmark::State& st) {
  nm_784x256 l;
  constexpr std::size_t K = nm_784x256::K, N = nm_784x256::N, cap = nm_784x256::cap;
  auto &w = l.w, &values = l.values;
  const ctnn::kernels::nm_index<2, 4> ix{l.meta.data()};
  for (auto _ : st) {
    ctnn::ops<ctnn::cpu<>>::sparse_dense_gather<K, N>(ix, w.data(), values.data(), cap);
    benchmark::DoNotOptimize(values.data());
    benchmark::ClobberMemory();
  }
}

// The 784 x 256 2:4 layer's weights decoded to dense alone (ops<cpu<>>::sparse_dense_decode, as the
// model's refresh runs it after each update; decode_nm_2of4 times both layers through the model).
void decode_nm(benchmark::State& st) {
  nm_784x256 l;
  constexpr std::size_t K = nm_784x256::K, N = nm_784x256::N;
  auto &w = l.w, &values = l.values;
  const ctnn::kernels::nm_index<2, 4> ix{l.meta.data()};
  for (auto _ : st) {
    ctnn::ops<ctnn::cpu<>>::sparse_dense_decode<K, N>(ix, values.data(), w.data());
    benchmark::DoNotOptimize(w.data());
    benchmark::ClobberMemory();
  }
}

}  // namespace

// every batch 1..16 and 64 (issue 28: no stripped layout below 0.67x dense at any batch size)
#define CTNN_SMALL_BATCHES ->DenseRange(1, 16)->Arg(64)
BENCHMARK(dense) CTNN_SMALL_BATCHES;
BENCHMARK(int8_dense)->Arg(1)->Arg(64);
BENCHMARK_TEMPLATE(stripped, pruned_mlp<ctnn::constant_sparsity<0.5>>)->Name("stripped_50") CTNN_SMALL_BATCHES;
BENCHMARK_TEMPLATE(stripped, pruned_mlp<ctnn::constant_sparsity<0.8>>)->Name("stripped_80") CTNN_SMALL_BATCHES;
BENCHMARK_TEMPLATE(stripped, pruned_mlp<ctnn::constant_sparsity<0.9>>)->Name("stripped_90") CTNN_SMALL_BATCHES;
BENCHMARK_TEMPLATE(stripped, pruned_mlp<ctnn::constant_sparsity<0.0>, ctnn::n_of_m<2, 4>>)->Name("stripped_2of4") CTNN_SMALL_BATCHES;
// csc and rows take layers with at most 1 weight in 9 kept (88.9 %): at the limit and at 90 %
BENCHMARK_TEMPLATE(stripped_csc, pruned_mlp<ctnn::constant_sparsity<0.889>>)->Name("csc_889") CTNN_SMALL_BATCHES;
BENCHMARK_TEMPLATE(stripped_csc, pruned_mlp<ctnn::constant_sparsity<0.9>>)->Name("csc_90") CTNN_SMALL_BATCHES;
BENCHMARK_TEMPLATE(stripped_to, ctnn::layout::rows, pruned_mlp<ctnn::constant_sparsity<0.889>>)->Name("rows_889") CTNN_SMALL_BATCHES;
BENCHMARK_TEMPLATE(stripped_to, ctnn::layout::rows, pruned_mlp<ctnn::constant_sparsity<0.9>>)->Name("rows_90") CTNN_SMALL_BATCHES;
BENCHMARK_TEMPLATE(stripped_to, ctnn::layout::nm<2, 4>, pruned_mlp<ctnn::constant_sparsity<0.0>, ctnn::n_of_m<2, 4>>)->Name("nm_2of4") CTNN_SMALL_BATCHES;
using lanes_block = ctnn::block<1, xsimd::batch<float>::size>;
BENCHMARK_TEMPLATE(stripped_to, ctnn::layout::block<1, xsimd::batch<float>::size>,
                   pruned_mlp<ctnn::constant_sparsity<0.8>, lanes_block>)->Name("block_80") CTNN_SMALL_BATCHES;
BENCHMARK_TEMPLATE(stripped_to, ctnn::layout::block<1, xsimd::batch<float>::size>,
                   pruned_mlp<ctnn::constant_sparsity<0.9>, lanes_block>)->Name("block_90") CTNN_SMALL_BATCHES;
BENCHMARK_TEMPLATE(stripped_to, ctnn::layout::block<4, 4>, pruned_mlp<ctnn::constant_sparsity<0.8>, ctnn::block<4, 4>>)
    ->Name("block4x4_80") CTNN_SMALL_BATCHES;
BENCHMARK_TEMPLATE(stripped_to, ctnn::layout::block<4, 4>, pruned_mlp<ctnn::constant_sparsity<0.9>, ctnn::block<4, 4>>)
    ->Name("block4x4_90") CTNN_SMALL_BATCHES;
BENCHMARK_TEMPLATE(int8_stripped, ctnn::layout::block<1, xsimd::batch<float>::size>,
                   pruned_mlp<ctnn::constant_sparsity<0.8>, lanes_block>)->Name("int8_block_80")->Arg(1)->Arg(64);
BENCHMARK_TEMPLATE(int8_stripped, ctnn::layout::block<1, xsimd::batch<float>::size>,
                   pruned_mlp<ctnn::constant_sparsity<0.9>, lanes_block>)->Name("int8_block_90")->Arg(1)->Arg(64);
BENCHMARK_TEMPLATE(int8_stripped, ctnn::layout::block<4, 4>, pruned_mlp<ctnn::constant_sparsity<0.8>, ctnn::block<4, 4>>)
    ->Name("int8_block4x4_80")->Arg(1)->Arg(64);
BENCHMARK_TEMPLATE(int8_stripped, ctnn::layout::block<4, 4>, pruned_mlp<ctnn::constant_sparsity<0.9>, ctnn::block<4, 4>>)
    ->Name("int8_block4x4_90")->Arg(1)->Arg(64);
// 4 x the lanes: a group of 4 consecutive inputs per kept block row (one 4-byte load, no gather)
using quad_block = ctnn::block<4, xsimd::batch<float>::size>;
BENCHMARK_TEMPLATE(stripped_to, ctnn::layout::block<4, xsimd::batch<float>::size>,
                   pruned_mlp<ctnn::constant_sparsity<0.8>, quad_block>)->Name("block4xL_80")->Arg(1)->Arg(64);
BENCHMARK_TEMPLATE(int8_stripped, ctnn::layout::block<4, xsimd::batch<float>::size>,
                   pruned_mlp<ctnn::constant_sparsity<0.8>, quad_block>)->Name("int8_block4xL_80")->Arg(1)->Arg(64);
BENCHMARK_TEMPLATE(int8_stripped, ctnn::layout::block<4, xsimd::batch<float>::size>,
                   pruned_mlp<ctnn::constant_sparsity<0.9>, quad_block>)->Name("int8_block4xL_90")->Arg(1)->Arg(64);
// the opt-out of decoded weights (docs/pruning.md "Decoded weights"): bitmap's own kernels at every batch
BENCHMARK_TEMPLATE(stripped_to, ctnn::layout::undecoded<ctnn::layout::bitmap>, pruned_mlp<ctnn::constant_sparsity<0.8>>)
    ->Name("undecoded_80")->Arg(1)->Arg(4)->Arg(16)->Arg(64);
BENCHMARK(train_dense)->Arg(16)->Arg(64);
BENCHMARK_TEMPLATE(train_stripped, ctnn::layout::bitmap, pruned_mlp<ctnn::constant_sparsity<0.8>>)
    ->Name("train_bitmap_80")->Arg(16)->Arg(64);
BENCHMARK_TEMPLATE(train_stripped, ctnn::layout::nm<2, 4>, pruned_mlp<ctnn::constant_sparsity<0.0>, ctnn::n_of_m<2, 4>>)
    ->Name("train_nm_2of4")->Arg(16)->Arg(64);
BENCHMARK_TEMPLATE(train_stripped, ctnn::layout::csc, pruned_mlp<ctnn::constant_sparsity<0.9>>)
    ->Name("train_csc_90")->Arg(16)->Arg(64);
BENCHMARK_TEMPLATE(decode, ctnn::layout::bitmap, pruned_mlp<ctnn::constant_sparsity<0.8>>)->Name("decode_bitmap_80");
BENCHMARK_TEMPLATE(decode, ctnn::layout::nm<2, 4>, pruned_mlp<ctnn::constant_sparsity<0.0>, ctnn::n_of_m<2, 4>>)
    ->Name("decode_nm_2of4");
BENCHMARK(gather_nm)->Name("gather_nm_2of4");
BENCHMARK(decode_nm)->Name("decode_nm_2of4_784");
BENCHMARK_MAIN();
