// ctnn/backends/cpu/backend.hpp — the CPU backend's tag, cpu<Arch>, its memory, feeder and runner.
//
// cpu<Arch> carries its xsimd architecture in the type, so two translation
// units built with different -march flags instantiate different functions
// instead of two bodies of one (an ODR violation). Its ops are in ops.hpp.
#pragma once
#include <cstddef>
#include <cstring>
#include <new>
#include <string>
#include <utility>

#include "../../core/backend.hpp"
#include "default_arch.hpp"  // not arch.hpp: a network type names cpu<> without xsimd's registers
#include "denormals.hpp"

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
  using host_view = zero_copy_view;
};

// The CPU's runner: the phases run on the calling thread (and the pool's
// workers) with flush-to-zero and denormals-are-zero set unless
// flush_denormals is false (denormals.hpp); the caller's mode is restored.
struct host_runner {
  template <class F>
  static decltype(auto) run(F&& f, bool flush_denormals = true) {
    const kernels::cpu::denormal_guard fp(flush_denormals);
    return std::forward<F>(f)();
  }
};

template <class Arch = kernels::cpu::default_arch>
struct cpu {
  using arch = Arch;
  using memory = host_memory;
  using feeder = zero_copy_feeder;  // the model reads the batch where it is
  using runner = host_runner;
  static std::string name() { return std::string("cpu<") + Arch::name() + ">"; }
};

}  // namespace ctnn
