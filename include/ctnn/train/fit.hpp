// ctnn/train/fit.hpp — fit, evaluate.
//
// fit(model, loss, optimizer, dataset, epochs{n}, extras...) trains in the
// dataset's mini-batches for n epochs and returns the history. extras, in any
// order: metrics (ctnn::Metric), callbacks (ctnn::Callback) and
// validation_data(ds). Each step: wait for the next batch (timed as data
// time), forward, loss + regularization penalties, backward, one optimizer
// update (timed as compute). Per epoch the logs hold loss, each metric,
// val_loss and val_<metric> when validation data is given, learning_rate,
// seconds, data_seconds, compute_seconds, input_share (data time / step
// time) and input_bound (0 not, 1 moderately, 2 highly; train/input_analysis.hpp). A non-finite loss throws ctnn::numeric_error naming the epoch and
// step, unless a callback sets stop_training in on_batch_end (then the bad
// update is not applied); so does a parameter or state value that is not
// finite after an update (train/numerics.hpp), and a non-finite loss in
// evaluate or on validation data. Validation data is checked against the
// network at compile time as the training data is. An optimizer with a step(model, w, g, slots, n)
// member (with_options) applies its own update and counts it, and its
// finalize(...) runs before on_train_end. The dataset's sample size and
// target kind are checked against the network and loss at compile time.
//
// evaluate(model, loss, dataset, metrics...) returns logs with loss and metrics.
#pragma once
#include <chrono>
#include <cmath>
#include <cstddef>
#include <stdexcept>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>

#include "../core/concepts.hpp"
#include "../core/diagnostics.hpp"
#include "../data/batch.hpp"
#include "../data/dataset.hpp"
#include "../losses/loss.hpp"
#include "../metrics/metric.hpp"
#include "callbacks.hpp"
#include "history.hpp"
#include "input_analysis.hpp"
#include "model.hpp"
#include "numerics.hpp"

namespace ctnn {

struct epochs {
  std::size_t count = 1;
  explicit epochs(std::size_t n) : count(n) {
    if (n == 0) throw std::invalid_argument("fit: epochs must be > 0");
  }
};

template <data::Dataset D>
struct validation_data_t {
  using dataset_type = D;
  const D& data;
};
template <data::Dataset D>
validation_data_t<D> validation_data(const D& d) {
  return {d};
}
template <class T>
inline constexpr bool is_validation_v = false;
template <class D>
inline constexpr bool is_validation_v<validation_data_t<D>> = true;

namespace detail {

template <class M, class L, class D>
constexpr bool check_compatible() {
  constexpr std::size_t n_in = M::input_size, n_out = M::output_size;
  static_assert(diag::dataset_input_mismatch<diag::dataset_elements<D::sample_shape::size>,
                                             diag::network_elements<n_in>, D::sample_shape::size == n_in>::value);
  using want = loss_target_kind_t<L, n_out>;
  using have = typename D::target_kind;
  if constexpr (is_sparse_v<want> || is_sparse_v<have>) {
    static_assert(diag::loss_target_kind_mismatch<L, std::is_same_v<want, have>>::value);
  } else {
    static_assert(diag::loss_target_width_mismatch<diag::target_width<have::width>, diag::output_width<n_out>,
                                                   have::width == n_out>::value);
  }
  static_assert(std::is_same_v<typename D::value_type, typename M::value_type>,
                "fit: the dataset's value type differs from the model's element type");
  return true;
}

// Validation data is checked against the network as the training data is.
template <class M, class L, class E>
constexpr bool check_validation() {
  if constexpr (is_validation_v<E>) return check_compatible<M, L, typename E::dataset_type>();
  else return true;
}

template <class M, class... Ms, class B>
void update_metrics(std::tuple<Ms...>& ms, const typename M::value_type* y, const B& b) {
  std::apply([&](auto&... m) { (m.template update<M::output_size>(y, b.y.data(), b.size), ...); }, ms);
}

// Forward + loss over a whole dataset, no training.
template <class M, class L, class D, class... Ms>
logs evaluate_impl(M& m, const L& loss, const D& ds, std::tuple<Ms...>& metrics, const std::string& prefix) {
  std::apply([](auto&... mm) { (mm.reset(), ...); }, metrics);
  data::minibatch<typename D::value_type, typename D::target_kind> b;
  auto cur = ds.open(0);
  double total = 0;
  std::size_t n = 0;
  for (std::size_t batch = 0; cur.next(b); ++batch) {
    const auto* y = m.forward(b.x.data(), b.size, false);
    const double batch_sum =
        loss.template compute<M::output_size>(y, b.y.data(), static_cast<typename M::value_type*>(nullptr), b.size);
    if (!std::isfinite(batch_sum))
      check_loss_finite(batch_sum, (prefix.empty() ? "evaluate: batch " : "fit: validation batch ") + std::to_string(batch + 1));
    total += batch_sum;
    update_metrics<M>(metrics, y, b);
    n += b.size;
  }
  if (n == 0) throw std::invalid_argument("evaluate: the dataset is empty");
  logs l;
  l.set(prefix + "loss", total / double(n) + m.penalty());
  std::apply([&](auto&... mm) { (l.set(prefix + mm.name(), mm.result()), ...); }, metrics);
  return l;
}

}  // namespace detail

template <Model M, Loss L, data::Dataset D, Metric... Ms>
logs evaluate(M& m, const L& loss, const D& ds, Ms... metrics) {
  static_assert(detail::check_compatible<std::remove_cvref_t<M>, L, D>());
  std::tuple<Ms...> mt{metrics...};
  return detail::evaluate_impl(m, loss, ds, mt, "");
}

template <Model M, Loss L, Optimizer O, data::Dataset D, class... Extras>
history fit(M& m, const L& loss, O& opt, const D& train, epochs ep, Extras&&... extras) {
  using MT = std::remove_cvref_t<M>;
  using T = typename MT::value_type;
  static_assert(detail::check_compatible<MT, L, D>());
  static_assert((detail::check_validation<MT, L, std::remove_cvref_t<Extras>>() && ...));
  static_assert(((Metric<std::remove_cvref_t<Extras>> || Callback<std::remove_cvref_t<Extras>> ||
                  is_validation_v<std::remove_cvref_t<Extras>>) && ...),
                "fit: every extra argument must be a metric, a callback or validation_data(...)");
  using clock = std::chrono::steady_clock;
  auto secs = [](clock::duration d) { return std::chrono::duration<double>(d).count(); };

  // Metrics are copied twice (training, validation); callbacks are kept by reference.
  auto metrics = std::tuple_cat([&]() -> decltype(auto) {
    using E = std::remove_cvref_t<Extras>;
    if constexpr (Metric<E>) return std::tuple<E>(extras);
    else return std::tuple<>();
  }()...);
  auto val_metrics = metrics;
  auto callbacks = std::tuple_cat([&]() -> decltype(auto) {
    using E = std::remove_cvref_t<Extras>;
    if constexpr (Callback<E>) return std::tuple<E&>(const_cast<E&>(static_cast<const E&>(extras)));
    else return std::tuple<>();
  }()...);
  const void* val_ptr = nullptr;
  ((void)[&] {
    if constexpr (is_validation_v<std::remove_cvref_t<Extras>>) val_ptr = &extras;
  }(), ...);

  history hist;
  train_context<MT, O> ctx{m, opt, hist};
  ctx.epochs = ep.count;
  if constexpr (requires { train.batches_per_epoch(); }) ctx.steps = train.batches_per_epoch();

  auto call = [&](auto hook) { std::apply([&](auto&... cb) { (hook(cb), ...); }, callbacks); };
#define CTNN_FIT_HOOK(name)                                                   \
  call([&](auto& cb) {                                                        \
    if constexpr (has_##name<std::remove_cvref_t<decltype(cb)>>) cb.name(ctx); \
  })

  // The arena may move when a larger batch arrives (validation too), so the
  // parameter, gradient and slot views are taken afresh at every step.
  m.reserve(1, O::slots_per_parameter);
  auto slots = m.optimizer_slots();
  const std::size_t n_params = m.parameters().size();  // includes alignment padding (its gradient is always zero)
  if (opt.iterations == 0) {
    std::fill(slots.begin(), slots.end(), T(0));
    for (std::size_t s = 0; s < O::slots_per_parameter; ++s) opt.template init_slots<T>(slots.data() + s * n_params, n_params);
  }

  data::minibatch<T, typename D::target_kind> b;
  CTNN_FIT_HOOK(on_train_begin);
  for (std::size_t e = 0; e < ep.count && !ctx.stop_training; ++e) {
    ctx.epoch = e;
    ctx.epoch_logs = logs{};
    CTNN_FIT_HOOK(on_epoch_begin);
    std::apply([](auto&... mm) { (mm.reset(), ...); }, metrics);
    double loss_sum = 0, data_s = 0, compute_s = 0;
    std::size_t seen = 0;
    const auto epoch_start = clock::now();
    auto cur = train.open(e);
    ctx.running_logs = [&] {
      logs r;
      r.set("loss", seen ? loss_sum / double(seen) : 0.0);
      std::apply([&](auto&... mm) { (r.set(mm.name(), mm.result()), ...); }, metrics);
      return r;
    };
    for (std::size_t step = 0;; ++step) {
      const auto t0 = clock::now();
      if (!cur.next(b)) break;
      const auto t1 = clock::now();
      data_s += secs(t1 - t0);
      ctx.step = step;
      CTNN_FIT_HOOK(on_batch_begin);

      // The arena may have moved (a larger batch here, or validation/callbacks running a
      // larger batch through the model): take the views afresh every step.
      if (b.size > m.batch_capacity()) m.reserve(b.size, O::slots_per_parameter);
      const auto params = m.parameters();
      const auto grads = m.gradients();
      const auto step_slots = m.optimizer_slots();
      const T* y = m.forward(b.x.data(), b.size, true);
      const double batch_sum = loss.template compute<MT::output_size>(y, b.y.data(), m.output_gradient(), b.size);
      const double pen = m.penalty();
      const double batch_loss = batch_sum / double(b.size) + pen;
      ctx.batch_loss = batch_loss;
      if (!std::isfinite(batch_loss)) {
        CTNN_FIT_HOOK(on_batch_end);
        if (ctx.stop_training) break;
        throw numeric_error("fit: the loss became " + std::string(std::isnan(batch_loss) ? "NaN" : "infinite") +
                            " at epoch " + std::to_string(e + 1) + ", step " + std::to_string(step + 1) +
                            " (learning rate " + detail::format_number(opt.learning_rate(opt.iterations)) + ")");
      }
      detail::update_metrics<MT>(metrics, y, b);
      m.backward();
      m.add_penalty_gradients();
      if constexpr (requires { opt.step(m, params.data(), grads.data(), step_slots.data(), n_params); }) {
        opt.step(m, params.data(), grads.data(), step_slots.data(), n_params);  // counts its own updates
      } else {
        opt.update(params.data(), grads.data(), step_slots.data(), n_params, opt.iterations);
        ++opt.iterations;
      }
      detail::check_model_finite(m, [&] {
        return "fit: after the update of epoch " + std::to_string(e + 1) + ", step " + std::to_string(step + 1);
      });
      loss_sum += batch_sum + pen * double(b.size);
      seen += b.size;
      compute_s += secs(clock::now() - t1);
      CTNN_FIT_HOOK(on_batch_end);
      if (ctx.stop_training) break;
    }
    ctx.running_logs = nullptr;
    if (seen == 0 && !ctx.stop_training)
      throw std::invalid_argument("fit: the training dataset yielded no batch in epoch " + std::to_string(e + 1));
    logs& l = ctx.epoch_logs;
    l.set("loss", loss_sum / double(seen));
    std::apply([&](auto&... mm) { (l.set(mm.name(), mm.result()), ...); }, metrics);
    if (val_ptr) {
      ((void)[&] {
        if constexpr (is_validation_v<std::remove_cvref_t<Extras>>) {
          logs vl = detail::evaluate_impl(m, loss, extras.data, val_metrics, "val_");
          for (auto& [k, v] : vl.items) l.set(k, v);
        }
      }(), ...);
    }
    l.set("learning_rate", opt.learning_rate(opt.iterations));
    l.set("seconds", secs(clock::now() - epoch_start));
    l.set("data_seconds", data_s);
    l.set("compute_seconds", compute_s);
    l.set("input_share", data_s + compute_s > 0 ? data_s / (data_s + compute_s) : 0.0);
    l.set("input_bound", double(int(input_bound(l["input_share"]))));
    CTNN_FIT_HOOK(on_epoch_end);
    hist.append(ctx.epoch_logs);
  }
  if constexpr (requires { opt.finalize(m, m.parameters().data(), m.optimizer_slots().data(), n_params); })
    opt.finalize(m, m.parameters().data(), m.optimizer_slots().data(), n_params);  // e.g. the EMA weights replace the weights
  CTNN_FIT_HOOK(on_train_end);
#undef CTNN_FIT_HOOK
  return hist;
}

}  // namespace ctnn
