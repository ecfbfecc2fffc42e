// cpu<> against cuda<90>, the sparse group of layer types of tests/parity/parity.hpp
// over every policy CUDA takes (parity_cuda.hpp: CUDA's traits).
#include "cuda/parity_cuda.hpp"

PARITY_SPARSE_CASES(ctnn::cuda<90>, "parity on cuda<90>")
