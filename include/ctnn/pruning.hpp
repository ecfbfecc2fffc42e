// ctnn/pruning.hpp — the pruning toolbox (docs/pruning.md): prune_low_magnitude,
// schedules, patterns, the update_pruning_step hook, strip_pruning and
// sparsity analysis.
#pragma once
#include "pruning/masks.hpp"
#include "pruning/prune.hpp"
#include "pruning/schedules.hpp"
#include "pruning/sensitivity.hpp"
#include "pruning/strip.hpp"
#include "pruning/update_pruning_step.hpp"
