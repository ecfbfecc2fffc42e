// ctnn/core/output_rule.hpp — what network output a loss or a metric accepts.
//
// A loss or metric declares `static constexpr accepts_output accepts{name,
// rule, targets}`; fit and evaluate check it against the network's output
// shape and the dataset's targets at compile time, and a mismatch is one
// sentence naming the loss or metric and the sizes (train/output_check.hpp):
//   output_rule::class_scores  rank 1, one score per class: at least 2 with
//                              sparse labels, as many as the target width
//                              with dense targets (width 1: a binary score)
//   output_rule::any_shape     any rank, as many values per sample as the
//                              target width (regression)
//   target_rule::sparse / dense / either: the target kinds it takes.
// `instead` names what to use with the other kind of target; the mismatch
// message ends with it ("...: use sparse_categorical_crossentropy instead").
// A loss or metric without `accepts` is not checked (beyond the target width).
#pragma once

namespace ctnn {

enum class output_rule : unsigned char { class_scores, any_shape };
enum class target_rule : unsigned char { sparse, dense, either };

struct accepts_output {
  const char* name;
  output_rule rule;
  target_rule targets = target_rule::either;
  const char* instead = nullptr;  // the loss or metric for the other target kind
};

}  // namespace ctnn
