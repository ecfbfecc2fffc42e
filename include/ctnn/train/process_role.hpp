// ctnn/train/process_role.hpp — this process's rank in data-parallel training, for the callbacks.
//
// train_context::role is rank 0 of 1 unless an extra of fit has process_role()
// (distributed::data_parallel), which fit asks before any callback runs. The callbacks that
// write files or print (epoch_logger, progress_bar, csv_logger, model_checkpoint, tensorboard, and the
// messages of early_stopping and terminate_on_nan) do so where detail::writes_output(ctx):
// on rank 0 only; they decide the same on every rank. docs/distributed.md.
#pragma once

namespace ctnn {

struct process_role {
  int rank = 0;
  int size = 1;
  bool chief() const noexcept { return rank == 0; }
};

namespace detail {
// Whether a callback's output belongs to this process: rank 0's, or a context without a role
// (a callback called by hand with a context of its own).
template <class Ctx>
bool writes_output(const Ctx& ctx) {
  if constexpr (requires { ctx.role.chief(); }) return ctx.role.chief();
  else return true;
}
}  // namespace detail

}  // namespace ctnn
