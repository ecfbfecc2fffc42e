// docs/tuning.md's example: Hyperband over two architectures, two optimizers and
// run-time values, on a small synthetic problem (class 1 when x0 + x1 > x2 + x3).
#include <ctnn/ctnn.hpp>
#include <ctnn/tuning/hyperband.hpp>
#include <ctnn/tuning/tuner.hpp>

#include <cstdint>
#include <iostream>
#include <memory>
#include <vector>

namespace tn = ctnn::tuning;

using small = ctnn::sequential<ctnn::input<4>, ctnn::dense<8, ctnn::relu, ctnn::dynamic_l2>, ctnn::dynamic_dropout,
                               ctnn::dense<2>>;
using wide = ctnn::sequential<ctnn::input<4>, ctnn::dense<32, ctnn::relu>, ctnn::dynamic_dropout, ctnn::dense<2>>;

ctnn::data::in_memory<ctnn::shape<4>, ctnn::sparse_labels> make_data(std::size_t n, std::uint64_t seed) {
  ctnn::rng g(seed);
  std::vector<float> x(n * 4);
  std::vector<std::int32_t> y(n);
  for (std::size_t i = 0; i < n; ++i) {
    for (std::size_t k = 0; k < 4; ++k) x[i * 4 + k] = float(g.uniform(-1, 1));
    y[i] = x[i * 4] + x[i * 4 + 1] > x[i * 4 + 2] + x[i * 4 + 3] ? 1 : 0;
  }
  return {x, y};
}

int main() {
  tn::search_space space;
  space.real("learning_rate", 1e-4, 1e-1, 0, tn::sampling::log);  // Float(..., sampling="log")
  space.choice("batch_size", {std::int64_t(16), std::int64_t(32), std::int64_t(64)});
  space.real("dropout", 0.0, 0.5, 0.1);                            // Float(..., step=0.1)
  space.real("l2", 1e-5, 1e-2, 0, tn::sampling::log)
      .when("architecture", {std::string("small")});               // only "small" has a dynamic_l2

  tn::tuner_options opt;
  opt.directory = "tuning_example";
  opt.project_name = "xor_like";
  opt.objective = tn::objective::max("val_sparse_categorical_accuracy");
  opt.seed = 1;
  opt.architecture_names = {"small", "wide"};  // the hyperparameter "architecture"
  opt.optimizer_names = {"adam", "sgd"};       // the hyperparameter "optimizer"
  opt.progress = &std::cout;                   // Keras Tuner's display (the default); nullptr: quiet
  tn::tuner<tn::architectures<small, wide>, tn::optimizers<ctnn::adam<>, ctnn::sgd<>>> tuner(
      space, std::make_unique<tn::hyperband>(/*max_epochs=*/9, /*factor=*/3), opt);

  const auto train = make_data(512, 1).shuffle(/*seed=*/2);  // the tuner batches it per trial
  const auto val = make_data(256, 3).batch(256);
  const ctnn::sparse_categorical_crossentropy loss{.from_logits = true};
  tuner.search(loss, train, val, /*epochs=*/9, ctnn::sparse_categorical_accuracy{},
               ctnn::early_stopping{.monitor = "val_loss", .patience = 2});

  tuner.results_summary(std::cout, 3);
  const tn::values best = tuner.best_hyperparameters().at(0);
  std::cout << "best learning rate: " << best.get<double>("learning_rate") << "\n";
  tuner.with_best_model([&](auto& model, const tn::trial& t) {
    const auto logs = ctnn::evaluate(model, loss, val, ctnn::sparse_categorical_accuracy{});
    std::cout << "trial " << t.id << ": val accuracy " << logs["sparse_categorical_accuracy"] << "\n";
  });
}
