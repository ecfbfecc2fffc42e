// What the distributed-tuner tests share (tests/distributed/mpi/mpi_tuner.cpp and
// mpi_tuner/mpi_tuner_killed.cpp): a tiny two-class problem, two architectures x two
// optimizers, and a project directory every rank names alike.
#pragma once
#include <ctnn/ctnn.hpp>
#include <ctnn/distributed/mpi.hpp>
#include <ctnn/tuning/tuner.hpp>

#include <cstdint>
#include <filesystem>
#include <span>
#include <string>
#include <vector>

#include <unistd.h>

namespace mpi_tuner_test {
using namespace ctnn;
namespace tn = ctnn::tuning;
using small = sequential<input<4>, dense<8, relu>, dynamic_dropout, dense<2>>;
using wide = sequential<input<4>, dense<16, relu>, dense<2>>;
using tiny_tuner = tn::tuner<tn::architectures<small, wide>, tn::optimizers<adam<>, sgd<>>>;

// Class 1 when x0 + x1 > x2 + x3.
inline data::in_memory<shape<4>, sparse_labels> make_data(std::size_t n, std::uint64_t seed) {
  rng g(seed);
  std::vector<float> x(n * 4);
  std::vector<std::int32_t> y(n);
  for (std::size_t i = 0; i < n; ++i) {
    for (int k = 0; k < 4; ++k) x[i * 4 + k] = float(g.uniform(-1, 1));
    y[i] = x[i * 4] + x[i * 4 + 1] > x[i * 4 + 2] + x[i * 4 + 3] ? 1 : 0;
  }
  return {x, y};
}
inline auto train_data() { return make_data(96, 1).shuffle(5); }
inline auto val_data() { return make_data(64, 2).batch(64); }
inline const sparse_categorical_crossentropy loss{.from_logits = true};

inline tn::search_space space() {
  tn::search_space s;
  s.real("learning_rate", 1e-3, 1e-1, 0, tn::sampling::log);
  s.choice("batch_size", {std::int64_t(16), std::int64_t(32)});
  s.real("dropout", 0.0, 0.5, 0.25).when("architecture", {std::string("small")});
  return s;
}
inline tn::tuner_options options(const std::filesystem::path& dir) {
  tn::tuner_options o;
  o.directory = dir;
  o.project_name = "p";
  o.objective = tn::objective::max("val_sparse_categorical_accuracy");
  o.seed = 3;
  o.architecture_names = {"small", "wide"};
  o.optimizer_names = {"adam", "sgd"};
  return o;
}
// A fresh directory under the temporary directory, named by rank 0 (its pid) and `what`.
inline std::filesystem::path shared_dir(distributed::mpi& comm, const std::string& what) {
  long pid = long(::getpid());
  comm.broadcast(std::span<long>(&pid, 1), 0);
  auto p = std::filesystem::temp_directory_path() / ("ctnn_mpi_tuner_" + what + "_" + std::to_string(pid));
  if (comm.rank() == 0) std::filesystem::remove_all(p);
  comm.barrier();
  return p;
}
}  // namespace mpi_tuner_test
