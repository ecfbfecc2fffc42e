// Run by expect_job_abort.sh under mpirun -np 2 (tests/CMakeLists.txt): data-parallel fit in
// which rank 1 kills itself (SIGKILL: no exception, no on_failure, no MPI call) at epoch 2,
// step 3, while rank 0 goes on to its next agreement. Open MPI's mpirun sees the process die
// and ends the job: the test passes when mpirun returns non-zero within the time limit and
// rank 0 never returned from fit (it would print "rank 0: fit returned").
#include <ctnn/ctnn.hpp>
#include <ctnn/distributed/mpi.hpp>

#include <csignal>
#include <cstdint>
#include <cstdio>
#include <vector>

using namespace ctnn;

namespace {
using net = sequential<input<4>, dense<8, ctnn::tanh>, dense<3>>;
struct kill_rank_1 {
  int rank;
  template <class Ctx>
  void on_batch_end(Ctx& ctx) {
    if (rank == 1 && ctx.epoch == 1 && ctx.step == 2) {
      std::printf("rank 1: raising SIGKILL at epoch 2, step 3\n");
      std::fflush(stdout);
      std::raise(SIGKILL);
    }
  }
};
}  // namespace

int main(int argc, char** argv) {
  distributed::mpi_session session(argc, argv);
  distributed::mpi comm;
  std::vector<float> x(64 * 4);
  std::vector<std::int32_t> y(64);
  rng g(5);
  for (auto& v : x) v = float(g.uniform(-1, 1));
  for (std::size_t i = 0; i < y.size(); ++i) y[i] = std::int32_t(i % 3);
  const data::in_memory<shape<4>, sparse_labels> ds(x, y);
  auto m = make_model<net>(3);
  sgd opt{0.01};
  distributed::data_parallel dp{comm};
  fit(m, sparse_categorical_crossentropy{.from_logits = true}, opt, ds.batch(4), epochs{1000}, dp,
      kill_rank_1{comm.rank()});
  std::printf("rank %d: fit returned\n", comm.rank());
  return 0;
}
