// ctnn/core/backend.hpp — backends: where a model's memory lives and who runs its ops.
//
// A backend is a type. It provides
//   memory    — allocate(bytes) / deallocate(p, bytes) / copy(dst, src, bytes)
//               (64-byte aligned; host_accessible says whether the host may
//               read the bytes directly);
//   ops<B>    — a specialization of ctnn::ops (backends/cpu/ops.hpp for cpu<Arch>)
//               through which layers, losses, activations and optimizers call
//               every kernel; they never name kernels::cpu. It is also the
//               executor: ops<B>::for_chunks runs parallel work (the CPU
//               thread pool; a stream later) and ops<B>::threads() says how wide.
// This header names no backend: cpu<Arch> and host_memory are in
// backends/cpu/backend.hpp, cuda<SM> in backends/cuda/backend.hpp.
#pragma once
#include <cstddef>
#include <string>
#include <type_traits>

namespace ctnn {

inline constexpr std::size_t memory_alignment = 64;

// The ops of backend B; each backend specializes it (never defined in general).
template <class B>
struct ops;

// ---- Backend: named sub-concepts ----
template <class B>
concept has_backend_memory = requires(void* p, const void* q, std::size_t n) {
  { B::memory::allocate(n) } -> std::same_as<void*>;
  B::memory::deallocate(p, n);
  B::memory::copy(p, q, n);
  { B::memory::host_accessible } -> std::convertible_to<bool>;
};
template <class B>
concept has_backend_ops = requires { sizeof(ops<B>); };
template <class B>
concept has_backend_name = requires { { B::name() } -> std::convertible_to<std::string>; };
template <class B>
concept Backend = has_backend_memory<B> && has_backend_name<B> && has_backend_ops<B>;

}  // namespace ctnn
