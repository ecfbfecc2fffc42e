// ctnn/optimizers/options.hpp — Keras 3's optimizer options, for any optimizer.
//
// with_options{adam{1e-3}, {.clipnorm = 1.0, .weight_decay = 0.004,
//   .gradient_accumulation_steps = 4, .use_ema = true}} is an adam that, per
// call of step() (fit calls it once per mini-batch):
//  1. accumulates: with N = gradient_accumulation_steps > 1, N - 1 calls only
//     add their gradient up; the N-th uses the mean of the N gradients;
//  2. clips: clipnorm (each variable's L2 norm, Keras' per-tensor rule),
//     global_clipnorm (all gradients' joint norm) or clipvalue (elementwise);
//     at most one of the three (std::invalid_argument otherwise);
//  3. decays the weights: w -= w * weight_decay * lr (decoupled, before the update);
//  4. runs the optimizer's own update, then counts it in `iterations`
//     (schedules and Adam's bias correction see real updates only);
//  5. keeps an exponential moving average of the weights (use_ema):
//     ema = m * ema + (1 - m) * w with m = ema_momentum (0 on the first
//     update); every ema_overwrite_frequency updates (0: never) w = ema; at the
//     end of fit (finalize) w = ema, as Keras' finalize_variable_values.
// It adds two slot arrays (the accumulator, the average) to the optimizer's.
#pragma once
#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <tuple>
#include <utility>

#include "../core/concepts.hpp"
#include "../core/format.hpp"

namespace ctnn {

struct optimizer_options {
  std::optional<double> clipnorm;         // per-variable norm limit
  std::optional<double> clipvalue;        // elementwise limit
  std::optional<double> global_clipnorm;  // joint norm limit
  std::optional<double> weight_decay;     // decoupled: w -= w * weight_decay * lr
  int gradient_accumulation_steps = 1;    // 1: every call updates
  bool use_ema = false;
  double ema_momentum = 0.99;
  int ema_overwrite_frequency = 0;  // 0: only at the end of fit

  void validate() const {
    auto bad = [](const std::string& what) { throw std::invalid_argument("optimizer_options: " + what); };
    const int clips = int(clipnorm.has_value()) + int(clipvalue.has_value()) + int(global_clipnorm.has_value());
    if (clips > 1) bad("only one of clipnorm, clipvalue and global_clipnorm may be set, got " + std::to_string(clips));
    auto positive = [&](const char* name, const std::optional<double>& v) {
      if (v && !(std::isfinite(*v) && *v > 0)) bad(std::string(name) + " must be finite and > 0, got " + detail::format_number(*v));
    };
    positive("clipnorm", clipnorm);
    positive("clipvalue", clipvalue);
    positive("global_clipnorm", global_clipnorm);
    if (weight_decay && !(std::isfinite(*weight_decay) && *weight_decay >= 0))
      bad("weight_decay must be finite and >= 0, got " + detail::format_number(*weight_decay));
    if (gradient_accumulation_steps < 1)
      bad("gradient_accumulation_steps must be >= 1, got " + std::to_string(gradient_accumulation_steps));
    if (!(ema_momentum >= 0 && ema_momentum <= 1))
      bad("ema_momentum must be in [0, 1], got " + detail::format_number(ema_momentum));
    if (ema_overwrite_frequency < 0)
      bad("ema_overwrite_frequency must be >= 0, got " + std::to_string(ema_overwrite_frequency));
  }
};

namespace detail {

// Calls f(offset, size) for every variable of model M, offsets relative to
// parameters().data(). A bound layer may list its variables' sizes in
// `variable_sizes` (dense: kernel, bias); otherwise its parameters are one variable.
template <class M, class F>
void for_each_variable(M& m, F&& f) {
  const auto* base = m.parameters().data();
  [&]<std::size_t... I>(std::index_sequence<I...>) {
    (
        [&] {
          using L = std::tuple_element_t<I, typename M::layers>;
          if constexpr (L::parameter_count > 0) {
            std::size_t off = std::size_t(m.template layer_parameters<I>().data() - base);
            if constexpr (requires { L::variable_sizes; }) {
              for (std::size_t n : L::variable_sizes) {
                f(off, n);
                off += n;
              }
            } else {
              f(off, L::parameter_count);
            }
          }
        }(),
        ...);
  }(std::make_index_sequence<M::layer_count>{});
}

// Keras' clip_by_norm: g * limit / max(||g||, limit).
template <class T>
void clip_by_norm(T* g, std::size_t n, double limit) {
  double sq = 0;
  for (std::size_t i = 0; i < n; ++i) sq += double(g[i]) * double(g[i]);
  const double norm = std::sqrt(sq);
  if (norm <= limit) return;
  const T scale = T(limit / norm);
  for (std::size_t i = 0; i < n; ++i) g[i] *= scale;
}

}  // namespace detail

template <Optimizer O>
struct with_options : O {
  static constexpr std::size_t inner_slots = O::slots_per_parameter;
  static constexpr std::size_t slots_per_parameter = O::slots_per_parameter + 2;  // + accumulator, average
  optimizer_options options;
  std::int64_t micro_steps = 0;  // calls of step() (Keras' _iterations with accumulation)

  with_options(O inner, optimizer_options opts) : O(std::move(inner)), options(std::move(opts)) { options.validate(); }

  // One mini-batch: w, g (overwritten: accumulated, clipped), slots of n values each.
  template <class M, class T>
  void step(M& m, T* w, T* g, T* slots, std::size_t n) {
    const int N = options.gradient_accumulation_steps;
    if (N > 1) {
      T* acc = slots + inner_slots * n;
      const int phase = int(micro_steps % N);
      ++micro_steps;
      if (phase == 0) {
        std::copy(g, g + n, acc);
        return;
      }
      if (phase < N - 1) {
        for (std::size_t i = 0; i < n; ++i) acc[i] += g[i];
        return;
      }
      const T inv = T(1) / T(N);
      for (std::size_t i = 0; i < n; ++i) g[i] = (acc[i] + g[i]) * inv;
    } else {
      ++micro_steps;
    }
    if (options.clipnorm) {
      detail::for_each_variable(m, [&](std::size_t off, std::size_t len) { detail::clip_by_norm(g + off, len, *options.clipnorm); });
    } else if (options.global_clipnorm) {
      detail::clip_by_norm(g, n, *options.global_clipnorm);
    } else if (options.clipvalue) {
      const T c = T(*options.clipvalue);
      for (std::size_t i = 0; i < n; ++i) g[i] = std::clamp(g[i], -c, c);
    }
    if (options.weight_decay) {
      const T k = T(*options.weight_decay * this->learning_rate(this->iterations));
      for (std::size_t i = 0; i < n; ++i) w[i] -= w[i] * k;
    }
    O::update(w, g, slots, n, this->iterations);
    if (options.use_ema) {
      T* avg = slots + (inner_slots + 1) * n;
      const T mom = this->iterations == 0 ? T(0) : T(options.ema_momentum), rest = T(1) - mom;
      for (std::size_t i = 0; i < n; ++i) avg[i] = mom * avg[i] + rest * w[i];
      if (options.ema_overwrite_frequency > 0 && (this->iterations + 1) % options.ema_overwrite_frequency == 0)
        std::copy(avg, avg + n, w);
    }
    ++this->iterations;
  }

  // End of fit: the weights become their moving average (use_ema).
  template <class M, class T>
  void finalize(M&, T* w, T* slots, std::size_t n) const {
    if (!options.use_ema || this->iterations == 0) return;
    const T* avg = slots + (inner_slots + 1) * n;
    std::copy(avg, avg + n, w);
  }
};

template <class O>
with_options(O, optimizer_options) -> with_options<O>;

}  // namespace ctnn
