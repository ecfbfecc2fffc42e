// A find_package(ctnn) consumer of ctnn::mpi (tests/package/find_package): one process, started
// without mpirun (MPI's singleton start), is rank 0 of 1 and its collectives leave the data.
#include <ctnn/distributed/mpi.hpp>

#include <cstdio>
#include <span>

int main(int argc, char** argv) {
  ctnn::distributed::mpi_session session(argc, argv);
  ctnn::distributed::mpi comm;
  float v[2] = {1.5f, -2.0f};
  comm.all_reduce_average(std::span<float>(v));
  comm.broadcast(std::span<float>(v), 0);
  if (comm.rank() != 0 || comm.size() != 1 || v[0] != 1.5f || v[1] != -2.0f) {
    std::fprintf(stderr, "consumer_mpi: rank %d of %d, values %g %g\n", comm.rank(), comm.size(), v[0], v[1]);
    return 1;
  }
  std::printf("consumer_mpi: rank 0 of 1\n");
  return 0;
}
