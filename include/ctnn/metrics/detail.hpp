// ctnn/metrics/detail.hpp — shared pieces of the metrics.
#pragma once
#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>

#include "../core/separate.hpp"

namespace ctnn::detail {

// Index of the first maximum of row[0..n).
template <class T>
std::size_t argmax(const T* row, std::size_t n) {
  std::size_t best = 0;
  for (std::size_t j = 1; j < n; ++j)
    if (row[j] > row[best]) best = j;
  return best;
}

// Throws std::out_of_range, as the sparse losses do, when a label is not a
// class of an n-class output.
[[noreturn, gnu::cold, gnu::noinline]] CTNN_DECL void throw_bad_label(const char* metric, std::int32_t label,
                                                                  std::size_t sample, std::size_t n)
#if CTNN_DEFINITIONS
{
  throw std::out_of_range(std::string(metric) + ": label " + std::to_string(label) + " of sample " +
                          std::to_string(sample) + " is not a class of the " + std::to_string(n) + " outputs");
}
#else
;
#endif
inline void check_label(const char* metric, std::int32_t label, std::size_t sample, std::size_t n) {
  if (label < 0 || std::size_t(label) >= n) throw_bad_label(metric, label, sample, n);
}

// The counting, over the output width n at run time (a batch's rows, once per batch: one body
// for every width, in the compiled part for float). sparse_hits: rows whose argmax is the
// label (a label outside [0, n) throws std::out_of_range naming the sample, before any is
// counted); dense_hits: argmax(y) == argmax(t), at width 1 (y > 0.5) == (t > 0.5).
template <class T>
CTNN_OUTLINE double sparse_hits(const T* y, const std::int32_t* labels, std::size_t batch, std::size_t n,
                                const char* who) {
  for (std::size_t i = 0; i < batch; ++i) check_label(who, labels[i], i, n);  // the batch is then not counted
  double hits = 0;
  for (std::size_t i = 0; i < batch; ++i) hits += argmax(y + i * n, n) == std::size_t(labels[i]) ? 1.0 : 0.0;
  return hits;
}
template <class T>
CTNN_OUTLINE double dense_hits(const T* y, const T* targets, std::size_t batch, std::size_t n) {
  double hits = 0;
  for (std::size_t i = 0; i < batch; ++i) {
    if (n == 1) hits += (y[i] > T(0.5)) == (targets[i] > T(0.5)) ? 1.0 : 0.0;
    else hits += argmax(y + i * n, n) == argmax(targets + i * n, n) ? 1.0 : 0.0;
  }
  return hits;
}
CTNN_INSTANCE(template double sparse_hits<float>(const float*, const std::int32_t*, std::size_t, std::size_t,
                                                 const char*);)
CTNN_INSTANCE(template double dense_hits<float>(const float*, const float*, std::size_t, std::size_t);)

// A running mean: total / count.
struct running_mean {
  double total = 0;
  double count = 0;
  void reset() { total = count = 0; }
  double result() const { return count > 0 ? total / count : 0.0; }
};

// The streaming accuracy both accuracy and sparse_categorical_accuracy are:
// sparse labels count argmax == label (a label outside [0, N) throws
// std::out_of_range naming the sample, as the loss does); dense targets of
// width N >= 2 count argmax(y) == argmax(t), width 1 counts (y > 0.5) == (t > 0.5).
struct accuracy_counter {
  // a mean over samples (Keras' MeanMetricWrapper): per step under a step mask, the unmasked steps only (train/fit.hpp)
  static constexpr bool steps_weighted = true;
  running_mean acc;
  void reset() { acc.reset(); }
  double result() const { return acc.result(); }
  template <std::size_t N, class T>
  void update_sparse(const T* y, const std::int32_t* labels, std::size_t batch, const char* who) {
    acc.total += sparse_hits(y, labels, batch, N, who);
    acc.count += double(batch);
  }
  template <std::size_t N, class T>
  void update_dense(const T* y, const T* targets, std::size_t batch) {
    acc.total += dense_hits(y, targets, batch, N);
    acc.count += double(batch);
  }
};

// The confusion counts precision and recall stream, over every output of every sample
// (Keras' update_confusion_matrix_variables at one threshold): predicted positive when
// y > threshold, actually positive when the target is not 0.
struct confusion_counts {
  double tp = 0, fp = 0, fn = 0;
  void reset() { tp = fp = fn = 0; }
  template <class T>
  void update(const T* y, const T* targets, std::size_t count, double threshold) {
    for (std::size_t i = 0; i < count; ++i) {
      const bool predicted = double(y[i]) > threshold, positive = double(targets[i]) != 0.0;
      tp += predicted && positive ? 1.0 : 0.0;
      fp += predicted && !positive ? 1.0 : 0.0;
      fn += !predicted && positive ? 1.0 : 0.0;
    }
  }
};
// a / b, or 0 when b is 0 (Keras' divide_no_nan).
inline double divide_no_nan(double a, double b) { return b != 0 ? a / b : 0.0; }

}  // namespace ctnn::detail
