// ctnn/cuda/fit.cuh — fit and evaluate for model<Net, P, cuda<SM>>.
//
// fit(model, sparse_categorical_crossentropy{.from_logits = true}, optimizer,
// dataset, epochs{n}) trains on the device: the same phases as
// train/step.hpp (forward, loss, backward, update) and the same optimizer
// state (update count, learning-rate scale, slots in the plan). Batches are
// staged in two pinned host buffers and copied on the context's copy stream
// while the compute stream runs the previous step: step s's forward and
// backward are queued first, then the host reads batch s + 1 from the
// dataset and queues its copy, then the update runs (it waits for the
// device: its finite flag). Events order the streams (a copy waits until the
// step that last read its device buffer is done; a step waits for its copy).
// Per epoch the logs hold loss, accuracy (argmax == label), learning_rate,
// seconds, data_seconds (host time spent in the dataset), device_wait_seconds
// (CUDA events: time the compute stream waited for a batch's copy),
// compute_seconds (CUDA events: from the end of that wait to the end of the
// update) and input_share = (data_seconds + device_wait_seconds) / seconds.
// A non-finite loss or parameter throws ctnn::numeric_error naming the epoch
// and step, as the CPU fit does. Supported today: the sparse softmax
// cross-entropy from logits; adam, sgd, rmsprop, adagrad, also in
// with_options (accumulation, clipnorm, global_clipnorm, clipvalue, weight
// decay, EMA: the phases of optimizers/options.hpp through ops<cuda<SM>>);
// float32. No metrics, callbacks, hooks or validation data yet (fit's
// signature takes none).
#pragma once
#include <chrono>
#include <climits>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>
#include <type_traits>

#include "../core/errors.hpp"
#include "../data/dataset.hpp"
#include "../losses/sparse_categorical_crossentropy.hpp"
#include "../train/fit.hpp"
#include "../optimizers/options.hpp"
#include "../train/history.hpp"
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

// Two staging slots: pinned host rows and labels, their device copies, and the events that order them.
template <class T>
struct staging {
  pinned_buffer<T> hx[2];
  pinned_buffer<std::int32_t> hy[2];
  device_buffer<T> dx[2];
  device_buffer<std::int32_t> dy[2];
  event copied[2], released[2];
  std::size_t size[2] = {0, 0};
  std::size_t capacity[2] = {0, 0};

  // Slot k holds `rows` rows (grown when needed; its old contents are not needed then).
  void ensure(int k, std::size_t rows, std::size_t width) {
    if (rows <= capacity[k]) return;
    CTNN_CUDA_CHECK(cudaDeviceSynchronize());  // nothing may still read or fill the slot
    hx[k] = pinned_buffer<T>(rows * width);
    hy[k] = pinned_buffer<std::int32_t>(rows);
    dx[k] = device_buffer<T>(rows * width);
    dy[k] = device_buffer<std::int32_t>(rows);
    capacity[k] = rows;
  }
};

template <class O>
concept has_options = requires(const O& o) {
  O::inner_slots;
  { o.options } -> std::convertible_to<optimizer_options>;
};

// Phases 4-6 of train/step.hpp on the device for one step: with_options'
// accumulation, clipping and weight decay, the optimizer's update, the
// moving average; then the update count. Returns whether the parameters are
// finite (true when no update ran); *updated says whether one did.
template <class B, class M, class O>
bool device_update(M& m, const O& opt, bool& updated) {
  using Ops = ops<B>;
  using V = typename M::variable_type;
  optimizer_state& os = m.mutable_optimizer_state();
  const double lr = opt.learning_rate(os.iterations) * os.learning_rate_scale;
  V* w = m.parameters().data();
  V* g = m.gradients().data();
  V* slots = m.optimizer_slots().data();
  const std::size_t n = m.parameters().size();
  bool apply = true, count = true, finite = true;
  if constexpr (has_options<O>) {
    const optimizer_options& o = opt.options;
    const int N = o.gradient_accumulation_steps;
    if (N > 1) {
      V* acc = slots + O::inner_slots * n;
      if (os.steps % N < N - 1) {
        Ops::accumulate(acc, g, n);
        apply = false;
        count = o.count_micro_steps;
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
    if (o.use_ema && count) {
      V* avg = slots + (O::inner_slots + 1) * n;
      Ops::moving_average(avg, w, n, os.iterations == 0 ? 0.0f : float(o.ema_momentum));
      if (o.ema_overwrite_frequency > 0 && (os.iterations + 1) % o.ema_overwrite_frequency == 0) Ops::copy(avg, w, n);
    }
  }
  if (count) ++os.iterations;
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
    ops<B>::synchronize();
  }
}

}  // namespace cuda_detail

template <Network Net, class P, int SM, class O, data::Dataset D>
history fit(model<Net, P, cuda<SM>>& m, const sparse_categorical_crossentropy& loss, O& opt, const D& train,
            epochs ep) {
  using M = model<Net, P, cuda<SM>>;
  using T = typename M::compute_type;
  using B = cuda<SM>;
  using Ops = ops<B>;
  static_assert(std::is_same_v<T, float> && std::is_same_v<typename D::value_type, float>,
                "fit on cuda: float32 models and float datasets only (the mixed policies are not wired yet)");
  static_assert(detail::check_compatible<M, sparse_categorical_crossentropy, D>());
  if (!loss.from_logits)
    throw std::invalid_argument("fit on cuda: sparse_categorical_crossentropy needs from_logits = true on the device");
  using clock = std::chrono::steady_clock;
  auto secs = [](clock::duration d) { return std::chrono::duration<double>(d).count(); };
  constexpr std::size_t width = M::input_size, classes = M::output_size;

  m.prepare_optimizer(opt);
  cuda_context& ctx = cuda_context::get();
  const cudaStream_t compute = ctx.compute(), copy = ctx.copy();
  cuda_detail::staging<T> st;
  cuda_detail::event wait0, start, end;
  // device accumulators: [0] loss sum (double), [1] bad row (int), [2] correct count (u64)
  device_buffer<double> acc(3);
  pinned_buffer<double> hacc(3);

  history hist;
  data::batch_for<D> b;
  for (std::size_t e = 0; e < ep.count; ++e) {
    const auto epoch_start = clock::now();
    double data_s = 0, wait_s = 0, compute_s = 0;
    std::size_t seen = 0;
    {
      const double zero[3] = {0, 0, 0};
      CTNN_CUDA_CHECK(cudaMemcpyAsync(acc.data(), zero, sizeof zero, cudaMemcpyHostToDevice, compute));
      const int none = INT_MAX;
      CTNN_CUDA_CHECK(cudaMemcpyAsync(acc.data() + 1, &none, sizeof none, cudaMemcpyHostToDevice, compute));
      CTNN_CUDA_CHECK(cudaStreamSynchronize(compute));
    }
    double* loss_sum = acc.data();
    int* bad_row = reinterpret_cast<int*>(acc.data() + 1);
    auto* correct = reinterpret_cast<unsigned long long*>(acc.data() + 2);
    auto cur = train.open(e);
    // Reads the next batch into slot k and queues its copy; false at the end of the epoch.
    auto load = [&](int k) {
      const auto t0 = clock::now();
      const bool got = cur.next(b);
      data_s += secs(clock::now() - t0);
      if (!got) return false;
      st.ensure(k, b.size, width);
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
      CTNN_CUDA_CHECK(cudaEventRecord(wait0, compute));
      CTNN_CUDA_CHECK(cudaStreamWaitEvent(compute, st.copied[k], 0));
      CTNN_CUDA_CHECK(cudaEventRecord(start, compute));
      // 1-3. forward, loss (dL/dy of the batch mean), backward
      const T* y = m.forward(st.dx[k].data(), n, true);
      Ops::sparse_crossentropy_logits_async(y, st.dy[k].data(), m.output_gradient(), n, classes, float(1.0 / double(n)),
                                            loss_sum, bad_row);
      cuda_kernels::count_correct<<<Ops::grid(n), Ops::block, 0, compute>>>(y, st.dy[k].data(), n, classes, correct);
      Ops::launched();
      m.backward();
      CTNN_CUDA_CHECK(cudaEventRecord(st.released[k], compute));
      CTNN_CUDA_CHECK(cudaMemcpyAsync(hacc.data(), acc.data(), 3 * sizeof(double), cudaMemcpyDeviceToHost, compute));
      // the next batch is read and its copy queued while the device works
      have = load(1 - k);
      // 4-6. gradient transform, update (waits for the device), after-update
      bool updated = true;
      const bool finite = cuda_detail::device_update<B>(m, opt, updated);
      CTNN_CUDA_CHECK(cudaEventRecord(end, compute));
      CTNN_CUDA_CHECK(cudaEventSynchronize(end));
      wait_s += cuda_detail::elapsed(wait0, start);
      compute_s += cuda_detail::elapsed(start, end);
      int bad;
      std::memcpy(&bad, hacc.data() + 1, sizeof bad);
      if (bad != INT_MAX)
        throw std::out_of_range("sparse_categorical_crossentropy: the label of sample " + std::to_string(bad) +
                                " of a batch in epoch " + std::to_string(e + 1) + " is outside [0, " +
                                std::to_string(classes) + ")");
      if (!std::isfinite(hacc.data()[0]))
        throw numeric_error("fit: the loss became " + std::string(std::isnan(hacc.data()[0]) ? "NaN" : "infinite") +
                            " at epoch " + std::to_string(e + 1) + ", step " + std::to_string(s + 1));
      if (updated && !finite)
        throw numeric_error("fit: after the update of epoch " + std::to_string(e + 1) + ", step " +
                            std::to_string(s + 1) + ": a parameter is not finite");
      seen += n;
    }
    logs l;
    unsigned long long right;
    std::memcpy(&right, hacc.data() + 2, sizeof right);
    const double seconds = secs(clock::now() - epoch_start);
    l.set("loss", hacc.data()[0] / double(seen));
    l.set("accuracy", double(right) / double(seen));
    l.set("learning_rate", opt.learning_rate(m.optimizer_state().iterations) * m.optimizer_state().learning_rate_scale);
    l.set("seconds", seconds);
    l.set("data_seconds", data_s);
    l.set("device_wait_seconds", wait_s);
    l.set("compute_seconds", compute_s);
    l.set("input_share", seconds > 0 ? (data_s + wait_s) / seconds : 0.0);
    hist.append(l);
    hist.autotune.emplace_back();
  }
  cuda_detail::device_finalize<B>(m, opt);
  return hist;
}

// loss (mean) and accuracy of the model on a dataset, batch by batch (inference mode).
template <Network Net, class P, int SM, data::Dataset D>
logs evaluate(model<Net, P, cuda<SM>>& m, const sparse_categorical_crossentropy& loss, const D& ds) {
  using M = model<Net, P, cuda<SM>>;
  using T = typename M::compute_type;
  using Ops = ops<cuda<SM>>;
  static_assert(std::is_same_v<T, float>, "evaluate on cuda: float32 models only (the mixed policies are not wired yet)");
  static_assert(detail::check_compatible<M, sparse_categorical_crossentropy, D>());
  if (!loss.from_logits)
    throw std::invalid_argument("evaluate on cuda: sparse_categorical_crossentropy needs from_logits = true");
  constexpr std::size_t width = M::input_size, classes = M::output_size;
  const cudaStream_t compute = cuda_context::get().compute();
  device_buffer<double> acc(3);
  pinned_buffer<double> hacc(3);
  const int none = INT_MAX;
  CTNN_CUDA_CHECK(cudaMemcpyAsync(acc.data() + 1, &none, sizeof none, cudaMemcpyHostToDevice, compute));
  device_buffer<T> dx;
  device_buffer<std::int32_t> dy;
  data::batch_for<D> b;
  std::size_t seen = 0;
  auto cur = ds.open(0);
  while (cur.next(b)) {
    if (dx.size() < b.size * width) {
      Ops::synchronize();
      dx = device_buffer<T>(b.size * width);
      dy = device_buffer<std::int32_t>(b.size);
    }
    Ops::synchronize();  // the previous batch's kernels are done with dx
    cuda_device_memory::copy(dx.data(), b.x.data(), b.size * width * sizeof(T));
    cuda_device_memory::copy(dy.data(), b.y.data(), b.size * sizeof(std::int32_t));
    const T* y = m.forward(dx.data(), b.size, false);
    Ops::sparse_crossentropy_logits_async(y, dy.data(), static_cast<T*>(nullptr), b.size, classes, 1.0f, acc.data(),
                                          reinterpret_cast<int*>(acc.data() + 1));
    cuda_kernels::count_correct<<<Ops::grid(b.size), Ops::block, 0, compute>>>(
        y, dy.data(), b.size, classes, reinterpret_cast<unsigned long long*>(acc.data() + 2));
    Ops::launched();
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
  l.set("loss", hacc.data()[0] / double(seen));
  l.set("accuracy", double(right) / double(seen));
  if (!std::isfinite(l["loss"])) throw numeric_error("evaluate: the loss is not finite");
  return l;
}

}  // namespace ctnn
