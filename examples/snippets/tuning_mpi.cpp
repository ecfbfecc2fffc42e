// A search on every process mpirun starts (docs/tuning.md):
//   mpirun -np 2 ./build/release/examples/snippet_tuning_mpi
#include <ctnn/ctnn.hpp>
#include <ctnn/distributed/mpi.hpp>
#include <ctnn/tuning/tuner.hpp>

#include <cstdint>
#include <memory>
#include <vector>

using net = ctnn::sequential<ctnn::input<4>, ctnn::dense<8, ctnn::relu>, ctnn::dense<2>>;
using my_tuner = ctnn::tuning::tuner<ctnn::tuning::architectures<net>, ctnn::tuning::optimizers<ctnn::adam<>>>;

int main(int argc, char** argv) {
  ctnn::distributed::mpi_session session(argc, argv);
  ctnn::distributed::mpi comm;
  ctnn::tuning::search_space space;
  space.real("learning_rate", 1e-3, 1e-1, 0, ctnn::tuning::sampling::log);
  ctnn::tuning::tuner_options opt;
  opt.directory = "tuning";  // shared by the processes: each writes the checkpoints of its trials there
  my_tuner tuner(comm, space, std::make_unique<ctnn::tuning::random_search>(8), opt);
  const auto train = ctnn::data::in_memory<ctnn::shape<4>, ctnn::sparse_labels>(std::vector<float>(64 * 4, 0.5f),
                                                                                 std::vector<std::int32_t>(64, 1));
  tuner.search(ctnn::sparse_categorical_crossentropy{.from_logits = true}, train, train.batch(64), 2);
  if (comm.rank() == 0) tuner.results_summary();
}
