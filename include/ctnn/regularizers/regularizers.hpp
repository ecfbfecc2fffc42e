// ctnn/regularizers/regularizers.hpp — weight penalties added to the loss (penalties.hpp), with the
// CPU backend's ops, so penalty / add_penalty / add_gradient on cpu<> (their default backend) can be
// called directly. The layers include penalties.hpp alone, so a program that only defines and checks
// network types does not parse the CPU kernels (issue 30).
#pragma once
#include "../backends/cpu/ops.hpp"
#include "penalties.hpp"
