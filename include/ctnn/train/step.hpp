// ctnn/train/step.hpp — one training step in fixed phases.
//
// train_step<M, L, O, Hooks...>::run(x, y, n, epoch, step):
//   1. forward              the model on the batch (training mode)
//   2. loss                 through ops<B> into the model's scalars; dL/dy times state.loss_scale;
//                           the regularizers' penalty into the scalars (ops<B>::add_penalty)
//   3. backward             parameter gradients; then ONE read of the scalars: a non-finite
//                           loss (+ penalty) ends the step here (fit raises numeric_error)
//   4. transform_gradients  hooks (loss scale undone; may skip the update or reject the step),
//                           regularizers' gradients (unscaled), the optimizer's (with_options)
//   5. update               the optimizer on the whole parameter region (unless skipped)
//   6. after_update         the optimizer's (EMA), the hooks' (masks); the counts advance
// Where nothing in 4 needs every gradient first (per_layer_update_allowed: no loss scale, no
// gradient hook, no gradient accumulation or global_clipnorm), 4 (the regularizers' gradients,
// with_options' clipping and decay) and 5 run inside 3, each layer's right after its gradients
// (model's detail::layer_update_hook), with the same bits.
// A hook (StepHook) has one or more of scale_loss, transform_gradients, after_update taking
// step_state<M>&. The batch reaches the model through the backend's feeder; phases 1-3 run
// as one call (model::train_pass) that reads nothing on the host (CUDA captures it as a graph
// unless a layer draws random numbers), phases 4-6 as a second. On the CPU the runner sets flush-to-zero unless ieee_denormals is true.
// The phases, hooks and counts in full: docs/training.md and docs/design.md, "Training".
#pragma once
#include <atomic>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <span>
#include <tuple>
#include <type_traits>
#include <utility>

#include "../losses/loss.hpp"
#include "../optimizers/prepared.hpp"
#include "model.hpp"
#include "numerics.hpp"

namespace ctnn {

namespace detail {
// A fresh id (> 0) per train_step: a runner never replays one step's captured pass for another.
inline std::uint64_t next_step_id() {
  static std::atomic<std::uint64_t> n{0};
  return ++n;
}
// Values per sample of a target array: one label (sparse), else one per output.
template <class M, class Target>
constexpr std::size_t target_width() {
  using Out = typename M::network::output_type;  // a per-step output <S, K> with int labels: step_labels<S>
  if constexpr (std::is_integral_v<Target>) return Out::rank == 2 ? Out::dims[0] : 1;
  else return M::output_size;
}
}  // namespace detail

// What the phases of one step share; hooks read and change it.
template <class M>
struct step_state {
  M& model;
  std::size_t epoch = 0, step = 0;  // 0-based
  std::size_t batch = 0;            // samples in this batch
  std::int64_t iteration = 0;       // updates applied before this step (Keras' optimizer.iterations)
  std::int64_t micro_step = 0;      // steps before this one (Keras' _iterations; > iteration with accumulation)
  double learning_rate = 0;         // detail::current_learning_rate: the schedule's rate * the model's scale
  double loss_scale = 1.0;          // dL/dy is multiplied by it in the loss phase
  bool apply_update = true;         // false: phase 5 is skipped
  bool parameters_finite = true;    // phase 5 found every new parameter finite
  bool count_iteration = true;      // false: the update count stays even if an update ran
  bool skip_step = false;           // a hook rejected the gradients: phases 4 (rest) to 6 and the counts are skipped
  std::span<typename M::variable_type> parameters{}, gradients{}, slots{};
  const typename M::value_type* inputs = nullptr;  // the batch's input values (batch * input_size; run() only)
};

template <class H, class M>
concept has_scale_loss = requires(H& h, step_state<M>& s) { h.scale_loss(s); };
template <class H, class M>
concept has_transform_gradients = requires(H& h, step_state<M>& s) { h.transform_gradients(s); };
template <class H, class M>
concept has_after_update = requires(H& h, step_state<M>& s) { h.after_update(s); };
// A customisation of the step's phases (loss scaling, masks, replica reduction).
template <class H, class M>
concept StepHook = has_scale_loss<H, M> || has_transform_gradients<H, M> || has_after_update<H, M>;

// What one step did.
struct step_result {
  double loss_sum = 0;   // sum of the per-sample losses (unscaled)
  double penalty = 0;    // regularization penalty
  bool updated = false;  // the optimizer's update ran
  bool skipped = false;  // a hook rejected the step (loss scaling: non-finite gradients)
  bool parameters_finite = true;  // ... and left every parameter finite (checked inside its loop)
  bool per_layer = false;  // ... layer by layer inside backward (train_step::set_per_layer_update)
};

template <class M, class L, class O, class... Hooks>
class train_step {
 public:
  using T = typename M::value_type;  // inputs, outputs and dL/dy
  using B = typename M::backend;
  static_assert(std::is_floating_point_v<typename M::variable_type>,
                "train_step: this model's variables are 16-bit (precision::float16 is for inference); train under "
                "precision::mixed_float16 or mixed_bfloat16, whose variables are float32");

  train_step(M& m, L loss, O& opt, std::tuple<Hooks&...> hooks = {}, bool ieee_denormals = false)
      : m_(m), loss_(loss), opt_(opt), hooks_(hooks), ieee_denormals_(ieee_denormals) {
    detail::training_access::prepare_optimizer(m_, opt_);
  }

  // One step on a batch of `n` samples x (n * input_size values) with targets y.
  template <class Target>
  step_result run(const T* x, const Target* y, std::size_t n, std::size_t epoch, std::size_t step) {
    if (n > m_.batch_capacity()) m_.reserve(n, opt_.slots_per_parameter());
    step_state<M> s = state(epoch, step, n);
    s.inputs = x;
    each([&](auto& h) {
      if constexpr (has_scale_loss<std::remove_cvref_t<decltype(h)>, M>) h.scale_loss(s);
    });
    detail::check_loss_targets<typename M::network::output_type>(loss_, y, n);  // on the host, before anything runs
    m_.reset_scalars(s.loss_scale);                              // sums 0, the loss scale the loss ops read
    // the batch where the model reads it (the feeder: zero-copy on the CPU)
    const T* dx = m_.feed(0, x, n * M::input_size);
    const Target* dy = m_.feed(1, y, n * detail::target_width<M, Target>());

    // 5. in 3.: each layer's update right after its gradients (per_layer_update_allowed)
    per_layer_context ctx{&opt_, {s.parameters.data(), s.gradients.data(), s.slots.data(), s.parameters.size(),
                                  s.iteration, s.learning_rate},
                          &s};
    if constexpr (prepares_update) ctx.prepared = opt_.template prepare<V>(s.iteration, s.learning_rate);
    detail::layer_update_hook hook{&ctx, &per_layer_ready};
    hook.rows = !transform_per_layer;  // the fused backward's row blocks (an update without a transform)
    struct hook_guard {
      M& m;
      ~hook_guard() { detail::training_access::set_update_hook(m, nullptr); }
    } guard{m_};
    if (per_layer_update_allowed()) detail::training_access::set_update_hook(m_, &hook);
    // 1. - 3. nothing here reads the backend's memory on the host (a device runner captures them:
    //         model::train_pass; the loss scale is read from the scalars where the loss runs)
    // 1. forward, 2. loss: the loss sum into the scalars, dL/dy times the loss scale,
    // 3. backward (the regularizers' gradients are added in phase 4, unscaled)
    last_output_ = m_.train_pass(
        dx, dy, n, id_,
        [&](const T* out) {
          detail::step_loss_into<typename M::network::output_type, B>(loss_, out, dy, m_.output_gradient(), n,
                                                                     &m_.step_mask(), m_.scalars());
          m_.add_penalty(m_.scalars());  // the regularizers' penalty into the scalars too
        },
        !ieee_denormals_);
    detail::training_access::set_update_hook(m_, nullptr);
    // the one read of the scalars per step, then the host decides
    const step_scalars sc = m_.read_scalars();
    step_result r;
    r.loss_sum = sc.loss_sum;
    r.penalty = sc.penalty;
    if (sc.non_finite || !std::isfinite(r.loss_sum + r.penalty)) return r;  // the caller decides (fit raises numeric_error)
    // 4. - 6.
    return m_.run(
        [&] {
          r.updated = apply_gradients(s, hook.used ? &ctx : nullptr);
          r.parameters_finite = s.parameters_finite;
          r.per_layer = r.updated && hook.used;
          r.skipped = s.skip_step;
          return r;
        },
        !ieee_denormals_);
  }

  // Phases 4 to 6 on the gradients the model holds now (run() calls it after
  // backward; a test or a custom loop may fill gradients() itself).
  bool apply_gradients(std::size_t epoch = 0, std::size_t step = 0) {
    step_state<M> s = state(epoch, step, 0);
    return m_.run([&] { return apply_gradients(s); }, !ieee_denormals_);
  }

  // The outputs of the last run's forward pass (batch rows).
  const T* output() const noexcept { return last_output_; }

  // Whether run() applies each layer's update inside backward, right after that layer's
  // gradients (on by default; where allowed: per_layer_update_allowed). Off: every update after
  // the whole backward. Either way each parameter gets the same arithmetic (the same bits).
  void set_per_layer_update(bool on) noexcept { per_layer_update_ = on; }
  // Whether the next run() updates layer by layer: set_per_layer_update(true), a model whose
  // backward can (model::updates_per_layer: host memory, float32 / float64 variables without
  // compute-type copies), no hook that scales the loss or transforms the gradients (loss
  // scaling, masks on gradients, data_parallel: they need every gradient first) and an optimizer
  // without its own transform (with_options: accumulation, clipping, weight decay). A non-finite
  // loss or penalty leaves every update to phase 5 (where the step ends before it, as always).
  bool per_layer_update_allowed() const noexcept {
    if constexpr (transform_per_layer) return per_layer_update_ && per_layer_possible && opt_.per_layer_transform();
    else return per_layer_update_ && per_layer_possible;
  }

 private:
  step_state<M> state(std::size_t epoch, std::size_t step, std::size_t n) {
    const optimizer_state& os = m_.optimizer_state();
    step_state<M> s{m_};
    s.epoch = epoch;
    s.step = step;
    s.batch = n;
    s.iteration = os.iterations;
    s.micro_step = os.steps;
    s.learning_rate = detail::current_learning_rate(opt_, os);
    s.parameters = m_.parameters();
    s.gradients = m_.gradients();
    s.slots = m_.optimizer_slots();
    return s;
  }

  // an optimizer's transform_gradients that can run layer by layer on some steps (with_options)
  static constexpr bool transform_per_layer = requires(const O& o, step_state<M>& s) {
    { o.per_layer_transform() } -> std::convertible_to<bool>;
    o.transform_range(s, std::size_t{}, std::size_t{});
  };
  // an optimizer that computes its update's coefficients once for all the step's per-layer calls
  // (adam::prepare: its two pow once a step instead of once a call)
  // (optimizers/prepared.hpp's detail::prepared_update: not where a derived type replaces update only,
  // whose update the step then calls; one that replaces prepare only is refused)
  static_assert(diag::require<!detail::prepare_without_update<O, B, typename M::variable_type>(),
                              &detail::prepare_without_update_text<O>>());
  static constexpr bool prepares_update = detail::prepared_update<O, B, typename M::variable_type>;
  struct no_prepared {};
  template <bool P, class = void>
  struct prepared_of {
    using type = no_prepared;
  };
  template <class D>
  struct prepared_of<true, D> {
    using type = decltype(std::declval<const O&>().template prepare<typename M::variable_type>(std::int64_t{}, 0.0));
  };
  static constexpr bool per_layer_possible =
      M::updates_per_layer && (!has_transform_gradients<O, M> || transform_per_layer) &&
      !(false || ... || (has_scale_loss<Hooks, M> || has_transform_gradients<Hooks, M>));
  using V = typename M::variable_type;
  // What the per-layer update (detail::layer_update_hook) needs: the optimizer, the whole region's
  // update_args (the layers' parts are ranges of it), whether every new weight was finite.
  struct per_layer_context {
    O* opt;
    update_args<V> whole;
    step_state<M>* state;
    typename prepared_of<prepares_update>::type prepared{};  // prepares_update: the coefficients of this step's update
    std::atomic<bool> finite{true};  // per_layer_ready may run on the pool's threads (layer_update_hook::rows)
  };
  static void per_layer_ready(void* c, std::size_t lo, std::size_t hi) {
    per_layer_context& x = *static_cast<per_layer_context*>(c);
    if constexpr (transform_per_layer) x.opt->transform_range(*x.state, lo, hi);  // phase 4's, on this part
    update_args<V> a = x.whole;
    a.w += lo;
    a.g += lo;
    a.slots += lo;
    a.n = hi - lo;
    a.slot_stride = x.whole.n;
    if constexpr (prepares_update) {
      if (!x.prepared.template run<B>(a)) x.finite.store(false, std::memory_order_relaxed);
    } else if constexpr (std::is_same_v<decltype(x.opt->template update<B>(a)), bool>) {
      if (!x.opt->template update<B>(a)) x.finite.store(false, std::memory_order_relaxed);
    } else {
      x.opt->template update<B>(a);
    }
  }

  // Phases 4-6; done: the update already ran layer by layer in backward (per_layer_context), so
  // phase 4's regularizer gradients and phase 5 are done (no hook or optimizer transform exists then).
  bool apply_gradients(step_state<M>& s, const per_layer_context* done = nullptr) {
    if (done) {
      if constexpr (std::is_same_v<decltype(opt_.template update<B>(std::declval<const update_args<V>&>())), bool>)
        s.parameters_finite = done->finite.load(std::memory_order_relaxed);
      else
        s.parameters_finite = ops<B>::all_finite(s.parameters.data(), s.parameters.size());
      return after_update(s);
    }
    // 4. transform the gradients: the hooks (which undo a loss scale), then the
    //    regularizers' gradients (never scaled), then the optimizer's transform
    each([&](auto& h) {
      if constexpr (has_transform_gradients<std::remove_cvref_t<decltype(h)>, M>) {
        if (!s.skip_step) h.transform_gradients(s);
      }
    });
    if (s.skip_step) return false;  // rejected: weights, slots and counts stay as they are
    m_.add_penalty_gradients();
    if constexpr (has_transform_gradients<O, M>) opt_.transform_gradients(s);
    // 5. update
    if (s.apply_update) {
      const update_args<typename M::variable_type> a{s.parameters.data(), s.gradients.data(), s.slots.data(),
                                                     s.parameters.size(), s.iteration,      s.learning_rate};
      if constexpr (std::is_same_v<decltype(opt_.template update<B>(a)), bool>) {
        s.parameters_finite = opt_.template update<B>(a);
      } else {  // an optimizer that does not report it: scan
        opt_.template update<B>(a);
        s.parameters_finite = ops<B>::all_finite(s.parameters.data(), s.parameters.size());
      }
    }
    return after_update(s);
  }
  // 6. after the update; the counts
  bool after_update(step_state<M>& s) {
    if constexpr (has_after_update<O, M>) opt_.after_update(s);
    each([&](auto& h) {
      if constexpr (has_after_update<std::remove_cvref_t<decltype(h)>, M>) h.after_update(s);
    });
    optimizer_state& os = detail::training_access::optimizer_state(m_);
    if (s.apply_update && s.count_iteration) ++os.iterations;
    ++os.steps;
    return s.apply_update;
  }
  template <class F>
  void each(F&& f) {
    std::apply([&](auto&... h) { (f(h), ...); }, hooks_);
  }

  M& m_;
  L loss_;
  O& opt_;
  std::tuple<Hooks&...> hooks_;
  bool ieee_denormals_;
  bool per_layer_update_ = true;
  const T* last_output_ = nullptr;
  std::uint64_t id_ = detail::next_step_id();  // keys this step's captured passes (model::train_pass)
};

template <class M, class L, class O>
train_step(M&, L, O&) -> train_step<M, L, O>;

}  // namespace ctnn
