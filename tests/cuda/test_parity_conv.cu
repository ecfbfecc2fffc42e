// cpu<> against cuda<90>, the conv group of layer types of tests/parity/parity.hpp
// over every policy CUDA takes (parity_cuda.hpp: the switch and CUDA's traits).
#include "cuda/parity_cuda.hpp"

#if CTNN_CUDA_PARITY
PARITY_CONV_CASES(ctnn::cuda<90>, "parity on cuda<90>")
#else
CTNN_CUDA_PARITY_PLACEHOLDER("conv")
#endif
