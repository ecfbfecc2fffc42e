// data_parallel's callbacks-facing half through mpirun -np 2 (tests/CMakeLists.txt), each rank
// with deliberately different data: the epoch's loss (weighted by each rank's samples) and
// val_loss are the same on both ranks before the callbacks see them, so reduce_lr_on_plateau
// reduces the rate at the same epoch on both; rank 1 writes no file and prints nothing; a rank
// that throws (a callback's exception, a NaN loss on that rank only) makes the other throw
// distributed_error "data_parallel: rank 1 failed: ..." instead of waiting forever.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <ctnn/ctnn.hpp>
#include <ctnn/distributed/mpi.hpp>

#include <cstring>
#include <filesystem>
#include <iostream>
#include <limits>
#include <span>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include <unistd.h>

using namespace ctnn;

namespace {
using line = sequential<input<1>, dense<1>>;  // y = w x + b
using ds_t = data::in_memory<shape<1>, dense_targets<shape<1>>>;

// Rank 0: 4 samples (x 1, y 1); rank 1: 2 samples (x 1, y -1); one batch per epoch on each.
ds_t rank_data(int rank) {
  if (rank == 0) return ds_t({1, 1, 1, 1}, {1, 1, 1, 1});
  return ds_t({1, 1}, {-1, -1});
}
template <class T>
bool same_on_every_rank(distributed::mpi& comm, std::vector<T> mine) {
  auto root = mine;
  comm.broadcast(std::span<T>(root), 0);
  return std::memcmp(root.data(), mine.data(), mine.size() * sizeof(T)) == 0;
}
std::string what_of(auto&& f) {
  try {
    f();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "(no exception)";
}
}  // namespace

TEST_CASE("mpi: the loss is weighted by each rank's samples, val_loss averaged, reduce_lr_on_plateau fires alike") {
  distributed::mpi comm;
  REQUIRE(comm.size() == 2);
  const int rank = comm.rank();
  // w + b = s starts at 3; the averaged gradient 2 s moves s to 0.8 s per epoch (sgd 0.05). Rank 0's
  // own loss (s - 1)^2 stops improving by 0.5 at epoch 5 (1-based), rank 1's (s + 1)^2 at epoch 9,
  // their plain mean s^2 + 1 at 7, the mean weighted 4:2, s^2 - 2s/3 + 1, at 6.
  auto m = make_model<line>(rank + 1);
  for (float& p : m.parameters()) p = 1.5f;
  sgd opt{0.05};
  distributed::data_parallel dp{comm};
  reduce_lr_on_plateau plateau{.monitor = "loss", .factor = 0.5, .patience = 1, .min_delta = 0.5};
  const ds_t data = rank_data(rank);
  const history h = fit(m, mean_squared_error{}, opt, data.batch(4), epochs{8}, dp, plateau, validation_data(data.batch(4)));
  REQUIRE(!plateau.reduced_at.empty());
  CHECK(plateau.reduced_at.front() == 5);  // 0-based
  CHECK(same_on_every_rank(comm, std::vector<std::size_t>(plateau.reduced_at)));
  CHECK(same_on_every_rank(comm, h["loss"]));
  CHECK(same_on_every_rank(comm, h["val_loss"]));
  CHECK(same_on_every_rank(comm, h["learning_rate"]));
  CHECK(h["loss"][0] == doctest::Approx(8.0).epsilon(1e-5));       // (4 (3-1)^2 + 2 (3+1)^2) / 6
  CHECK(h["val_loss"][0] == doctest::Approx(6.76).epsilon(1e-5));  // s = 2.4 after the update: s^2 + 1
}

TEST_CASE("mpi: rank 1 writes no checkpoint or CSV file and prints nothing; rank 0 does") {
  namespace fs = std::filesystem;
  distributed::mpi comm;
  const int rank = comm.rank();
  const fs::path dir = fs::temp_directory_path() / ("ctnn_mpi_callbacks_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  auto m = make_model<line>(1);
  sgd opt{0.05};
  distributed::data_parallel dp{comm};
  csv_logger csv{(dir / "log.csv").string()};
  model_checkpoint ckpt{(dir / "w{epoch}.ctnn").string()};
  std::ostringstream captured;
  auto* old = std::cout.rdbuf(captured.rdbuf());  // progress_bar, epoch_logger, early_stopping: std::cout
  try {
    fit(m, mean_squared_error{}, opt, rank_data(rank).batch(4), epochs{2}, dp, progress_bar{}, epoch_logger{}, csv, ckpt,
        early_stopping{.monitor = "loss", .min_delta = 100, .patience = 0});
  } catch (...) {
    std::cout.rdbuf(old);
    throw;
  }
  std::cout.rdbuf(old);
  const auto files = std::distance(fs::directory_iterator(dir), fs::directory_iterator{});
  if (rank == 1) {
    CHECK(files == 0);
    CHECK(captured.str().empty());
  } else {
    CHECK(files == 3);  // log.csv, w1.ctnn, w2.ctnn
    CHECK(captured.str().find("Epoch 2/2") != std::string::npos);
    CHECK(captured.str().find("early stopping") != std::string::npos);
  }
  comm.barrier();
  if (rank == 0) fs::remove_all(dir);
}

namespace {
struct throws_on_rank_1 {
  int rank;
  template <class Ctx>
  void on_batch_end(Ctx& ctx) {
    if (rank == 1 && ctx.epoch == 1 && ctx.step == 2) throw std::runtime_error("a callback failed on rank 1");
  }
};
}  // namespace

TEST_CASE("mpi: a callback that throws on rank 1 makes rank 0 throw 'rank 1 failed' instead of hanging") {
  distributed::mpi comm;
  const int rank = comm.rank();
  auto m = make_model<line>(1);
  sgd opt{0.01};
  distributed::data_parallel dp{comm};
  const std::string what = what_of(
      [&] { fit(m, mean_squared_error{}, opt, rank_data(0).batch(1), epochs{3}, dp, throws_on_rank_1{rank}); });
  if (rank == 1) CHECK(what == "a callback failed on rank 1");
  else
    CHECK(what == "data_parallel: rank 1 failed: a callback failed on rank 1 (rank 0 stopped at a step's gradient all-reduce)");
  // the communicator is still usable: no collective was left half done
  CHECK(same_on_every_rank(comm, std::vector<int>{7}));
}

TEST_CASE("mpi: a NaN loss on rank 1 only makes both ranks throw, rank 0 naming rank 1's error") {
  distributed::mpi comm;
  const int rank = comm.rank();
  auto m = make_model<line>(1);
  sgd opt{0.01};
  distributed::data_parallel dp{comm};
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const ds_t data = rank == 1 ? ds_t({1, 1, nan, 1}, {1, 1, 1, 1}) : ds_t({1, 1, 1, 1}, {1, 1, 1, 1});
  const std::string what = what_of([&] { fit(m, mean_squared_error{}, opt, data.batch(1), epochs{2}, dp); });
  const std::string rank1 = "fit: the loss became NaN at epoch 1, step 3 (learning rate 0.01)";
  if (rank == 1) CHECK(what == rank1);
  else CHECK(what == "data_parallel: rank 1 failed: " + rank1 + " (rank 0 stopped at a step's gradient all-reduce)");
  CHECK(same_on_every_rank(comm, std::vector<int>{7}));
}

int main(int argc, char** argv) {
  distributed::mpi_session session(argc, argv);
  doctest::Context ctx(argc, argv);
  const int failures = ctx.run();
  int all = failures != 0;
  MPI_Allreduce(MPI_IN_PLACE, &all, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  return all;
}
