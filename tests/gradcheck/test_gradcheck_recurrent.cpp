// Finite-difference gradient checks, in double, of backpropagation through time in
// simple_rnn, lstm and gru (layers/recurrent.hpp): each cell, return_sequences (a
// loss on every step), go_backwards, both, and a stack (lstm with return_sequences
// into gru) checked through both layers at once; dropout and recurrent_dropout with a
// fixed draw of the masks (the checker reseeds the generator before every forward);
// bidirectional (layers/bidirectional.hpp) in each merge mode, with a mask and dropout;
// time_distributed<dense> (layers/time_distributed.hpp).
#include <doctest/doctest.h>

#include <ctnn/ctnn.hpp>
#include <ctnn/layers/bidirectional.hpp>
#include <ctnn/layers/gru.hpp>
#include <ctnn/layers/lstm.hpp>
#include <ctnn/layers/simple_rnn.hpp>
#include <ctnn/layers/time_distributed.hpp>

#include <algorithm>
#include <vector>

#include "gradcheck.hpp"

using namespace ctnn;

namespace {
constexpr double tol = 1e-6;
constexpr recurrent_options both{.return_sequences = true, .go_backwards = true};
}  // namespace

TEST_CASE("gradcheck: simple_rnn") {
  CHECK(gradcheck::check_layer<simple_rnn<4>, shape<5, 3>>() < tol);
  CHECK(gradcheck::check_layer<simple_rnn<4, sigmoid, return_sequences>, shape<5, 3>>() < tol);
  CHECK(gradcheck::check_layer<simple_rnn<3, ctnn::tanh, go_backwards>, shape<4, 2>>() < tol);
  CHECK(gradcheck::check_layer<simple_rnn<3, ctnn::tanh, both>, shape<4, 2>>({.batch = 1}) < tol);
  CHECK(gradcheck::check_layer<simple_rnn<3, ctnn::tanh, both>, shape<4, 2>>({.batch = 17}) < tol);  // R packed
}

TEST_CASE("gradcheck: lstm") {
  CHECK(gradcheck::check_layer<lstm<4>, shape<5, 3>>() < tol);
  CHECK(gradcheck::check_layer<lstm<4, return_sequences>, shape<5, 3>>() < tol);
  CHECK(gradcheck::check_layer<lstm<3, go_backwards>, shape<6, 2>>() < tol);
  CHECK(gradcheck::check_layer<lstm<3, both>, shape<4, 5>>({.batch = 2}) < tol);
  CHECK(gradcheck::check_layer<lstm<17, return_sequences>, shape<3, 4>>({.batch = 5}) < tol);  // U past a vector
  CHECK(gradcheck::check_layer<lstm<3>, shape<1, 4>>() < tol);  // one step: no recurrent product
  // a batch past ops<cpu>::packed_rows: the step products over R packed once per pass
  CHECK(gradcheck::check_layer<lstm<3, both>, shape<4, 5>>({.batch = 17}) < tol);
  // ... where dW, dR and db are summed step by step in the time loop (ops<cpu>::step_weights_gradient):
  // 9 features and 17 units (tiles with copied rows), one step (dR 0)
  // (from ops<cpu>::step_weights_rows rows)
  static_assert(ops<cpu<>>::step_weights_rows <= 32);
  CHECK(gradcheck::check_layer<lstm<17, return_sequences>, shape<3, 9>>({.batch = 32}) < tol);
  CHECK(gradcheck::check_layer<lstm<3>, shape<1, 4>>({.batch = 32}) < tol);
  CHECK(gradcheck::check_layer<simple_rnn<3, ctnn::tanh, both>, shape<4, 2>>({.batch = 33}) < tol);
  // batch 1: each step's product and rule in one pass by blocks of units (ops<cpu>::recurrent_row),
  // 17 units: two whole vectors of double (AVX-512) and a partial one
  CHECK(gradcheck::check_layer<lstm<17, return_sequences>, shape<3, 4>>({.batch = 1}) < tol);
}

TEST_CASE("gradcheck: gru (reset_after)") {
  CHECK(gradcheck::check_layer<gru<4>, shape<5, 3>>() < tol);
  CHECK(gradcheck::check_layer<gru<4, return_sequences>, shape<5, 3>>() < tol);
  CHECK(gradcheck::check_layer<gru<3, go_backwards>, shape<6, 2>>() < tol);
  CHECK(gradcheck::check_layer<gru<3, both>, shape<4, 5>>({.batch = 2}) < tol);
  CHECK(gradcheck::check_layer<gru<17, return_sequences>, shape<3, 4>>({.batch = 5}) < tol);
  CHECK(gradcheck::check_layer<gru<3>, shape<1, 4>>() < tol);  // one step: the recurrent bias only
  CHECK(gradcheck::check_layer<gru<3, both>, shape<4, 5>>({.batch = 17}) < tol);  // R packed
  CHECK(gradcheck::check_layer<gru<17, return_sequences>, shape<3, 4>>({.batch = 1}) < tol);  // recurrent_row
}

TEST_CASE("gradcheck: gru (reset_after = false)") {
  constexpr recurrent_options before{.reset_after = false};
  CHECK(gradcheck::check_layer<gru<4, before>, shape<5, 3>>() < tol);
  CHECK(gradcheck::check_layer<gru<3, recurrent_options{.return_sequences = true, .go_backwards = true, .reset_after = false,
                                                        .dropout = 0.3}>,
                               shape<4, 5>>({.batch = 2}) < tol);
  CHECK(gradcheck::check_layer<gru<17, recurrent_options{.return_sequences = true, .reset_after = false}>, shape<3, 4>>(
            {.batch = 5}) < tol);
  CHECK(gradcheck::check_layer<gru<3, before>, shape<1, 4>>() < tol);  // one step: no recurrent product
  CHECK(gradcheck::check_layer<gru<3, recurrent_options{.return_sequences = true, .reset_after = false}>, shape<4, 3>>(
            {.batch = 17}) < tol);  // R packed
}

TEST_CASE("gradcheck: dropout and recurrent_dropout (fixed masks, one per gate with recurrent_dropout)") {
  CHECK(gradcheck::check_layer<simple_rnn<3, ctnn::tanh, recurrent_options{.dropout = 0.3, .recurrent_dropout = 0.3}>,
                               shape<4, 3>>() < tol);
  CHECK(gradcheck::check_layer<lstm<3, recurrent_options{.dropout = 0.3}>, shape<4, 3>>() < tol);
  CHECK(gradcheck::check_layer<lstm<3, recurrent_options{.return_sequences = true, .dropout = 0.3, .recurrent_dropout = 0.4}>,
                               shape<4, 3>>() < tol);
  CHECK(gradcheck::check_layer<gru<3, recurrent_options{.go_backwards = true, .recurrent_dropout = 0.3}>, shape<4, 3>>() <
        tol);
  CHECK(gradcheck::check_layer<lstm<3, recurrent_options{.return_sequences = true, .dropout = 0.3, .recurrent_dropout = 0.4}>,
                               shape<4, 3>>({.batch = 17}) < tol);  // R packed, one product per gate's mask
}

namespace {
// The largest relative error between analytic[i] and the central difference of f over each v[i]
// (v restored after each probe).
template <class Fn>
double probe(Fn& f, std::vector<double>& v, const std::vector<double>& analytic) {
  double worst = 0;
  for (std::size_t i = 0; i < v.size(); ++i) {
    const double keep = v[i], eps = 1e-6;
    v[i] = keep + eps;
    const double fp = f();
    v[i] = keep - eps;
    const double fm = f();
    v[i] = keep;
    worst = std::max(worst, gradcheck::rel_err((fp - fm) / (2 * eps), analytic[i]));
  }
  return worst;
}

// BPTT with a step mask (run_info::mask, as masking<> publishes it) against central
// differences of f = sum(r * y), over the input and every parameter.
template <class Spec, class In>
double masked_check(std::size_t n) {
  using L = typename Spec::template bind<In, double, cpu<>>;
  constexpr std::size_t S = In::dims[0];
  rng g(29);
  std::vector<double> p(L::parameter_count), gr(L::parameter_count), c(L::cache_per_sample * n);
  for (auto& v : p) v = g.uniform(-0.7, 0.7);
  std::vector<double> x(n * In::size), y(n * L::out_shape::size), r(y.size()), m(n * S, 1.0);
  for (auto& v : x) v = g.uniform(-1, 1);
  for (auto& v : r) v = g.uniform(-1, 1);
  for (std::size_t i = 0; i < m.size(); ++i)
    if (i % 3 != 2) m[i] = i % S == 0 || i % 4 == 1 ? 0.0 : 1.0;  // masked first, middle and (some) last steps
  sequence_mask mask{m.data(), S, sizeof(double)};
  const layer_slot<double> sl{p.data(), gr.data(), nullptr, c.data()};
  const run_info ri{n, true, nullptr, nullptr, &mask};
  auto f = [&] {
    L::forward(sl, x.data(), y.data(), ri);
    double sum = 0;
    for (std::size_t i = 0; i < y.size(); ++i) sum += r[i] * y[i];
    return sum;
  };
  f();
  std::vector<double> dy = r, dx(x.size());
  L::backward(sl, x.data(), y.data(), dy.data(), dx.data(), ri);
  return std::max(probe(f, x, dx), probe(f, p, gr));
}
}  // namespace

TEST_CASE("gradcheck: a step mask (masked steps carry the state, their gradient passes through)") {
  CHECK(masked_check<simple_rnn<4>, shape<5, 3>>(3) < tol);
  CHECK(masked_check<lstm<3, both>, shape<4, 5>>(2) < tol);
  CHECK(masked_check<lstm<3, both>, shape<4, 5>>(33) < tol);  // dW, dR, db step by step
  CHECK(masked_check<gru<4, return_sequences>, shape<5, 3>>(3) < tol);
  CHECK(masked_check<gru<4, recurrent_options{.return_sequences = true, .reset_after = false}>, shape<5, 3>>(3) < tol);
}

TEST_CASE("gradcheck: bidirectional (each merge mode, return_sequences, a step mask, dropout)") {
  CHECK(gradcheck::check_layer<bidirectional<lstm<3>>, shape<4, 2>>() < tol);
  CHECK(gradcheck::check_layer<bidirectional<gru<3, return_sequences>, merge::mul>, shape<4, 2>>({.batch = 2}) < tol);
  CHECK(gradcheck::check_layer<bidirectional<simple_rnn<3, ctnn::tanh, return_sequences>, merge::sum>, shape<5, 2>>() <
        tol);
  CHECK(gradcheck::check_layer<bidirectional<simple_rnn<4>, merge::ave>, shape<3, 2>>() < tol);
  CHECK(gradcheck::check_layer<bidirectional<lstm<2, recurrent_options{.return_sequences = true, .dropout = 0.3}>>,
                               shape<3, 2>>() < tol);
  // masked steps: zeros out of both directions (Keras forces zero_output_for_mask), no gradient through them
  CHECK(masked_check<bidirectional<lstm<3, return_sequences>>, shape<5, 2>>(3) < tol);
  CHECK(masked_check<bidirectional<gru<3>, merge::mul>, shape<4, 3>>(2) < tol);
  CHECK(masked_check<bidirectional<lstm<3, return_sequences>>, shape<5, 2>>(17) < tol);  // R packed
}

TEST_CASE("gradcheck: time_distributed<dense> (every step through one kernel)") {
  CHECK(gradcheck::check_layer<time_distributed<dense<3, ctnn::tanh>>, shape<4, 5>>() < tol);
}

TEST_CASE("gradcheck: a stack, lstm (return_sequences) into gru, through both layers") {
  using A = lstm<3, return_sequences>::bind<shape<5, 2>, double, cpu<>>;
  using B = gru<2, go_backwards>::bind<A::out_shape, double, cpu<>>;
  constexpr std::size_t n = 2;
  rng g(17);
  std::vector<double> pa(A::parameter_count), ga(A::parameter_count), ca(A::cache_per_sample * n);
  std::vector<double> pb(B::parameter_count), gb(B::parameter_count), cb(B::cache_per_sample * n);
  for (auto& v : pa) v = g.uniform(-0.7, 0.7);
  for (auto& v : pb) v = g.uniform(-0.7, 0.7);
  std::vector<double> x(n * 10), mid(n * A::out_shape::size), y(n * 2), r(n * 2);
  for (auto& v : x) v = g.uniform(-1, 1);
  for (auto& v : r) v = g.uniform(-1, 1);
  const layer_slot<double> sa{pa.data(), ga.data(), nullptr, ca.data()}, sb{pb.data(), gb.data(), nullptr, cb.data()};
  const run_info ri{n, true, nullptr};
  auto f = [&] {
    A::forward(sa, x.data(), mid.data(), ri);
    B::forward(sb, mid.data(), y.data(), ri);
    double s = 0;
    for (std::size_t i = 0; i < y.size(); ++i) s += r[i] * y[i];
    return s;
  };
  f();
  std::vector<double> dy = r, dmid(mid.size()), dx(x.size());
  B::backward(sb, mid.data(), y.data(), dy.data(), dmid.data(), ri);
  A::backward(sa, x.data(), mid.data(), dmid.data(), dx.data(), ri);
  const std::vector<double> ax = dx, aga = ga, agb = gb;
  CHECK(std::max({probe(f, x, ax), probe(f, pa, aga), probe(f, pb, agb)}) < tol);
}
