// simple_rnn.hpp, lstm.hpp, gru.hpp (recurrent.hpp): the forward pass against a scalar
// implementation written here from Keras 3's formulas (batch-major, one sample and one
// step at a time), Keras' variables and initializers, the plan's sizes, a model with a
// stack of them (summary, weights file), and a short training run that learns.
#include <doctest/doctest.h>

#include <ctnn/ctnn.hpp>
#include <ctnn/kernels/rows.hpp>
#include <ctnn/layers/bidirectional.hpp>
#include <ctnn/layers/gru.hpp>
#include <ctnn/layers/lstm.hpp>
#include <ctnn/layers/simple_rnn.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string>
#include <vector>

using namespace ctnn;

namespace {

struct axpy {
  template <class V>
  void operator()(V& d, V a, V b) const { d = d + a * b; }
};

double sig(double v) { return 1 / (1 + std::exp(-v)); }

enum class cell_kind { simple_tanh, simple_relu, lstm, gru, gru_before };  // gru_before: reset_after = false

// Dropout masks as Keras' DropoutRNNCell, one per sequence: `count` masks [n, extent],
// 0 or 1 / (1 - rate), one uniform draw of g per value (the layer's documented order).
std::vector<double> draw_masks(rng& g, std::size_t count, std::size_t n, std::size_t extent, double rate) {
  std::vector<double> m(count * n * extent, 1.0);
  if (rate > 0)
    for (auto& v : m) v = g.uniform() >= rate ? 1 / (1 - rate) : 0.0;
  return m;
}

// Keras' formulas, one sample and one step at a time. p: kernel [F, G], recurrent_kernel
// [U, G], bias ([G], gru [2, G], gru_before [G]); x [n, S, F]; returns [n, U] or [n, S, U]. mx [ni, n, F]
// and mh [nr, n, U]: the dropout masks (ni, nr = 1 or one per gate, as Keras' implementation 1).
std::vector<double> reference(cell_kind k, const std::vector<double>& p, const std::vector<double>& x, std::size_t n,
                              std::size_t S, std::size_t F, std::size_t U, bool seq, bool backwards,
                              const std::vector<double>& mx = {}, std::size_t ni = 0, const std::vector<double>& mh = {},
                              std::size_t nr = 0, const std::vector<double>& step_mask = {}) {
  const std::size_t gates = k == cell_kind::lstm ? 4 : k == cell_kind::gru || k == cell_kind::gru_before ? 3 : 1;
  const std::size_t G = gates * U;
  const double *W = p.data(), *R = W + F * G, *b = R + U * G;
  std::vector<double> out;
  for (std::size_t s = 0; s < n; ++s) {
    std::vector<double> h(U, 0.0), c(U, 0.0);
    for (std::size_t step = 0; step < S; ++step) {
      const std::size_t t = backwards ? S - 1 - step : step;
      const double* xt = x.data() + (s * S + t) * F;
      if (!step_mask.empty() && step_mask[s * S + t] == 0) {  // Keras: a masked step keeps the state and the output
        if (seq) out.insert(out.end(), h.begin(), h.end());
        continue;
      }
      std::vector<double> xw(G), hr(G);
      for (std::size_t j = 0; j < G; ++j) {
        double a = b[j], r = k == cell_kind::gru ? b[G + j] : 0.0;
        const std::size_t bi = ni > 1 ? j / U : 0, br = nr > 1 ? j / U : 0;  // the gate's masks
        for (std::size_t f = 0; f < F; ++f) a += xt[f] * (ni ? mx[(bi * n + s) * F + f] : 1.0) * W[f * G + j];
        for (std::size_t u = 0; u < U; ++u) r += h[u] * (nr ? mh[(br * n + s) * U + u] : 1.0) * R[u * G + j];
        xw[j] = a;
        hr[j] = r;
      }
      std::vector<double> hn(U);
      for (std::size_t u = 0; u < U; ++u) {
        if (k == cell_kind::simple_tanh) hn[u] = std::tanh(xw[u] + hr[u]);
        if (k == cell_kind::simple_relu) hn[u] = std::max(0.0, xw[u] + hr[u]);
        if (k == cell_kind::lstm) {
          const double i = sig(xw[u] + hr[u]), f = sig(xw[U + u] + hr[U + u]);
          const double g = std::tanh(xw[2 * U + u] + hr[2 * U + u]), o = sig(xw[3 * U + u] + hr[3 * U + u]);
          c[u] = f * c[u] + i * g;
          hn[u] = o * std::tanh(c[u]);
        }
        if (k == cell_kind::gru) {
          const double z = sig(xw[u] + hr[u]), r = sig(xw[U + u] + hr[U + u]);
          const double hh = std::tanh(xw[2 * U + u] + r * hr[2 * U + u]);
          hn[u] = z * h[u] + (1 - z) * hh;
        }
      }
      if (k == cell_kind::gru_before) {  // hh = tanh(x_h + (r * h) R_h): every r first
        std::vector<double> r(U);
        for (std::size_t u = 0; u < U; ++u) r[u] = sig(xw[U + u] + hr[U + u]);
        for (std::size_t u = 0; u < U; ++u) {
          double rh = 0;
          for (std::size_t v = 0; v < U; ++v) rh += r[v] * h[v] * R[v * G + 2 * U + u];
          const double z = sig(xw[u] + hr[u]), hh = std::tanh(xw[2 * U + u] + rh);
          hn[u] = z * h[u] + (1 - z) * hh;
        }
      }
      h = hn;
      if (seq) out.insert(out.end(), h.begin(), h.end());
    }
    if (!seq) out.insert(out.end(), h.begin(), h.end());
  }
  return out;
}

// The bound layer in T against the reference, with random parameters (biases non-zero);
// in training with the masks drawn from the same seed (dropout), else without masks.
template <class Spec, class In, class T>
double forward_error(cell_kind k, std::size_t n, bool training = true, bool masked = false) {
  using L = typename Spec::template bind<In, T, cpu<>>;
  constexpr std::size_t S = In::dims[0], F = In::dims[1], U = Spec::units;
  rng g(5);
  std::vector<T> p(L::parameter_count), cache(L::cache_per_sample * n), x(n * S * F), y(n * L::out_shape::size);
  for (auto& v : p) v = T(g.uniform(-0.6, 0.6));
  for (auto& v : x) v = T(g.uniform(-1, 1));
  layer_slot<T> s{p.data(), nullptr, nullptr, cache.data()};
  rng gen(42), mirror(42);
  // a step mask (run_info::mask, as masking<> publishes it): steps masked at the start, middle and end
  std::vector<T> sm(n * S, T(1));
  for (std::size_t i = 0; i < sm.size(); ++i)
    if (i % 3 == 1 || (i % S == 0 && i / S % 2 == 0)) sm[i] = T(0);
  sequence_mask seq_mask{masked ? sm.data() : nullptr, S, sizeof(T)};
  L::forward(s, x.data(), y.data(), run_info{n, training, &gen, nullptr, &seq_mask});
  constexpr auto o = Spec::options;
  const std::size_t gates = L::G / U, per_gate = o.recurrent_dropout > 0 ? gates : 1;
  const std::size_t ni = training && o.dropout > 0 ? per_gate : 0, nr = training && o.recurrent_dropout > 0 ? per_gate : 0;
  const auto mx = draw_masks(mirror, ni, n, F, o.dropout), mh = draw_masks(mirror, nr, n, U, o.recurrent_dropout);
  const auto want = reference(k, std::vector<double>(p.begin(), p.end()), std::vector<double>(x.begin(), x.end()), n, S,
                              F, U, o.return_sequences, o.go_backwards, mx, ni, mh, nr,
                              masked ? std::vector<double>(sm.begin(), sm.end()) : std::vector<double>{});
  REQUIRE(want.size() == y.size());
  double worst = 0;
  for (std::size_t i = 0; i < y.size(); ++i) worst = std::max(worst, std::abs(double(y[i]) - want[i]));
  return worst;
}

}  // namespace

TEST_CASE("ops<cpu>::map_rows: a rule over row-strided arrays, every row and column once, on and above a chunk") {
  for (std::size_t rows : {1u, 5u, 300u}) {
    const std::size_t cols = 131, sd = 140, sa = 3 * cols;  // padded rows, and a gate block's stride
    std::vector<float> d(rows * sd, 1.0f), a(rows * sa), b(rows * cols);
    for (std::size_t i = 0; i < a.size(); ++i) a[i] = float(i % 97) / 8;
    for (std::size_t i = 0; i < b.size(); ++i) b[i] = float(i % 13) - 6;
    ops<cpu<>>::map_rows(axpy{}, rows, cols, kernels::rows{d.data(), sd}, kernels::rows<const float>{a.data() + cols, sa},
                         kernels::rows<const float>{b.data(), cols});
    for (std::size_t r = 0; r < rows; ++r)
      for (std::size_t c = 0; c < sd; ++c) {
        const float want = c < cols ? 1.0f + a[r * sa + cols + c] * b[r * cols + c] : 1.0f;  // padding untouched
        REQUIRE(d[r * sd + c] == want);
      }
  }
}

// The dropout variants stand for the plain layers too: at inference they are the plain
// path (and must equal the reference without masks).
namespace {
constexpr recurrent_options both{.return_sequences = true, .go_backwards = true};
constexpr recurrent_options drop{.dropout = 0.3, .recurrent_dropout = 0.2};  // one mask per gate (Keras' impl. 1)
constexpr recurrent_options seq_drop{.return_sequences = true, .dropout = 0.2, .recurrent_dropout = 0.3};
}  // namespace

TEST_CASE("recurrent forward equals Keras' formulas computed step by step (float within 1e-5, double 1e-12)") {
  for (std::size_t n : {1u, 3u, 17u}) {
    CAPTURE(n);
    for (bool training : {false, true}) {
      CAPTURE(training);
      CHECK(forward_error<simple_rnn<5, ctnn::tanh, drop>, shape<6, 3>, float>(cell_kind::simple_tanh, n, training) < 1e-5);
      CHECK(forward_error<lstm<7, recurrent_options{.dropout = 0.25}>, shape<5, 4>, float>(cell_kind::lstm, n, training) <
            1e-5);  // one input mask for every gate (Keras' impl. 2)
      CHECK(forward_error<lstm<7, seq_drop>, shape<5, 4>, float>(cell_kind::lstm, n, training) < 1e-5);
      CHECK(forward_error<gru<6, drop>, shape<5, 4>, float>(cell_kind::gru, n, training) < 1e-5);
      CHECK(forward_error<gru<6, recurrent_options{.return_sequences = true, .recurrent_dropout = 0.3}>, shape<5, 4>,
                          double>(cell_kind::gru, n, training) < 1e-12);
    }
    CHECK(forward_error<simple_rnn<5, relu, return_sequences>, shape<6, 3>, float>(cell_kind::simple_relu, n) < 1e-5);
    CHECK(forward_error<lstm<20, both>, shape<4, 9>, float>(cell_kind::lstm, n) < 1e-5);
    CHECK(forward_error<gru<33, go_backwards>, shape<3, 5>, float>(cell_kind::gru, n) < 1e-5);
    CHECK(forward_error<lstm<7>, shape<5, 4>, double>(cell_kind::lstm, n) < 1e-12);
    // whole blocks of units (batch 1: ops<cpu>::recurrent_row's blocks of several vectors)
    CHECK(forward_error<lstm<128>, shape<3, 5>, float>(cell_kind::lstm, n) < 1e-5);
    CHECK(forward_error<gru<48, return_sequences>, shape<3, 5>, double>(cell_kind::gru, n) < 1e-12);
    CHECK(forward_error<simple_rnn<64>, shape<3, 5>, float>(cell_kind::simple_tanh, n) < 1e-5);
  }
}

namespace {
constexpr recurrent_options before{.reset_after = false};
constexpr recurrent_options before_seq_back{.return_sequences = true, .go_backwards = true, .reset_after = false,
                                            .dropout = 0.3};
}  // namespace

namespace {
// the per-sample values of the packed recurrent kernel [U, G] (ops<cpu<>>::packed_size over packed_rows samples)
template <std::size_t U, std::size_t G>
constexpr std::size_t packed_values = (ops<cpu<>>::packed_size<U, G, float> + ops<cpu<>>::packed_rows - 1) / ops<cpu<>>::packed_rows;
}  // namespace

TEST_CASE("gru reset_after = false: Keras' formula step by step, a step mask, dropout, its bias [3U] and name") {
  for (std::size_t n : {1u, 3u, 17u}) {
    CAPTURE(n);
    CHECK(forward_error<gru<6, before>, shape<5, 4>, double>(cell_kind::gru_before, n) < 1e-12);
    CHECK(forward_error<gru<33, before>, shape<3, 5>, float>(cell_kind::gru_before, n, false, true) < 1e-5);
    for (bool training : {false, true})
      CHECK(forward_error<gru<6, before_seq_back>, shape<5, 4>, float>(cell_kind::gru_before, n, training, true) < 1e-5);
  }
  using L = gru<8, before>::bind<shape<10, 3>, float, cpu<>>;
  static_assert(L::reset_before && L::buffers[2].name == "bias" && L::buffers[2].rank == 1 && L::buffers[2].dims[0] == 24);
  static_assert(L::parameter_count == 3 * (8 * (3 + 8) + 8));  // Keras, reset_after=False: 3 (U (F + U) + U)
  // the caches: as reset_after's, less the per-step products (one step's), plus r ⊙ h per step and the two
  // expanded dz blocks
  static_assert(L::cache_per_sample ==
                10 * 3 + 10 * 24 + 24 + 10 * 8 + 11 * 8 + 2 * 10 * 24 + 3 * 8 + 10 + 10 * 8 + 3 * 8 + packed_values<8, 24>);
  CHECK(gru<4, before_seq_back>::name() == "gru<4, return_sequences, go_backwards, dropout = 0.3, reset_after = false>");
}

TEST_CASE("recurrent masking: masked steps carry the state and the output forward, as Keras' RNN loop") {
  for (std::size_t n : {1u, 4u}) {
    CAPTURE(n);
    CHECK(forward_error<simple_rnn<5, relu, return_sequences>, shape<6, 3>, float>(cell_kind::simple_relu, n, false, true) <
          1e-5);
    CHECK(forward_error<lstm<20, both>, shape<4, 9>, float>(cell_kind::lstm, n, false, true) < 1e-5);
    CHECK(forward_error<gru<33, go_backwards>, shape<3, 5>, float>(cell_kind::gru, n, false, true) < 1e-5);
    CHECK(forward_error<lstm<7>, shape<5, 4>, double>(cell_kind::lstm, n, false, true) < 1e-12);
    CHECK(forward_error<gru<6, drop>, shape<5, 4>, float>(cell_kind::gru, n, true, true) < 1e-5);  // with dropout
  }
}

namespace {
// forward and backward of the bound layer at batch n on `threads` threads: the output, dx and the
// gradients, one after another (training with the masks of seed 42; masked: a step mask as forward_error's)
template <class Spec, class In, class T>
std::vector<T> pass_on_threads(std::size_t n, std::size_t threads, bool masked) {
  using L = typename Spec::template bind<In, T, cpu<>>;
  constexpr std::size_t S = In::dims[0];
  kernels::cpu::set_threads(threads);
  rng g(7);
  std::vector<T> p(L::parameter_count), grads(L::parameter_count), cache(L::cache_per_sample * n), x(n * In::size),
      y(n * L::out_shape::size), dy(y.size()), dx(x.size()), sm(n * S, T(1));
  for (auto& v : p) v = T(g.uniform(-0.6, 0.6));
  for (auto& v : x) v = T(g.uniform(-1, 1));
  for (auto& v : dy) v = T(g.uniform(-1, 1));
  for (std::size_t i = 0; i < sm.size(); ++i)
    if (i % 3 == 1) sm[i] = T(0);
  sequence_mask seq_mask{masked ? sm.data() : nullptr, S, sizeof(T)};
  layer_slot<T> s{p.data(), grads.data(), nullptr, cache.data()};
  rng gen(42);
  const run_info r{n, true, &gen, nullptr, &seq_mask};
  L::forward(s, x.data(), y.data(), r);
  L::backward(s, x.data(), y.data(), dy.data(), dx.data(), r);
  y.insert(y.end(), dx.begin(), dx.end());
  y.insert(y.end(), grads.begin(), grads.end());
  return y;
}
template <class Spec, class In, class T>
bool same_bits_on_threads(std::size_t n, bool masked = false) {
  const std::vector<T> one = pass_on_threads<Spec, In, T>(n, 1, masked);
  bool same = true;
  for (std::size_t t : {2u, 3u}) same = same && pass_on_threads<Spec, In, T>(n, t, masked) == one;
  return same;
}
}  // namespace

// ops<cpu>::recurrent_row_blocks: from 32 rows on two threads each thread runs the time loops over
// its block of the batch (40: blocks of 16 and 24 rows; 48 on three threads: 16 each)
TEST_CASE("recurrent time loops split by rows of the batch: the same bits on 1, 2 and 3 threads, and Keras' formulas") {
  const std::size_t before_threads = kernels::cpu::threads();
  for (std::size_t n : {40u, 48u}) {
    CAPTURE(n);
    CHECK(same_bits_on_threads<lstm<20, both>, shape<4, 9>, float>(n));
    CHECK(same_bits_on_threads<lstm<20, both>, shape<4, 9>, float>(n, true));
    CHECK(same_bits_on_threads<lstm<7, seq_drop>, shape<5, 4>, float>(n));
    CHECK(same_bits_on_threads<gru<6, drop>, shape<5, 4>, float>(n, true));
    CHECK(same_bits_on_threads<gru<6, before>, shape<5, 4>, double>(n));
    CHECK(same_bits_on_threads<simple_rnn<5, relu, return_sequences>, shape<6, 3>, float>(n));
  }
  kernels::cpu::set_threads(2);
  CHECK(forward_error<lstm<20, both>, shape<4, 9>, float>(cell_kind::lstm, 40, false, true) < 1e-5);
  CHECK(forward_error<gru<6, drop>, shape<5, 4>, float>(cell_kind::gru, 40) < 1e-5);
  CHECK(forward_error<gru<33, before>, shape<3, 5>, float>(cell_kind::gru_before, 40, false, true) < 1e-5);
  kernels::cpu::set_threads(before_threads);
}

TEST_CASE("recurrent dropout: masks differ between passes, none at inference, and training needs a generator") {
  using L = lstm<7, seq_drop>::bind<shape<5, 4>, float, cpu<>>;  // a type the forward test has instantiated
  static_assert(L::draws_random && !lstm<7>::bind<shape<5, 4>, double, cpu<>>::draws_random);
  std::vector<float> p(L::parameter_count, 0.3f), cache(L::cache_per_sample * 2), x(40, 1.0f), a(70), b(70), c(70), d(70);
  layer_slot<float> s{p.data(), nullptr, nullptr, cache.data()};
  rng g(1);
  L::forward(s, x.data(), a.data(), run_info{2, true, &g});
  L::forward(s, x.data(), b.data(), run_info{2, true, &g});
  CHECK(a != b);  // a new draw per pass (per batch), as Keras resets its cached masks per call
  L::forward(s, x.data(), c.data(), run_info{2, false, nullptr});
  L::forward(s, x.data(), d.data(), run_info{2, false, &g});
  CHECK(c == d);
  CHECK_THROWS_AS(L::forward(s, x.data(), a.data(), run_info{2, true, nullptr}), std::invalid_argument);
  CHECK(L::name() == "lstm<7, return_sequences, dropout = 0.2, recurrent_dropout = 0.3>");
}

TEST_CASE("recurrent variables: Keras' names and shapes, parameter counts, output shapes") {
  using L = lstm<8>::bind<shape<10, 3>, float, cpu<>>;
  static_assert(L::buffers[0].name == "kernel" && L::buffers[0].dims[0] == 3 && L::buffers[0].dims[1] == 32);
  static_assert(L::buffers[1].name == "recurrent_kernel" && L::buffers[1].dims[0] == 8 && L::buffers[1].dims[1] == 32);
  static_assert(L::buffers[2].name == "bias" && L::buffers[2].rank == 1 && L::buffers[2].dims[0] == 32);
  static_assert(L::parameter_count == 4 * (8 * (3 + 8) + 8));  // Keras: 4 (U (F + U) + U)
  static_assert(L::out_shape{} == shape<8>{});
  using Gr = gru<8>::bind<shape<10, 3>, float, cpu<>>;
  static_assert(Gr::buffers[2].rank == 2 && Gr::buffers[2].dims[0] == 2 && Gr::buffers[2].dims[1] == 24);
  static_assert(Gr::parameter_count == 3 * (8 * (3 + 8) + 2 * 8));  // Keras 3, reset_after: 3 (U (F + U) + 2U)
  using Sr = simple_rnn<8, ctnn::tanh, return_sequences>::bind<shape<10, 3>, float, cpu<>>;
  static_assert(Sr::parameter_count == 8 * (3 + 8) + 8);
  static_assert(Sr::out_shape{} == shape<10, 8>{});
  // the caches per sample: time-major input, gates, one step's recurrent product, states, cell states, scratch,
  // the step mask (time-major, widened to the units, ones, backward's two passes), the packed recurrent kernel
  // (the lstm on the CPU: and the packed kernel, whose products sum each step's projection)
  static_assert(L::step_projection);
  static_assert(L::cache_per_sample == 10 * 3 + 10 * 32 + 32 + 11 * 8 + 11 * 8 + 3 * 8 + 10 + 10 * 8 + 3 * 8 +
                                           packed_values<8, 32> + packed_values<3, 32>);
  static_assert(Gr::cache_per_sample ==
                10 * 3 + 10 * 24 + 10 * 24 + 11 * 8 + 3 * 8 + 10 + 10 * 8 + 3 * 8 + packed_values<8, 24>);
  // R [U, G] packed (ops<B>::pack_weights, once per pass): its panels (NR columns, U rows) or those of R^T,
  // U G values when both are whole panels (lstm(128) on every architecture), held by packed_rows samples
  static_assert(ops<cpu<>>::packed_size<128, 512, float> == 128 * 512 && ops<cpu<>>::packed_size<8, 32, float> >= 8 * 32);
  static_assert(lstm<128>::bind<shape<28, 28>, float, cpu<>>::packed_per_sample * ops<cpu<>>::packed_rows >= 128 * 512);

  using net = sequential<input<28, 28>, lstm<128>, dense<10>>;
  static_assert(net::parameter_count == 4 * (128 * (28 + 128) + 128) + 128 * 10 + 10);  // Keras' summary: 80,384 + 1,290
  constexpr auto mp = net::memory_plan<float>(64, 0);
  static_assert(mp.parameters >= net::parameter_count * 4 && mp.activations >= 64 * 4 * (28 * 28 * (1 + 4) + 29 * 8));
  CHECK(lstm<4, return_sequences>::name() == "lstm<4, return_sequences>");
  CHECK(gru<4, go_backwards>::name() == "gru<4, go_backwards>");
  CHECK(simple_rnn<4, relu>::name() == "simple_rnn<4, relu>");
}

TEST_CASE("recurrent init: glorot_uniform kernel, orthogonal recurrent kernel, unit_forget_bias") {
  using L = lstm<6>::bind<shape<4, 5>, double, cpu<>>;
  std::vector<double> p(L::parameter_count, 7.0);
  rng g(3);
  L::init({p.data(), nullptr, nullptr, nullptr}, g);
  const double limit = std::sqrt(6.0 / (5 + 24));
  for (std::size_t i = 0; i < L::kernel_count; ++i) CHECK(std::abs(p[i]) <= limit);
  // recurrent_kernel [6, 24]: fewer rows than columns, so its rows are orthonormal
  const double* R = p.data() + L::kernel_count;
  for (std::size_t a = 0; a < 6; ++a)
    for (std::size_t b = 0; b < 6; ++b) {
      double d = 0;
      for (std::size_t j = 0; j < 24; ++j) d += R[a * 24 + j] * R[b * 24 + j];
      CHECK(d == doctest::Approx(a == b ? 1.0 : 0.0).epsilon(1e-12));
    }
  const double* b = R + L::recurrent_count;
  for (std::size_t j = 0; j < 24; ++j) CHECK(b[j] == (j >= 6 && j < 12 ? 1.0 : 0.0));  // i, f, c, o
  using N = lstm<6, recurrent_options{.unit_forget_bias = false}>::bind<shape<4, 5>, double, cpu<>>;
  N::init({p.data(), nullptr, nullptr, nullptr}, g);
  for (std::size_t j = 0; j < 24; ++j) CHECK(p[N::kernel_count + N::recurrent_count + j] == 0.0);
  // a square orthogonal kernel (more rows than columns is the transposed case): columns orthonormal
  std::vector<double> q(12 * 5);
  orthogonal::fill(q.data(), q.size(), 12, 5, g);
  for (std::size_t a = 0; a < 5; ++a)
    for (std::size_t c = 0; c < 5; ++c) {
      double d = 0;
      for (std::size_t r = 0; r < 12; ++r) d += q[r * 5 + a] * q[r * 5 + c];
      CHECK(d == doctest::Approx(a == c ? 1.0 : 0.0).epsilon(1e-12));
    }
}

namespace {
using stack = sequential<input<6, 4>, lstm<8, return_sequences>, gru<5, go_backwards>, dense<1>>;
using stack_before = sequential<input<6, 4>, gru<5, recurrent_options{.return_sequences = true, .reset_after = false}>,
                                gru<4, recurrent_options{.reset_after = false}>, dense<1>>;

// Net learns the sum of the first feature over the steps (scaled) and goes through a weights file.
template <class Net>
void learns_sum_and_saves(const char* file) {
  // target: the sum of the first feature over the steps, scaled
  rng g(11);
  std::vector<float> x(256 * 24), y(256);
  for (std::size_t s = 0; s < 256; ++s) {
    double sum = 0;
    for (std::size_t t = 0; t < 6; ++t)
      for (std::size_t f = 0; f < 4; ++f) {
        const float v = float(g.uniform(-1, 1));
        x[s * 24 + t * 4 + f] = v;
        if (f == 0) sum += v;
      }
    y[s] = float(sum / 3);
  }
  const data::in_memory<shape<6, 4>, dense_targets<shape<1>>> ds(x, y);
  auto m = make_model<Net>(3);
  adam opt{0.01};
  const auto h = fit(m, mean_squared_error{}, opt, ds.batch(32), epochs{15});
  CHECK(h["loss"].back() < 0.2 * h["loss"].front());

  const auto path = std::filesystem::temp_directory_path() / file;
  io::save_weights(m, path);
  auto m2 = make_model<Net>(99);
  io::load_weights(m2, path);
  std::filesystem::remove(path);
  const auto a = m.predict(x.data(), 8), b = m2.predict(x.data(), 8);
  CHECK(a == b);
}
}  // namespace

TEST_CASE("recurrent model: a stack in summary and through a weights file, and it learns a sum over steps") {
  std::ostringstream os;
  summary<stack>(os);
  CHECK(os.str().find("lstm<8, return_sequences>") != std::string::npos);
  CHECK(os.str().find("gru<5, go_backwards>") != std::string::npos);
  learns_sum_and_saves<stack>("ctnn_test_recurrent.weights");
}

TEST_CASE("gru reset_after = false in a model: it learns the sum, and its bias [3U] goes through a weights file") {
  learns_sum_and_saves<stack_before>("ctnn_test_recurrent_before.weights");
  auto m = make_model<stack_before>(1);
  std::size_t biases = 0;
  m.for_each_variable([&](const variable_ref& v) {
    if (v.name != "bias" || v.layer > 1) return;
    CHECK(v.extent == (v.layer == 0 ? 15u : 12u));
    ++biases;
  });
  CHECK(biases == 2);
}

namespace {
// bidirectional against two reference passes: the forward layer's parameters, then the backward
// layer's; the backward pass's sequence reversed back, masked steps 0 with return_sequences (Keras
// forces zero_output_for_mask), merged by `mode` (0 concat, 1 sum, 2 mul, 3 ave).
template <class Spec, class In>
double bidirectional_error(cell_kind k, int mode, std::size_t n, bool masked) {
  using L = typename Spec::template bind<In, double, cpu<>>;
  constexpr std::size_t S = In::dims[0], F = In::dims[1], U = L::U, half = L::parameter_count / 2;
  constexpr bool seq = Spec::options.return_sequences;
  rng g(8);
  std::vector<double> p(L::parameter_count), cache(L::cache_per_sample * n), x(n * S * F), y(n * L::out_shape::size);
  for (auto& v : p) v = g.uniform(-0.6, 0.6);
  for (auto& v : x) v = g.uniform(-1, 1);
  std::vector<double> sm(n * S, 1.0);
  for (std::size_t i = 0; i < sm.size(); ++i)
    if (i % 3 == 1 || i % S == S - 1) sm[i] = 0.0;  // the last step of each sequence (padding) and others
  sequence_mask mask{masked ? sm.data() : nullptr, S, sizeof(double)};
  L::forward({p.data(), nullptr, nullptr, cache.data()}, x.data(), y.data(), run_info{n, false, nullptr, nullptr, &mask});
  const std::vector<double> pf(p.begin(), p.begin() + half), pb(p.begin() + half, p.end()), none;
  const auto yf = reference(k, pf, x, n, S, F, U, seq, false, {}, 0, {}, 0, masked ? sm : none);
  const auto yb = reference(k, pb, x, n, S, F, U, seq, true, {}, 0, {}, 0, masked ? sm : none);
  const std::size_t steps = seq ? S : 1, width = mode == 0 ? 2 * U : U;
  REQUIRE(y.size() == n * steps * width);
  double worst = 0;
  for (std::size_t s = 0; s < n; ++s)
    for (std::size_t t = 0; t < steps; ++t) {
      const double m = seq && masked ? sm[s * S + t] : 1.0;
      for (std::size_t u = 0; u < U; ++u) {
        const double a = yf[(s * steps + t) * U + u] * m, b = yb[(s * steps + (seq ? S - 1 - t : 0)) * U + u] * m;
        const double* out = y.data() + (s * steps + t) * width;
        if (mode == 0) worst = std::max({worst, std::abs(out[u] - a), std::abs(out[U + u] - b)});
        else worst = std::max(worst, std::abs(out[u] - (mode == 1 ? a + b : mode == 2 ? a * b : (a + b) / 2)));
      }
    }
  return worst;
}
}  // namespace

TEST_CASE("bidirectional: forward and reversed passes merged as Keras (concat, sum, mul, ave, a step mask)") {
  for (bool masked : {false, true}) {
    CAPTURE(masked);
    CHECK(bidirectional_error<bidirectional<lstm<7>>, shape<5, 4>>(cell_kind::lstm, 0, 3, masked) < 1e-12);
    CHECK(bidirectional_error<bidirectional<lstm<7, return_sequences>>, shape<5, 4>>(cell_kind::lstm, 0, 3, masked) <
          1e-12);
    CHECK(bidirectional_error<bidirectional<gru<6, return_sequences>, merge::mul>, shape<5, 4>>(cell_kind::gru, 2, 2,
                                                                                                 masked) < 1e-12);
    CHECK(bidirectional_error<bidirectional<simple_rnn<5, ctnn::tanh, return_sequences>, merge::sum>, shape<6, 3>>(
              cell_kind::simple_tanh, 1, 2, masked) < 1e-12);
    CHECK(bidirectional_error<bidirectional<gru<6>, merge::ave>, shape<5, 4>>(cell_kind::gru, 3, 4, masked) < 1e-12);
  }
}

TEST_CASE("bidirectional: Keras' variables (forward_*, then backward_*), counts, shapes, summary and weights file") {
  using L = bidirectional<lstm<8>>::bind<shape<10, 3>, float, cpu<>>;
  static_assert(L::buffers[0].name == "forward_kernel" && L::buffers[0].dims[0] == 3 && L::buffers[0].dims[1] == 32);
  static_assert(L::buffers[1].name == "forward_recurrent_kernel" && L::buffers[2].name == "forward_bias");
  static_assert(L::buffers[L::nf].name == "backward_kernel" && L::buffers[L::nf + 1].name == "backward_recurrent_kernel");
  static_assert(L::buffers[L::nf + 2].name == "backward_bias" && L::buffers[L::nf + 2].dims[0] == 32);
  static_assert(L::parameter_count == 2 * 4 * (8 * (3 + 8) + 8));  // Keras: twice the LSTM's
  static_assert(L::out_shape{} == shape<16>{});
  using net = sequential<input<6, 4>, masking<>, bidirectional<gru<5, return_sequences>, merge::sum>,
                         bidirectional<lstm<3>>, dense<1>>;
  static_assert(net::output_shape == shape<1>{});
  static_assert(net::parameter_count == 2 * 3 * (5 * (4 + 5) + 2 * 5) + 2 * 4 * (3 * (5 + 3) + 3) + 6 + 1);
  CHECK(bidirectional<gru<5, return_sequences>, merge::sum>::name() == "bidirectional<gru<5, return_sequences>, sum>");
  std::ostringstream os;
  summary<net>(os);
  CHECK(os.str().find("bidirectional<lstm<3>>") != std::string::npos);

  std::vector<float> x(64 * 24), y(64);
  rng g(2);
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = i % 24 >= 16 && i / 24 % 2 ? 0.0f : float(g.uniform(-1, 1));
  for (std::size_t s = 0; s < 64; ++s) y[s] = x[s * 24] - x[s * 24 + 5];
  const data::in_memory<shape<6, 4>, dense_targets<shape<1>>> ds(x, y);
  auto m = make_model<net>(3);
  adam opt{0.01};
  const auto h = fit(m, mean_squared_error{}, opt, ds.batch(16), epochs{10});
  CHECK(h["loss"].back() < 0.5 * h["loss"].front());
  const auto path = std::filesystem::temp_directory_path() / "ctnn_test_bidirectional.weights";
  io::save_weights(m, path);
  std::ifstream in(path, std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  in.close();
  CHECK(bytes.find("forward_recurrent_kernel") != std::string::npos);
  CHECK(bytes.find("backward_bias") != std::string::npos);
  auto m2 = make_model<net>(99);
  io::load_weights(m2, path);
  std::filesystem::remove(path);
  CHECK(m.predict(x.data(), 8) == m2.predict(x.data(), 8));
}
