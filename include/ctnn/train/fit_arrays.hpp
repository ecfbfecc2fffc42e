// ctnn/train/fit_arrays.hpp — fit and evaluate on arrays, as Keras' model.fit(x, y, ...).
//
// fit(m, loss, opt, x, y, options...) and evaluate(m, loss, x, y, options...) with x and y
// contiguous ranges (std::vector, std::span, std::array): x holds n * input_size values of
// the model's value type (sample after sample, row-major), y n class indices (any integer
// type; a sparse loss) or n * width target values (a dense loss). ctnn/xtensor.hpp adds the
// same for xtensor arrays. Options, in any order, beside fit's own extras (metrics,
// callbacks, hooks, validation_data(ds), ieee_denormals{}):
//   epochs{n} (default 1)  batch_size{n} (default 32)  validation_split{f}  shuffle_seed{s}
//   no_shuffle{}  sample_weight(range of n)  class_weight({{class, weight}, ...})
// As Keras: validation_split takes the LAST floor(n * f) samples before any shuffling (none
// for f = 0; validation_data(ds) given as well overrides it); the training samples are
// shuffled every epoch (from (seed, epoch); seed 0 unless shuffle_seed) unless no_shuffle{};
// a weighted batch's loss is sum(w_i * loss_i) / batch ("sum_over_batch_size"); class_weight
// gives sample i the weight of its class (the label, argmax of a target row, or a rounded
// single target), 1 for a class it does not name; sample_weight and class_weight together
// are an error. Weighted losses run on host backends; metrics are not weighted (Keras weighs
// them): docs/training.md ("Arrays, as Keras' fit(x, y)"). Bad input throws
// std::invalid_argument "<fit|evaluate>: <argument>: <what>".
#pragma once
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <limits>
#include <map>
#include <memory>
#include <ranges>
#include <stdexcept>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "../core/format.hpp"
#include "../core/separate.hpp"
#include "../core/rng.hpp"
#include "../core/targets.hpp"
#include "../data/element.hpp"
#include "../losses/loss.hpp"
#include "fit.hpp"

namespace ctnn {

// fit's array options (Keras' fit arguments of the same names).
struct batch_size {
  std::size_t count = 32;
  explicit batch_size(std::size_t n) : count(n) {
    if (n == 0) throw std::invalid_argument("fit: batch_size: must be > 0");
  }
};
struct validation_split {
  double fraction = 0;
  explicit validation_split(double f) : fraction(f) {
    if (!(f >= 0.0 && f < 1.0))
      throw std::invalid_argument("fit: validation_split: " + detail::format_number(f) + " is not in [0, 1)");
  }
};
struct shuffle_seed {
  std::uint64_t seed = 0;
};
struct no_shuffle {};

// One weight per sample (copied); checked against the samples when fit or evaluate runs.
struct sample_weight_t {
  std::vector<double> values;
};
template <std::ranges::input_range R>
  requires std::is_arithmetic_v<std::ranges::range_value_t<R>>
sample_weight_t sample_weight(const R& r) {
  sample_weight_t w;
  for (auto v : r) w.values.push_back(double(v));
  return w;
}
// class index -> weight; a class not named weighs 1.
struct class_weight_t {
  std::map<std::int64_t, double> weights;
};
CTNN_LAZY CTNN_DECL class_weight_t class_weight(std::map<std::int64_t, double> w)
#if CTNN_DEFINITIONS
{
  return {std::move(w)};
}
#else
;
#endif
CTNN_LAZY CTNN_DECL class_weight_t class_weight(std::initializer_list<std::pair<const std::int64_t, double>> w)
#if CTNN_DEFINITIONS
{
  return {std::map<std::int64_t, double>(w)};
}
#else
;
#endif
// Weights as an array: class c weighs w[c].
template <std::ranges::input_range R>
  requires std::is_arithmetic_v<std::ranges::range_value_t<R>>
class_weight_t class_weight(const R& r) {
  class_weight_t c;
  std::int64_t i = 0;
  for (auto v : r) c.weights[i++] = double(v);
  return c;
}

namespace detail {

template <class X>
inline constexpr bool is_array_option_v =
    std::is_same_v<X, batch_size> || std::is_same_v<X, validation_split> || std::is_same_v<X, shuffle_seed> ||
    std::is_same_v<X, no_shuffle> || std::is_same_v<X, sample_weight_t> || std::is_same_v<X, class_weight_t> ||
    std::is_same_v<X, epochs>;
template <class... E>
inline constexpr bool has_weights_v =
    ((std::is_same_v<std::remove_cvref_t<E>, sample_weight_t> || std::is_same_v<std::remove_cvref_t<E>, class_weight_t>) ||
     ...);

// A loss whose per-sample losses are weighted by the current batch's weights (*weights, set
// by the arrays' cursor for each batch and used once; none: all 1), reduced as Keras'
// "sum_over_batch_size": the batch's loss sum(w_i * loss_i) / batch, dy of row i the
// gradient of loss_i times w_i / batch. Host memory only (no accumulate: loss_into calls
// compute on a host backend).
template <class L, class W>
struct sample_weighted : L {
  std::shared_ptr<std::vector<W>> weights;

  template <std::size_t N, class B, class... A>
  void accumulate(A&&...) const = delete;  // loss_into takes compute, row by row

  template <std::size_t N, class B = cpu<>, class T, class Target>
  double compute(const T* y, const Target* t, T* dy, std::size_t batch) const {
    const L& inner = *this;
    if (!weights || weights->empty()) return inner.template compute<N, B>(y, t, dy, batch);
    if (weights->size() != batch)
      throw std::logic_error(inner.name() + ": sample weights for " + std::to_string(weights->size()) +
                             " samples but a batch of " + std::to_string(batch) +
                             " rows (a per-step loss under a mask takes no sample weights)");
    constexpr std::size_t tw = loss_target_kind_t<L, N>::width;
    double sum = 0;
    for (std::size_t i = 0; i < batch; ++i) {
      const double w = double((*weights)[i]);
      T* row = dy ? dy + i * N : nullptr;
      sum += w * inner.template compute<N, B>(y + i * N, t + i * tw, row, 1);
      if (row)
        for (std::size_t j = 0; j < N; ++j) row[j] = T(double(row[j]) * w / double(batch));
    }
    weights->clear();  // used once: a batch from elsewhere (validation_data(ds)) is not weighted
    return sum;
  }
};

// Samples in memory with optional weights; each batch's weights go to *sink as its cursor
// fills the batch (the loss above reads them). Shuffled per epoch from (seed, epoch).
template <Shape S, class K, class T>
class weighted_arrays {
 public:
  using sample_shape = S;
  using value_type = T;
  using target_kind = K;
  using target_type = target_element_t<K, T>;
  struct storage {
    std::vector<T> x;
    std::vector<target_type> y;
    std::vector<T> w;  // empty: no weights
  };

  weighted_arrays(std::shared_ptr<const storage> data, std::size_t first, std::size_t count, std::size_t batch,
                  bool shuffled, std::uint64_t seed, std::shared_ptr<std::vector<T>> sink)
      : data_(std::move(data)), first_(first), count_(count), batch_(batch), shuffled_(shuffled), seed_(seed),
        sink_(std::move(sink)) {}

  std::size_t size() const noexcept { return count_; }
  std::size_t batches_per_epoch() const noexcept { return (count_ + batch_ - 1) / batch_; }

  class cursor {
   public:
    bool next(data::batch_of<S, K, T>& b) {
      const std::size_t n = std::min(batch_, count_ - pos_);
      if (n == 0) return false;
      if (b.x.size() < n * S::size) b.x.resize(n * S::size);
      if (b.y.size() < n * K::width) b.y.resize(n * K::width);
      if (sink_) sink_->resize(data_->w.empty() ? 0 : n);
      for (std::size_t i = 0; i < n; ++i) {
        const std::size_t src = first_ + (order_.empty() ? pos_ + i : order_[pos_ + i]);
        std::copy_n(data_->x.data() + src * S::size, S::size, b.x.data() + i * S::size);
        std::copy_n(data_->y.data() + src * K::width, K::width, b.y.data() + i * K::width);
        if (sink_ && !data_->w.empty()) (*sink_)[i] = data_->w[src];
      }
      b.size = n;
      pos_ += n;
      return true;
    }

   private:
    friend class weighted_arrays;
    std::shared_ptr<const storage> data_;
    std::shared_ptr<std::vector<T>> sink_;
    std::vector<std::size_t> order_;
    std::size_t first_ = 0, count_ = 0, batch_ = 1, pos_ = 0;
  };

  cursor open(std::size_t epoch) const {
    cursor c;
    c.data_ = data_;
    c.sink_ = sink_;
    c.first_ = first_;
    c.count_ = count_;
    c.batch_ = batch_;
    if (shuffled_) {
      c.order_.resize(count_);
      for (std::size_t i = 0; i < count_; ++i) c.order_[i] = i;
      rng g = rng::derive(seed_, epoch);
      ctnn::shuffle(c.order_.begin(), count_, g);
    }
    return c;
  }

 private:
  std::shared_ptr<const storage> data_;
  std::size_t first_, count_, batch_;
  bool shuffled_;
  std::uint64_t seed_;
  std::shared_ptr<std::vector<T>> sink_;
};

// The options of one call, gathered.
struct array_options {
  std::size_t epochs = 1, batch = 32;
  double split = 0;
  bool shuffled = true;
  std::uint64_t seed = 0;
  const sample_weight_t* samples = nullptr;
  const class_weight_t* classes = nullptr;
};
template <class... E>
array_options gather_options(const E&... e) {
  array_options o;
  auto one = [&](const auto& x) {
    using X = std::remove_cvref_t<decltype(x)>;
    if constexpr (std::is_same_v<X, epochs>) o.epochs = x.count;
    else if constexpr (std::is_same_v<X, batch_size>) o.batch = x.count;
    else if constexpr (std::is_same_v<X, validation_split>) o.split = x.fraction;
    else if constexpr (std::is_same_v<X, shuffle_seed>) o.seed = x.seed;
    else if constexpr (std::is_same_v<X, no_shuffle>) o.shuffled = false;
    else if constexpr (std::is_same_v<X, sample_weight_t>) o.samples = &x;
    else if constexpr (std::is_same_v<X, class_weight_t>) o.classes = &x;
  };
  (one(e), ...);
  (void)one;  // no options
  return o;
}

// x, y and the weights checked and copied into the model's types.
template <class MT, class K, class XR, class YR>
auto array_storage(const char* who, const XR& x, const YR& y, const array_options& o) {
  using T = typename MT::value_type;
  using S = typename MT::network::input_type;
  using store = typename weighted_arrays<S, K, T>::storage;
  using XV = std::ranges::range_value_t<XR>;
  using YV = std::ranges::range_value_t<YR>;
  static_assert(std::is_same_v<XV, T>, "fit: x's values must be of the model's value type (convert them first)");
  const std::string f = who;
  auto s = std::make_shared<store>();
  s->x.assign(std::ranges::begin(x), std::ranges::end(x));
  if (s->x.size() % S::size != 0)
    throw std::invalid_argument(f + ": x: " + std::to_string(s->x.size()) +
                                " values are not a whole number of samples of shape " + S::str());
  const std::size_t n = s->x.size() / S::size;
  const std::size_t ny = std::size_t(std::ranges::distance(y));
  if (ny != n * K::width)
    throw std::invalid_argument(f + ": y: " + std::to_string(ny) + " target values for " + std::to_string(n) +
                                " samples of x (expected " + std::to_string(n * K::width) + ")");
  if (n == 0) throw std::invalid_argument(f + ": x: no samples");
  if constexpr (is_sparse_v<K>) {
    static_assert(std::is_integral_v<YV>, "fit: y: a sparse loss takes class indices (integers)");
    std::size_t i = 0;
    for (auto v : y) {
      if (v < 0 || static_cast<std::uint64_t>(v) > std::uint64_t(std::numeric_limits<std::int32_t>::max()))
        throw std::invalid_argument(f + ": y: label " + std::to_string(v) + " of sample " + std::to_string(i) +
                                    " is not a class index");
      s->y.push_back(std::int32_t(v));
      ++i;
    }
  } else {
    static_assert(std::is_arithmetic_v<YV>, "fit: y: target values must be numbers");
    for (auto v : y) s->y.push_back(T(v));
  }
  if (o.samples && o.classes)
    throw std::invalid_argument(f + ": sample_weight and class_weight: give one of them, not both (as Keras)");
  if (o.samples) {
    const auto& w = o.samples->values;
    if (w.size() != n)
      throw std::invalid_argument(f + ": sample_weight: " + std::to_string(w.size()) + " weights for " +
                                  std::to_string(n) + " samples");
    for (std::size_t i = 0; i < n; ++i) {
      if (!(w[i] >= 0) || !std::isfinite(w[i]))
        throw std::invalid_argument(f + ": sample_weight: weight " + format_number(w[i]) + " of sample " +
                                    std::to_string(i) + " is not a finite number >= 0");
      s->w.push_back(T(w[i]));
    }
  }
  if (o.classes) {
    constexpr std::size_t classes = is_sparse_v<K> ? MT::output_size : (K::width > 1 ? K::width : 2);
    for (const auto& [c, w] : o.classes->weights) {
      if (c < 0 || std::uint64_t(c) >= classes)
        throw std::invalid_argument(f + ": class_weight: class " + std::to_string(c) + " is outside [0, " +
                                    std::to_string(classes) + ")");
      if (!(w >= 0) || !std::isfinite(w))
        throw std::invalid_argument(f + ": class_weight: weight " + format_number(w) + " of class " +
                                    std::to_string(c) + " is not a finite number >= 0");
    }
    for (std::size_t i = 0; i < n; ++i) {
      std::int64_t c = 0;
      if constexpr (is_sparse_v<K>) {
        c = s->y[i];
      } else if constexpr (K::width > 1) {  // a row: its argmax (the first of equal maxima), as Keras
        const T* r = s->y.data() + i * K::width;
        for (std::size_t j = 1; j < K::width; ++j)
          if (r[j] > r[std::size_t(c)]) c = std::int64_t(j);
      } else {
        c = std::int64_t(std::llround(double(s->y[i])));
      }
      const auto it = o.classes->weights.find(c);
      s->w.push_back(it == o.classes->weights.end() ? T(1) : T(it->second));
    }
  }
  return std::shared_ptr<const store>(std::move(s));
}

// The loss fit and evaluate run: the weighted one when the call has weights.
template <bool Weighted, class L, class T>
auto array_loss(const L& loss, const std::shared_ptr<std::vector<T>>& sink) {
  if constexpr (Weighted) return sample_weighted<L, T>{loss, sink};
  else return loss;
}

template <class X>
struct is_not_array_option : std::bool_constant<!is_array_option_v<X>> {};

}  // namespace detail

// A contiguous range of numbers that is not an xtensor expression (ctnn/xtensor.hpp's fit and
// evaluate take those, with their shapes).
template <class R>
concept contiguous_of_numbers = std::ranges::contiguous_range<R> && std::ranges::sized_range<R> &&
                                std::is_arithmetic_v<std::ranges::range_value_t<R>> &&
                                !requires { typename R::expression_tag; };

// Keras' model.fit(x, y, batch_size, epochs, validation_split, shuffle, class_weight,
// sample_weight): the samples into a dataset, then fit(m, loss, opt, dataset, ...).
template <Model M, class L, class O, class XR, class YR, class... Extras>
  requires Loss<L, typename std::remove_cvref_t<M>::value_type> &&
           Optimizer<O, typename std::remove_cvref_t<M>::variable_type> &&
           contiguous_of_numbers<XR> && contiguous_of_numbers<YR>
history fit(M& m, const L& loss, O& opt, const XR& x, const YR& y, Extras&&... extras) {
  using MT = std::remove_cvref_t<M>;
  using T = typename MT::value_type;
  using K = loss_target_kind_t<L, MT::output_size>;
  using S = typename MT::network::input_type;
  constexpr bool weighted = detail::has_weights_v<Extras...>;
  static_assert(!weighted || MT::backend::memory::host_accessible,
                "fit: sample_weight and class_weight run on host backends only");
  const detail::array_options o = detail::gather_options(extras...);
  const auto data = detail::array_storage<MT, K>("fit", x, y, o);
  const std::size_t n = data->x.size() / S::size;
  std::size_t train_n = n;
  constexpr bool has_validation = (is_validation_v<std::remove_cvref_t<Extras>> || ...);
  if (o.split > 0 && !has_validation) {  // the last samples, before any shuffling (Keras' train_validation_split)
    train_n = std::size_t(std::floor(double(n) * (1.0 - o.split)));
    if (train_n == 0 || train_n == n)
      throw std::invalid_argument("fit: validation_split: " + std::to_string(n) +
                                  " samples are too few to split into training and validation by " +
                                  detail::format_number(o.split));
  }
  auto sink = weighted ? std::make_shared<std::vector<T>>() : nullptr;
  const auto lo = detail::array_loss<weighted>(loss, sink);
  using data_t = detail::weighted_arrays<S, K, T>;
  const data_t train(data, 0, train_n, o.batch, o.shuffled, o.seed, sink);
  const data_t val(data, train_n, n - train_n, o.batch, false, 0, sink);
  auto rest = detail::select<detail::is_not_array_option, false>(extras...);
  return std::apply(
      [&](auto&... e) {
        if (train_n < n) return fit(m, lo, opt, train, epochs(o.epochs), validation_data(val), e...);
        return fit(m, lo, opt, train, epochs(o.epochs), e...);
      },
      rest);
}

// Keras' model.evaluate(x, y, batch_size, sample_weight): loss and metrics over the arrays
// (in the given order); class_weight too (Keras' evaluate has none).
template <Model M, class L, class XR, class YR, class... Extras>
  requires Loss<L, typename std::remove_cvref_t<M>::value_type> && contiguous_of_numbers<XR> &&
           contiguous_of_numbers<YR> &&
           ((Metric<std::remove_cvref_t<Extras>, typename std::remove_cvref_t<M>::value_type> ||
             detail::is_array_option_v<std::remove_cvref_t<Extras>>) && ...)
logs evaluate(M& m, const L& loss, const XR& x, const YR& y, const Extras&... extras) {
  using MT = std::remove_cvref_t<M>;
  using T = typename MT::value_type;
  using K = loss_target_kind_t<L, MT::output_size>;
  using S = typename MT::network::input_type;
  constexpr bool weighted = detail::has_weights_v<Extras...>;
  static_assert(!weighted || MT::backend::memory::host_accessible,
                "evaluate: sample_weight and class_weight run on host backends only");
  detail::array_options o = detail::gather_options(extras...);
  const auto data = detail::array_storage<MT, K>("evaluate", x, y, o);
  auto sink = weighted ? std::make_shared<std::vector<T>>() : nullptr;
  const auto lo = detail::array_loss<weighted>(loss, sink);
  const detail::weighted_arrays<S, K, T> ds(data, 0, data->x.size() / S::size, o.batch, false, 0, sink);
  auto metrics = detail::select<detail::is_metric_for<MT>::template pred, true>(extras...);
  return std::apply([&](auto&... mm) { return evaluate(m, lo, ds, mm...); }, metrics);
}

}  // namespace ctnn
