// ctnn/data/autotune.hpp — tuning map parallelism and prefetch depth while
// training runs (prefetch(data::autotune), map(f, data::autotune)).
//
// Three parts: autotune/machine.hpp (the probe: the machine's busy cores and free
// memory), autotune/policy.hpp (the budget, the knobs and autotune_policy, the
// pure decision logic over measured windows) and autotune/tuner.hpp (the tuner:
// windows measured from the running pipeline, handed to the policy, verdicts
// printed). The objective is the measured step time; a neighbour setting is kept
// only when its best window is >= 3% faster, close calls are measured again, a
// settled tuner searches again only when the costs move, and what a search moved
// is held against noise. Docs: docs/input-pipeline.md ("Autotune").
#pragma once
#include "autotune/machine.hpp"
#include "autotune/policy.hpp"
#include "autotune/tuner.hpp"
