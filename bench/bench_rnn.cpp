// Throughput (samples/s) of an LSTM(128) and a GRU(128) (and a GRU(128) with reset_after =
// false, batch 1 and 64, no peer: gru_reset_before_*) over 28 steps of 28
// features (a Fashion-MNIST image read row by row) with a dense<10> head, at
// batch 1, 16, 64 and 256: inference (model::forward, no training) and one
// training step (forward, loss, backward through time, an RMSprop update, as
// train/step.hpp runs it). Synthetic inputs: the data does not change the work.
// Threads: CTNN_NUM_THREADS (1 for the one-core figures, pinned with taskset).
//   CTNN_NUM_THREADS=1 taskset -c 0 build/bench/bench/bench_rnn --benchmark_repetitions=3
// Its peer, bench/peers/pytorch_rnn.py, runs beside it in paired rounds: bench/peers/rnn_rounds.py.
#include <benchmark/benchmark.h>

#include <ctnn/ctnn.hpp>

#include "train_step_bench.hpp"

#include <cstdint>
#include <vector>

namespace {

using lstm_net = ctnn::sequential<ctnn::input<28, 28>, ctnn::lstm<128>, ctnn::dense<10>>;
using gru_net = ctnn::sequential<ctnn::input<28, 28>, ctnn::gru<128>, ctnn::dense<10>>;
// GRU(reset_after=False): the reset gate before the recurrent product (Keras 2's default); no peer
// (PyTorch's GRU applies it after, as reset_after=True)
using gru_before_net = ctnn::sequential<ctnn::input<28, 28>, ctnn::gru<128, {.reset_after = false}>, ctnn::dense<10>>;

template <class Net>
void inference(benchmark::State& st) {
  const std::size_t batch = std::size_t(st.range(0));
  auto m = ctnn::make_model<Net>(1);
  ctnn::rng g(2);
  std::vector<float> x(batch * 784);
  for (auto& v : x) v = float(g.uniform());
  m.reserve(batch, 0);
  for (auto _ : st) {
    const float* y = m.forward(x.data(), batch, false);
    benchmark::DoNotOptimize(y);
  }
  st.counters["samples_per_s"] = benchmark::Counter(double(st.iterations()) * double(batch), benchmark::Counter::kIsRate);
}

void lstm_train(benchmark::State& st) { ctnn_bench::train_step<lstm_net>(st, ctnn::rmsprop{1e-3}); }
void gru_train(benchmark::State& st) { ctnn_bench::train_step<gru_net>(st, ctnn::rmsprop{1e-3}); }
void gru_reset_before_train(benchmark::State& st) { ctnn_bench::train_step<gru_before_net>(st, ctnn::rmsprop{1e-3}); }
void lstm_inference(benchmark::State& st) { inference<lstm_net>(st); }
void gru_reset_before_inference(benchmark::State& st) { inference<gru_before_net>(st); }
void gru_inference(benchmark::State& st) { inference<gru_net>(st); }

}  // namespace

BENCHMARK(lstm_inference)->Arg(1)->Arg(16)->Arg(64)->Arg(256)->Unit(benchmark::kMicrosecond)->UseRealTime();
BENCHMARK(gru_inference)->Arg(1)->Arg(16)->Arg(64)->Arg(256)->Unit(benchmark::kMicrosecond)->UseRealTime();
BENCHMARK(lstm_train)->Arg(1)->Arg(16)->Arg(64)->Arg(256)->Unit(benchmark::kMicrosecond)->UseRealTime();
BENCHMARK(gru_train)->Arg(1)->Arg(16)->Arg(64)->Arg(256)->Unit(benchmark::kMicrosecond)->UseRealTime();
BENCHMARK(gru_reset_before_inference)->Arg(1)->Arg(64)->Unit(benchmark::kMicrosecond)->UseRealTime();
BENCHMARK(gru_reset_before_train)->Arg(1)->Arg(64)->Unit(benchmark::kMicrosecond)->UseRealTime();

BENCHMARK_MAIN();
