// Run twice by requeue.sh under mpirun -np 2 (tests/CMakeLists.txt) on one project directory:
//   mpi_tuner_killed kill DIR    a random search of 5 trials in which rank 1 kills itself (SIGKILL)
//                                at the end of its first trial's (trial 0's) first epoch, once rank 0
//                                has recorded its own first trial (trial 1) and started trial 2, where
//                                it waits: mpirun ends the job
//   mpi_tuner_killed resume DIR  the same search again: trial 0 is RUNNING in rank 0's state and
//                                runs again (re-queued, not lost), as does trial 2; trial 1 is kept; the search then ends with the same
//                                5 trials and scores as a one-process search (rank 0 runs it).
// Prints "resume: PASS" and returns 0 when every check holds.
#include "distributed/mpi_tuner/common.hpp"

#include <chrono>
#include <cmath>
#include <thread>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <string>

using namespace mpi_tuner_test;

namespace {
// Rank 1 waits (up to 60 s) until rank 0 has recorded its first trial, and rank 0 then waits in
// its next trial until mpirun stops it, so that what the resume finds does not depend on which
// process mpirun stops first.
struct kill_rank_1 {
  int rank;
  std::filesystem::path rank0_trial;
  bool recorded() const {
    return std::filesystem::exists(rank0_trial) && io::read_file(rank0_trial, "test").find("COMPLETED") != std::string::npos;
  }
  template <class Ctx>
  void on_epoch_end(Ctx& ctx) {
    if (rank == 0 && recorded()) {
      for (int i = 0; i < 600; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    if (rank == 1 && ctx.epoch == 0) {
      for (int i = 0; i < 600 && !recorded(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(100));
      std::printf("rank 1: raising SIGKILL in its first trial\n");
      std::fflush(stdout);
      std::raise(SIGKILL);
    }
  }
};
int failures = 0;
void check(bool ok, const std::string& what) {
  if (!ok) {
    ++failures;
    std::printf("FAIL: %s\n", what.c_str());
  }
}
}  // namespace

int main(int argc, char** argv) {
  if (argc != 3 || (std::strcmp(argv[1], "kill") != 0 && std::strcmp(argv[1], "resume") != 0)) {
    std::fprintf(stderr, "usage: mpi_tuner_killed kill|resume DIR\n");
    return 2;
  }
  distributed::mpi_session session(argc, argv);
  distributed::mpi comm;
  const std::filesystem::path dir = argv[2];
  const int rank = comm.rank();
  if (std::strcmp(argv[1], "kill") == 0) {
    tiny_tuner t(comm, space(), std::make_unique<tn::random_search>(5), options(dir / "two"));
    t.search(loss, train_data(), val_data(), 2, sparse_categorical_accuracy{}, kill_rank_1{rank, dir / "two" / "p" / "trial_1" / "trial.json"});
    std::printf("rank %d: the search returned\n", rank);
    return 0;
  }
  tiny_tuner t(comm, space(), std::make_unique<tn::random_search>(5), options(dir / "two"));
  check(t.trials().size() == 3, "3 trials after the killed job, got " + std::to_string(t.trials().size()));
  if (t.trials().size() == 3) {
    check(t.trials()[0].status == tn::trial_status::running, "rank 1's trial 0 is RUNNING in the state");
    check(t.trials()[1].status == tn::trial_status::completed, "rank 0's trial 1 was recorded COMPLETED");
    check(t.trials()[2].status == tn::trial_status::running, "rank 0's trial 2 is RUNNING in the state");
  }
  t.search(loss, train_data(), val_data(), 2, sparse_categorical_accuracy{});
  // trials 0 and 2 (re-queued), 3 and 4, shared as the processes are free
  int runs = int(t.trials_run());
  MPI_Allreduce(MPI_IN_PLACE, &runs, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  check(runs == 4, "the ranks trained " + std::to_string(runs) + " trials together, not 4");
  check(t.trials_run() >= 1, "rank " + std::to_string(rank) + " trained no trial");
  check(t.trials().size() == 5, "5 trials at the end");
  if (rank == 0) {
    tiny_tuner one(space(), std::make_unique<tn::random_search>(5), options(dir / "one"));
    one.search(loss, train_data(), val_data(), 2, sparse_categorical_accuracy{});
    for (std::size_t i = 0; i < 5 && i < t.trials().size(); ++i) {
      const auto& a = t.trials()[i];
      const auto& b = one.trials()[i];
      check(a.status == tn::trial_status::completed, "trial " + a.id + " COMPLETED");
      check(a.hp == b.hp, "trial " + a.id + " has the one-process search's values");
      check(a.score && b.score && std::abs(*a.score - *b.score) <= 1e-6, "trial " + a.id + " has the one-process search's score");
    }
  }
  int all = failures;
  MPI_Allreduce(MPI_IN_PLACE, &all, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  if (rank == 0 && all == 0) std::printf("resume: PASS\n");
  return all != 0;
}
