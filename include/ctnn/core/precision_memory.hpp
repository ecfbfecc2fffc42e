// ctnn/core/precision_memory.hpp — the bytes a precision policy saves, at compile time.
//
// memory_saved<Net, P>(batch, optimizer_slots) is, per role, what a model of
// Net needs under precision::float32 minus what it needs under P (both from
// Net::memory_plan, core/plan.hpp): mixed_float16 and mixed_bfloat16 halve
// the activations and deltas (the last layer's output and dL/dy stay float)
// and keep parameters, gradients and optimizer slots; float16 halves the
// parameters too (inference: no gradients or slots needed). All constexpr:
//   static_assert(ctnn::memory_saved<net, ctnn::precision::mixed_float16>(256, 2).activations > 0);
#pragma once
#include <cstddef>

#include "plan.hpp"
#include "precision.hpp"
#include "sequential.hpp"

namespace ctnn {

template <Network Net, class P>
constexpr memory_plan_bytes memory_saved(std::size_t batch, std::size_t optimizer_slots = 0) {
  const memory_plan_bytes a = Net::template memory_plan<precision::float32>(batch, optimizer_slots);
  const memory_plan_bytes b = Net::template memory_plan<P>(batch, optimizer_slots);
  memory_plan_bytes d;
  d.parameters = a.parameters - b.parameters;
  d.gradients = a.gradients - b.gradients;
  d.state = a.state - b.state;
  d.masks = a.masks - b.masks;
  d.metadata = a.metadata - b.metadata;
  d.optimizer = a.optimizer - b.optimizer;
  d.activations = a.activations - b.activations;
  d.total = a.total - b.total;
  return d;
}

}  // namespace ctnn
