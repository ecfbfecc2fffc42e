// ctnn/core/backend.hpp — backends: where a model's memory lives and who runs its ops.
//
// A backend is a type. It provides
//   memory  — allocate(bytes) / deallocate(p, bytes) / copy(dst, src, bytes) (64-byte
//             aligned; copy works to and from the host), host_accessible, and optionally
//             memory::host_view (default: zero_copy_view on host memory, host_mirror elsewhere);
//   ops<B>  — the op set every layer, loss, activation and optimizer calls; it satisfies
//             BackendOps<B> (backend_ops.hpp). How it parallelises is its own business;
//   feeder  — (optional) feed(slot, host, n): where the model reads a batch
//             (zero_copy_feeder on host memory, staging_feeder elsewhere);
//   runner  — (optional) run(f, flush_denormals): how the phases of a step execute
//             (plain_runner; the CPU's adds its denormal guard; CUDA's times and captures).
// The model, step, fit, callbacks and weights files are the same for every backend: host
// code reaches a model's memory only through a host view or memory::copy. This header names
// no backend (cpu<Arch>: backends/cpu/backend.hpp; cuda<SM>: backends/cuda/backend.hpp).
// docs/design.md, "The backend" and "Add a backend".
#pragma once
#include <cstddef>
#include <new>
#include <string>
#include <type_traits>
#include <utility>

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

// ---- host views: the host's window on a range of a backend's memory ----
// A view is made on (p, bytes, read): data() is host memory holding the
// range's bytes (when read) and commit() makes the range hold data()'s bytes.

// Host-accessible memory: data() is p itself; commit() does nothing.
class zero_copy_view {
 public:
  zero_copy_view(std::byte* p, std::size_t bytes, bool = true) noexcept : p_(p), n_(bytes) {}
  std::byte* data() const noexcept { return p_; }
  std::size_t size() const noexcept { return n_; }
  void commit() noexcept {}

 private:
  std::byte* p_;
  std::size_t n_;
};

// Other memory: a 64-byte-aligned host copy, read through Memory::copy when
// made (read = true) and written back by commit().
template <class Memory>
class host_mirror {
 public:
  host_mirror(std::byte* p, std::size_t bytes, bool read = true) : dev_(p), n_(bytes) {
    if (n_ == 0) return;
    host_ = static_cast<std::byte*>(::operator new(n_, std::align_val_t{memory_alignment}));
    if (read) Memory::copy(host_, dev_, n_);
  }
  host_mirror(const host_mirror&) = delete;
  host_mirror& operator=(const host_mirror&) = delete;
  ~host_mirror() {
    if (host_) ::operator delete(host_, std::align_val_t{memory_alignment});
  }
  std::byte* data() const noexcept { return host_; }
  std::size_t size() const noexcept { return n_; }
  void commit() {
    if (n_) Memory::copy(dev_, host_, n_);
  }

 private:
  std::byte* dev_;
  std::size_t n_;
  std::byte* host_ = nullptr;
};

namespace detail {
template <class B>
struct host_view_of {
  using type = std::conditional_t<B::memory::host_accessible, zero_copy_view, host_mirror<typename B::memory>>;
};
template <class B>
  requires requires { typename B::memory::host_view; }
struct host_view_of<B> {
  using type = typename B::memory::host_view;
};
}  // namespace detail
// B's host view: B::memory::host_view, or the default for its memory.
template <class B>
using host_view_t = typename detail::host_view_of<B>::type;

// ---- feeders: where the model reads a batch ----
// feed(slot, host, n) returns a pointer to n values of host's that the model's
// kernels may read until the next feed of that slot (slot 0: inputs, 1: targets).
struct zero_copy_feeder {
  template <class T>
  const T* feed(std::size_t, const T* host, std::size_t) noexcept {
    return host;
  }
};

// Copies each slot's values into a buffer of Memory (grown as needed, never shrunk).
template <class Memory>
class staging_feeder {
 public:
  staging_feeder() = default;
  staging_feeder(const staging_feeder&) {}  // a copy feeds its own buffers
  staging_feeder& operator=(const staging_feeder&) { return *this; }
  ~staging_feeder() {
    for (slot& s : slots_) Memory::deallocate(s.p, s.n);
  }
  template <class T>
  const T* feed(std::size_t k, const T* host, std::size_t n) {
    slot& s = slots_[k];
    const std::size_t bytes = n * sizeof(T);
    if (bytes > s.n) {
      Memory::deallocate(s.p, s.n);
      s.p = nullptr, s.n = 0;
      s.p = Memory::allocate(bytes);
      s.n = bytes;
    }
    if (bytes) Memory::copy(s.p, host, bytes);
    return static_cast<const T*>(s.p);
  }

 private:
  struct slot {
    void* p = nullptr;
    std::size_t n = 0;
  };
  slot slots_[2];
};

namespace detail {
template <class B>
struct feeder_of {
  using type = std::conditional_t<B::memory::host_accessible, zero_copy_feeder, staging_feeder<typename B::memory>>;
};
template <class B>
  requires requires { typename B::feeder; }
struct feeder_of<B> {
  using type = typename B::feeder;
};
}  // namespace detail
// B's feeder: B::feeder, or the default for its memory.
template <class B>
using feeder_t = typename detail::feeder_of<B>::type;

// ---- runners: how the phases of a step execute ----
// run(f, flush_denormals) returns f(); a backend's runner may change how
// (the CPU's sets flush-to-zero unless flush_denormals is false; CUDA's
// captures a graph).
struct plain_runner {
  template <class F>
  static decltype(auto) run(F&& f, bool = true) {
    return std::forward<F>(f)();
  }
};

namespace detail {
template <class B, class Fallback>
struct runner_of {
  using type = Fallback;
};
template <class B, class Fallback>
  requires requires { typename B::runner; }
struct runner_of<B, Fallback> {
  using type = typename B::runner;
};
}  // namespace detail
// B's runner: B::runner, or Fallback (the model passes the CPU's runner for a
// host backend that names none, so its steps flush denormals as cpu<>'s do).
template <class B, class Fallback = plain_runner>
using runner_t = typename detail::runner_of<B, Fallback>::type;

}  // namespace ctnn
