// tests/device/simulated_device.hpp — a device backend tested without a device.
//
// sim::device's memory is not host-accessible: each allocation is its own
// anonymous mmap (the arena), kept PROT_NONE except while the backend itself
// works on it: memory::copy (so the feeder and host views) and every op of
// ops<sim::device> (the CPU kernels of ops<cpu<>>). The runner does not open
// it: host code in the phases it runs (a layer, loss or optimizer reading the
// model's memory other than through ops<B>) faults as anywhere else. Any other
// host access to a model's memory — the generic model, fit, callbacks, weights
// files reading or writing it directly instead of through host views,
// memory::copy or the feeder — is a SIGSEGV. Its
// host_view and feeder are the defaults for device memory (host_mirror,
// staging_feeder: core/backend.hpp). arena counts the copies, the reads
// (arena to host) in and outside the runner, and the waited-for reductions. Single-threaded use of the arena: one
// thread enters the backend at a time (the CPU pool's workers run inside).
#pragma once
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <cstdio>

#include <cstddef>
#include <cstring>
#include <map>
#include <new>
#include <stdexcept>
#include <string>
#include <utility>

#include <ctnn/backends/cpu/ops.hpp>

namespace sim {

// The arena: every live mapping and its length; `depth` counts the backend's
// nested calls (the arena is readable and writable while depth > 0).
struct arena {
  static inline std::map<void*, std::size_t> mappings;
  static inline int depth = 0;
  static inline std::size_t allocations = 0, copies = 0, bytes_copied = 0;
  // copies from the arena to host memory (reads), and those made while the runner runs
  static inline std::size_t reads = 0, bytes_read = 0, reads_in_runner = 0;
  // calls of the reductions that return a value (sum_squares, sum_abs: a device waits for each)
  static inline std::size_t waits = 0;
  static inline int runner_depth = 0;

  static bool contains(const void* p) {
    auto it = mappings.upper_bound(const_cast<void*>(p));
    if (it == mappings.begin()) return false;
    --it;
    return static_cast<const char*>(p) < static_cast<const char*>(it->first) + it->second;
  }

  static std::size_t page() {
    static const std::size_t p = std::size_t(::sysconf(_SC_PAGESIZE));
    return p;
  }
  static std::size_t rounded(std::size_t n) { return (n + page() - 1) / page() * page(); }
  static void protect(void* p, std::size_t n, bool open) {
    if (::mprotect(p, n, open ? PROT_READ | PROT_WRITE : PROT_NONE) != 0)
      throw std::runtime_error("simulated_device: mprotect failed");
  }
  static void set_all(bool open) {
    for (auto& [p, n] : mappings) protect(p, n, open);
  }
};

// While one lives, the backend is working: the arena is open.
class scope {
 public:
  scope() {
    if (arena::depth++ == 0) arena::set_all(true);
  }
  scope(const scope&) = delete;
  scope& operator=(const scope&) = delete;
  ~scope() {
    if (--arena::depth == 0) arena::set_all(false);
  }
};

struct memory {
  static constexpr bool host_accessible = false;
  static void* allocate(std::size_t bytes) {
    if (bytes == 0) return nullptr;
    const std::size_t n = arena::rounded(bytes);
    void* p = ::mmap(nullptr, n, arena::depth > 0 ? PROT_READ | PROT_WRITE : PROT_NONE,
                     MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);  // zero-filled, page (so 64-byte) aligned
    if (p == MAP_FAILED) throw std::bad_alloc();
    arena::mappings.emplace(p, n);
    ++arena::allocations;
    return p;
  }
  static void deallocate(void* p, std::size_t) noexcept {
    if (!p) return;
    const auto it = arena::mappings.find(p);
    if (it == arena::mappings.end()) return;
    ::munmap(p, it->second);
    arena::mappings.erase(it);
  }
  // Either direction (device <-> host, device <-> device), as cudaMemcpyDefault.
  static void copy(void* dst, const void* src, std::size_t bytes) {
    if (bytes == 0) return;
    const scope s;
    std::memcpy(dst, src, bytes);
    ++arena::copies;
    arena::bytes_copied += bytes;
    if (arena::contains(src) && !arena::contains(dst)) {
      ++arena::reads;
      arena::bytes_read += bytes;
      if (arena::runner_depth > 0) ++arena::reads_in_runner;
    }
  }
};

// The runner: the phases run with the CPU's denormal mode and the arena closed (only the ops,
// memory::copy and the feeder open it). runner_depth counts its nested calls (arena::reads_in_runner).
struct runner {
  struct depth {
    depth() { ++arena::runner_depth; }
    depth(const depth&) = delete;
    depth& operator=(const depth&) = delete;
    ~depth() { --arena::runner_depth; }
  };
  template <class F>
  static decltype(auto) run(F&& f) {
    const depth d;
    return std::forward<F>(f)();
  }
  template <class F>
  static decltype(auto) run(F&& f, bool flush_denormals) {
    const depth d;
    return ctnn::host_runner::run(std::forward<F>(f), flush_denormals);
  }
};

struct device {
  using memory = sim::memory;
  using runner = sim::runner;
  static std::string name() { return "simulated_device"; }
};

// True when reading p from the host (outside the backend) kills a forked child with SIGSEGV.
inline bool faults_on_read(const void* p) {
  std::fflush(nullptr);
  const pid_t pid = ::fork();
  if (pid < 0) throw std::runtime_error("simulated_device: fork failed");
  if (pid == 0) {
    const rlimit no_core{0, 0};
    ::setrlimit(RLIMIT_CORE, &no_core);
    std::signal(SIGSEGV, SIG_DFL);  // not the test framework's handler
    const volatile unsigned char c = *static_cast<const volatile unsigned char*>(p);
    (void)c;
    ::_exit(0);
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  return WIFSIGNALED(status) && WTERMSIG(status) == SIGSEGV;
}

}  // namespace sim

// The ops: cpu<>'s kernels, each call inside the backend (the arena open).
#define SIM_DEVICE_OP(name)                                        \
  template <auto... V, class... A>                                 \
  static decltype(auto) name(A&&... a) {                           \
    const sim::scope s;                                            \
    return base::template name<V...>(std::forward<A>(a)...);      \
  }
// ... and one the base offers for some arguments only (a layer asks with a requires-expression:
// sparse_dense_weights_gradient, only where the layout computes it without the dense dW).
#define SIM_DEVICE_OP_IF(name)                                                                  \
  template <auto... V, class... A>                                                             \
    requires requires(A&&... a) { base::template name<V...>(std::forward<A>(a)...); }          \
  static decltype(auto) name(A&&... a) {                                                       \
    const sim::scope s;                                                                        \
    return base::template name<V...>(std::forward<A>(a)...);                                   \
  }
// ... and a reduction that returns a value, counted in arena::waits.
#define SIM_DEVICE_WAIT(name)                                      \
  template <auto... V, class... A>                                 \
  static decltype(auto) name(A&&... a) {                           \
    ++sim::arena::waits;                                           \
    const sim::scope s;                                            \
    return base::template name<V...>(std::forward<A>(a)...);      \
  }

template <>
struct ctnn::ops<sim::device> : private ctnn::ops<ctnn::cpu<>> {
  using base = ctnn::ops<ctnn::cpu<>>;
  // cpu<>'s ops are a private base: an op the CPU backend gains is not callable here until it
  // is wrapped below (a missing required op fails BackendOps at compile time; an optional one,
  // found by a requires-expression, is not taken), so no kernel runs with the arena closed.
  // The non-op members are named here.
  using base::arch;
  using base::half;
  using base::float16;
  using base::bfloat16;
  using base::compute_t;
  using base::packed_size;
  using base::packed_rows;
  using base::fused_recurrent_row;
  using base::fused_step_projection;
  using base::fused_packed_add;
  using base::step_weight_gradients;
  using base::step_weights_rows;
  SIM_DEVICE_OP(dense_forward)
  SIM_DEVICE_OP(dense_backward_weights)
  SIM_DEVICE_OP(dense_backward_input)
  SIM_DEVICE_OP(pack_weights)
  SIM_DEVICE_OP(pack_weights_transposed)
  SIM_DEVICE_OP(dense_forward_packed)
  SIM_DEVICE_OP(dense_backward_input_packed)
  SIM_DEVICE_OP(recurrent_row)
  SIM_DEVICE_OP(dense_forward_packed_sum)
  SIM_DEVICE_OP(dense_backward_input_packed_add)
  SIM_DEVICE_OP(step_weights_gradient)
  SIM_DEVICE_OP(sparse_dense_forward)
  SIM_DEVICE_OP(sparse_dense_backward)
  SIM_DEVICE_OP(sparse_dense_decode)
  SIM_DEVICE_OP(sparse_dense_gather)
  SIM_DEVICE_OP_IF(sparse_dense_weights_gradient)
  SIM_DEVICE_OP(conv_forward)
  SIM_DEVICE_OP(conv_backward)
  SIM_DEVICE_OP(conv_backward_relu)
  SIM_DEVICE_OP(max_pool_forward)
  SIM_DEVICE_OP(max_pool_backward)
  SIM_DEVICE_OP(average_pool_forward)
  SIM_DEVICE_OP(average_pool_backward)
  SIM_DEVICE_OP(global_average_forward)
  SIM_DEVICE_OP(global_average_backward)
  SIM_DEVICE_OP(batch_norm_forward)
  SIM_DEVICE_OP(batch_norm_backward)
  SIM_DEVICE_OP(dropout_forward)
  SIM_DEVICE_OP(dropout_backward)
  SIM_DEVICE_OP(gather_rows)
  SIM_DEVICE_OP(scatter_add_rows)
  SIM_DEVICE_OP(layer_norm_forward)
  SIM_DEVICE_OP(layer_norm_backward)
  SIM_DEVICE_OP(zero_pad_forward)
  SIM_DEVICE_OP(zero_pad_backward)
  SIM_DEVICE_OP(up_sample_forward)
  SIM_DEVICE_OP(up_sample_backward)
  SIM_DEVICE_OP(depthwise_forward)
  SIM_DEVICE_OP(depthwise_backward)
  SIM_DEVICE_OP(copy)
  SIM_DEVICE_OP(relu_forward)
  SIM_DEVICE_OP(relu_backward)
  SIM_DEVICE_OP(leaky_relu_forward)
  SIM_DEVICE_OP(leaky_relu_backward)
  SIM_DEVICE_OP(sigmoid_forward)
  SIM_DEVICE_OP(sigmoid_backward)
  SIM_DEVICE_OP(tanh_forward)
  SIM_DEVICE_OP(tanh_backward)
  SIM_DEVICE_OP(softmax_forward)
  SIM_DEVICE_OP(softmax_backward)
  SIM_DEVICE_OP(crossentropy_logits_row)
  SIM_DEVICE_OP(sparse_crossentropy_logits)
  SIM_DEVICE_OP(categorical_crossentropy_logits)
  SIM_DEVICE_OP(squared_error)
  SIM_DEVICE_OP(sparse_crossentropy_loss)
  SIM_DEVICE_OP(categorical_crossentropy_loss)
  SIM_DEVICE_OP(squared_error_loss)
  SIM_DEVICE_OP(pointwise_loss)
  SIM_DEVICE_OP(map)
  SIM_DEVICE_OP(map_rows)
  SIM_DEVICE_OP(fill)
  SIM_DEVICE_OP(fill_zero)
  SIM_DEVICE_OP(scale)
  SIM_DEVICE_OP(clip_value)
  SIM_DEVICE_OP(accumulate)
  SIM_DEVICE_OP(accumulated_mean)
  SIM_DEVICE_OP(moving_average)
  SIM_DEVICE_OP(add_penalty_gradient)
  SIM_DEVICE_OP(add_penalty)
  SIM_DEVICE_OP(unscale)
  SIM_DEVICE_OP(all_finite)
  SIM_DEVICE_WAIT(sum_squares)
  SIM_DEVICE_WAIT(sum_abs)
  SIM_DEVICE_OP(clip_by_norm)
  // convert / widen declare their return type, so BackendOps' check on 16-bit types does not
  // instantiate their bodies (a float32 program includes no 16-bit execution).
  template <class S, class D>
  static void convert(const S* src, D* dst, std::size_t n) {
    const sim::scope s;
    base::convert(src, dst, n);
  }
  template <class T>
  static void widen(const T* x, float* y, std::size_t n) {
    const sim::scope s;
    base::widen(x, y, n);
  }
};
#undef SIM_DEVICE_OP
#undef SIM_DEVICE_WAIT
