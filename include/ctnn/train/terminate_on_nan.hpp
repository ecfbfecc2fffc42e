// ctnn/train/terminate_on_nan.hpp — Keras' TerminateOnNaN.
//
// terminate_on_nan{}: at the end of a batch whose loss is NaN or infinite it
// prints "Batch <step>: Invalid loss, terminating training" and sets
// stop_training. fit then skips that batch's update and ends training
// (instead of throwing ctnn::numeric_error). That epoch's logged loss is the
// mean over the batches before the bad one (NaN if it was the first).
#pragma once
#include <cmath>
#include <cstddef>
#include <iostream>
#include <optional>
#include <ostream>

#include "process_role.hpp"

namespace ctnn {

struct terminate_on_nan {
  std::ostream* out = &std::cout;
  std::optional<std::size_t> stopped_epoch, stopped_step;  // where it stopped training (0-based)

  template <class Ctx>
  void on_batch_end(Ctx& ctx) {
    if (std::isfinite(ctx.batch_loss)) return;
    if (out && detail::writes_output(ctx)) *out << "Batch " << ctx.step << ": Invalid loss, terminating training\n";
    stopped_epoch = ctx.epoch;
    stopped_step = ctx.step;
    ctx.stop_training = true;
  }
};

}  // namespace ctnn
