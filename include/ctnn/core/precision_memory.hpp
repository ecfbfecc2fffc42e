// ctnn/core/precision_memory.hpp — the bytes a precision policy saves, at compile time.
//
// memory_saved<Net, P>(batch, optimizer_slots) is, per role, what a model of
// Net needs under precision::float32 minus what it needs under P (both from
// Net::memory_plan, core/plan.hpp), as signed byte counts: mixed_float16 and
// mixed_bfloat16 halve the activations, deltas and caches (the model's float
// input and output are converted copies) and keep parameters, gradients and
// optimizer slots; they add the compute-type copy of the parameters and its
// gradients (compute_copies < 0). float16 halves the parameters too
// (inference: no gradients or slots needed). All constexpr:
//   static_assert(ctnn::memory_saved<net, ctnn::precision::mixed_float16>(256, 2).activations > 0);
#pragma once
#include <cstddef>

#include "plan.hpp"
#include "precision.hpp"
#include "sequential.hpp"

namespace ctnn {

// Bytes saved per role (negative: P needs more).
struct memory_plan_difference {
  std::ptrdiff_t parameters = 0, gradients = 0, state = 0, masks = 0, metadata = 0, optimizer = 0;
  std::ptrdiff_t activations = 0, compute_copies = 0, total = 0;
};

template <Network Net, class P>
constexpr memory_plan_difference memory_saved(std::size_t batch, std::size_t optimizer_slots = 0) {
  const memory_plan_bytes a = Net::template memory_plan<precision::float32>(batch, optimizer_slots);
  const memory_plan_bytes b = Net::template memory_plan<P>(batch, optimizer_slots);
  auto d = [](std::size_t x, std::size_t y) { return std::ptrdiff_t(x) - std::ptrdiff_t(y); };
  memory_plan_difference r;
  r.parameters = d(a.parameters, b.parameters);
  r.gradients = d(a.gradients, b.gradients);
  r.state = d(a.state, b.state);
  r.masks = d(a.masks, b.masks);
  r.metadata = d(a.metadata, b.metadata);
  r.optimizer = d(a.optimizer, b.optimizer);
  r.activations = d(a.activations, b.activations);
  r.compute_copies = d(a.compute_copies, b.compute_copies);
  r.total = d(a.total, b.total);
  return r;
}

}  // namespace ctnn
