// ctnn/losses/detail.hpp — shared math of the cross-entropy losses.
//
// One row at a time, loss in double: the rows of probabilities and of logits
// are kernels (backends/cpu/crossentropy.hpp) the losses reach through the
// batched loss ops of ops<Backend> (core/backend_ops.hpp, has_loss_ops).
#pragma once
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <type_traits>

#include "../backends/cpu/crossentropy.hpp"


namespace ctnn::detail {

// The probabilities' row is a CPU kernel (backends/cpu/crossentropy.hpp); the losses reach the
// batched forms through ops<B> (has_loss_ops).
using kernels::cpu::crossentropy_probs_row;
using kernels::cpu::probability_epsilon;

}  // namespace ctnn::detail
