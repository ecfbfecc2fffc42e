// ctnn/cuda/fit.cuh — fit and evaluate for model<Net, P, cuda<SM>>.
//
// fit(model, sparse_categorical_crossentropy{.from_logits = true}, optimizer,
// dataset, epochs{n}, extras...) trains on the device: the phases of
// train/step.hpp (forward, loss (scaled), backward, gradient transform,
// update, after-update) and the same optimizer state (update count,
// learning-rate scale, slots in the plan). Batches are staged in two pinned
// host buffers and copied on the context's copy stream while the compute
// stream runs the previous step; events order the streams.
// extras, in any order: metrics (computed on the host from the step's
// logits, copied back widened to float: no device metric exists yet),
// callbacks (the same train_context as the CPU fit: on_train_begin ..
// on_batch_end; stop_training; ctx.model is a callback_model, the device
// model's variables in host memory, copied from the device when a hook reads
// them and back when it changed them: early_stopping's restore_best_weights
// and model_checkpoint work as on the CPU), validation_data(ds) (evaluated on the
// device, val_loss, val_accuracy and val_<metric>) and a loss_scale
// (train/loss_scale.hpp: its decisions, record(), are the host's; the
// gradients are checked and unscaled on the device). Other step hooks run
// on the CPU only (a compile error says so).
// Precision: float32, mixed_float16, mixed_bfloat16 (cuda/model.cuh). Under
// mixed_float16 fit scales the loss with a dynamic loss_scale of its own when
// none is given (Keras' model.fit does the same); under mixed_bfloat16 and
// float32 only a loss_scale passed as an extra scales. With a loss scale the
// step queues: dL/dy * scale (the scale read from device memory), backward,
// the gradients times 1/scale into the float32 gradients with a non-finite
// flag; then the host reads the flag and loss_scale::record decides: skip
// (no variable, slot or count changes; the scale halves) or go on
// (regularizer gradients, clipping etc., update, the 16-bit weights
// refreshed). The history then holds loss_scale and skipped_steps.
// CUDA graphs: when m.options().graph_training (default) and no layer draws
// random numbers (dropout), the step's device part (input conversion,
// forward, loss, backward, unscaling, logits for the metrics) runs
// uncaptured the first time a (staging buffer, batch size) pair is seen (its
// cuBLASLt plans are made then), is captured the second time and replayed
// from then on; the optimizer update
// (its learning rate and bias correction change every step) runs after it,
// uncaptured. When capture fails the step runs uncaptured for the rest of
// fit. Per epoch "graph_steps" counts the steps that ran as a graph.
// Per epoch the logs hold loss, accuracy (argmax == label), each metric,
// val_*, learning_rate, seconds, data_seconds (host time in the dataset),
// device_wait_seconds (CUDA events: the compute stream waiting for a copy),
// compute_seconds (CUDA events: from the end of that wait to the end of the
// update), input_share = (data_seconds + device_wait_seconds) / seconds,
// input_bound, graph_steps. A non-finite loss throws ctnn::numeric_error
// naming the epoch and step (unless a callback stops training in
// on_batch_end), as does a non-finite parameter after an update; a label out
// of range throws std::out_of_range. Not on the device yet: other losses,
// the all-zero-output warning of the CPU fit, ieee_denormals.
#pragma once
#include <chrono>
#include <climits>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>
#include <set>
#include <span>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "../../core/errors.hpp"
#include "../../data/dataset.hpp"
#include "../../losses/sparse_categorical_crossentropy.hpp"
#include "../../train/fit.hpp"
#include "../../optimizers/options.hpp"
#include "../../train/history.hpp"
#include "../../train/loss_scale.hpp"
#include "model.cuh"

namespace ctnn {

namespace cuda_detail {

// A CUDA event, destroyed with its owner.
struct event {
  cudaEvent_t e = nullptr;
  event() { CTNN_CUDA_CHECK(cudaEventCreate(&e)); }
  event(const event&) = delete;
  event& operator=(const event&) = delete;
  ~event() {
    if (e) cudaEventDestroy(e);
  }
  operator cudaEvent_t() const noexcept { return e; }
};
inline double elapsed(const event& a, const event& b) {
  float ms = 0;
  CTNN_CUDA_CHECK(cudaEventElapsedTime(&ms, a, b));
  return double(ms) / 1000.0;
}

// Two staging slots: pinned host rows and labels, their device copies (and
// the rows in the compute type C when it is not T), and the events that order them.
template <class T, class C = T>
struct staging {
  pinned_buffer<T> hx[2];
  pinned_buffer<std::int32_t> hy[2];
  device_buffer<T> dx[2];
  device_buffer<C> dc[2];
  device_buffer<std::int32_t> dy[2];
  event copied[2], released[2];
  std::size_t size[2] = {0, 0};
  std::size_t capacity[2] = {0, 0};

  staging() = default;
  staging(const staging&) = delete;
  staging& operator=(const staging&) = delete;
  ~staging() { cudaDeviceSynchronize(); }  // no copy may still use the buffers (errors are not thrown here)

  // Slot k holds `rows` rows (grown when needed; its old contents are not
  // needed then). True when it was reallocated (graphs that captured it are stale).
  bool ensure(int k, std::size_t rows, std::size_t width) {
    if (rows <= capacity[k]) return false;
    CTNN_CUDA_CHECK(cudaDeviceSynchronize());  // nothing may still read or fill the slot
    hx[k] = pinned_buffer<T>(rows * width);
    hy[k] = pinned_buffer<std::int32_t>(rows);
    dx[k] = device_buffer<T>(rows * width);
    if constexpr (!std::is_same_v<T, C>) dc[k] = device_buffer<C>(rows * width);
    dy[k] = device_buffer<std::int32_t>(rows);
    capacity[k] = rows;
    return true;
  }
  // The device rows of slot k in the compute type.
  const C* rows(int k) const {
    if constexpr (std::is_same_v<T, C>) return dx[k].data();
    else return dc[k].data();
  }
};

// Labels on the host beside host logits: what detail::update_metrics reads.
struct host_batch {
  std::span<const std::int32_t> y;
  std::size_t size = 0;
};

// The step's logits as float rows in out (device): widened, or copied.
template <class B, class C>
void logits_to_float(const C* y, float* out, std::size_t n) {
  if constexpr (std::is_same_v<C, float>) ops<B>::copy(y, out, n);
  else ops<B>::widen(y, out, n);
}

// Loss (mean, + the regularization penalty), accuracy and the metrics of
// model m on dataset ds, batch by batch in inference mode, keys prefixed.
template <class M, class D, class Ms>
logs evaluate_device(M& m, const D& ds, Ms& metrics, const std::string& prefix) {
  using T = typename M::value_type;
  using C = typename M::compute_type;
  using B = typename M::backend;
  using Ops = ops<B>;
  constexpr std::size_t width = M::input_size, classes = M::output_size;
  constexpr bool with_metrics = std::tuple_size_v<Ms> > 0;
  std::apply([](auto&... mm) { (mm.reset(), ...); }, metrics);
  const cudaStream_t compute = cuda_context::get().compute();
  device_buffer<double> acc(3);
  pinned_buffer<double> hacc(3);
  CTNN_CUDA_CHECK(cudaMemsetAsync(acc.data(), 0, 3 * sizeof(double), compute));
  const int none = INT_MAX;
  CTNN_CUDA_CHECK(cudaMemcpyAsync(acc.data() + 1, &none, sizeof none, cudaMemcpyHostToDevice, compute));
  device_buffer<T> dx;
  device_buffer<C> dc;
  device_buffer<std::int32_t> dy;
  device_buffer<float> dlog;
  std::vector<float> hlog;
  data::batch_for<D> b;
  std::size_t seen = 0;
  auto cur = ds.open(0);
  while (cur.next(b)) {
    Ops::synchronize();  // the previous batch's kernels are done with dx
    if (dx.size() < b.size * width) {
      dx = device_buffer<T>(b.size * width);
      if constexpr (!std::is_same_v<T, C>) dc = device_buffer<C>(b.size * width);
      dy = device_buffer<std::int32_t>(b.size);
      if constexpr (with_metrics) dlog = device_buffer<float>(b.size * classes);
    }
    cuda_device_memory::copy(dx.data(), b.x.data(), b.size * width * sizeof(T));
    cuda_device_memory::copy(dy.data(), b.y.data(), b.size * sizeof(std::int32_t));
    const C* in;
    if constexpr (std::is_same_v<T, C>) {
      in = dx.data();
    } else {
      Ops::convert(static_cast<const float*>(dx.data()), dc.data(), b.size * width);
      in = dc.data();
    }
    const C* y = m.forward(in, b.size, false);
    Ops::sparse_crossentropy_logits_async(y, dy.data(), static_cast<C*>(nullptr), b.size, classes, 1.0f, acc.data(),
                                          reinterpret_cast<int*>(acc.data() + 1));
    cuda_kernels::count_correct<<<Ops::grid(b.size), Ops::block, 0, compute>>>(
        y, dy.data(), b.size, classes, reinterpret_cast<unsigned long long*>(acc.data() + 2));
    Ops::launched();
    if constexpr (with_metrics) {
      logits_to_float<B>(y, dlog.data(), b.size * classes);
      hlog.resize(b.size * classes);
      Ops::synchronize();
      cuda_device_memory::copy(hlog.data(), dlog.data(), hlog.size() * sizeof(float));
      detail::update_metrics<M>(metrics, hlog.data(), host_batch{{b.y.data(), b.size}, b.size});
    }
    seen += b.size;
  }
  if (seen == 0) throw std::invalid_argument("evaluate: the dataset is empty");
  CTNN_CUDA_CHECK(cudaMemcpyAsync(hacc.data(), acc.data(), 3 * sizeof(double), cudaMemcpyDeviceToHost, compute));
  Ops::synchronize();
  int bad;
  std::memcpy(&bad, hacc.data() + 1, sizeof bad);
  if (bad != INT_MAX) throw std::out_of_range("evaluate: a label is outside [0, " + std::to_string(classes) + ")");
  unsigned long long right;
  std::memcpy(&right, hacc.data() + 2, sizeof right);
  logs l;
  l.set(prefix + "loss", hacc.data()[0] / double(seen) + (M::regularized ? m.penalty() : 0.0));
  l.set(prefix + "accuracy", double(right) / double(seen));
  std::apply([&](auto&... mm) { (l.set(prefix + mm.name(), mm.result()), ...); }, metrics);
  if (!std::isfinite(l[prefix + "loss"]))
    throw numeric_error(prefix.empty() ? "evaluate: the loss is not finite" : "fit: the validation loss is not finite");
  return l;
}

template <class O>
concept has_options = requires(const O& o) {
  O::inner_slots;
  { o.options } -> std::convertible_to<optimizer_options>;
};

// Phases 4-6 of train/step.hpp on the device for one step: with_options'
// accumulation, clipping and weight decay, the optimizer's update, the
// moving average; then the counts (as train/step.hpp). Returns whether the parameters are
// finite (true when no update ran); *updated says whether one did.
template <class B, class M, class O>
bool device_update(M& m, const O& opt, bool& updated) {
  using Ops = ops<B>;
  using V = typename M::variable_type;
  optimizer_state& os = m.mutable_optimizer_state();
  const double lr = ctnn::detail::current_learning_rate(opt, os);
  V* w = m.parameters().data();
  V* g = m.gradients().data();
  V* slots = m.optimizer_slots().data();
  const std::size_t n = m.parameters().size();
  bool apply = true, finite = true;
  if constexpr (has_options<O>) {
    const optimizer_options& o = opt.options;
    const int N = o.gradient_accumulation_steps;
    if (N > 1) {
      V* acc = slots + O::inner_slots * n;
      if (os.steps % N < N - 1) {
        Ops::accumulate(acc, g, n);
        apply = false;
      } else {
        Ops::accumulated_mean(g, acc, n, float(1.0 / double(N)));
      }
    }
    if (apply) {
      if (o.clipnorm) {
        m.for_each_variable([&](const variable_ref& v) {
          if (v.kind == role::parameter) Ops::clip_by_norm(g + v.offset / sizeof(V), v.extent, *o.clipnorm);
        });
      } else if (o.global_clipnorm) {
        Ops::clip_by_norm(g, n, *o.global_clipnorm);
      } else if (o.clipvalue) {
        Ops::clip_value(g, n, float(*o.clipvalue));
      }
      if (o.weight_decay) Ops::scale(w, n, float(1.0 - double(V(*o.weight_decay * lr))));
    }
  }
  if (apply) {
    const update_args<V> a{w, g, slots, n, os.iterations, lr};
    finite = opt.template update<B>(a);
  }
  if constexpr (has_options<O>) {
    const optimizer_options& o = opt.options;
    if (o.use_ema && (apply || o.count_micro_steps)) {
      V* avg = slots + (O::inner_slots + 1) * n;
      Ops::moving_average(avg, w, n, os.iterations == 0 ? 0.0f : float(o.ema_momentum));
      if (o.ema_overwrite_frequency > 0 && (os.iterations + 1) % o.ema_overwrite_frequency == 0) Ops::copy(avg, w, n);
    }
  }
  if (apply) ++os.iterations;
  ++os.steps;
  updated = apply;
  return finite;
}

// End of fit: with use_ema the weights become their moving average (with_options::finalize).
template <class B, class M, class O>
void device_finalize(M& m, const O& opt) {
  if constexpr (has_options<O>) {
    if (!opt.options.use_ema || m.optimizer_iterations() == 0) return;
    const std::size_t n = m.parameters().size();
    ops<B>::copy(m.optimizer_slots().data() + (O::inner_slots + 1) * n, m.parameters().data(), n);
    m.push_parameters();
    ops<B>::synchronize();
  }
}


// What callbacks see as ctx.model on the device: the CPU model's interface
// to the variables in host memory (parameters(), gradients(), state(),
// for_each_variable: a host_variables<M>, cuda/host_variables.cuh), the
// optimizer state (learning_rate(), scale_learning_rate()), predict() and
// device(), the device model itself. The variables are copied from the
// device on the first access during a hook and copied back after the hook
// when a callback changed their bytes (early_stopping's
// restore_best_weights); a hook that does not touch them costs nothing, one
// that only reads them (model_checkpoint's io::save_weights(ctx.model, path),
// early_stopping's copy of the best weights) one copy from the device. Within
// a hook, the device model does not see host changes until the hook returns.
// M only needs variables_to_host(), variables_from_host(h),
// optimizer_state(), mutable_optimizer_state() and predict().
template <class M>
class callback_model {
 public:
  using network = typename M::network;
  using device_model = M;
  using host_type = decltype(std::declval<const M&>().variables_to_host());
  using variable_type = typename host_type::variable_type;
  using value_type = typename M::value_type;
  static constexpr std::size_t input_size = M::input_size, output_size = M::output_size;

  explicit callback_model(M& m) : m_(m), opt_(m.mutable_optimizer_state()) {}
  callback_model(const callback_model&) = delete;
  callback_model& operator=(const callback_model&) = delete;

  std::span<variable_type> parameters() { return host().parameters(); }
  std::span<variable_type> gradients() { return host().gradients(); }
  std::span<variable_type> state() { return host().state(); }
  template <class F>
  void for_each_variable(F&& f) const {
    host().for_each_variable(f);
  }
  const ctnn::optimizer_state& optimizer_state() const noexcept { return m_.optimizer_state(); }
  std::vector<value_type> predict(const value_type* x, std::size_t n, std::size_t batch = 256) {
    return m_.predict(x, n, batch);
  }
  M& device() noexcept { return m_; }
  // Whether the variables were copied from the device during this hook.
  bool pulled() const noexcept { return pulled_; }

  // Around every hook call (call_device_callbacks): after it, changed
  // variables go back to the device and the next hook copies them afresh.
  void end_hook() {
    if (pulled_ && host_.bytes() != snapshot_) m_.variables_from_host(host_);
    pulled_ = false;
  }

 private:
  friend struct detail::training_access;  // optimizer_state(ctx.model): scale_learning_rate
  host_type& host() const {
    if (!pulled_) {
      host_ = m_.variables_to_host();
      snapshot_ = host_.bytes();
      pulled_ = true;
    }
    return host_;
  }
  M& m_;
  ctnn::optimizer_state& opt_;
  mutable host_type host_{};
  mutable std::vector<std::byte> snapshot_;
  mutable bool pulled_ = false;
};

// Calls hook H of every callback with the device fit's context, whose model
// is a callback_model: changed variables are copied back after the hook.
template <detail::callback_hook H, class Callbacks, class Ctx>
void call_device_callbacks(Callbacks& callbacks, Ctx& ctx) {
  try {
    detail::call_callbacks<H>(callbacks, ctx);
  } catch (...) {
    ctx.model.end_hook();
    throw;
  }
  ctx.model.end_hook();
}

template <class X>
struct is_loss_scale : std::bool_constant<std::is_same_v<X, loss_scale>> {};
template <class E, class M>
constexpr bool is_device_fit_extra() {
  using X = std::remove_cvref_t<E>;
  return Metric<X, typename M::value_type> || Callback<X> || is_validation_v<X> || std::is_same_v<X, loss_scale>;
}

}  // namespace cuda_detail

template <Network Net, class P, int SM, class O, data::Dataset D, class... Extras>
history fit(model<Net, P, cuda<SM>>& m, const sparse_categorical_crossentropy& loss, O& opt, const D& train,
            epochs ep, Extras&&... extras) {
  using M = model<Net, P, cuda<SM>>;
  using T = typename M::value_type;
  using C = typename M::compute_type;
  using B = cuda<SM>;
  using Ops = ops<B>;
  static_assert(std::is_same_v<typename M::variable_type, float>,
                "fit on cuda: this model's variables are 16-bit (precision::float16 or a uniform 16-bit policy is for "
                "inference); train under precision::float32, mixed_float16 or mixed_bfloat16");
  static_assert(detail::check_compatible<M, sparse_categorical_crossentropy, D>());
  static_assert((detail::check_validation<M, sparse_categorical_crossentropy, std::remove_cvref_t<Extras>>() && ...));
  static_assert((detail::check_metric<M, std::remove_cvref_t<Extras>, D>() && ...));
  static_assert((cuda_detail::is_device_fit_extra<Extras, M>() && ...),
                "fit on cuda: every extra argument must be a metric, a callback, validation_data(...) or a loss_scale "
                "(other step hooks and ieee_denormals run on the CPU only)");
  if (!loss.from_logits)
    throw std::invalid_argument("fit on cuda: sparse_categorical_crossentropy needs from_logits = true on the device");
  using clock = std::chrono::steady_clock;
  auto secs = [](clock::duration d) { return std::chrono::duration<double>(d).count(); };
  constexpr std::size_t width = M::input_size, classes = M::output_size;

  auto metrics = detail::select<detail::is_metric_for<M>::template pred, true>(extras...);
  auto val_metrics = metrics;
  auto callbacks = detail::select<detail::is_callback, false>(extras...);
  auto scales = detail::select<cuda_detail::is_loss_scale, false>(extras...);
  static_assert(std::tuple_size_v<decltype(scales)> <= 1, "fit on cuda: at most one loss_scale");
  constexpr bool with_metrics = std::tuple_size_v<decltype(metrics)> > 0;
  constexpr bool with_callbacks = std::tuple_size_v<decltype(callbacks)> > 0;
  // mixed_float16 scales the loss by default (Keras' model.fit wraps the optimizer in a LossScaleOptimizer)
  constexpr bool default_scale = M::mixed && std::is_same_v<C, __half>;
  constexpr bool scaled = default_scale || std::tuple_size_v<decltype(scales)> > 0;
  loss_scale own;
  loss_scale* ls = nullptr;
  if constexpr (std::tuple_size_v<decltype(scales)> > 0) ls = &std::get<0>(scales);
  else if constexpr (default_scale) ls = &own;
  // the host must see the step's loss and flags before the update
  constexpr bool pre_sync = scaled || M::regularized || with_metrics || with_callbacks;

  m.prepare_optimizer(opt);
  history hist;
  cuda_detail::callback_model<M> view(m);  // ctx.model: the variables on the host for the callbacks
  train_context<cuda_detail::callback_model<M>, O> ctx{view, opt, hist};
  ctx.epochs = ep.count;
  if constexpr (requires { train.batches_per_epoch(); }) ctx.steps = train.batches_per_epoch();
  using hook = detail::callback_hook;
  auto on_train_begin = [&] { cuda_detail::call_device_callbacks<hook::train_begin>(callbacks, ctx); };
  auto on_train_end = [&] { cuda_detail::call_device_callbacks<hook::train_end>(callbacks, ctx); };
  auto on_epoch_begin = [&] { cuda_detail::call_device_callbacks<hook::epoch_begin>(callbacks, ctx); };
  auto on_epoch_end = [&] { cuda_detail::call_device_callbacks<hook::epoch_end>(callbacks, ctx); };
  auto on_batch_begin = [&] { cuda_detail::call_device_callbacks<hook::batch_begin>(callbacks, ctx); };
  auto on_batch_end = [&] { cuda_detail::call_device_callbacks<hook::batch_end>(callbacks, ctx); };

  cuda_context& cc = cuda_context::get();
  const cudaStream_t compute = cc.compute(), copy = cc.copy();
  cuda_detail::graph_cache graphs;  // destroyed after st (whose destructor waits for the device)
  cuda_detail::staging<T, C> st;
  cuda_detail::event wait0, start, end;
  // device: [0] loss sum (double), [1] bad row (int), [2] correct count (u64), [3] non-finite gradient flag (int)
  device_buffer<double> acc(4);
  pinned_buffer<double> hacc(4);
  // device: [0] the loss scale, [1] its inverse (written before each step)
  device_buffer<float> dscale(2);
  pinned_buffer<float> hscale(2);
  device_buffer<float> dlog;
  pinned_buffer<float> hlog;
  double* loss_sum = acc.data();
  int* bad_row = reinterpret_cast<int*>(acc.data() + 1);
  auto* correct = reinterpret_cast<unsigned long long*>(acc.data() + 2);
  int* grad_bad = reinterpret_cast<int*>(acc.data() + 3);
  const void* graph_memory = nullptr;
  std::set<std::pair<const void*, std::size_t>> warm;  // (staging buffer, batch) run once uncaptured
  bool capture_failed = false;
  const bool use_graphs = !M::draws_random && m.options().graph_training;

  data::batch_for<D> b;
  on_train_begin();
  for (std::size_t e = 0; e < ep.count && !ctx.stop_training; ++e) {
    ctx.epoch = e;
    ctx.epoch_logs = logs{};
    on_epoch_begin();
    std::apply([](auto&... mm) { (mm.reset(), ...); }, metrics);
    const auto epoch_start = clock::now();
    double data_s = 0, wait_s = 0, compute_s = 0, penalty_sum = 0, last_sum = 0;
    std::size_t seen = 0, graph_steps = 0;
    {
      CTNN_CUDA_CHECK(cudaMemsetAsync(acc.data(), 0, 4 * sizeof(double), compute));
      const int none = INT_MAX;
      CTNN_CUDA_CHECK(cudaMemcpyAsync(bad_row, &none, sizeof none, cudaMemcpyHostToDevice, compute));
      CTNN_CUDA_CHECK(cudaStreamSynchronize(compute));
    }
    auto cur = train.open(e);
    ctx.running_logs = [&] {
      logs r;
      r.set("loss", seen ? (last_sum + penalty_sum) / double(seen) : 0.0);
      std::apply([&](auto&... mm) { (r.set(mm.name(), mm.result()), ...); }, metrics);
      return r;
    };
    // Reads the next batch into slot k and queues its copy; false at the end of the epoch.
    auto load = [&](int k) {
      const auto t0 = clock::now();
      const bool got = cur.next(b);
      data_s += secs(clock::now() - t0);
      if (!got) return false;
      if (st.ensure(k, b.size, width)) graphs.clear();  // the device is idle (ensure synchronized)
      CTNN_CUDA_CHECK(cudaEventSynchronize(st.copied[k]));  // the pinned slot's last copy is done
      std::memcpy(st.hx[k].data(), b.x.data(), b.size * width * sizeof(T));
      std::memcpy(st.hy[k].data(), b.y.data(), b.size * sizeof(std::int32_t));
      st.size[k] = b.size;
      CTNN_CUDA_CHECK(cudaStreamWaitEvent(copy, st.released[k], 0));  // the step that read dx[k] is done
      CTNN_CUDA_CHECK(cudaMemcpyAsync(st.dx[k].data(), st.hx[k].data(), b.size * width * sizeof(T),
                                      cudaMemcpyHostToDevice, copy));
      CTNN_CUDA_CHECK(cudaMemcpyAsync(st.dy[k].data(), st.hy[k].data(), b.size * sizeof(std::int32_t),
                                      cudaMemcpyHostToDevice, copy));
      CTNN_CUDA_CHECK(cudaEventRecord(st.copied[k], copy));
      return true;
    };
    bool have = load(0);
    if (!have) throw std::invalid_argument("fit: the training dataset yielded no batch in epoch " + std::to_string(e + 1));
    for (std::size_t s = 0; have; ++s) {
      const int k = int(s % 2);
      const std::size_t n = st.size[k];
      ctx.step = s;
      on_batch_begin();
      m.reserve(n, O::slots_per_parameter);  // never inside a capture
      if constexpr (with_metrics)
        if (dlog.size() < n * classes) {
          Ops::synchronize();
          graphs.clear();  // they captured the old buffer
          dlog = device_buffer<float>(n * classes);
          hlog = pinned_buffer<float>(n * classes);
        }
      const double used_scale = ls ? ls->scale() : 1.0;
      hscale.data()[0] = float(used_scale);
      hscale.data()[1] = float(1.0 / used_scale);
      CTNN_CUDA_CHECK(cudaEventRecord(wait0, compute));
      CTNN_CUDA_CHECK(cudaStreamWaitEvent(compute, st.copied[k], 0));
      CTNN_CUDA_CHECK(cudaEventRecord(start, compute));
      CTNN_CUDA_CHECK(cudaMemcpyAsync(dscale.data(), hscale.data(), 2 * sizeof(float), cudaMemcpyHostToDevice, compute));
      // 1-3. forward, loss (dL/dy of the batch mean, times the scale), backward, the gradients unscaled
      auto queue = [&] {
        if constexpr (!std::is_same_v<T, C>) Ops::convert(static_cast<const float*>(st.dx[k].data()), st.dc[k].data(), n * width);
        const C* y = m.forward(st.rows(k), n, true);
        Ops::sparse_crossentropy_logits_async(y, st.dy[k].data(), m.output_gradient(), n, classes, float(1.0 / double(n)),
                                              loss_sum, bad_row, scaled ? dscale.data() : nullptr);
        cuda_kernels::count_correct<<<Ops::grid(n), Ops::block, 0, compute>>>(y, st.dy[k].data(), n, classes, correct);
        Ops::launched();
        m.backward();
        if constexpr (scaled || M::mixed) {
          CTNN_CUDA_CHECK(cudaMemsetAsync(grad_bad, 0, sizeof(int), compute));
          m.unscale_gradients(dscale.data() + 1, grad_bad);
        }
        if constexpr (with_metrics) cuda_detail::logits_to_float<B>(y, dlog.data(), n * classes);
      };
      bool graphed = false;
      if (use_graphs && !capture_failed) {
        if (m.memory_id() != graph_memory) {
          graphs.clear();
          warm.clear();
          graph_memory = m.memory_id();
        }
        if (cudaGraphExec_t g = graphs.find(st.dx[k].data(), n)) {
          CTNN_CUDA_CHECK(cudaGraphLaunch(g, compute));
          graphed = true;
        } else if (!warm.insert({st.dx[k].data(), n}).second) {
          // seen once uncaptured (its cuBLASLt plans made outside a capture): capture it now
          graphed = cuda_detail::capture_and_launch(graphs, st.dx[k].data(), n, compute, queue);
          capture_failed = !graphed;
        }
      }
      if (!graphed) queue();
      graph_steps += graphed;
      CTNN_CUDA_CHECK(cudaEventRecord(st.released[k], compute));
      CTNN_CUDA_CHECK(cudaMemcpyAsync(hacc.data(), acc.data(), 4 * sizeof(double), cudaMemcpyDeviceToHost, compute));
      if constexpr (with_metrics)
        CTNN_CUDA_CHECK(cudaMemcpyAsync(hlog.data(), dlog.data(), n * classes * sizeof(float), cudaMemcpyDeviceToHost, compute));
      // the next batch is read and its copy queued while the device works
      have = load(1 - k);
      // The loss, the labels and (scaled) the gradients' flag: false when a callback stopped training.
      double penalty = 0;
      auto check_loss = [&] {
        int bad;
        std::memcpy(&bad, hacc.data() + 1, sizeof bad);
        if (bad != INT_MAX)
          throw std::out_of_range("sparse_categorical_crossentropy: the label of sample " + std::to_string(bad) +
                                  " of a batch in epoch " + std::to_string(e + 1) + " is outside [0, " +
                                  std::to_string(classes) + ")");
        const double batch_loss = (hacc.data()[0] - last_sum) / double(n) + penalty;
        ctx.batch_loss = batch_loss;
        if (std::isfinite(batch_loss)) return true;
        on_batch_end();
        if (ctx.stop_training) return false;
        throw numeric_error("fit: the loss became " + std::string(std::isnan(batch_loss) ? "NaN" : "infinite") +
                            " at epoch " + std::to_string(e + 1) + ", step " + std::to_string(s + 1));
      };
      // 4-6. gradient transform, update (waits for the device), after-update
      bool go = true, updated = false, finite = true;
      if constexpr (pre_sync) {
        CTNN_CUDA_CHECK(cudaStreamSynchronize(compute));
        if constexpr (M::regularized) penalty = m.penalty();  // the weights of this step's forward, as the CPU step
        if (!check_loss()) break;
        if constexpr (scaled) {
          int gb;
          std::memcpy(&gb, hacc.data() + 3, sizeof gb);
          const bool grads_finite = gb == 0;
          const bool data_bad =
              !grads_finite && detail::first_non_finite(st.hx[k].data(), n * width) < n * width;
          go = ls->record(grads_finite, data_bad, e, s);
        }
      }
      if (go) {
        if constexpr (M::regularized) m.add_penalty_gradients();
        finite = cuda_detail::device_update<B>(m, opt, updated);
        m.push_parameters();  // mixed: the update (or the EMA's overwrite) into the 16-bit weights
      }
      CTNN_CUDA_CHECK(cudaEventRecord(end, compute));
      CTNN_CUDA_CHECK(cudaEventSynchronize(end));
      wait_s += cuda_detail::elapsed(wait0, start);
      compute_s += cuda_detail::elapsed(start, end);
      if constexpr (!pre_sync)
        if (!check_loss()) break;
      if (updated && !finite)
        throw numeric_error("fit: after the update of epoch " + std::to_string(e + 1) + ", step " +
                            std::to_string(s + 1) + ": a parameter is not finite");
      if constexpr (with_metrics)
        detail::update_metrics<M>(metrics, static_cast<const float*>(hlog.data()),
                                  cuda_detail::host_batch{{st.hy[k].data(), n}, n});
      last_sum = hacc.data()[0];
      penalty_sum += penalty * double(n);
      seen += n;
      on_batch_end();
      if (ctx.stop_training) break;
    }
    ctx.running_logs = nullptr;
    if (seen == 0 && !ctx.stop_training)
      throw std::invalid_argument("fit: the training dataset yielded no batch in epoch " + std::to_string(e + 1));
    if (seen == 0) break;
    logs& l = ctx.epoch_logs;
    unsigned long long right;
    std::memcpy(&right, hacc.data() + 2, sizeof right);
    l.set("loss", (last_sum + penalty_sum) / double(seen));
    l.set("accuracy", double(right) / double(seen));
    std::apply([&](auto&... mm) { (l.set(mm.name(), mm.result()), ...); }, metrics);
    ((void)[&] {
      if constexpr (is_validation_v<std::remove_cvref_t<Extras>>) {
        logs vl = cuda_detail::evaluate_device(m, extras.data, val_metrics, "val_");
        for (auto& [key, v] : vl.items) l.set(key, v);
      }
    }(), ...);
    const double seconds = secs(clock::now() - epoch_start);
    l.set("learning_rate", ctx.learning_rate());
    l.set("seconds", seconds);
    l.set("data_seconds", data_s);
    l.set("device_wait_seconds", wait_s);
    l.set("compute_seconds", compute_s);
    l.set("input_share", seconds > 0 ? (data_s + wait_s) / seconds : 0.0);
    l.set("input_bound", double(int(input_bound(l["input_share"]))));
    l.set("graph_steps", double(graph_steps));
    if (ls) ls->log_epoch(l);
    on_epoch_end();
    hist.append(ctx.epoch_logs);
    hist.autotune.emplace_back();
  }
  cuda_detail::device_finalize<B>(m, opt);
  on_train_end();
  return hist;
}

// loss (mean, + the regularization penalty), accuracy and the metrics of the
// model on a dataset, batch by batch (inference mode).
template <Network Net, class P, int SM, data::Dataset D, class... Ms>
logs evaluate(model<Net, P, cuda<SM>>& m, const sparse_categorical_crossentropy& loss, const D& ds, Ms... metrics) {
  using M = model<Net, P, cuda<SM>>;
  static_assert(detail::check_compatible<M, sparse_categorical_crossentropy, D>());
  static_assert((Metric<Ms, typename M::value_type> && ...), "evaluate on cuda: every extra argument must be a metric");
  static_assert((detail::check_metric<M, Ms, D>() && ...));
  if (!loss.from_logits)
    throw std::invalid_argument("evaluate on cuda: sparse_categorical_crossentropy needs from_logits = true");
  std::tuple<Ms...> mt{metrics...};
  return cuda_detail::evaluate_device(m, ds, mt, "");
}

}  // namespace ctnn
