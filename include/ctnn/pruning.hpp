// ctnn/pruning.hpp — the pruning toolbox (docs/pruning.md): prune_low_magnitude,
// schedules, patterns, the update_pruning_step hook, strip_pruning, sparsity
// analysis, and every sparse layout strip_pruning can produce (layout::bitmap,
// csc, rows, nm<Nk, M>, block<R, C>).
#pragma once
#include "layers/sparse_dense.hpp"
#include "layers/sparse_dense_block.hpp"
#include "layers/sparse_dense_csc.hpp"
#include "layers/sparse_dense_nm.hpp"
#include "layers/sparse_dense_rows.hpp"
#include "pruning/masks.hpp"
#include "pruning/prune.hpp"
#include "pruning/schedules.hpp"
#include "pruning/sensitivity.hpp"
#include "pruning/strip.hpp"
#include "pruning/strip_csc.hpp"
#include "pruning/update_pruning_step.hpp"
