// step.hpp (and the optimizer state model.hpp keeps): the phases of one
// training step and their customisation points, the optimizer state that
// belongs to the model, per-variable clipping for every layer, and the
// floating-point mode (flush-to-zero) of the step.
#include <doctest/doctest.h>

#include <ctnn/ctnn.hpp>
#include <ctnn/optimizers/lion.hpp>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <limits>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

using namespace ctnn;

namespace {
using net = sequential<input<4>, dense<8, ctnn::tanh>, dense<3>>;
data::in_memory<shape<4>, sparse_labels> toy_data() {
  std::vector<float> x(48 * 4);
  std::vector<std::int32_t> y(48);
  rng g(5);
  for (auto& v : x) v = float(g.uniform(-1, 1));
  for (std::size_t i = 0; i < 48; ++i) y[i] = std::int32_t(i % 3);
  return {x, y};
}
template <class M>
std::vector<float> params(const M& m) {
  return {m.parameters().begin(), m.parameters().end()};
}
const sparse_categorical_crossentropy xent{.from_logits = true};
}  // namespace

TEST_CASE("optimizer state belongs to the model: fit(m2, opt) after fit(m1, opt) starts m2 afresh") {
  SUBCASE("adagrad: m2's accumulators start at initial_accumulator_value") {
    adagrad shared{0.1};
    auto m1 = make_model<net>(1), m2 = make_model<net>(2);
    fit(m1, xent, shared, toy_data().batch(8), epochs{2});
    fit(m2, xent, shared, toy_data().batch(8), epochs{2});
    adagrad fresh{0.1};
    auto m3 = make_model<net>(2);
    fit(m3, xent, fresh, toy_data().batch(8), epochs{2});
    CHECK(params(m2) == params(m3));
    CHECK(m2.optimizer_iterations() == 12);
    // a model that meets the optimizer gets its slots made: every accumulator at 0.1
    auto m4 = make_model<net>(3);
    train_step<model<net>, sparse_categorical_crossentropy, adagrad<>> step{m4, xent, shared};
    const auto slots = m4.optimizer_slots();
    CHECK(std::all_of(slots.begin(), slots.begin() + std::ptrdiff_t(m4.parameters().size()),
                      [](float v) { return v == 0.1f; }));
    CHECK(m4.optimizer_iterations() == 0);
  }
  SUBCASE("adam: m2's bias correction starts at step 1") {
    adam shared{0.01};
    auto m1 = make_model<net>(1), m2 = make_model<net>(2);
    fit(m1, xent, shared, toy_data().batch(8), epochs{1});
    fit(m2, xent, shared, toy_data().batch(8), epochs{1});
    adam fresh{0.01};
    auto m3 = make_model<net>(2);
    fit(m3, xent, fresh, toy_data().batch(8), epochs{1});
    CHECK(params(m2) == params(m3));
  }
  SUBCASE("the same model continues (Keras: fit twice), another optimizer kind or reset_optimizer restarts") {
    adam opt{0.01};
    auto a = make_model<net>(4), b = make_model<net>(4);
    fit(a, xent, opt, toy_data().batch(8), epochs{2});
    fit(b, xent, opt, toy_data().batch(8), epochs{1});
    fit(b, xent, opt, toy_data().batch(8), epochs{1});  // epoch 0 again: toy_data is not shuffled, same batches
    CHECK(params(a) == params(b));
    CHECK(b.optimizer_iterations() == 12);
    sgd other{0.1};
    fit(b, xent, other, toy_data().batch(8), epochs{1});
    CHECK(b.optimizer_iterations() == 6);
    b.reset_optimizer();
    CHECK(b.optimizer_iterations() == 0);
    CHECK(b.optimizer_state().kind == nullptr);
  }
}

namespace {
// Records the phases it is called in and can scale the loss, undoing it on the gradients.
struct recording_hook {
  std::vector<std::string>* log;
  double scale = 1.0;
  bool skip = false;
  template <class S>
  void scale_loss(S& s) {
    log->push_back("scale_loss");
    s.loss_scale = scale;
  }
  template <class S>
  void transform_gradients(S& s) {
    log->push_back("transform_gradients");
    for (auto& g : s.gradients) g /= float(s.loss_scale);
    if (skip) {
      s.apply_update = false;
      s.count_iteration = false;
    }
  }
  template <class S>
  void after_update(S&) {
    log->push_back("after_update");
  }
};
}  // namespace

TEST_CASE("train_step: hooks run in their phases, a loss scale undone in transform_gradients changes nothing") {
  std::vector<std::string> log;
  recording_hook h{&log, 1024.0};
  static_assert(StepHook<recording_hook, model<net>>);
  auto a = make_model<net>(7), b = make_model<net>(7);
  sgd o1{0.1}, o2{0.1};
  fit(a, xent, o1, toy_data().batch(16), epochs{1}, h);
  fit(b, xent, o2, toy_data().batch(16), epochs{1});
  const std::vector<std::string> want{"scale_loss", "transform_gradients", "after_update"};
  REQUIRE(log.size() == 9);
  CHECK(std::vector<std::string>(log.begin(), log.begin() + 3) == want);
  // 1024 is a power of two: scaling and unscaling are exact
  CHECK(params(a) == params(b));

  SUBCASE("with a regularizer the penalty's gradient is added unscaled, after the hooks") {
    using reg = sequential<input<4>, dense<8, ctnn::tanh, l2<0.01>>, dense<3, identity, l1<0.001>>>;
    std::vector<std::string> l1;
    recording_hook scaler{&l1, 1024.0};
    auto c = make_model<reg>(7), d = make_model<reg>(7);
    sgd o3{0.1}, o4{0.1};
    fit(c, xent, o3, toy_data().batch(16), epochs{1}, scaler);
    fit(d, xent, o4, toy_data().batch(16), epochs{1});
    CHECK(params(c) == params(d));
  }
  SUBCASE("a hook can skip the update and the count") {
    std::vector<std::string> l2;
    recording_hook skipper{&l2, 1.0, true};
    auto c = make_model<net>(7);
    const auto before = params(c);
    sgd o3{0.1};
    fit(c, xent, o3, toy_data().batch(16), epochs{1}, skipper);
    CHECK(params(c) == before);
    CHECK(c.optimizer_iterations() == 0);
    CHECK(c.optimizer_state().steps == 3);
  }
}

TEST_CASE("clipnorm is per variable for every layer: conv2d's kernel and bias, batch_norm's gamma and beta") {
  using cnn = sequential<input<4, 4, 1>, conv2d<2, 3, 3>, batch_norm, flatten, dense<2>>;
  using M = model<cnn>;
  auto m = make_model<cnn>(1);
  with_options opt{sgd{1.0}, {.clipnorm = 1.0}};
  train_step<M, mean_squared_error, decltype(opt)> step{m, mean_squared_error{}, opt};
  auto w = m.parameters();
  std::fill(w.begin(), w.end(), 0.0f);
  auto g = m.gradients();
  std::fill(g.begin(), g.end(), 0.0f);
  // every variable's gradient is all 3s: each is clipped to norm 1 on its own
  std::vector<std::pair<std::size_t, std::size_t>> vars;  // offset (elements), extent
  m.for_each_variable([&](const variable_ref& v) {
    if (v.kind != role::parameter) return;
    vars.emplace_back(v.offset / sizeof(float), v.extent);
    for (std::size_t i = 0; i < v.extent; ++i) g[v.offset / sizeof(float) + i] = 3.0f;
  });
  REQUIRE(vars.size() == 6);  // conv kernel, conv bias, gamma, beta, dense kernel, dense bias
  step.apply_gradients();
  for (auto [off, n] : vars) {
    double sq = 0;
    for (std::size_t i = 0; i < n; ++i) sq += double(w[off + i]) * double(w[off + i]);
    CHECK(std::sqrt(sq) == doctest::Approx(1.0).epsilon(1e-6));  // w = -clipped gradient
    CHECK(w[off] == doctest::Approx(-1.0 / std::sqrt(double(n))).epsilon(1e-6));
  }
}

namespace {
// Checks the floating-point mode inside the step: on this thread and in the pool's tasks.
struct mode_probe {
  int steps = 0, flushing = 0, pool_tasks = 0, pool_flushing = 0;
  template <class S>
  void transform_gradients(S&) {
    ++steps;
    flushing += kernels::cpu::flushing_denormals();
    std::atomic<int> t{0}, f{0};
    kernels::cpu::thread_pool::global().run(8, [&](std::size_t) {
      ++t;
      f += kernels::cpu::flushing_denormals();
    });
    pool_tasks += t;
    pool_flushing += f;
  }
};
}  // namespace

TEST_CASE("the step flushes denormals to zero on this thread and the pool's workers, and restores the mode") {
#if CTNN_HAS_MXCSR
  const std::size_t threads = kernels::cpu::threads();
  kernels::cpu::set_threads(2);
  REQUIRE_FALSE(kernels::cpu::flushing_denormals());
  const unsigned before = kernels::cpu::fp_mode();
  auto m = make_model<net>(1);
  adam opt;
  mode_probe p;
  fit(m, xent, opt, toy_data().batch(16), epochs{2}, p);
  CHECK(p.steps == 6);
  CHECK(p.flushing == 6);
  CHECK(p.pool_tasks == 48);
  CHECK(p.pool_flushing == 48);
  const unsigned control = ~kernels::cpu::fp_status_bits;
  CHECK((kernels::cpu::fp_mode() & control) == (before & control));  // restored after fit
  // ... and a denormal really is flushed inside (1e-39 * 0.5 is 0, not a denormal)
  {
    const kernels::cpu::denormal_guard g;
    volatile float tiny = 1e-39f;
    CHECK(tiny * 0.5f == 0.0f);
  }
  volatile float tiny = 1e-39f;
  CHECK(tiny * 0.5f != 0.0f);

  SUBCASE("ieee_denormals{} keeps IEEE denormals in the step") {
    mode_probe q;
    auto m2 = make_model<net>(1);
    adam o2;
    fit(m2, xent, o2, toy_data().batch(16), epochs{1}, q, ieee_denormals{});
    CHECK(q.flushing == 0);
    CHECK(q.pool_flushing == 0);
  }
  SUBCASE("a caller that already flushes keeps flushing after fit") {
    kernels::cpu::set_fp_mode(before | kernels::cpu::ftz_daz_bits);
    auto m3 = make_model<net>(1);
    adam o3;
    fit(m3, xent, o3, toy_data().batch(16), epochs{1});
    CHECK(kernels::cpu::flushing_denormals());
    kernels::cpu::set_fp_mode(before);
  }
  kernels::cpu::set_threads(threads);
#else
  MESSAGE("CTNN_SKIP: no MXCSR on this target (the guard changes nothing)");
#endif
}

namespace {
// K steps of train_step on model m with optimizer o, the update layer by layer (per_layer) or after
// the whole backward; the parameters and slots afterwards, and whether every step updated per layer.
template <class Net, class P = float, class O>
std::pair<std::vector<P>, bool> steps_of(O o, bool per_layer, bool fused_backward, std::size_t batch) {
  auto m = make_model<Net, P>(3);
  m.fused_mlp().backward = fused_backward;
  m.fused_mlp().training_forward = fused_backward;
  if constexpr (requires { ops<cpu<>>::fused_mlp_backward_ready<typename model<Net, P>::layers>(); })
    CHECK(m.fused_mlp_backward_active() == fused_backward);  // the CPU's fused backward tells the step per layer
  train_step step{m, xent, o};
  step.set_per_layer_update(per_layer);
  std::vector<P> x(batch * model<Net, P>::input_size);
  std::vector<std::int32_t> y(batch);
  rng g(9);
  bool all = true;
  for (std::size_t k = 0; k < 3; ++k) {
    for (auto& v : x) v = P(g.uniform(-1, 1));
    for (auto& v : y) v = std::int32_t(g.below(3));
    const step_result r = step.run(x.data(), y.data(), batch, 0, k);
    CHECK(r.updated);
    all = all && r.per_layer;
  }
  std::vector<P> out(m.parameters().begin(), m.parameters().end());
  out.insert(out.end(), m.optimizer_slots().begin(), m.optimizer_slots().end());
  return {out, all};
}
template <class Net, class P = float, class O>
void per_layer_matches(const O& o, bool fused_backward, std::size_t batch) {
  const auto [layered, used] = steps_of<Net, P>(o, true, fused_backward, batch);
  const auto [whole, unused] = steps_of<Net, P>(o, false, fused_backward, batch);
  CHECK(used);
  CHECK(!unused);
  CHECK(layered == whole);  // the same arithmetic per parameter: the same bits
}
}  // namespace

namespace {
// sgd that records the part of the parameter region each of its updates covers ({offset, count}).
struct recording_sgd : sgd<> {
  using sgd<>::sgd;
  std::vector<std::pair<std::size_t, std::size_t>>* parts = nullptr;
  const float* base = nullptr;
  std::mutex* mu = nullptr;
  template <class B, class T>
  bool update(const update_args<T>& a) const {
    {
      std::lock_guard<std::mutex> l(*mu);
      parts->emplace_back(std::size_t(a.w - base), a.n);
    }
    return sgd<>::update<B>(a);
  }
};
}  // namespace

TEST_CASE("the fused backward hands a kernel without a regularizer to the update in blocks of whole rows") {
  // dense<32> (64 inputs, no regularizer): its kernel in several parts of whole rows as the fused
  // backward finishes them (on the last tile); dense<64, l2>: whole, after its regularizer's gradient
  using wide = sequential<input<8, 8>, flatten, dense<64, relu, l2<0.01>>, dense<32, relu>, dense<3>>;
  const std::size_t threads = kernels::cpu::threads();
  for (std::size_t t : {1, 2})
    for (std::size_t batch : {5, 70}) {
      CAPTURE(t);
      CAPTURE(batch);
      kernels::cpu::set_threads(t);
      // parts: the updates' parts, sorted; fused: the fused backward with the per-layer update
      auto run = [&](bool fused, bool per_layer, std::vector<std::pair<std::size_t, std::size_t>>& parts) {
        auto m = make_model<wide>(3);
        m.fused_mlp().backward = fused;
        REQUIRE(m.fused_mlp_backward_active() == fused);
        std::mutex mu;
        recording_sgd o{0.1};
        m.reserve(batch, o.slots_per_parameter());  // the region where the step finds it
        o.parts = &parts, o.base = m.parameters().data(), o.mu = &mu;
        train_step step{m, xent, o};
        step.set_per_layer_update(per_layer);
        std::vector<float> x(batch * 64);
        std::vector<std::int32_t> y(batch);
        rng g(4);
        for (auto& v : x) v = float(g.uniform(-1, 1));
        for (auto& v : y) v = std::int32_t(g.below(3));
        CHECK(step.run(x.data(), y.data(), batch, 0, 0).per_layer == per_layer);
        std::sort(parts.begin(), parts.end());
        return params(m);
      };
      std::vector<std::pair<std::size_t, std::size_t>> rows, layers, whole;
      const auto p_rows = run(true, true, rows), p_layers = run(false, true, layers), p_whole = run(true, false, whole);
      CHECK(p_rows == p_whole);  // the same arithmetic per parameter: the same bits
      CHECK(p_layers == p_whole);
      REQUIRE(whole.size() == 1);
      REQUIRE(layers.size() == 3);  // one part a layer
      // the parts cover the region once, in order
      std::size_t end = 0;
      for (const auto& [lo, n] : rows) {
        CHECK(lo == end);
        end = lo + n;
      }
      CHECK(end == whole[0].second);
      // the first layer's part whole; the others' kernels (the second's 64 rows of 32: several
      // blocks of rows) in parts before their bias's
      CHECK(rows[0] == layers[0]);
      const std::size_t k2 = layers[1].first;
      std::size_t kernel_parts = 0;
      for (const auto& [lo, n] : rows)
        if (lo >= k2 && lo < k2 + 64 * 32) {
          ++kernel_parts;
          CHECK((lo - k2) % 32 == 0);
          CHECK(n % 32 == 0);
        }
      CHECK(kernel_parts >= 2);
      CHECK(rows.size() >= layers.size() + 3);
    }
  kernels::cpu::set_threads(threads);
}

TEST_CASE("the update layer by layer inside backward equals the update after it, for every optimizer") {
  // flatten + dense (the CPU's fused MLP passes when asked, each layer updated after its last
  // tile; a regularizer on two layers) and a CNN (conv2d, batch_norm: the layers one by one)
  using mlp = sequential<input<4, 4>, flatten, dense<16, relu, l2<0.01>>, dense<16, ctnn::tanh>, dense<3, identity, l1<0.001>>>;
  using cnn = sequential<input<4, 4, 1>, conv2d<2, 3, 3>, batch_norm, flatten, dense<3>>;
  auto each = [](const auto& o) {
    for (bool fused : {false, true})
      for (std::size_t batch : {3, 8, 70}) per_layer_matches<mlp>(o, fused, batch);
    per_layer_matches<cnn>(o, false, 5);
  };
  SUBCASE("sgd") { each(sgd{0.1}); }
  SUBCASE("sgd, nesterov momentum") { each(sgd{0.1, 0.9, true}); }
  SUBCASE("adam") { each(adam{0.01}); }
  SUBCASE("adam, amsgrad, a schedule") { each(adam{exponential_decay{0.01, 2, 0.5}, 0.9, 0.999, 1e-7, true}); }
  SUBCASE("rmsprop, centered, momentum") { each(rmsprop{0.01, 0.9, 0.5, 1e-7, true}); }
  SUBCASE("adagrad") { each(adagrad{0.1}); }
  SUBCASE("lion") { each(lion{0.01}); }
  SUBCASE("float64 variables") { per_layer_matches<mlp, double>(adam{0.01}, false, 8); }
  SUBCASE("with_options: clipnorm (per variable), clipvalue, weight decay, EMA") {
    each(with_options{adam{0.01}, optimizer_options{.clipnorm = 0.05, .weight_decay = 0.01, .use_ema = true}});
    each(with_options{sgd{0.1, 0.9}, optimizer_options{.clipvalue = 0.01, .weight_decay = 0.01}});
  }
  SUBCASE("not where the step needs every gradient first: accumulation, global_clipnorm, a loss scale, mixed precision") {
    auto m = make_model<net>(1);
    with_options acc{adam{0.01}, optimizer_options{.gradient_accumulation_steps = 2}};
    train_step a{m, xent, acc};
    CHECK(!a.per_layer_update_allowed());
    with_options global{adam{0.01}, optimizer_options{.global_clipnorm = 1.0}};
    train_step a2{m, xent, global};
    CHECK(!a2.per_layer_update_allowed());
    adam plain{0.01};
    train_step b{m, xent, plain};
    CHECK(b.per_layer_update_allowed());
    b.set_per_layer_update(false);
    CHECK(!b.per_layer_update_allowed());
    std::vector<std::string> log;
    recording_hook h{&log, 1024.0};
    train_step<model<net>, sparse_categorical_crossentropy, adam<>, recording_hook> c{m, xent, plain, std::tie(h)};
    CHECK(!c.per_layer_update_allowed());
    static_assert(!model<net, precision::mixed_float16>::updates_per_layer);
  }
  SUBCASE("a non-finite loss: no update, as after the whole backward") {
    auto m = make_model<net>(1);
    adam o{0.01};
    train_step step{m, xent, o};
    const auto before = params(m);
    std::vector<float> x(4 * 4, std::numeric_limits<float>::quiet_NaN());
    std::vector<std::int32_t> y(4, 1);
    const step_result r = step.run(x.data(), y.data(), 4, 0, 0);
    CHECK(!r.updated);
    CHECK(!r.per_layer);
    CHECK(params(m) == before);
  }
}

namespace {
// A user's adam that replaces update only (Keras 3's way to change Adam is to override
// update_step): the step must run that update, layer by layer too, not adam::prepare's coefficients.
struct halved_adam : adam<> {
  using adam<>::adam;
  template <class B, class T>
  bool update(const update_args<T>& a) const {
    update_args<T> h = a;
    h.learning_rate = a.learning_rate / 2;  // exact: adam{lr / 2}'s bits
    return adam<>::update<B>(h);
  }
};
// one that replaces both: prepare and run are used (as adam's own)
struct halved_prepared_adam : adam<> {
  using adam<>::adam;
  template <class T>
  prepared<T> prepare(std::int64_t iteration, double learning_rate) const {
    return adam<>::prepare<T>(iteration, learning_rate / 2);
  }
  template <class B, class T>
  bool update(const update_args<T>& a) const {
    return prepare<T>(a.iteration, a.learning_rate).template run<B>(a);
  }
};
static_assert(detail::prepared_update<adam<>, cpu<>, float>);
static_assert(detail::prepared_update<with_options<adam<>>, cpu<>, float>);  // adam's update and prepare
static_assert(detail::prepared_update<halved_prepared_adam, cpu<>, float>);
static_assert(!detail::prepared_update<halved_adam, cpu<>, float>);
static_assert(!detail::prepared_update<sgd<>, cpu<>, float>);
}  // namespace

TEST_CASE("a type derived from adam that replaces update only: the step runs its update, layer by layer too") {
  using mlp = sequential<input<4, 4>, flatten, dense<16, relu>, dense<3>>;
  for (bool fused : {false, true})
    for (std::size_t batch : {3, 70}) {
      CAPTURE(fused);
      CAPTURE(batch);
      const auto [mine, layered] = steps_of<mlp>(halved_adam{0.01}, true, fused, batch);
      const auto [half, unused] = steps_of<mlp>(adam{0.005}, true, fused, batch);
      const auto [full, unused2] = steps_of<mlp>(adam{0.01}, true, fused, batch);
      CHECK(layered);
      CHECK(mine == half);  // halved_adam's update ran, not adam::prepare's coefficients
      CHECK(mine != full);
      per_layer_matches<mlp>(halved_adam{0.01}, fused, batch);
      const auto [both, layered2] = steps_of<mlp>(halved_prepared_adam{0.01}, true, fused, batch);
      CHECK(layered2);
      CHECK(both == half);
    }
}
