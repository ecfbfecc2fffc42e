// options.hpp (with_options, optimizer_options): clipping, decoupled weight
// decay, gradient accumulation and the moving average of the weights, each
// against values computed by hand from Keras 3's rules (written out here).
#include <doctest/doctest.h>

#include <ctnn/ctnn.hpp>
#include <ctnn/optimizers/options.hpp>

#include <cmath>
#include <stdexcept>
#include <vector>

using namespace ctnn;

namespace {
// 2 -> 2 dense: kernel (4 values) then bias (2 values), then alignment padding.
using tiny = sequential<input<2>, dense<2>>;

using tiny_model = model<tiny>;

// Phases 4-6 of the training step (train/step.hpp) with gradients set by hand.
template <class O>
struct stepper {
  tiny_model m = make_model<tiny>(1);
  O opt;
  train_step<tiny_model, mean_squared_error, O> step{m, mean_squared_error{}, opt};
  explicit stepper(O o) : opt(std::move(o)) {}
  // Sets the gradient to g (the first values, the rest 0) and runs the phases.
  void operator()(const std::vector<float>& g) {
    auto grads = m.gradients();
    std::fill(grads.begin(), grads.end(), 0.0f);
    std::copy(g.begin(), g.end(), grads.begin());
    step.apply_gradients();
  }
};

// One step of opt with gradient g (kernel, bias) from w = 0; returns -w (= lr * processed gradient).
template <class O>
std::vector<float> processed(O opt, std::vector<float> g6) {
  stepper<O> st(std::move(opt));
  auto w = st.m.parameters();
  std::fill(w.begin(), w.end(), 0.0f);
  st(g6);
  std::vector<float> out;
  for (std::size_t i = 0; i < 6; ++i) out.push_back(-w[i]);
  for (std::size_t i = 6; i < w.size(); ++i) CHECK(w[i] == 0.0f);  // padding stays zero
  return out;
}
void expect(const std::vector<float>& got, const std::vector<double>& want) {
  REQUIRE(got.size() == want.size());
  for (std::size_t i = 0; i < want.size(); ++i) CHECK(got[i] == doctest::Approx(want[i]).epsilon(1e-6));
}
}  // namespace

static_assert(Optimizer<with_options<adam<>>>);
static_assert(with_options<adam<>>::max_slots_per_parameter == 5);
static_assert(std::is_same_v<decltype(with_options{sgd{0.1}, optimizer_options{}}), with_options<sgd<constant_schedule>>>);

TEST_CASE("clipping: clipnorm per variable, global_clipnorm jointly, clipvalue elementwise") {
  const std::vector<float> g{3, 4, 0, 0, 0.6f, 0.8f};  // kernel norm 5, bias norm 1
  // clipnorm 2: the kernel is scaled by 2/5, the bias (norm 1 <= 2) is left alone.
  expect(processed(with_options{sgd{1.0}, {.clipnorm = 2.0}}, g), {1.2, 1.6, 0, 0, 0.6, 0.8});
  // global_clipnorm 2: everything scaled by 2 / sqrt(26).
  expect(processed(with_options{sgd{1.0}, {.global_clipnorm = 2.0}}, g),
         {1.1766968108291043, 1.5689290811054724, 0, 0, 0.23533936216582085, 0.31378581622109447});
  expect(processed(with_options{sgd{1.0}, {.clipvalue = 0.7}}, {3, -4, 0, 0, 0.6f, -0.8f}), {0.7, -0.7, 0, 0, 0.6, -0.7});
  // Below the limits nothing changes.
  expect(processed(with_options{sgd{1.0}, {.clipnorm = 10.0}}, g), {3, 4, 0, 0, 0.6, 0.8});
  expect(processed(with_options{sgd{1.0}, {.global_clipnorm = 6.0}}, g), {3, 4, 0, 0, 0.6, 0.8});
}

TEST_CASE("optimizer_options: invalid combinations and values are refused, naming them") {
  CHECK_THROWS_WITH_AS(with_options(sgd{0.1}, {.clipnorm = 1.0, .clipvalue = 1.0}),
                       "optimizer_options: only one of clipnorm, clipvalue and global_clipnorm may be set, got 2",
                       std::invalid_argument);
  CHECK_THROWS_WITH_AS(with_options(sgd{0.1}, {.clipnorm = -1.0}),
                       "optimizer_options: clipnorm must be finite and > 0, got -1", std::invalid_argument);
  CHECK_THROWS_AS(with_options(sgd{0.1}, {.weight_decay = -0.1}), std::invalid_argument);
  CHECK_THROWS_WITH_AS(with_options(sgd{0.1}, {.gradient_accumulation_steps = 0}),
                       "optimizer_options: gradient_accumulation_steps must be >= 1, got 0", std::invalid_argument);
  CHECK_THROWS_AS(with_options(sgd{0.1}, {.use_ema = true, .ema_momentum = 1.5}), std::invalid_argument);
  CHECK_THROWS_AS(with_options(sgd{0.1}, {.ema_overwrite_frequency = -1}), std::invalid_argument);
}

TEST_CASE("decoupled weight decay: w -= w * wd * lr before the update") {
  stepper st(with_options{sgd{0.1}, {.weight_decay = 0.5}});
  auto w = st.m.parameters();
  std::fill(w.begin(), w.end(), 0.0f);
  w[0] = 2;
  st({1});  // 2 - 2 * 0.5 * 0.1 = 1.9, then - 0.1 * 1 = 1.8
  CHECK(w[0] == doctest::Approx(1.8));
  st({1});  // 1.8 - 0.09 = 1.71, - 0.1 = 1.61
  CHECK(w[0] == doctest::Approx(1.61));
  CHECK(st.m.optimizer_iterations() == 2);
  // The decay uses the current rate: halving the model's learning-rate scale (reduce_lr_on_plateau) halves it too.
  detail::training_access::optimizer_state(st.m).learning_rate_scale = 0.5;
  st({1});  // 1.61 - 1.61 * 0.5 * 0.05 = 1.56975, - 0.05 = 1.51975
  CHECK(w[0] == doctest::Approx(1.51975));
}

TEST_CASE("moving average of the weights: first update copies, then m * ema + (1 - m) * w, overwrite and finalize") {
  auto run = [&](int overwrite, int steps) {
    stepper st(with_options{sgd{0.1}, {.use_ema = true, .ema_momentum = 0.5, .ema_overwrite_frequency = overwrite}});
    auto w = st.m.parameters();
    std::fill(w.begin(), w.end(), 0.0f);
    w[0] = 1;
    for (int s = 0; s < steps; ++s) st({1});
    const float before = w[0];
    st.opt.finalize(st.m);
    return std::pair{before, w[0]};
  };
  // w: 0.9, 0.8, 0.7; ema: 0.9, 0.85, 0.775
  auto [w3, fin3] = run(0, 3);
  CHECK(w3 == doctest::Approx(0.7));
  CHECK(fin3 == doctest::Approx(0.775));
  // every 2 updates w = ema: w 0.9 (ema 0.9), 0.8 -> ema 0.85 -> w 0.85, 0.75 (ema 0.8), 0.65 -> ema 0.725 -> w 0.725
  auto [w4, fin4] = run(2, 4);
  CHECK(w4 == doctest::Approx(0.725));
  CHECK(fin4 == doctest::Approx(0.725));
  auto [w3b, fin3b] = run(2, 3);
  CHECK(w3b == doctest::Approx(0.75));
  CHECK(fin3b == doctest::Approx(0.8));
}

namespace {
using acc_net = sequential<input<4>, dense<8, ctnn::tanh>, dense<3>>;
data::in_memory<shape<4>, sparse_labels> acc_data() {
  std::vector<float> x(64 * 4);
  std::vector<std::int32_t> y(64);
  rng g(3);
  for (auto& v : x) v = float(g.uniform(-1, 1));
  for (std::size_t i = 0; i < 64; ++i) y[i] = std::int32_t(i % 3);
  return {x, y};
}
std::int64_t last_iterations = 0, last_steps = 0;
template <class O>
std::vector<float> train(O& opt, std::size_t batch, std::size_t n_epochs) {
  auto m = make_model<acc_net>(9);
  fit(m, sparse_categorical_crossentropy{.from_logits = true}, opt, acc_data().batch(batch), epochs{n_epochs});
  last_iterations = m.optimizer_state().iterations;
  last_steps = m.optimizer_state().steps;
  return {m.parameters().begin(), m.parameters().end()};
}
}  // namespace

TEST_CASE("gradient accumulation counting real updates: 4 micro-batches of 16 give the update of one batch of 64") {
  SUBCASE("sgd with momentum and a schedule that counts real updates") {
    with_options accumulated{sgd{exponential_decay{0.5, 1, 0.5, true}, 0.9},
                             {.gradient_accumulation_steps = 4, .count_micro_steps = false}};
    sgd whole{exponential_decay{0.5, 1, 0.5, true}, 0.9};
    const auto a = train(accumulated, 16, 2);
    CHECK(last_iterations == 2);
    CHECK(last_steps == 8);
    const auto b = train(whole, 64, 2);
    CHECK(last_iterations == 2);
    REQUIRE(a.size() == b.size());
    std::size_t differ = 0;
    for (std::size_t i = 0; i < a.size(); ++i) differ += !(a[i] == doctest::Approx(b[i]).epsilon(1e-5).scale(1e-6));
    CHECK(differ == 0);
    // ... and differ from 8 plain updates on batches of 16.
    sgd plain{exponential_decay{0.5, 1, 0.5, true}, 0.9};
    const auto c = train(plain, 16, 2);
    double dist = 0;
    for (std::size_t i = 0; i < a.size(); ++i) dist += std::abs(double(a[i]) - double(c[i]));
    CHECK(dist > 1e-2);
  }
  SUBCASE("adam (bias correction sees one update)") {
    with_options accumulated{adam{0.01}, {.gradient_accumulation_steps = 4, .count_micro_steps = false}};
    adam whole{0.01};
    const auto a = train(accumulated, 16, 1);
    CHECK(last_iterations == 1);
    const auto b = train(whole, 64, 1);
    double worst = 0;
    for (std::size_t i = 0; i < a.size(); ++i) worst = std::max(worst, std::abs(double(a[i]) - double(b[i])));
    CHECK(worst < 1e-5);
  }
}

TEST_CASE("with_options through fit: EMA weights at the end, learning rate logged per real update") {
  with_options opt{adam{0.01}, {.clipnorm = 1.0, .weight_decay = 0.01, .use_ema = true, .ema_momentum = 0.9}};
  auto m = make_model<acc_net>(9);
  auto h = fit(m, sparse_categorical_crossentropy{.from_logits = true}, opt, acc_data().batch(16), epochs{3});
  CHECK(m.optimizer_iterations() == 12);
  const std::size_t n = m.parameters().size();
  const float* avg = m.optimizer_slots().data() + (opt.inner_slots() + 1) * n;
  for (std::size_t i = 0; i < n; ++i) CHECK(m.parameters()[i] == avg[i]);
  CHECK(std::isfinite(h["loss"].back()));
}

TEST_CASE("gradient accumulation as Keras 3: the schedule sees every step, the EMA the update count") {
  // 4 accumulation steps; the schedule halves the rate at every step count.
  stepper st(with_options{sgd{exponential_decay{1.0, 1, 0.5, true}},
                          {.gradient_accumulation_steps = 4, .use_ema = true, .ema_momentum = 0.5}});
  auto w = st.m.parameters();
  std::fill(w.begin(), w.end(), 0.0f);
  for (int i = 0; i < 3; ++i) st({1});
  CHECK(w[0] == 0.0f);  // no update yet
  CHECK(st.m.optimizer_iterations() == 0);
  CHECK(st.m.optimizer_state().steps == 3);
  const float* avg = st.m.optimizer_slots().data() + (st.opt.inner_slots() + 1) * w.size();
  CHECK(avg[0] == 0.0f);  // the EMA moved (of zeros) on every step
  st({5});  // mean gradient (1 + 1 + 1 + 5) / 4 = 2 at step count 3: rate 1 * 0.5^3 = 0.125 -> w = -0.25
  CHECK(w[0] == doctest::Approx(-0.25));
  CHECK(st.m.optimizer_iterations() == 1);
  CHECK(avg[0] == doctest::Approx(-0.25));  // iterations 3 // 4 = 0 during that step: momentum 0, a copy
  // With count_micro_steps = false the same four steps are one update at count 0: rate 1.
  stepper updates_only(with_options{sgd{exponential_decay{1.0, 1, 0.5, true}},
                                    {.gradient_accumulation_steps = 4, .count_micro_steps = false}});
  auto w2 = updates_only.m.parameters();
  std::fill(w2.begin(), w2.end(), 0.0f);
  for (float g : {1.0f, 1.0f, 1.0f, 5.0f}) updates_only({g});
  CHECK(w2[0] == doctest::Approx(-2.0));
  CHECK(updates_only.m.optimizer_iterations() == 1);
}

// The tests below follow Keras 3's keras/src/optimizers/base_optimizer.py with
// gradient_accumulation_steps = N: `_iterations` (k below) advances on every
// apply(); `iterations` is k // N; step k updates when (k + 1) % N == 0, with
// the mean of the N gradients; the learning-rate schedule (so weight decay)
// is called with k; Adam's local_step is iterations + 1 (adam.py); on every
// step the EMA uses momentum 0 when iterations == 0, then overwrites the
// weights when (iterations + 1) % ema_overwrite_frequency == 0; fit ends with
// finalize_variable_values (w = ema). ctnn: optimizer_iterations() is
// iterations, optimizer_state().steps is k.

TEST_CASE("gradient accumulation and Adam: the bias correction reads the update count (Keras: first update -0.1)") {
  stepper st(with_options{adam{0.1}, {.gradient_accumulation_steps = 2}});
  auto w = st.m.parameters();
  std::fill(w.begin(), w.end(), 0.0f);
  const double eps = 1e-7;
  st({1});  // k = 0: accumulated
  CHECK(w[0] == 0.0f);
  st({1});  // k = 1: update with g = (1 + 1) / 2 = 1, iterations = 1 // 2 = 0, local_step = 1
  // m = 0.1 g = 0.1, v = 0.001 g^2 = 0.001, alpha = 0.1 * sqrt(1 - 0.999) / (1 - 0.9)
  const double alpha1 = 0.1 * std::sqrt(1 - 0.999) / (1 - 0.9);
  const double w1 = -alpha1 * 0.1 / (std::sqrt(0.001) + eps);  // -0.09999968...
  CHECK(w[0] == doctest::Approx(w1).epsilon(1e-6));
  CHECK(w[0] == doctest::Approx(-0.1).epsilon(1e-5));  // (the micro-step count, local_step 2, gives -0.0744)
  CHECK(st.m.optimizer_iterations() == 1);
  st({1});  // k = 2: accumulated
  st({1});  // k = 3: update, iterations = 3 // 2 = 1, local_step = 2
  // m = 0.1 + 0.1 (1 - 0.1) = 0.19, v = 0.001 + 0.001 (1 - 0.001) = 0.001999
  const double alpha2 = 0.1 * std::sqrt(1 - 0.999 * 0.999) / (1 - 0.9 * 0.9);
  const double w2 = w1 - alpha2 * 0.19 / (std::sqrt(0.001999) + eps);
  CHECK(w[0] == doctest::Approx(w2).epsilon(1e-6));
  CHECK(st.m.optimizer_iterations() == 2);
  CHECK(st.m.optimizer_state().steps == 4);
}

TEST_CASE("gradient accumulation and the EMA: momentum and overwrite read the update count (Keras: -1.5)") {
  // sgd with rate 1, N = 2, ema_momentum 0.5, gradient 1 on every step, w = 0:
  //   k = 0: accumulate;                   iterations 0: ema = w = 0
  //   k = 1: w = 0 - 1 * (1 + 1) / 2 = -1;  iterations 0: ema = w = -1
  //   k = 2: accumulate;                   iterations 1: ema = 0.5 * -1 + 0.5 * -1 = -1
  //   k = 3: w = -1 - 1 = -2;              iterations 1: ema = 0.5 * -1 + 0.5 * -2 = -1.5
  // (the micro-step count would give ema 0, -0.5, -0.75, -1.375)
  auto run = [](int overwrite) {
    stepper st(with_options{sgd{1.0}, {.gradient_accumulation_steps = 2, .use_ema = true, .ema_momentum = 0.5,
                                       .ema_overwrite_frequency = overwrite}});
    auto w = st.m.parameters();
    std::fill(w.begin(), w.end(), 0.0f);
    const float* avg = st.m.optimizer_slots().data() + (st.opt.inner_slots() + 1) * w.size();
    std::vector<float> ws, avgs;
    for (int k = 0; k < 4; ++k) {
      st({1});
      ws.push_back(w[0]);
      avgs.push_back(avg[0]);
    }
    st.opt.finalize(st.m);
    ws.push_back(w[0]);
    return std::pair{ws, avgs};
  };
  SUBCASE("no overwrite: the final weight is the average, -1.5") {
    auto [ws, avgs] = run(0);
    CHECK(avgs == std::vector<float>{0, -1, -1, -1.5f});
    CHECK(ws == std::vector<float>{0, -1, -1, -2, -1.5f});
  }
  SUBCASE("overwrite every 2: w = ema when (iterations + 1) % 2 == 0, i.e. at k = 2 and 3") {
    // k = 2: w = ema = -1; k = 3: w = -1 - 1 = -2, ema = 0.5 * -1 + 0.5 * -2 = -1.5, w = -1.5
    // (the micro-step count would give 0, -0.5, -0.5, -1)
    auto [ws, avgs] = run(2);
    CHECK(ws == std::vector<float>{0, -1, -1, -1.5f, -1.5f});
    CHECK(avgs == std::vector<float>{0, -1, -1, -1.5f});
  }
}

TEST_CASE("gradient accumulation: the schedule and weight decay read the step count, optimizer_iterations() the updates") {
  SUBCASE("sgd with a schedule and weight decay") {
    // rate 0.5^k (exponential_decay{1, 1, 0.5, staircase}), weight_decay 0.5, N = 2, gradient 1, w = 2:
    //   k = 1: rate 0.5^1: w = 2 - 2 * 0.5 * 0.5 = 1.5, then 1.5 - 0.5 * 1 = 1
    //   k = 3: rate 0.5^3: w = 1 - 1 * 0.5 * 0.125 = 0.9375, then 0.9375 - 0.125 = 0.8125
    stepper st(with_options{sgd{exponential_decay{1.0, 1, 0.5, true}}, {.weight_decay = 0.5, .gradient_accumulation_steps = 2}});
    auto w = st.m.parameters();
    std::fill(w.begin(), w.end(), 0.0f);
    w[0] = 2;
    st({1});
    st({1});
    CHECK(w[0] == doctest::Approx(1.0));
    st({1});
    CHECK(st.m.optimizer_iterations() == 1);  // 3 // 2
    CHECK(st.m.optimizer_state().steps == 3);
    st({1});
    CHECK(w[0] == doctest::Approx(0.8125));
    CHECK(st.m.optimizer_iterations() == 2);
  }
  SUBCASE("adam with a schedule: the rate at k = 1, the bias correction at iterations 0") {
    // rate 0.5, local_step 1: w = -0.5 * sqrt(0.001) / (sqrt(0.001) + 1e-7)
    stepper st(with_options{adam{exponential_decay{1.0, 1, 0.5, true}}, {.gradient_accumulation_steps = 2}});
    auto w = st.m.parameters();
    std::fill(w.begin(), w.end(), 0.0f);
    st({1});
    st({1});
    CHECK(w[0] == doctest::Approx(-0.5 * std::sqrt(0.001) / (std::sqrt(0.001) + 1e-7)).epsilon(1e-6));
  }
  SUBCASE("through fit: the logged learning rate is the schedule's at the step count") {
    with_options opt{sgd{exponential_decay{1.0, 1, 0.5, true}}, {.gradient_accumulation_steps = 2}};
    auto m = make_model<acc_net>(9);
    auto h = fit(m, sparse_categorical_crossentropy{.from_logits = true}, opt, acc_data().batch(16), epochs{1});
    CHECK(m.optimizer_state().steps == 4);
    CHECK(m.optimizer_iterations() == 2);
    CHECK(h["learning_rate"].back() == doctest::Approx(0.0625));  // 0.5^4, the rate the next update would use
  }
}

TEST_CASE("gradient accumulation resumed mid-window: a second fit continues the accumulator and both counts") {
  // 4 batches per epoch, N = 3: the first epoch ends with one micro-step in the accumulator.
  auto make_opt = [] { return with_options{adam{0.01}, {.gradient_accumulation_steps = 3}}; };
  auto xent = sparse_categorical_crossentropy{.from_logits = true};
  auto split = make_model<acc_net>(9), whole = make_model<acc_net>(9);
  auto o1 = make_opt(), o2 = make_opt(), o3 = make_opt();
  fit(split, xent, o1, acc_data().batch(16), epochs{1});
  CHECK(split.optimizer_iterations() == 1);  // k = 2 updated; k = 3 waits
  CHECK(split.optimizer_state().steps == 4);
  fit(split, xent, o2, acc_data().batch(16), epochs{1});
  CHECK(split.optimizer_iterations() == 2);  // k = 5 updated (with k = 3's gradient); k = 6, 7 wait
  CHECK(split.optimizer_state().steps == 8);
  fit(whole, xent, o3, acc_data().batch(16), epochs{2});
  CHECK(whole.optimizer_iterations() == 2);
  const auto a = split.parameters(), b = whole.parameters();
  REQUIRE(a.size() == b.size());
  std::size_t differ = 0;
  for (std::size_t i = 0; i < a.size(); ++i) differ += !(a[i] == doctest::Approx(b[i]).epsilon(1e-6).scale(1e-7));
  CHECK(differ == 0);
}
