// A 2:4 packed layer whose 30 inputs are not a multiple of the group size 4.
// first-error: sparse_dense_nm: the inputs K must be a multiple of the group size M
#include <ctnn/layers/sparse_dense_nm.hpp>
constexpr auto n = ctnn::sparse_dense_nm<30, 8, 2, 4>::nnz;
