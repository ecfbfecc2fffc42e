// Tunes Fashion-MNIST classifiers with Hyperband, and with random search on the
// same budget of epochs, over three architectures (types, each compiled once) x
// learning rate (log) x dropout x batch size (run-time values).
//
// To fit in minutes on two cores the searches train on a subset of the training
// images (the first `subset`, default 15,000) and validate on the last 5,000
// training images (never the test set). Each search's best checkpoint is tested
// once on the 10,000 test images; Hyperband's best values are then retrained on
// all 60,000 training images (`retrain_epochs`, default 12) and tested, as Keras
// Tuner's guide retrains the best hyperparameters (retrain_epochs 0: not). Prints
// both results_summary tables, each search's best validation accuracy, wall time
// and test accuracy.
//   tune_fashion_mnist [max_epochs=9] [subset=15000] [retrain_epochs=12] [data_dir]
//                      [projects=tune_fashion_mnist.projects]
// An empty data_dir is the default one. Project directories:
// <projects>/{hyperband,random} (overwritten; a tuner constructed on an existing
// project without overwrite resumes it). The default has a dot so that it never
// collides with an executable: a directory named tune_fashion_mnist beside the
// program would be the program itself.
// Built with MPI (ctnn::mpi), `mpirun -np N tune_fashion_mnist ...` searches on N
// processes: rank 0 is the oracle and prints, every rank trains trials (Keras
// Tuner's chief/worker mode; docs/tuning.md). The test and retraining run on rank 0.
#include <ctnn/ctnn.hpp>
#include <ctnn/tuning/hyperband.hpp>
#include <ctnn/tuning/tuner.hpp>
#ifdef CTNN_EXAMPLE_MPI
#include <ctnn/distributed/mpi.hpp>
#endif

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <iostream>
#include <memory>

namespace tn = ctnn::tuning;

using mlp = ctnn::sequential<ctnn::input<28, 28>, ctnn::flatten, ctnn::dense<128, ctnn::relu>, ctnn::dynamic_dropout,
                             ctnn::dense<10>>;
using mlp_deep = ctnn::sequential<ctnn::input<28, 28>, ctnn::flatten, ctnn::dense<256, ctnn::relu>,
                                  ctnn::dense<128, ctnn::relu>, ctnn::dynamic_dropout, ctnn::dense<10>>;
using cnn = ctnn::sequential<ctnn::input<28, 28>,
                             ctnn::conv2d<16, 3, 3, 1, ctnn::padding::valid, ctnn::relu>,  // 26x26x16
                             ctnn::max_pool2d<2>,                                          // 13x13x16
                             ctnn::conv2d<32, 3, 3, 1, ctnn::padding::valid, ctnn::relu>,  // 11x11x32
                             ctnn::max_pool2d<2>,                                          // 5x5x32
                             ctnn::flatten, ctnn::dense<64, ctnn::relu>, ctnn::dynamic_dropout, ctnn::dense<10>>;

using fashion_tuner = tn::tuner<tn::architectures<mlp, mlp_deep, cnn>, tn::optimizers<ctnn::adam<>>>;

int main(int argc, char** argv) try {
  const std::int64_t max_epochs = argc > 1 ? std::strtol(argv[1], nullptr, 10) : 9;
  const std::size_t subset = argc > 2 ? std::strtoul(argv[2], nullptr, 10) : 15000;
  const std::size_t retrain_epochs = argc > 3 ? std::strtoul(argv[3], nullptr, 10) : 12;
  const auto dir = argc > 4 && *argv[4] ? std::filesystem::path(argv[4]) : ctnn::data::fashion_mnist::default_dir();
  const std::filesystem::path projects = argc > 5 ? argv[5] : "tune_fashion_mnist.projects";
#ifdef CTNN_EXAMPLE_MPI
  ctnn::distributed::mpi_session session(argc, argv);
  ctnn::distributed::mpi comm;
#else
  ctnn::distributed::none comm;
#endif
  const bool chief = comm.rank() == 0;

  const auto all = ctnn::data::fashion_mnist::train(dir);
  if (subset == 0 || subset > all.size() - 5000)
    throw std::invalid_argument("subset must be in [1, " + std::to_string(all.size() - 5000) + "]");
  const auto search_train = all.take(subset).shuffle(/*seed=*/1);
  const auto search_val = all.skip(all.size() - 5000).batch(1000);
  const auto full_train = all.shuffle(/*seed=*/2);
  const auto test = ctnn::data::fashion_mnist::test(dir).batch(1000);
  const ctnn::sparse_categorical_crossentropy loss{.from_logits = true};

  tn::search_space space;
  space.real("learning_rate", 1e-4, 1e-2, 0, tn::sampling::log);
  space.real("dropout", 0.0, 0.5, 0.1);
  space.choice("batch_size", {std::int64_t(32), std::int64_t(64), std::int64_t(128)});

  tn::tuner_options opt;
  opt.directory = projects;
  opt.objective = tn::objective::max("val_sparse_categorical_accuracy");
  opt.seed = 7;
  opt.overwrite = true;
  opt.architecture_names = {"mlp", "mlp_deep", "cnn"};
  opt.log = chief ? &std::cout : nullptr;
  using clock = std::chrono::steady_clock;
  auto seconds_since = [](clock::time_point t) { return std::chrono::duration<double>(clock::now() - t).count(); };

  // Hyperband
  opt.project_name = "hyperband";
  fashion_tuner hb(comm, space, std::make_unique<tn::hyperband>(max_epochs, 3), opt);
  if (chief)
    std::cout << "== Hyperband (max_epochs " << max_epochs << ", factor 3) on " << subset << " training images, "
              << comm.size() << " process(es)\n";
  auto t0 = clock::now();
  hb.search(loss, search_train, search_val, std::size_t(max_epochs), ctnn::sparse_categorical_accuracy{});
  const double hb_seconds = seconds_since(t0);
  std::size_t budget = 0;  // epochs Hyperband trained, for random search's budget
  for (auto& t : hb.trials())
    budget += std::size_t(t.hp.get<std::int64_t>("tuner/epochs") - t.hp.get<std::int64_t>("tuner/initial_epoch"));
  if (chief) hb.results_summary(std::cout, 3);

  // Random search on the same budget: trials of max_epochs epochs each.
  opt.project_name = "random";
  const std::size_t random_trials = std::max<std::size_t>(1, budget / std::size_t(max_epochs));
  fashion_tuner rs(comm, space, std::make_unique<tn::random_search>(random_trials), opt);
  if (chief)
    std::cout << "\n== Random search: " << random_trials << " trials x " << max_epochs << " epochs (" << budget
            << " epochs, Hyperband's budget)\n";
  t0 = clock::now();
  rs.search(loss, search_train, search_val, std::size_t(max_epochs), ctnn::sparse_categorical_accuracy{});
  const double rs_seconds = seconds_since(t0);
  if (!chief) return 0;  // the rest on rank 0
  rs.results_summary(std::cout, 3);

  // Test each search's own best checkpoint once; retrain Hyperband's best values on all the data.
  auto test_best = [&](const fashion_tuner& t, const char* name) {
    double acc = 0;
    t.with_best_model([&](auto& model, const tn::trial& trial) {
      acc = ctnn::evaluate(model, loss, test, ctnn::sparse_categorical_accuracy{})["sparse_categorical_accuracy"];
      std::printf("%s best trial %s (%s, checkpoint of epoch %zu, %zu training images): test accuracy %.4f\n", name,
                  trial.id.c_str(), trial.hp.get<std::string>("architecture").c_str(), trial.best_step + 1, subset,
                  acc);
    });
    return acc;
  };
  std::cout << "\n";
  const double hb_ckpt = test_best(hb, "hyperband");
  const double rs_ckpt = test_best(rs, "random search");

  const auto best = hb.best_hyperparameters(1).at(0);
  double retrained = 0;
  if (retrain_epochs > 0) {
    const auto r0 = clock::now();
    hb.build(best, /*seed=*/42, [&](auto& model, auto& optimizer, std::size_t batch) {
      ctnn::fit(model, loss, optimizer, full_train.batch(batch), ctnn::epochs{retrain_epochs},
                ctnn::sparse_categorical_accuracy{});
      retrained = ctnn::evaluate(model, loss, test, ctnn::sparse_categorical_accuracy{})["sparse_categorical_accuracy"];
    });
    std::printf("hyperband best values (%s) retrained %zu epochs on %zu images in %.1f s: test accuracy %.4f\n",
                best.get<std::string>("architecture").c_str(), retrain_epochs, all.size(), seconds_since(r0), retrained);
  }

  std::printf("\n%-14s %8s %8s %12s %14s %14s   (%d process(es))\n", "search", "trials", "epochs", "wall time",
              "best val acc", "its test acc", comm.size());
  std::printf("%-14s %8zu %8zu %10.1f s %14.4f %14.4f\n", "hyperband", hb.trials().size(), budget, hb_seconds,
              *hb.best_trials(1).at(0).score, hb_ckpt);
  std::printf("%-14s %8zu %8zu %10.1f s %14.4f %14.4f\n", "random search", rs.trials().size(),
              random_trials * std::size_t(max_epochs), rs_seconds, *rs.best_trials(1).at(0).score, rs_ckpt);
  if (retrain_epochs > 0)
    std::printf("best model's test accuracy (hyperband's best values retrained on all the training images): %.4f\n",
                retrained);
  else
    std::printf("hyperband's best values (%s) not retrained (retrain_epochs 0)\n", best.get<std::string>("architecture").c_str());
  return 0;
} catch (const std::exception& e) {
  std::cerr << "tune_fashion_mnist: " << e.what() << "\n";
  return 1;
}
