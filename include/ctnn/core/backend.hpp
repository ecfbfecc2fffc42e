// ctnn/core/backend.hpp — backends: where a model's memory lives and who runs its ops.
//
// A backend is a type. It provides
//   memory    — allocate(bytes) / deallocate(p, bytes) / copy(dst, src, bytes)
//               (64-byte aligned; host_accessible says whether the host may
//               read the bytes directly);
//   ops<B>    — a specialization of ctnn::ops (backends/cpu/ops.hpp for cpu<Arch>)
//               through which layers, losses, activations and optimizers call
//               every kernel; they never name kernels::cpu. It satisfies
//               BackendOps<B> (backend_ops.hpp: products, element-wise maps,
//               reductions, conversions, optimizer updates, loss kernels).
//               How a backend parallelises (the CPU thread pool, a stream)
//               is its own business, not part of the op set.
// This header names no backend: cpu<Arch> and host_memory are in
// backends/cpu/backend.hpp, cuda<SM> in backends/cuda/backend.hpp.
#pragma once
#include <cstddef>
#include <string>
#include <type_traits>

#include "backend_ops.hpp"

namespace ctnn {

inline constexpr std::size_t memory_alignment = 64;

// ---- Backend: named sub-concepts ----
template <class B>
concept has_backend_memory = requires(void* p, const void* q, std::size_t n) {
  { B::memory::allocate(n) } -> std::same_as<void*>;
  B::memory::deallocate(p, n);
  B::memory::copy(p, q, n);
  { B::memory::host_accessible } -> std::convertible_to<bool>;
};
template <class B>
concept has_backend_name = requires { { B::name() } -> std::convertible_to<std::string>; };
template <class B>
concept Backend = has_backend_memory<B> && has_backend_name<B> && BackendOps<B>;

}  // namespace ctnn
