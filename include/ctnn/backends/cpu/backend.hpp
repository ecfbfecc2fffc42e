// ctnn/backends/cpu/backend.hpp — the CPU backend's tag, cpu<Arch>, and its memory.
//
// cpu<Arch> carries its xsimd architecture in the type, so two translation
// units built with different -march flags instantiate different functions
// instead of two bodies of one (an ODR violation). Its ops are in ops.hpp.
#pragma once
#include <cstddef>
#include <cstring>
#include <new>
#include <string>

#include "../../core/backend.hpp"
#include "arch.hpp"

namespace ctnn {

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

template <class Arch = kernels::cpu::default_arch>
struct cpu {
  using arch = Arch;
  using memory = host_memory;
  static std::string name() { return std::string("cpu<") + Arch::name() + ">"; }
};

}  // namespace ctnn
