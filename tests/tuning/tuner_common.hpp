// What the tuner tests share: two tiny architectures and two optimizers (the
// tuner type each test file compiles), a synthetic two-class problem, its
// search space and tuner options, and a fresh scratch directory.
#pragma once
#include <ctnn/ctnn.hpp>
#include <ctnn/tuning/tuner.hpp>

#include <cstdint>
#include <filesystem>
#include <string>
#include <unistd.h>
#include <vector>

namespace tuner_test {
namespace tn = ctnn::tuning;

using small = ctnn::sequential<ctnn::input<4>, ctnn::dense<8, ctnn::relu, ctnn::dynamic_l2>, ctnn::dynamic_dropout,
                               ctnn::dense<2>>;
using wide = ctnn::sequential<ctnn::input<4>, ctnn::dense<16, ctnn::relu>, ctnn::dynamic_dropout, ctnn::dense<2>>;
using tiny_tuner = tn::tuner<tn::architectures<small, wide>, tn::optimizers<ctnn::adam<>, ctnn::sgd<>>>;

// Class 1 when x0 + x1 > x2 + x3.
inline ctnn::data::in_memory<ctnn::shape<4>, ctnn::sparse_labels> make_data(std::size_t n, std::uint64_t seed) {
  ctnn::rng g(seed);
  std::vector<float> x(n * 4);
  std::vector<std::int32_t> y(n);
  for (std::size_t i = 0; i < n; ++i) {
    for (int k = 0; k < 4; ++k) x[i * 4 + k] = float(g.uniform(-1, 1));
    y[i] = x[i * 4] + x[i * 4 + 1] > x[i * 4 + 2] + x[i * 4 + 3] ? 1 : 0;
  }
  return {x, y};
}
inline const auto train_data = make_data(96, 1).shuffle(5);
inline const auto val_data = make_data(64, 2).batch(64);
inline const ctnn::sparse_categorical_crossentropy loss{.from_logits = true};

inline tn::search_space space() {
  tn::search_space s;
  s.real("learning_rate", 1e-3, 1e-1, 0, tn::sampling::log);
  s.choice("batch_size", {std::int64_t(16), std::int64_t(32)});
  s.real("dropout", 0.0, 0.5, 0.25);
  s.real("l2", 1e-4, 1e-2, 0, tn::sampling::log).when("architecture", {std::string("small")});
  return s;
}
inline tn::tuner_options options(const std::filesystem::path& dir, std::uint64_t seed = 3) {
  tn::tuner_options o;
  o.directory = dir;
  o.project_name = "p";
  o.objective = tn::objective::max("val_sparse_categorical_accuracy");
  o.seed = seed;
  o.architecture_names = {"small", "wide"};
  o.optimizer_names = {"adam", "sgd"};
  return o;
}
// An empty directory of its own under the temporary directory (named after the test and the process).
inline std::filesystem::path scratch(const std::string& name) {
  auto p = std::filesystem::temp_directory_path() / ("ctnn_tuning_" + name + "_" + std::to_string(::getpid()));
  std::filesystem::remove_all(p);
  return p;
}

}  // namespace tuner_test
