// Data-parallel training of the Fashion-MNIST MLP on MPI (docs/distributed.md):
//   mpirun -np 2 ./build/release/examples/snippet_distributed_mpi
#include <ctnn/ctnn.hpp>
#include <ctnn/distributed/mpi.hpp>

#include <cstddef>
#include <iostream>

using net = ctnn::sequential<ctnn::input<28, 28>, ctnn::flatten, ctnn::dense<256, ctnn::relu>, ctnn::dense<10>>;

int main(int argc, char** argv) {
  ctnn::distributed::mpi_session session(argc, argv);  // MPI_Init_thread now, MPI_Finalize at the end
  ctnn::distributed::mpi comm;                          // MPI_COMM_WORLD
  const auto ranks = std::size_t(comm.size()), rank = std::size_t(comm.rank());

  auto model = ctnn::make_model<net>(/*seed=*/42);  // rank 0's weights reach every rank before step 1
  ctnn::adam opt{1e-3};
  // One global order (shuffled before the shard, the same seed on every rank); each rank
  // takes 64 / ranks samples of every global batch of 64.
  auto train = ctnn::data::from(ctnn::data::fashion_mnist::train())
                   .shuffle(60'000, /*seed=*/1)
                   .shard(ranks, rank)
                   .batch(64 / ranks)
                   .prefetch(2);
  ctnn::distributed::data_parallel dp{comm};
  auto hist = ctnn::fit(model, ctnn::sparse_categorical_crossentropy{.from_logits = true}, opt, train,
                        ctnn::epochs{3}, dp);
  if (rank == 0)  // every rank holds the same weights and the same logs (averaged over the ranks)
    std::cout << "loss " << hist["loss"].back() << ", all-reduce " << hist["allreduce_seconds"].back() << " s\n";
}
