// What the two pruning examples (prune_fashion_mnist, prune_cnn_fashion_mnist)
// share: the control (the trained model trained as many epochs more), a pruned
// network started from the trained weights and retrained with its mask
// updates, and the line that reports a pruned model against the control.
#pragma once
#include <ctnn/ctnn.hpp>
#include <ctnn/pruning.hpp>

#include <cstddef>
#include <cstdio>

namespace prune_example {

// A copy of `trained` trained `epochs` epochs more (adam 1e-3, fresh optimizer slots, as the pruned
// models get): what a pruned model's accuracy is compared with.
template <class Model, class Data, class Loss, class Metric>
Model control(const Model& trained, const Data& train, const Loss& loss, const Metric& metric, std::size_t epochs) {
  Model m = trained;
  m.reset_optimizer();
  ctnn::adam opt{1e-3};
  ctnn::fit(m, loss, opt, train, ctnn::epochs{epochs}, metric, ctnn::epoch_logger{});
  return m;
}

// A model of the network Pruned with `trained`'s variables, retrained `epochs` epochs (adam 1e-3)
// while its masks follow their schedule.
template <class Pruned, class Trained, class Data, class Loss, class Metric>
auto retrain_pruned(const Trained& trained, const Data& train, const Loss& loss, const Metric& metric,
                    std::size_t epochs) {
  auto m = ctnn::make_model<Pruned>(42);
  ctnn::copy_variables(trained, m);
  ctnn::adam opt{1e-3};
  ctnn::fit(m, loss, opt, train, ctnn::epochs{epochs}, metric, ctnn::update_pruning_step{}, ctnn::epoch_logger{});
  return m;
}

// "<what>: masked 0.8857, stripped 0.8857 (+0.57 points against the control)", a line.
inline void print_against_control(const char* what, double masked, double stripped, double control_accuracy) {
  std::printf("%s: masked %.4f, stripped %.4f (%+.2f points against the control)\n", what, masked, stripped,
              100 * (stripped - control_accuracy));
}

}  // namespace prune_example
