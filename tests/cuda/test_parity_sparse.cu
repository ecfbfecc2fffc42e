// cpu<> against cuda<90>, the sparse group of layer types of tests/parity/parity.hpp
// over every policy CUDA takes (parity_cuda.hpp: CUDA's traits); and a pruned
// model trained one step on each backend, stripped to each sparse layout
// (parity::check_stripped: strip_pruning through host views), predicts as on cpu<>.
#include "cuda/parity_cuda.hpp"

PARITY_SPARSE_CASES(ctnn::cuda<90>, "parity on cuda<90>")

TEST_CASE("parity on cuda<90>: a pruned model stripped to the bitmap, csc and rows layouts predicts as on cpu<>") {
  CTNN_REQUIRE_DEVICE();
  parity::check_stripped<ctnn::cuda<90>>();
}
