// ctnn/train/input_analysis.hpp — is training input-bound? (TF profiler's input-pipeline verdict)
//
// input_bound(share) classifies the share of step time spent waiting for the
// next batch: highly input-bound at >= 20%, moderately at >= 5%, otherwise
// not (the thresholds of the TensorFlow profiler's input-pipeline analysis).
// fit logs the level as "input_bound" (0, 1, 2) beside "input_share";
// input_verdict(share) is the sentence epoch_logger{.., verbose} prints and
// history::input_verdict(epoch) returns; input_bound_words(level) the two
// words the compact epoch line and progress_bar print.
#pragma once
#include <cstdio>
#include <string>

namespace ctnn {

enum class input_bound_level { no = 0, moderately = 1, highly = 2 };

constexpr input_bound_level input_bound(double share) {
  return share >= 0.20 ? input_bound_level::highly : share >= 0.05 ? input_bound_level::moderately : input_bound_level::no;
}

// The verdict in two words: "not input-bound", "moderately input-bound", "highly input-bound".
constexpr const char* input_bound_words(input_bound_level level) {
  return level == input_bound_level::highly       ? "highly input-bound"
         : level == input_bound_level::moderately ? "moderately input-bound"
                                                  : "not input-bound";
}

inline std::string input_verdict(double share) {
  char pct[32];
  std::snprintf(pct, sizeof pct, "%.1f%%", 100 * share);
  switch (input_bound(share)) {
    case input_bound_level::highly:
      return std::string("highly input-bound: ") + pct + " of step time is spent waiting for data";
    case input_bound_level::moderately:
      return std::string("moderately input-bound: ") + pct + " of step time is spent waiting for data";
    default:
      return std::string("not input-bound: ") + pct + " of step time is spent waiting for data";
  }
}

}  // namespace ctnn
