// 4:2 sparsity (N > M) on the third layer.
// expect: static assertion failed: prune_low_magnitude: N:M sparsity for this layer needs 0 < N < M (N kept of every M)
// expect: prune_n_of_m_invalid<ctnn::diag::layer<3>, ctnn::diag::n_kept<4>, ctnn::diag::m_group<2>, false>
// first-error: layer 3 (prune_low_magnitude): n_of_m<4, 2> needs 0 < N < M (N kept of every M)
#include <ctnn/ctnn.hpp>
#include <ctnn/pruning.hpp>
using net = ctnn::sequential<ctnn::input<28, 28>, ctnn::flatten, ctnn::dense<128, ctnn::relu>,
                             ctnn::prune_low_magnitude<ctnn::dense<10>, ctnn::constant_sparsity<0.5>, ctnn::n_of_m<4, 2>>>;
constexpr auto n = net::parameter_count;
