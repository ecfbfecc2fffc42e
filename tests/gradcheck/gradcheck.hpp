// tests/gradcheck/gradcheck.hpp — a generic finite-difference gradient checker.
//
// check_layer<Spec, InShape>() binds Spec in double precision, draws
// parameters (init, then jittered so biases are non-zero) and inputs, and
// compares backward()'s input and parameter gradients of f = sum(r * y) (r
// random) with central differences. The layer's generator is reseeded before
// every forward so layers that draw random numbers (dropout) are checked with
// a fixed draw. A layer with a derived block (role::derived: a stripped sparse
// layer's decoded weights) gets one, rewritten through L::derive before every
// forward as the model does, unless options::derived is false (the layer then
// runs without it, as a slot with none). Returns the largest relative error seen.
// check_penalty<Spec, InShape>(metadata) does the same for the regularization
// penalty of a layer's kernel: add_penalty_gradient against central
// differences of penalty().
#pragma once
#include <ctnn/core/concepts.hpp>
#include <ctnn/core/plan.hpp>
#include <ctnn/core/precision.hpp>
#include <ctnn/core/rng.hpp>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <vector>

namespace gradcheck {

struct options {
  std::size_t batch = 3;
  double eps = 1e-6;
  bool training = true;
  double input_min_abs = 0.05;  // keep inputs away from kinks at 0
  std::size_t max_checks = 400; // per tensor, sampled evenly
  std::vector<float> metadata{};  // f32 values written over the layer's metadata block after init (run-time factors)
  std::vector<std::uint32_t> metadata_u32{};  // or u32 values (dense<up_to<N>>'s active width)
  bool derived = true;  // give a layer that declares a derived block one (kept current through L::derive)
};

inline double rel_err(double a, double b) { return std::abs(a - b) / std::max(1.0, std::max(std::abs(a), std::abs(b))); }

template <class Spec, class InShape>
double check_layer(options o = {}) {
  using L = typename Spec::template bind<InShape, double, ctnn::cpu<>>;
  constexpr std::size_t in = L::in_shape::size, out = L::out_shape::size;
  const std::size_t B = o.batch;
  ctnn::rng g(123);
  std::vector<double> params(L::parameter_count + 1), grads(L::parameter_count + 1), state(L::state_count + 1),
      cache(L::cache_per_sample * B + 1);
  // mask and metadata blocks (pruned and sparse layers), as the plan sizes them; init fills them
  std::vector<std::uint64_t> mask((ctnn::layer_role_bytes<ctnn::precision::float64>(L::buffers, ctnn::role::mask) + 15) / 8),
      meta((ctnn::layer_role_bytes<ctnn::precision::float64>(L::buffers, ctnn::role::metadata) +
            (o.metadata.size() + o.metadata_u32.size()) * 4 + 15) / 8);
  ctnn::layer_slot<double> slot{params.data(), grads.data(), state.data(), cache.data(),
                                reinterpret_cast<std::uint8_t*>(mask.data()), reinterpret_cast<std::byte*>(meta.data())};
  std::vector<double> derived(ctnn::layer_role_bytes<ctnn::precision::float64>(L::buffers, ctnn::role::derived) / 8);
  if (o.derived && !derived.empty()) slot.derived = derived.data();
  auto refresh = [&] {
    if constexpr (requires { L::derive(slot); })
      if (slot.derived) L::derive(slot);
  };
  L::init(slot, g);
  std::copy(o.metadata.begin(), o.metadata.end(), reinterpret_cast<float*>(meta.data()));
  std::copy(o.metadata_u32.begin(), o.metadata_u32.end(), reinterpret_cast<std::uint32_t*>(meta.data()));
  for (std::size_t i = 0; i < L::parameter_count; ++i) params[i] += g.uniform(-0.1, 0.1);
  for (std::size_t i = 0; i < L::state_count; ++i) state[i] = g.uniform(0.5, 1.5);
  std::vector<double> x(in * B), r(out * B), y(out * B), dy(out * B), dx(in * B);
  for (auto& v : x) {
    v = g.uniform(o.input_min_abs, 1.0);
    if (g.uniform() < 0.5) v = -v;
  }
  for (auto& v : r) v = g.uniform(-1, 1);

  ctnn::rng layer_gen(7);
  auto f = [&]() {
    layer_gen.reseed(7);
    const std::vector<double> saved_state = state;
    ctnn::run_info ri{B, o.training, &layer_gen};
    refresh();
    L::forward(slot, x.data(), y.data(), ri);
    state = saved_state;  // forward in training mode may update moving statistics
    double s = 0;
    for (std::size_t i = 0; i < y.size(); ++i) s += r[i] * y[i];
    return s;
  };

  // analytic
  layer_gen.reseed(7);
  const std::vector<double> saved_state = state;
  ctnn::run_info ri{B, o.training, &layer_gen};
  refresh();
  L::forward(slot, x.data(), y.data(), ri);
  state = saved_state;
  dy = r;
  L::backward(slot, x.data(), y.data(), dy.data(), dx.data(), ri);
  const std::vector<double> agrad(grads.begin(), grads.begin() + L::parameter_count);
  const std::vector<double> adx = dx;

  double worst = 0;
  auto probe = [&](std::vector<double>& v, std::size_t n, const std::vector<double>& analytic) {
    const std::size_t step = std::max<std::size_t>(1, n / o.max_checks);
    for (std::size_t i = 0; i < n; i += step) {
      const double keep = v[i];
      v[i] = keep + o.eps;
      const double fp = f();
      v[i] = keep - o.eps;
      const double fm = f();
      v[i] = keep;
      worst = std::max(worst, rel_err((fp - fm) / (2 * o.eps), analytic[i]));
    }
  };
  probe(x, x.size(), adx);
  probe(params, L::parameter_count, agrad);
  return worst;
}

// Checks L::add_penalty_gradient against central differences of L::penalty
// over the kernel (the first L::kernel_count parameters, drawn in [-1, 1)),
// with `metadata` (f32 values: a run-time factor) as the layer's metadata.
// Returns the largest relative error, or infinity when a parameter outside the
// kernel (a bias) got a penalty gradient.
template <class Spec, class InShape>
double check_penalty(std::vector<float> metadata = {}, double eps = 1e-6) {
  using L = typename Spec::template bind<InShape, double, ctnn::cpu<>>;
  std::vector<double> p(L::parameter_count), gr(L::parameter_count, 0.0);
  ctnn::rng g(3);
  for (auto& v : p) v = g.uniform(-1, 1);
  const ctnn::layer_slot<double> s{p.data(), gr.data(), nullptr, nullptr, nullptr,
                                   metadata.empty() ? nullptr : reinterpret_cast<std::byte*>(metadata.data())};
  L::add_penalty_gradient(s);
  double worst = 0;
  for (std::size_t i = 0; i < L::kernel_count; ++i) {
    const double keep = p[i];
    p[i] = keep + eps;
    const double fp = L::penalty(s);
    p[i] = keep - eps;
    const double fm = L::penalty(s);
    p[i] = keep;
    worst = std::max(worst, rel_err((fp - fm) / (2 * eps), gr[i]));
  }
  for (std::size_t i = L::kernel_count; i < L::parameter_count; ++i)
    if (gr[i] != 0.0) return std::numeric_limits<double>::infinity();  // the bias is not regularized
  return worst;
}

// Checks a loss: the gradient of the batch-mean loss against central differences.
template <std::size_t N, class Loss, class Target>
double check_loss(const Loss& loss, std::vector<double> y, const std::vector<Target>& t, std::size_t batch,
                  double eps = 1e-6) {
  std::vector<double> dy(y.size());
  loss.template compute<N>(y.data(), t.data(), dy.data(), batch);
  double worst = 0;
  for (std::size_t i = 0; i < y.size(); ++i) {
    const double keep = y[i];
    y[i] = keep + eps;
    const double fp = loss.template compute<N>(y.data(), t.data(), static_cast<double*>(nullptr), batch) / double(batch);
    y[i] = keep - eps;
    const double fm = loss.template compute<N>(y.data(), t.data(), static_cast<double*>(nullptr), batch) / double(batch);
    y[i] = keep;
    worst = std::max(worst, rel_err((fp - fm) / (2 * eps), dy[i]));
  }
  return worst;
}

}  // namespace gradcheck
