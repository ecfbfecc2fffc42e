// ctnn/metrics/metric.hpp — the Metric concept.
//
// A metric streams over batches: reset(), update<N>(y, targets, batch),
// result(), and has a name() used as its key in the history ("val_" + name
// for validation data).
#pragma once
#include <string>

namespace ctnn {

template <class M>
concept has_metric_name = requires(const M& m) { { m.name() } -> std::convertible_to<std::string>; };
template <class M>
concept has_result = requires(M& m) {
  m.reset();
  { m.result() } -> std::convertible_to<double>;
};
template <class M>
concept Metric = has_metric_name<M> && has_result<M>;

}  // namespace ctnn
