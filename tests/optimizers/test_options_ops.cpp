// The optimizer options, the loss scale, the step's loss scaling and the
// regularizers run through ops<B> (core/backend_ops.hpp), not host loops:
// on a host backend whose ops are the CPU's with each of those ops counted,
// every phase calls its op, and the results equal those of cpu<>.
#include <doctest/doctest.h>

#include <ctnn/ctnn.hpp>
#include <ctnn/optimizers/options.hpp>
#include <ctnn/train/loss_scale.hpp>

#include <map>
#include <string>
#include <vector>

namespace {
struct traced_cpu {
  using memory = ctnn::host_memory;
  static std::string name() { return "traced_cpu"; }
};
std::map<std::string, int>& calls() {
  static std::map<std::string, int> c;
  return c;
}
}  // namespace

template <>
struct ctnn::ops<traced_cpu> : ctnn::ops<ctnn::cpu<>> {
  using base = ctnn::ops<ctnn::cpu<>>;
  using base::add_penalty;  // the overloads with a factor pointer stay the base's
  using base::add_penalty_gradient;
  template <class T, class S>
  static void scale(T* x, std::size_t n, S k) {
    ++calls()["scale"];
    base::scale(x, n, k);
  }
  template <class T>
  static void clip_by_norm(T* g, std::size_t n, double limit) {
    ++calls()["clip_by_norm"];
    base::clip_by_norm(g, n, limit);
  }
  template <class T, class S>
  static void clip_value(T* g, std::size_t n, S c) {
    ++calls()["clip_value"];
    base::clip_value(g, n, c);
  }
  template <class T>
  static void accumulate(T* acc, const T* g, std::size_t n) {
    ++calls()["accumulate"];
    base::accumulate(acc, g, n);
  }
  template <class T, class S>
  static void accumulated_mean(T* g, T* acc, std::size_t n, S inv) {
    ++calls()["accumulated_mean"];
    base::accumulated_mean(g, acc, n, inv);
  }
  template <class T, class S>
  static void moving_average(T* avg, const T* w, std::size_t n, S mom) {
    ++calls()["moving_average"];
    base::moving_average(avg, w, n, mom);
  }
  template <class T, class S>
  static void add_penalty_gradient(const T* w, T* g, std::size_t n, S l1, S l2) {
    ++calls()["add_penalty_gradient"];
    base::add_penalty_gradient(w, g, n, l1, l2);
  }
  template <class T, class S>
  static void add_penalty(const T* w, std::size_t n, S l1, S l2, ctnn::step_scalars* s) {
    ++calls()["add_penalty"];
    base::add_penalty(w, n, l1, l2, s);
  }
  // The loss op applies the scalars' loss scale to dy itself: counted when dy is the
  // unscaled gradient times s->loss_scale (!= 1).
  template <class T>
  static void squared_error_loss(const T* y, const T* t, std::size_t count, T* d, double scale, double divisor,
                                 ctnn::step_scalars* s) {
    ctnn::step_scalars one = *s;
    one.loss_scale = 1.0;
    std::vector<T> unscaled(count);
    base::squared_error_loss(y, t, count, unscaled.data(), scale, divisor, &one);
    base::squared_error_loss(y, t, count, d, scale, divisor, s);
    bool scaled = s->loss_scale != 1.0;
    for (std::size_t i = 0; i < count; ++i) scaled = scaled && d[i] == T(unscaled[i] * T(s->loss_scale));
    ++calls()[scaled ? "dy_times_loss_scale" : "dy_not_scaled"];
  }
  template <class T, class S>
  static bool unscale(T* g, std::size_t n, S inv) {
    ++calls()["unscale"];
    return base::unscale(g, n, inv);
  }
};

static_assert(ctnn::BackendOps<traced_cpu>);

namespace {
using net = ctnn::sequential<ctnn::input<6>, ctnn::dense<5, ctnn::tanh, ctnn::l1_l2<0.01, 0.02>>, ctnn::dense<3>>;

// Three steps of one batch on backend B; returns the parameters.
template <class B, class O, class... Hooks>
std::vector<float> train(O opt, Hooks&... hooks) {
  auto m = ctnn::make_model<net, float, B>(7);
  std::vector<float> x(8 * 6), y(8 * 3);
  ctnn::rng g(3);
  for (auto& v : x) v = float(g.uniform(-1, 1));
  for (auto& v : y) v = float(g.uniform(-1, 1));
  ctnn::train_step step(m, ctnn::mean_squared_error{}, opt, std::tuple<Hooks&...>(hooks...));
  for (std::size_t s = 0; s < 3; ++s) step.run(x.data(), y.data(), 8, 0, s);
  auto p = m.parameters();
  return {p.begin(), p.end()};
}
}  // namespace

TEST_CASE("with_options, loss scaling and the regularizers call ops<B>, with the results of cpu<>") {
  const ctnn::optimizer_options clip_norm{.clipnorm = 0.5, .weight_decay = 0.01, .gradient_accumulation_steps = 2,
                                          .use_ema = true, .ema_overwrite_frequency = 2};
  const ctnn::optimizer_options clip_value{.clipvalue = 0.01, .weight_decay = 0.01};
  for (const auto& o : {clip_norm, clip_value}) {
    calls().clear();
    ctnn::loss_scale ls = ctnn::loss_scale::fixed(64), ls_cpu = ctnn::loss_scale::fixed(64);
    const auto traced = train<traced_cpu>(ctnn::with_options{ctnn::adam{0.01}, o}, ls);
    const auto plain = train<ctnn::cpu<>>(ctnn::with_options{ctnn::adam{0.01}, o}, ls_cpu);
    CHECK(traced == plain);
    auto& c = calls();
    CHECK(c["unscale"] == 3);                // loss_scale's phase 4
    CHECK(c["dy_times_loss_scale"] == 3);    // phase 2's loss scale, applied by the loss op
    CHECK(c["dy_not_scaled"] == 0);
    CHECK(c["scale"] == (o.clipnorm ? 1 : 3));  // the weight decay, once per update
    CHECK(c["add_penalty_gradient"] == 3);   // l1_l2's gradient, one pass
    CHECK(c["add_penalty"] == 3);            // its penalty, into the step's scalars
    if (o.clipnorm) {
      CHECK(c["accumulate"] == 2);           // micro-steps 0 and 2
      CHECK(c["accumulated_mean"] == 1);     // micro-step 1
      CHECK(c["clip_by_norm"] == 4);         // one update: two layers' kernels and biases
      CHECK(c["moving_average"] == 3);       // every step (count_micro_steps)
    } else {
      CHECK(c["clip_value"] == 3);
      CHECK(c["accumulate"] == 0);
    }
  }
}
