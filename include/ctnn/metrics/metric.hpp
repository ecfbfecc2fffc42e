// ctnn/metrics/metric.hpp — the Metric concept.
//
// A metric streams over batches: reset(), update<N>(y, targets, batch),
// result(), and has a name() used as its key in the history ("val_" + name
// for validation data).
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

namespace ctnn {

template <class M>
concept has_metric_name = requires(const M& m) { { m.name() } -> std::convertible_to<std::string>; };
template <class M>
concept has_result = requires(M& m) {
  m.reset();
  { m.result() } -> std::convertible_to<double>;
};
// update<N>(y, targets, batch) for outputs of element type T, with sparse
// labels or dense targets (whichever the metric takes).
template <class M, class T>
concept has_metric_update = requires(M& m, const T* y, const std::int32_t* labels, std::size_t n) {
  m.template update<2>(y, labels, n);
} || requires(M& m, const T* y, const T* targets, std::size_t n) { m.template update<2>(y, targets, n); };
template <class M, class T = float>
concept Metric = has_metric_name<M> && has_result<M> && has_metric_update<M, T>;

}  // namespace ctnn
