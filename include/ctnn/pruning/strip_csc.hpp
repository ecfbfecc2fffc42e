// ctnn/pruning/strip_csc.hpp — the column layout's names, kept for the code that includes this header.
//
// strip_pruning_csc(m) is strip_pruning<layout::csc>(m) and stripped_csc_t<Net>
// is stripped_t<Net, layout::csc> (both in pruning/strip.hpp, which the
// umbrella header includes): every pruned dense layer (unstructured, N:M,
// blocks, global) becomes sparse_dense_csc<K, N, NNZ, Act>
// (layers/sparse_dense_csc.hpp), whose inference work falls with NNZ, at 2
// bytes of row index per weight instead of the bitmap's 1 bit per kernel
// entry: choose it for speed at high sparsity, the default layout for size.
#pragma once
#include "strip.hpp"

namespace ctnn {
template <class Net>
using stripped_csc_t = stripped_t<Net, layout::csc>;
}  // namespace ctnn
