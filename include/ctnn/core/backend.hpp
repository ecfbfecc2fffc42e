// ctnn/core/backend.hpp — backends: where a model's memory lives and who runs its ops.
//
// A backend is a type. It provides
//   memory    — allocate(bytes) / deallocate(p, bytes) / copy(dst, src, bytes)
//               (64-byte aligned; host_accessible says whether the host may
//               read the bytes directly);
//   ops<B>    — a specialization of ctnn::ops (kernels/cpu/ops.hpp for cpu<Arch>)
//               through which layers, losses, activations and optimizers call
//               every kernel; they never name kernels::cpu. It is also the
//               executor: ops<B>::for_chunks runs parallel work (the CPU
//               thread pool; a stream later) and ops<B>::threads() says how wide.
// cpu<Arch> carries its xsimd architecture in the type, so two translation
// units built with different -march flags instantiate different functions
// instead of two bodies of one (an ODR violation). cuda<SM> names the CUDA
// half-precision specializations, which only nvcc sees.
#pragma once
#include <cstddef>
#include <cstring>
#include <new>
#include <string>
#include <type_traits>

#include "../kernels/cpu/arch.hpp"

namespace ctnn {

inline constexpr std::size_t memory_alignment = 64;

// Host memory: 64-byte-aligned operator new, zero-filled.
struct host_memory {
  static constexpr bool host_accessible = true;
  static void* allocate(std::size_t bytes) {
    if (bytes == 0) return nullptr;
    void* p = ::operator new(bytes, std::align_val_t{memory_alignment});
    std::memset(p, 0, bytes);
    return p;
  }
  static void deallocate(void* p, std::size_t) noexcept {
    if (p) ::operator delete(p, std::align_val_t{memory_alignment});
  }
  static void copy(void* dst, const void* src, std::size_t bytes) noexcept {
    if (bytes) std::memcpy(dst, src, bytes);
  }
};

// The ops of backend B; each backend specializes it (never defined in general).
template <class B>
struct ops;

template <class Arch = kernels::cpu::default_arch>
struct cpu {
  using arch = Arch;
  using memory = host_memory;
  static std::string name() { return std::string("cpu<") + Arch::name() + ">"; }
};

// Device memory of the CUDA backends; defined by cuda/memory.cuh, which only
// nvcc translation units include (cuda<SM> is a complete Backend there).
struct cuda_device_memory;

template <int SM>
struct cuda {
  static constexpr int sm = SM;
  using memory = cuda_device_memory;
  static std::string name() { return "cuda<" + std::to_string(SM) + ">"; }
};

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
