// ctnn/train/fit.hpp — fit, evaluate.
//
// fit(model, loss, optimizer, dataset, epochs{n}, extras...) trains for n epochs in the
// dataset's mini-batches and returns the history. extras, in any order: metrics, callbacks,
// step hooks, validation_data(ds), ieee_denormals{}. Each step waits for the next batch (data
// time), then runs one train_step (train/step.hpp; compute time). Per epoch the logs hold
// loss, each metric, val_* with validation data, learning_rate, seconds, data_seconds,
// compute_seconds, input_share, input_bound, and whatever the backend's feeder and runner
// log (model::log_epoch). A non-finite loss, or a non-finite parameter or state value after
// an update, throws ctnn::numeric_error naming epoch and step (unless a callback stops
// training in on_batch_end). Dataset and validation shapes are checked at compile time. An
// optimizer's finalize(model) (with_options' EMA) runs before on_train_end; an all-zero
// output on the first batch gives a warning on std::clog (rank 0). For data-parallel training
// (distributed::data_parallel) fit takes ctx.role from an extra's process_role(), lets hooks
// reduce_logs(logs, samples) before the callbacks, and on an exception calls the extras'
// on_failure(what) before rethrowing: docs/distributed.md. The loop itself is one function for every
// network (train/fit_loop.hpp: detail::fit_epochs), around this network's fit_session_of.
//
// evaluate(model, loss, dataset, metrics...) returns loss and metrics, and checks the
// model's variables for non-finite values as fit does. docs/training.md has the details.
// fit and evaluate on arrays (Keras' fit(x, y, ...)): train/fit_arrays.hpp.
#pragma once
#include <cmath>
#include <concepts>
#include <exception>
#include <cstddef>
#include <iostream>
#include <optional>
#include <ranges>
#include <stdexcept>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>

#include "../core/concepts.hpp"
#include "../core/diagnostics.hpp"
#include "../core/errors.hpp"
#include "../core/format.hpp"
#include "../core/narrow_std.hpp"
#include "../core/separate.hpp"
#include "../data/element.hpp"
#include "../data/dataset.hpp"
#include "../losses/loss.hpp"
#include "../metrics/metric.hpp"
#include "callbacks.hpp"
#include "fit_loop.hpp"
#include "history.hpp"
#include "input_analysis.hpp"
#include "model.hpp"
#include "numerics.hpp"
#include "output_check.hpp"
#include "step.hpp"

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

// Who: as diag::dataset_input_text (0 fit, 1 validation_data, 2 evaluate).
template <class M, class L, class D, int Who = 0>
constexpr bool check_compatible() {
  constexpr std::size_t n_in = M::input_size, n_out = M::output_size;
  static_assert(diag::require<D::sample_shape::size == n_in,
                              &diag::dataset_input_text<typename D::sample_shape, typename M::network::input_type, Who>>());
  static_assert(diag::dataset_input_mismatch<diag::dataset_elements<D::sample_shape::size>,
                                             diag::network_elements<n_in>, D::sample_shape::size == n_in>::value);
  using want = loss_target_kind_t<L, n_out>;
  using have = typename D::target_kind;
  static_assert(check_output<L, typename M::network::output_type, have, /*PerStep=*/true>());
  if constexpr (is_sparse_v<want> || is_sparse_v<have> || is_step_labels_v<have>) {
    static_assert(diag::loss_target_kind_mismatch<L, std::is_same_v<want, have> ||
                                                         (is_sparse_v<want> && is_step_labels_v<have>)>::value);
  } else {
    static_assert(diag::loss_target_width_mismatch<diag::target_width<have::width>, diag::output_width<n_out>,
                                                   have::width == n_out>::value);
  }
  static_assert(std::is_same_v<typename D::value_type, typename M::value_type>,
                "fit: the dataset's value type differs from the model's element type");
  return true;
}

// A metric's `accepts` against the network's output and the dataset's targets
// (train/output_check.hpp; per step, as the losses: class scores at every step of an
// output <S, K>); other extras pass.
template <class M, class X, class D>
constexpr bool check_metric() {
  if constexpr (Metric<X, typename M::compute_type>)
    return check_output<X, typename M::network::output_type, typename D::target_kind, /*PerStep=*/true>();
  else return true;
}

// Validation data is checked against the network as the training data is.
template <class M, class L, class E>
constexpr bool check_validation() {
  if constexpr (is_validation_v<E>) return check_compatible<M, L, typename E::dataset_type, 1>();
  else return true;
}

// The metrics read the outputs on the host (model::host_outputs: one copy per
// batch on a device backend). On a per-step output <S, K> (Keras' metrics on
// [batch, S, K]) a class-score metric counts every step as a sample (batch * S rows,
// a target row per step), and under a step mask with S steps (the pass's: masking,
// embedding<..., mask_zero>) the metrics that are means over samples (Keras'
// MeanMetricWrapper, which weights its values by the mask: keras/src/metrics/
// reduction_metrics.py; the metric's steps_weighted) count the unmasked steps only;
// others count every value. The mask is read on the host: a device backend throws
// std::logic_error.
template <class Out, class B, class X, class T, class Target>
void update_metric(X& metric, const T* y, const Target* t, std::size_t batch, const sequence_mask* mask) {
  constexpr bool per_step = Out::rank == 2;
  constexpr std::size_t U = Out::dims[Out::rank - 1];
  constexpr bool classes = per_step && per_step_classes<X, Out>();
  constexpr bool weighted = per_step && requires { requires X::steps_weighted; };
  if constexpr (per_step && (classes || weighted)) {
    constexpr std::size_t S = Out::dims[0], tw = std::is_integral_v<Target> ? 1 : U;  // target values per step
    if (mask && mask->data && mask->steps == S && batch > 0 && weighted) {
      if constexpr (!B::memory::host_accessible) {
        throw std::logic_error(metric.name() + ": a per-step metric under a step mask runs on host backends only " +
                               "(not on " + B::name() + " yet)");
      } else {
        for (std::size_t i = 0, rows = batch * S; i < rows;) {  // each run of unmasked steps, as rows
          if (!step_unmasked(*mask, i)) {
            ++i;
            continue;
          }
          std::size_t j = i + 1;
          while (j < rows && step_unmasked(*mask, j)) ++j;
          metric.template update<U>(y + i * U, t + i * tw, j - i);
          i = j;
        }
      }
      return;
    }
    if constexpr (classes) {
      metric.template update<U>(y, t, batch * S);
      return;
    }
  }
  metric.template update<Out::size>(y, t, batch);
}
template <class M, class... Ms, class B>
void update_metrics(std::tuple<Ms...>& ms, const typename M::value_type* y, const B& b, const sequence_mask* mask) {
  using Out = typename M::network::output_type;
  std::apply([&](auto&... m) { (update_metric<Out, typename M::backend>(m, y, b.y.data(), b.size, mask), ...); }, ms);
}

// fit's and evaluate's messages and epoch logs, the same for every network and dataset: not
// templates, so that each fit and evaluate instance keeps a call where it would format them
// (the compiled part holds them: core/separate.hpp).
// check_model_finite's "where" after fit's update of (epoch, step), counted from 0.
CTNN_LAZY [[gnu::cold]] CTNN_DECL std::string fit_update_where(std::size_t epoch, std::size_t step)
#if CTNN_DEFINITIONS
{
  return "fit: after the update of epoch " + std::to_string(epoch + 1) + ", step " + std::to_string(step + 1);
}
#else
;
#endif
// A batch's loss sum that is not finite: evaluate's batch, or fit's validation batch.
CTNN_LAZY [[noreturn, gnu::cold, gnu::noinline]] CTNN_DECL void throw_batch_loss_not_finite(double loss, bool validation,
                                                                               std::size_t batch)
#if CTNN_DEFINITIONS
{
  throw numeric_error((validation ? "fit: validation batch " : "evaluate: batch ") + std::to_string(batch + 1) +
                      ": the loss is " + non_finite_name(loss));
}
#else
;
#endif
CTNN_LAZY [[noreturn, gnu::cold, gnu::noinline]] CTNN_DECL void throw_evaluate_empty()
#if CTNN_DEFINITIONS
{
  throw std::invalid_argument("evaluate: the dataset is empty");
}
#else
;
#endif
// The first batch's output all zeros is a dead network (a deep relu stack
// under glorot_uniform, a dead relu layer): fit says so on std::clog once.
CTNN_LAZY [[gnu::cold]] CTNN_DECL void warn_all_zero_output(std::ostream& out)
#if CTNN_DEFINITIONS
{
  out << "fit: warning: the network's output for the first batch is all zeros; training will not move it. "
         "A deep relu stack under glorot_uniform does this: try he_uniform or he_normal (dense<N, relu, he_uniform>)\n";
}
#else
;
#endif
// (over the batch's `count` output values: one body per value type, out of line, for every network;
// fit calls it once)
template <class T>
[[gnu::cold, gnu::noinline]] bool warn_if_all_zero(const T* y, std::size_t count, std::ostream& out = std::clog) {
  for (std::size_t i = 0; i < count; ++i)
    if (y[i] != T(0)) return false;
  warn_all_zero_output(out);
  return true;
}

// evaluate's loop over a dataset's batches (and fit's validation, prefix "val_"): forward + loss
// per batch, no training. The loop, its checks and the logs are evaluate_batches, one function for
// every network (the compiled part holds it: core/separate.hpp); evaluate_session_of below is the
// network-typed side it calls, as fit_epochs calls fit_session_of.
class evaluate_session {
 public:
  virtual bool next(std::size_t& size) = 0;      // the next batch (false: the dataset's end), its size
  virtual double loss_sum() = 0;                 // its forward pass and loss (targets checked first): the sum
  virtual void check_variables() = 0;            // the model's variables for non-finite values
  virtual void update_metrics() = 0;             // the metrics on its outputs
  virtual double penalty() = 0;                  // the regularizers' penalty now
  virtual void metric_logs(logs& l, const std::string& prefix) = 0;  // each metric's result

 protected:
  ~evaluate_session() = default;
};

// The logs prefix + "loss" (the mean loss over the samples plus the penalty) and each metric's.
// A batch whose loss is not finite throws numeric_error; evaluate (prefix "") checks the model's
// variables once, after its first batch, as fit does after every update (a NaN weight behind a relu
// leaves the loss finite: ln 3 for 3 classes); an empty dataset throws std::invalid_argument.
CTNN_LAZY CTNN_DECL logs evaluate_batches(evaluate_session& s, const std::string& prefix)
#if CTNN_DEFINITIONS
{
  double total = 0;
  std::size_t n = 0, size = 0;
  for (std::size_t batch = 0; s.next(size); ++batch) {
    const double batch_sum = s.loss_sum();
    if (!std::isfinite(batch_sum)) throw_batch_loss_not_finite(batch_sum, !prefix.empty(), batch);
    if (batch == 0 && prefix.empty()) s.check_variables();
    total += batch_sum;
    s.update_metrics();
    n += size;
  }
  if (n == 0) throw_evaluate_empty();
  logs l;
  l.set(prefix, "loss", total / double(n) + s.penalty());
  s.metric_logs(l, prefix);
  return l;
}
#else
;
#endif

// evaluate's network-typed side: model M, loss L, dataset D, the metrics Ms (reset first).
template <class M, class L, class D, class... Ms>
class evaluate_session_of final : public evaluate_session {
 public:
  evaluate_session_of(M& m, const L& loss, const D& ds, std::tuple<Ms...>& metrics)
      : m_(m), loss_(loss), metrics_(metrics), cur_(ds.open(0)) {
    std::apply([](auto&... mm) { (mm.reset(), ...); }, metrics_);
    // an in-memory dataset's batch copied over the CPU's pool, as fit's (this thread runs the forwards)
    if constexpr (requires { cur_.share_gather(true); }) cur_.share_gather(true);
  }
  bool next(std::size_t& size) override {
    if (!cur_.next(b_)) return false;
    size = b_.size;
    return true;
  }
  double loss_sum() override {
    check_loss_targets<typename M::network::output_type>(loss_, b_.y.data(), b_.size);
    m_.reset_scalars();
    const auto* y = m_.forward(b_.x.data(), b_.size, false);
    const auto* t = m_.feed(1, b_.y.data(), b_.size * target_width<M, std::remove_cvref_t<decltype(b_.y[0])>>());
    m_.run([&] {
      step_loss_into<typename M::network::output_type, typename M::backend>(
          loss_, y, t, static_cast<typename M::value_type*>(nullptr), b_.size, &m_.step_mask(), m_.scalars());
    });
    return m_.read_scalars().loss_sum;  // the one read of the batch's scalars
  }
  [[gnu::cold]] void check_variables() override {
    if constexpr (checks_numerics<std::remove_cvref_t<M>>)
      check_model_finite(m_, [] { return std::string("evaluate: the model's variables"); });
  }
  void update_metrics() override {
    if constexpr (sizeof...(Ms) > 0) detail::update_metrics<M>(metrics_, m_.host_outputs(b_.size).data(), b_, &m_.step_mask());
  }
  [[gnu::cold]] double penalty() override { return m_.penalty(); }
  [[gnu::cold]] void metric_logs(logs& l, const std::string& prefix) override {
    std::apply([&](auto&... mm) { (l.set(prefix, mm.name(), mm.result()), ...); }, metrics_);
  }

 private:
  M& m_;
  const L& loss_;
  std::tuple<Ms...>& metrics_;
  data::batch_for<D> b_;
  decltype(std::declval<const D&>().open(std::size_t{})) cur_;
};

// Forward + loss over a whole dataset, no training. (Not inlined: one body for evaluate and fit's
// validation, which would each inline the session's set-up.)
template <class M, class L, class D, class... Ms>
[[gnu::noinline]] logs evaluate_impl(M& m, const L& loss, const D& ds, std::tuple<Ms...>& metrics, const std::string& prefix) {
  evaluate_session_of<M, L, D, Ms...> s(m, loss, ds, metrics);
  return evaluate_batches(s, prefix);
}

}  // namespace detail

template <Model M, class L, data::Dataset D, class... Ms>
  requires Loss<L, typename std::remove_cvref_t<M>::value_type> &&
           (Metric<Ms, typename std::remove_cvref_t<M>::value_type> && ...)
logs evaluate(M& m, const L& loss, const D& ds, Ms... metrics) {
  static_assert(detail::check_compatible<std::remove_cvref_t<M>, L, D, 2>());
  static_assert((detail::check_metric<std::remove_cvref_t<M>, Ms, D>() && ...));
  std::tuple<Ms...> mt{metrics...};
  return detail::evaluate_impl(m, loss, ds, mt, "");
}

// fit's own options, passed as an extra argument: ieee_denormals{} keeps IEEE
// denormals during the steps (by default the step flushes them to zero;
// train/step.hpp).
struct ieee_denormals {};

namespace detail {
template <class E, class M>
constexpr bool is_fit_extra() {
  using X = std::remove_cvref_t<E>;
  return Metric<X, typename M::value_type> || Callback<X> || is_validation_v<X> || StepHook<X, M> ||
         std::is_same_v<X, ieee_denormals>;
}
// "fit: argument 6 (ctnn::mean_squared_error) is neither a metric, a callback, a step hook, ..."
template <std::size_t Arg, class X>
constexpr diag::message not_an_extra_text() {
  diag::message m;
  m << "fit: argument " << Arg << " (";
  m.type<X>() << ") is neither a metric, a callback, a step hook, validation_data(...) nor ieee_denormals{}";
  return m;
}
// The first error names the first extra argument fit does not take (arguments count from 1: the
// extras from 6).
template <class M, class... X>
constexpr bool check_extras() {
  return []<std::size_t... I>(std::index_sequence<I...>) {
    return (diag::require<is_fit_extra<X, M>(), &not_an_extra_text<I + 6, X>>() && ...);
  }(std::index_sequence_for<X...>{});
}
// The callbacks' hooks: call_callbacks<H>(callbacks, ctx) calls hook H with
// ctx on every callback of the tuple that implements it, in argument order.
// fit calls the callbacks through it.
template <callback_hook H, class Callbacks, class Ctx>
void call_callbacks(Callbacks& callbacks, Ctx& ctx) {
  auto one = [&](auto& cb) {
    using C = std::remove_cvref_t<decltype(cb)>;
    if constexpr (H == callback_hook::train_begin) {
      if constexpr (has_on_train_begin<C>) cb.on_train_begin(ctx);
    } else if constexpr (H == callback_hook::train_end) {
      if constexpr (has_on_train_end<C>) cb.on_train_end(ctx);
    } else if constexpr (H == callback_hook::epoch_begin) {
      if constexpr (has_on_epoch_begin<C>) cb.on_epoch_begin(ctx);
    } else if constexpr (H == callback_hook::epoch_end) {
      if constexpr (has_on_epoch_end<C>) cb.on_epoch_end(ctx);
    } else if constexpr (H == callback_hook::batch_begin) {
      if constexpr (has_on_batch_begin<C>) cb.on_batch_begin(ctx);
    } else {
      if constexpr (has_on_batch_end<C>) cb.on_batch_end(ctx);
    }
  };
  std::apply([&](auto&... cb) { (one(cb), ...); }, callbacks);
}
// The extras of kind Pred as a tuple of references (callbacks, hooks) or copies (metrics).
template <template <class> class Pred, bool Copy, class... E>
auto select(E&... e) {
  return std::tuple_cat([&]() -> decltype(auto) {
    using X = std::remove_cvref_t<E>;
    if constexpr (!Pred<X>::value) return std::tuple<>();
    else if constexpr (Copy) return std::tuple<X>(e);
    else return std::tuple<E&>(e);
  }()...);
}
template <class M>
struct is_hook_for {
  template <class X>
  struct pred : std::bool_constant<StepHook<X, M>> {};  // may be a callback too (update_pruning_step)
};
template <class M>
struct is_metric_for {
  template <class X>
  struct pred : std::bool_constant<Metric<X, typename M::value_type>> {};
};
template <class X>
struct is_callback : std::bool_constant<Callback<X>> {};
}  // namespace detail

// fit and evaluate given something that is not a dataset of batches: one
// error line instead of the unsatisfied constraints of every candidate.
template <class M, class L, class O, class D, class... Extras>
  requires(!data::Dataset<D>)
history fit(M&, const L&, O&, const D&, epochs, Extras&&...) {
  static_assert(data::Dataset<D>,
                "fit: the 4th argument is not a dataset of batches (data::Dataset); a pipeline of samples needs .batch(n)");
  return {};
}
namespace detail {
// "fit: the 3rd argument (not_an_optimizer) is not an optimizer of float variables (ctnn::Optimizer: sgd, adam, ...)"
template <class O, class T>
constexpr diag::message not_an_optimizer_text() {
  diag::message m;
  m << "fit: the 3rd argument (";
  m.type<O>() << ") is not an optimizer of ";
  m.type<T>() << " variables (ctnn::Optimizer: sgd, adam, ...)";
  return m;
}
template <class L, class T>
constexpr diag::message not_a_loss_text() {
  diag::message m;
  m << "fit: the 2nd argument (";
  m.type<L>() << ") is not a loss of ";
  m.type<T>() << " outputs (ctnn::Loss: mean_squared_error, sparse_categorical_crossentropy, ...)";
  return m;
}
}  // namespace detail
// fit given a model and a dataset but an argument that is not an optimizer, or not a loss: the
// first error names the argument and its type, then the failed constraint (its missing piece).
template <Model M, class L, class O, data::Dataset D, class... Extras>
  requires(!Optimizer<O, typename std::remove_cvref_t<M>::variable_type>)
history fit(M&, const L&, O&, const D&, epochs, Extras&&...) {
  using T = typename std::remove_cvref_t<M>::variable_type;
  constexpr bool located = diag::require<false, &detail::not_an_optimizer_text<O, T>>();
  (void)located;
  static_assert(Optimizer<O, T>);
  return {};
}
template <Model M, class L, class O, data::Dataset D, class... Extras>
  requires(Optimizer<O, typename std::remove_cvref_t<M>::variable_type> &&
           !Loss<L, typename std::remove_cvref_t<M>::value_type>)
history fit(M&, const L&, O&, const D&, epochs, Extras&&...) {
  using T = typename std::remove_cvref_t<M>::value_type;
  constexpr bool located = diag::require<false, &detail::not_a_loss_text<L, T>>();
  (void)located;
  static_assert(Loss<L, T>);
  return {};
}
namespace detail {
// An xtensor expression (it names its expression_tag): ctnn/xtensor.hpp's
// evaluate(m, loss, x, y, metrics...) takes those, and train/fit_arrays.hpp's evaluate
// takes contiguous ranges, so the fallback below must not.
template <class D>
concept tensor_expression = requires { typename D::expression_tag; };
}  // namespace detail
template <class M, class L, class D, class... Ms>
  requires(!data::Dataset<D> && !detail::tensor_expression<D> && !std::ranges::contiguous_range<D>)
logs evaluate(M&, const L&, const D&, Ms...) {
  static_assert(data::Dataset<D>,
                "evaluate: the 3rd argument is not a dataset of batches (data::Dataset); a pipeline of samples needs .batch(n)");
  return {};
}

namespace detail {
// The training step of fit: train_step over the hooks' types (a tuple of references).
template <class MT, class L, class O, class Hooks>
struct fit_step_of;
template <class MT, class L, class O, class... H>
struct fit_step_of<MT, L, O, std::tuple<H&...>> {
  using type = train_step<MT, L, O, H...>;
};
// A value made in place from f's result (no move: a cursor need not be movable).
template <class T>
struct made_from {
  T value;
  template <class F>
  explicit made_from(F&& f) : value(f()) {}
};

// fit's network-typed side of the epoch loop (fit_loop.hpp: fit_epochs runs the loop and calls it).
// What runs once an epoch or less is cold (optimized for size: less code for a program's edit to
// compile); what runs per batch (call, next, run, after_step) is not.
template <class MT, class L, class O, class D, class... E>
class fit_session_of final : public fit_session {
 public:
  fit_session_of(MT& m, const L& loss, O& opt, const D& train, history& hist, E&... extras)
      : ctx(m, opt, hist),
        m_(m),
        loss_(loss),
        opt_(opt),
        train_(train),
        extras_(extras...),
        metrics_(select<is_metric_for<MT>::template pred, true>(extras...)),
        val_metrics_(metrics_),
        callbacks_(select<is_callback, false>(extras...)),
        hooks_(select<is_hook_for<MT>::template pred, false>(extras...)) {}

  train_context<MT, O> ctx;

  [[gnu::cold]] void start() override {
    constexpr bool keep_denormals = (std::is_same_v<std::remove_cv_t<E>, ieee_denormals> || ...);
    std::apply([&](auto&... h) { step_.emplace(m_, loss_, opt_, std::tie(h...), keep_denormals); }, hooks_);
  }
  void call(callback_hook h) override {
    switch (h) {
      case callback_hook::train_begin: return call_callbacks<callback_hook::train_begin>(callbacks_, ctx);
      case callback_hook::train_end: return call_callbacks<callback_hook::train_end>(callbacks_, ctx);
      case callback_hook::epoch_begin: return call_callbacks<callback_hook::epoch_begin>(callbacks_, ctx);
      case callback_hook::epoch_end: return call_callbacks<callback_hook::epoch_end>(callbacks_, ctx);
      case callback_hook::batch_begin: return call_callbacks<callback_hook::batch_begin>(callbacks_, ctx);
      case callback_hook::batch_end: return call_callbacks<callback_hook::batch_end>(callbacks_, ctx);
    }
  }
  [[gnu::cold]] std::size_t autotune_said() override {
    if constexpr (requires { train_.autotuner().said(); }) return train_.autotuner().said();
    else return 0;
  }
  [[gnu::cold]] void open(std::size_t epoch) override {
    std::apply([](auto&... mm) { (mm.reset(), ...); }, metrics_);
    cursor_.reset();
    cursor_.emplace([&] { return train_.open(epoch); });
    // an in-memory dataset's batch copied over the CPU's pool: this is the thread that runs the steps
    if constexpr (requires { cursor_->value.share_gather(true); }) cursor_->value.share_gather(true);
  }
  bool next(std::size_t& batch) override {
    if (!cursor_->value.next(b_)) return false;
    batch = b_.size;
    return true;
  }
  step_result run(std::size_t epoch, std::size_t step) override {
    return step_->run(b_.x.data(), b_.y.data(), b_.size, epoch, step);
  }
  void after_step(const step_result& r, std::size_t epoch, std::size_t step, bool first) override {
    if (first) warn_if_all_zero(m_.host_outputs(b_.size).data(), b_.size * MT::output_size);
    if constexpr (std::tuple_size_v<metrics_type> > 0)
      update_metrics<MT>(metrics_, m_.host_outputs(b_.size).data(), b_, &m_.step_mask());
    if (r.updated) check_model_finite(m_, [&] { return fit_update_where(epoch, step); }, r.parameters_finite);
  }
  [[gnu::cold]] void metric_logs(logs& l) override {
    std::apply([&](auto&... mm) { (l.set(mm.name(), mm.result()), ...); }, metrics_);
  }
  [[gnu::cold]] void validate(logs& l, std::size_t seen) override {
    std::apply([&](auto&... x) {
      ((void)[&] {
        if constexpr (is_validation_v<std::remove_cv_t<std::remove_reference_t<decltype(x)>>>) {
          logs vl = evaluate_impl(m_, loss_, x.data, val_metrics_, "val_");
          for (auto& [k, v] : vl.items) l.set(k, v);
        }
      }(), ...);
    }, extras_);
    std::apply([&](auto&... h) {  // hooks that reduce the loss, metrics and val_* across ranks (data_parallel)
      ((void)[&] { if constexpr (requires { h.reduce_logs(l, seen); }) h.reduce_logs(l, seen); }(), ...);
    }, hooks_);
  }
  [[gnu::cold]] double learning_rate() override { return ctx.learning_rate(); }
  [[gnu::cold]] void extra_logs(logs& l) override {
    m_.log_epoch(l);  // the backend's figures (CUDA: device_wait_seconds, device_compute_seconds, graph_steps)
    std::apply([&](auto&... h) {  // hooks that log (loss_scale: the scale, skipped steps)
      ((void)[&] { if constexpr (requires { h.log_epoch(l); }) h.log_epoch(l); }(), ...);
    }, hooks_);
  }
  [[gnu::cold]] bool autotune_messages(std::vector<std::string>& said) override {
    if constexpr (requires { train_.autotuner().messages(); }) {
      said = train_.autotuner().messages();
      return true;
    } else {
      return false;
    }
  }
  [[gnu::cold]] void close() override { cursor_.reset(); }
  [[gnu::cold]] void finish() override {
    if constexpr (requires { opt_.finalize(m_); }) opt_.finalize(m_);
  }
  [[gnu::cold]] void failed(const std::string& what) override {
    std::apply([&](auto&... x) {
      ((void)[&] { if constexpr (requires { x.on_failure(what); }) x.on_failure(what); }(), ...);
    }, extras_);
  }

 private:
  using metrics_type = decltype(select<is_metric_for<MT>::template pred, true>(std::declval<E&>()...));
  using callbacks_type = decltype(select<is_callback, false>(std::declval<E&>()...));
  using hooks_type = decltype(select<is_hook_for<MT>::template pred, false>(std::declval<E&>()...));
  using cursor_type = decltype(std::declval<const D&>().open(std::size_t{}));

  MT& m_;
  const L& loss_;
  O& opt_;
  const D& train_;
  std::tuple<E&...> extras_;
  // Metrics are copied twice (training, validation); callbacks and hooks are kept by reference.
  metrics_type metrics_;
  metrics_type val_metrics_;
  callbacks_type callbacks_;
  hooks_type hooks_;
  std::optional<typename fit_step_of<MT, L, O, hooks_type>::type> step_;
  data::batch_for<D> b_;
  std::optional<made_from<cursor_type>> cursor_;
};
}  // namespace detail

// Trains m for ep.count epochs: per epoch, one train_step (train/step.hpp) per
// mini-batch of `train`, then validation and the callbacks. The loop itself is
// detail::fit_epochs (fit_loop.hpp), around this network's fit_session_of.
template <Model M, class L, class O, data::Dataset D, class... Extras>
  requires Loss<L, typename std::remove_cvref_t<M>::value_type> &&
           Optimizer<O, typename std::remove_cvref_t<M>::variable_type>
history fit(M& m, const L& loss, O& opt, const D& train, epochs ep, Extras&&... extras) {
  using MT = std::remove_cvref_t<M>;
  static_assert(detail::check_compatible<MT, L, D>());
  static_assert((detail::check_validation<MT, L, std::remove_cvref_t<Extras>>() && ...));
  static_assert((detail::check_metric<MT, std::remove_cvref_t<Extras>, D>() && ...));
  static_assert(detail::check_extras<MT, std::remove_cvref_t<Extras>...>());
  static_assert((detail::is_fit_extra<Extras, MT>() && ...),
                "fit: every extra argument must be a metric, a callback, a step hook, validation_data(...) or "
                "ieee_denormals{}");
  history hist;
  detail::fit_session_of<MT, L, O, D, std::remove_reference_t<Extras>...> s(m, loss, opt, train, hist, extras...);
  s.ctx.epochs = ep.count;
  if constexpr (requires { train.batches_per_epoch(); }) s.ctx.steps = train.batches_per_epoch();
  ((void)[&] {  // data-parallel training: this process's rank, before any callback runs
    if constexpr (requires { { extras.process_role() } -> std::convertible_to<process_role>; }) s.ctx.role = extras.process_role();
  }(), ...);
  detail::fit_epochs(s, s.ctx);
  return hist;
}

}  // namespace ctnn
