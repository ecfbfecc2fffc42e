// Throughput (samples/s) of an LSTM(128) and a GRU(128) (and a GRU(128) with reset_after =
// false, batch 1 and 64, no peer: gru_reset_before_*) over 28 steps of 28
// features (a Fashion-MNIST image read row by row) with a dense<10> head, at
// batch 1, 16, 64 and 256: inference (model::forward, no training) and one
// training step (forward, loss, backward through time, an RMSprop update, as
// train/step.hpp runs it). Synthetic inputs: the data does not change the work.
// lstm_step_product<K>: batch 1's step product alone (kernels::cpu::recurrent_row), CPU time a
// step, over the first K of R's 128 rows: the product's share of lstm_inference/1 and the cost of
// the rows it reads from L2.
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

// An LSTM(128)'s batch-1 step product alone: kernels::cpu::recurrent_row (h R by blocks of units,
// every other step reversed, as the layer runs it) with a rule that only reads the products, over
// the first K rows of R [128, 512] (K = 128: the layer's 256 KiB; fewer rows: fewer bytes from L2
// per step, the rest as before); an iteration is one step (lstm_inference/1 runs 27 a sample).
// K = 112 against 128: what 16 more rows that stay in L1 could save (docs/performance.md, Recurrent).
struct read_gates {
  template <class V>
  void operator()(V& sum, V i, V f, V g, V o) const { sum = i + f + g + o; }
};
template <std::size_t K>
void lstm_step_product(benchmark::State& st) {
  constexpr std::size_t U = 128, G = 4 * U;
  ctnn::rng g(3);
  // R 64-byte aligned, as a layer's (a model aligns each layer's parameters; with U % 4 == 0 every
  // row of R is aligned): at a 16-byte offset every load spans two cache lines (about 1.4x the time)
  std::vector<float> buf(U * G + 16), h(U), rec(G), sum(U);
  float* r = buf.data() + (64 - reinterpret_cast<std::uintptr_t>(buf.data()) % 64) % 64 / sizeof(float);
  for (std::size_t i = 0; i < U * G; ++i) r[i] = float(g.uniform(-0.1, 0.1));
  for (auto& v : h) v = float(g.uniform(-1, 1));
  std::size_t t = 0;
  for (auto _ : st) {
    ctnn::kernels::cpu::recurrent_row<K, U, 4>(read_gates{}, h.data(), r, static_cast<const float*>(nullptr),
                                               rec.data(), t++ % 2 == 1, sum.data(), static_cast<const float*>(rec.data()),
                                               static_cast<const float*>(rec.data() + U),
                                               static_cast<const float*>(rec.data() + 2 * U),
                                               static_cast<const float*>(rec.data() + 3 * U));
    h[t % K] += sum[t % U] * 1e-9f;  // the next step reads this one's result
    benchmark::ClobberMemory();
  }
}

// The LSTM(128) training step's products alone at batch n (st.range(0)), as the layer runs them
// (layers/recurrent.hpp), with a GFLOP/s counter to set beside peak/fma (ctnn_bench): phase 0 the
// input projection x W + b (28 n rows), 1 one step's h R over R packed (n rows), 2 one step's
// dz R^T, 3 dW = X^T dZ (+ db; read in place, ops<cpu>::dense_backward_weights_in_place), 4 dR = H^T dZ
// (27 n rows), 5 dx = dZ W^T; 6 and 7 one step's forward
// and backward gate rules (no FLOPs counted); 8 dW and dR as one product over a copy [x_t, h_{t-1}]
// (M 156: no faster than 3 and 4 apart, not used by the layer; docs/performance.md, Recurrent).
// A pass's step products, S steps: 9 the input projection as one GEMM (0) then h R of steps 1..S-1 (1, into one
// step's buffer), 10 each step's z = x_t W + b + h R in one product (dense_forward_packed_sum, as the layer
// runs it); 11 dh += dz R^T of steps S-1..1 through a buffer (2 then a pass adding it), 12 in the product's
// tiles (dense_backward_input_packed_add, as the layer runs it); 13 dW, dR and db of steps S-1..0 one step at a time
// (ops<cpu>::step_weights_gradient over the step's n rows, as the layer runs it, here with every step's dz
// from memory where the layer's is still in cache): the same sums as 3 and 4 together.
void lstm_phase(benchmark::State& st) {
  constexpr std::size_t S = 28, F = 28, U = 128, G = 4 * U;
  using O = ctnn::ops<ctnn::cpu<>>;
  const std::size_t n = std::size_t(st.range(0)), phase = std::size_t(st.range(1));
  ctnn::rng g(4);
  const double range = phase >= 6 ? 2 : 0.5;  // the rules: both branches of tanh (|x| below and above 0.625)
  auto fill = [&](std::size_t k) {
    std::vector<float> v(k);
    for (auto& e : v) e = float(g.uniform(-range, range));
    return v;
  };
  std::vector<float> x = fill(S * n * F), w = fill(F * G), r = fill(U * G), b = fill(G), h = fill(S * n * U),
                     z = fill(S * n * G), dw = fill(F * G), dr = fill(U * G), db = fill(G), out = fill(S * n * G);
  std::vector<float> pk(O::packed_size<U, G, float>), wr((F + U) * G), pw(O::packed_size<F, G, float>);
  double flops = 0;
  if (phase == 1) O::pack_weights<U, G>(r.data(), pk.data(), n);
  if (phase == 2 || phase == 11 || phase == 12) O::pack_weights_transposed<U, G>(r.data(), pk.data(), n);
  if (phase == 9 || phase == 10) O::pack_weights<U, G>(r.data(), pk.data(), n);
  if (phase == 10) O::pack_weights<F, G>(w.data(), pw.data(), n);
  for (auto _ : st) {
    switch (phase) {
      case 0: O::dense_forward<F, G>(x.data(), w.data(), b.data(), out.data(), S * n); flops = 2.0 * S * n * F * G; break;
      case 1: O::dense_forward_packed<U, G>(h.data(), r.data(), pk.data(), static_cast<const float*>(nullptr), out.data(), n); flops = 2.0 * n * U * G; break;
      case 2: O::dense_backward_input_packed<U, G>(z.data(), r.data(), pk.data(), out.data(), n); flops = 2.0 * n * U * G; break;
      case 3: O::dense_backward_weights_in_place<F, G>(x.data(), z.data(), dw.data(), db.data(), S * n); flops = 2.0 * S * n * F * G; break;
      case 4: O::dense_backward_weights<U, G>(h.data(), z.data(), dr.data(), static_cast<float*>(nullptr), (S - 1) * n); flops = 2.0 * (S - 1) * n * U * G; break;
      case 5: O::dense_backward_input<F, G>(z.data(), w.data(), out.data(), S * n); flops = 2.0 * S * n * F * G; break;
      case 6:  // one step's forward rule (gates in z, h R in out, c_{t-1} and c, h in h)
        ctnn::lstm_cell::forward_step<O, float, U>(ctnn::detail::map_rows_of<O>{}, n, z.data(), out.data(), nullptr,
                                                   h.data(), h.data() + n * U, h.data() + 2 * n * U);
        break;
      case 8: {  // dW and dR as one product: [x_t, h_{t-1}]^T dZ (28 n rows of F + U), after the copy into one
        std::vector<float>& xh = out;
        O::map_rows(ctnn::detail::assign_fn{}, S * n, F, ctnn::kernels::rows<float>{xh.data(), F + U},
                    ctnn::kernels::rows<const float>{x.data(), F});
        O::map_rows(ctnn::detail::assign_fn{}, S * n, U, ctnn::kernels::rows<float>{xh.data() + F, F + U},
                    ctnn::kernels::rows<const float>{h.data(), U});
        O::dense_backward_weights<F + U, G>(xh.data(), z.data(), wr.data(), db.data(), S * n);
        flops = 2.0 * S * n * (F + U) * G;
        break;
      }
      case 9:
        O::dense_forward<F, G>(x.data(), w.data(), b.data(), z.data(), S * n);
        for (std::size_t t = 1; t < S; ++t)
          O::dense_forward_packed<U, G>(h.data() + t * n * U, r.data(), pk.data(), static_cast<const float*>(nullptr),
                                        out.data(), n);
        flops = 2.0 * S * n * F * G + 2.0 * (S - 1) * n * U * G;
        break;
      case 10:
        for (std::size_t t = 0; t < S; ++t)
          O::dense_forward_packed_sum<F, U, G>(x.data() + t * n * F, w.data(), pw.data(),
                                               t > 0 ? h.data() + t * n * U : nullptr, r.data(), pk.data(), b.data(),
                                               z.data() + t * n * G, n);
        flops = 2.0 * S * n * F * G + 2.0 * (S - 1) * n * U * G;
        break;
      case 11:
        for (std::size_t t = S - 1; t > 0; --t) {
          O::dense_backward_input_packed<U, G>(z.data() + t * n * G, r.data(), pk.data(), out.data(), n);
          O::accumulate(h.data(), out.data(), n * U);
        }
        flops = 2.0 * (S - 1) * n * U * G;
        break;
      case 12:
        for (std::size_t t = S - 1; t > 0; --t)
          O::dense_backward_input_packed_add<U, G>(z.data() + t * n * G, r.data(), pk.data(), h.data(), n);
        flops = 2.0 * (S - 1) * n * U * G;
        break;
      case 13:
        for (std::size_t t = S; t-- > 0;)
          O::step_weights_gradient<F, U, G>(x.data() + t * n * F, t > 0 ? h.data() + t * n * U : nullptr,
                                            z.data() + t * n * G, dw.data(), dr.data(), db.data(), n, t == S - 1, true);
        flops = 2.0 * S * n * F * G + 2.0 * (S - 1) * n * U * G;
        break;
      default:  // one step's backward rule
        ctnn::lstm_cell::backward_step<O, float, U>(n, z.data(), nullptr, nullptr, nullptr, h.data(), h.data() + n * U,
                                                    h.data() + 2 * n * U, h.data() + 3 * n * U);
        break;
    }
    benchmark::ClobberMemory();
  }
  st.counters["GFLOPs"] = benchmark::Counter(double(st.iterations()) * flops * 1e-9, benchmark::Counter::kIsRate);
}

}  // namespace

BENCHMARK(lstm_step_product<128>)->Unit(benchmark::kMicrosecond);
BENCHMARK(lstm_step_product<112>)->Unit(benchmark::kMicrosecond);
BENCHMARK(lstm_step_product<96>)->Unit(benchmark::kMicrosecond);
BENCHMARK(lstm_phase)->ArgsProduct({{64}, {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13}})->Unit(benchmark::kMicrosecond);
BENCHMARK(lstm_inference)->Arg(1)->Arg(16)->Arg(64)->Arg(256)->Unit(benchmark::kMicrosecond)->UseRealTime();
BENCHMARK(gru_inference)->Arg(1)->Arg(16)->Arg(64)->Arg(256)->Unit(benchmark::kMicrosecond)->UseRealTime();
BENCHMARK(lstm_train)->Arg(1)->Arg(16)->Arg(64)->Arg(256)->Unit(benchmark::kMicrosecond)->UseRealTime();
BENCHMARK(gru_train)->Arg(1)->Arg(16)->Arg(64)->Arg(256)->Unit(benchmark::kMicrosecond)->UseRealTime();
BENCHMARK(gru_reset_before_inference)->Arg(1)->Arg(64)->Unit(benchmark::kMicrosecond)->UseRealTime();
BENCHMARK(gru_reset_before_train)->Arg(1)->Arg(64)->Unit(benchmark::kMicrosecond)->UseRealTime();

BENCHMARK_MAIN();
