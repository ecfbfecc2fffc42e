// ctnn/losses/detail.hpp — shared math of the cross-entropy losses.
//
// One row at a time, loss in double: the probabilities' row here; the row of
// logits is a kernel (backends/cpu/crossentropy.hpp) the losses reach through
// ops<Backend>::crossentropy_logits_row.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <type_traits>


namespace ctnn::detail {

inline constexpr double probability_epsilon = 1e-7;  // keras.config.epsilon()

// Cross-entropy of one row of probabilities p[n] against target weights t[n]
// (one-hot or soft). As Keras: o = p / sum(p), c = clip(o, eps, 1 - eps),
// loss = -sum t log c. If d is given it receives d loss / d p, times scale.
template <class T, class Target>
double crossentropy_probs_row(const T* p, Target&& t, std::size_t n, T* d, double scale) {
  double s = 0;
  for (std::size_t j = 0; j < n; ++j) s += double(p[j]);
  const double eps = probability_epsilon;
  double loss = 0, dot = 0;
  for (std::size_t j = 0; j < n; ++j) {
    const double o = double(p[j]) / s;
    const double c = std::clamp(o, eps, 1.0 - eps);
    const double tj = t(j);
    loss -= tj * std::log(c);
    if (d) {
      const double g = (o > eps && o < 1.0 - eps) ? -tj / c : 0.0;  // d loss / d o
      d[j] = T(g);
      dot += g * o;
    }
  }
  if (d)
    for (std::size_t j = 0; j < n; ++j) d[j] = T((double(d[j]) - dot) / s * scale);
  return loss;
}

}  // namespace ctnn::detail
