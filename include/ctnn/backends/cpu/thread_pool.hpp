// ctnn/kernels/cpu/thread_pool.hpp — the small thread pool the CPU kernels share.
//
// thread_pool::global() holds size()-1 worker threads; the calling thread is
// the size()-th. Its size is CTNN_NUM_THREADS when set (1..256), else
// std::thread::hardware_concurrency(); set_threads(n) changes it.
// run(tasks, f) calls f(t) once for every t in [0, tasks) and returns when all
// are done. Which thread runs a task is not fixed, so a kernel that wants the
// same result whatever the thread count gives each task its own outputs and
// computes each output within one task. A run() from inside a task, or while
// another thread's run() is in progress, executes serially on the caller, as
// does run(tasks, f, false) (a kernel whose work is too small to share).
// f is called through one function pointer on every path, so its body is
// compiled once per kernel, not once per path.
// Workers run a run()'s tasks under the caller's floating-point mode (x86
// MXCSR: flush-to-zero, denormals-are-zero, rounding; denormals.hpp) and
// restore their own afterwards. The caller takes tasks from the front of
// [0, tasks), the workers from the back (docs/performance.md, "MLP training":
// two threads).
// A probe (attach) records each run() for measurement: its task body, tasks, the
// CPU time each thread spent in its tasks; with probe::serial every run executes
// in order on the caller, the same runs and tasks (bench/pool_probe.cpp).
// Its functions that are not templates (the pool, its workers' loop, run_tasks)
// are CTNN_DECL: with CTNN_COMPILED_KERNELS the compiled part holds them
// (core/separate.hpp).
#pragma once
#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <ctime>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

#include "../../core/narrow_std.hpp"
#include "../../core/separate.hpp"
#include "denormals.hpp"

namespace ctnn::kernels::cpu {

// This thread's CPU time in ns (CLOCK_THREAD_CPUTIME_ID: time the OS gives other threads is not
// counted); 0 where the clock is missing.
inline std::int64_t thread_cpu_ns() noexcept {
#if defined(CLOCK_THREAD_CPUTIME_ID)
  timespec ts{};
  if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts) == 0) return std::int64_t(ts.tv_sec) * 1000000000 + ts.tv_nsec;
#endif
  return 0;
}

class thread_pool {
 public:
  // One run() as a probe saw it. fn is the task body (thread_pool::call<F>, one per kernel's
  // task lambda: its symbol names the kernel); cpu_ns and ran: the caller's [0] and the workers'
  // [1] CPU time from their first task of the run to the end of their last, and tasks run;
  // caller_cpu_ns: the caller's CPU time (thread_cpu_ns) when run() began and when it returned
  // (between one run's end and the next one's begin: the caller's serial work).
  struct run_record {
    void (*fn)(void*, std::size_t) = nullptr;
    std::size_t tasks = 0;
    bool shared = false;  // handed to the workers (else run on the caller alone)
    std::int64_t wall_ns = 0;
    std::int64_t cpu_ns[2] = {0, 0};
    std::uint32_t ran[2] = {0, 0};
    std::int64_t caller_cpu_ns[2] = {0, 0};
  };
  // Measurement only (bench/pool_probe.cpp): while attached, every run() called outside a task
  // appends a run_record to `records` up to its capacity (reserve it: the workers write into the
  // record of a run in progress, so it must not move); with `serial`, every run's tasks run in
  // order on the calling thread (the same runs, tasks and plans as with the workers: one thread's
  // time for each run; the runs inside its tasks run serially and unrecorded, as in a shared run's
// tasks); with `split`, such a run's first half of tasks runs on the caller and then the rest on
  // the workers, one part after the other (each part's data where two threads leave it, without
  // running at the same time: what the split costs, measurable on a loaded machine). Attach and
  // detach (nullptr) between runs, with one thread calling run().
  struct probe {
    std::vector<run_record> records;
    bool serial = false, split = false;
  };
  void attach(probe* p) noexcept { probe_ = p; }

  explicit thread_pool(std::size_t threads) { start(threads); }
  thread_pool(const thread_pool&) = delete;
  thread_pool& operator=(const thread_pool&) = delete;
  ~thread_pool();

  static thread_pool& global();

  std::size_t size() const noexcept { return workers_.size() + 1; }

  // Restarts the pool with n threads in all (n >= 1); not while a run() is in progress.
  void resize(std::size_t n);

  template <class F>
  void run(std::size_t tasks, F&& f) {
    run_tasks(tasks, const_cast<void*>(static_cast<const void*>(&f)), &call<std::remove_reference_t<F>>, true);
  }
  // run(tasks, f) when parallel, else f(0), f(1), ... in order on the calling
  // thread, without the pool (a kernel that decides by the size of its work).
  template <class F>
  void run(std::size_t tasks, F&& f, bool parallel) {
    run_tasks(tasks, const_cast<void*>(static_cast<const void*>(&f)), &call<std::remove_reference_t<F>>, parallel);
  }

 private:
  // f's body is compiled once, into call<F>, which every path (the workers,
  // the serial loops) reaches through one function pointer; run_tasks is not
  // a template. A kernel that called f inline in its serial path and again
  // through the pool compiled its task body two or three times.
  template <class FD>
  static void call(void* c, std::size_t t) {
    (*static_cast<FD*>(c))(t);
  }

  // Not inlined (its attribute is on the definition: g++ warns of an inline definition after a noinline declaration).
  void run_tasks(std::size_t tasks, void* ctx, void (*fn)(void*, std::size_t), bool parallel);

  static std::size_t default_threads() {
    if (const char* e = std::getenv("CTNN_NUM_THREADS")) {
      const long v = std::strtol(e, nullptr, 10);
      if (v >= 1 && v <= 256) return std::size_t(v);
    }
    return std::max<std::size_t>(1, std::thread::hardware_concurrency());
  }
  static void cpu_pause() noexcept {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
  }
  // Busy-waits, yielding only now and then.
  static void relax(unsigned i) noexcept {
    if (i % 1024 == 1023) std::this_thread::yield();
    else cpu_pause();
  }
  static bool& in_task() {
    thread_local bool flag = false;
    return flag;
  }

  void start(std::size_t n);
  void stop();

  // Takes tasks until none is left: the caller from the front of [0, tasks), the workers from
  // the back, so that on two threads each runs a contiguous part and reads only its part of the
  // operands (a product's tasks in order share rows of A; the runs of a K-blocked product give
  // each thread about the same tiles of C every time), where one counter for all had each thread
  // take tasks in turn. range_: the tasks not yet taken, [low 32 bits, high 32 bits).
  bool take(bool front, std::size_t& t) {
    std::uint64_t r = range_.load(std::memory_order_relaxed);
    for (;;) {
      const std::uint64_t lo = r & 0xffffffffu, hi = r >> 32;
      if (lo >= hi) return false;
      if (range_.compare_exchange_weak(r, front ? r + 1 : r - (std::uint64_t(1) << 32), std::memory_order_relaxed)) {
        t = std::size_t(front ? lo : hi - 1);
        return true;
      }
    }
  }
  void work(bool front) {
    in_task() = true;
    run_record* const rec = record_;  // published with the run (null: no probe)
    const std::int64_t cpu0 = rec ? thread_cpu_ns() : 0;
    std::size_t finished = 0;
    for (std::size_t t; take(front, t); ++finished) fn_(ctx_, t);
    in_task() = false;
    if (rec && finished) {
      const int who = front ? 0 : 1;
      std::atomic_ref<std::int64_t>(rec->cpu_ns[who]).fetch_add(thread_cpu_ns() - cpu0, std::memory_order_relaxed);
      std::atomic_ref<std::uint32_t>(rec->ran[who]).fetch_add(std::uint32_t(finished), std::memory_order_relaxed);
    }
    if (finished) done_.fetch_add(finished, std::memory_order_acq_rel);
  }

  void loop(std::uint64_t seen);

  std::vector<std::thread> workers_;
  std::mutex m_, run_mutex_;
  std::condition_variable cv_;
  std::atomic<std::uint64_t> generation_{0};
  std::atomic<std::uint64_t> range_{0};
  std::atomic<std::size_t> done_{0}, active_{0};
  unsigned mode_ = 0;  // the floating-point mode of the thread that called run()
  void* ctx_ = nullptr;
  void (*fn_)(void*, std::size_t) = nullptr;
  bool quit_ = false;
  probe* probe_ = nullptr;
  run_record* record_ = nullptr;  // the probed run in progress
};

#if CTNN_DEFINITIONS
CTNN_DECL thread_pool::~thread_pool() { stop(); }

CTNN_DECL thread_pool& thread_pool::global() {
  static thread_pool pool(default_threads());
  return pool;
}

CTNN_DECL void thread_pool::resize(std::size_t n) {
  if (n == 0 || n > 256)
    throw std::invalid_argument("thread_pool::resize: the thread count must be in [1, 256], got " + std::to_string(n));
  std::lock_guard<std::mutex> run_lock(run_mutex_);
  if (n == size()) return;
  stop();
  start(n);
}

[[gnu::noinline]] CTNN_DECL void thread_pool::run_tasks(std::size_t tasks, void* ctx, void (*fn)(void*, std::size_t),
                                                      bool parallel) {
  run_record* rec = nullptr;
  if (probe_ && !in_task() && probe_->records.size() < probe_->records.capacity()) {
    rec = &probe_->records.emplace_back();
    rec->fn = fn;
    rec->tasks = tasks;
    rec->caller_cpu_ns[0] = thread_cpu_ns();
  }
  struct stamp {  // the probed run's wall time, on every return below
    run_record* rec;
    std::chrono::steady_clock::time_point begin;
    ~stamp() {
      if (!rec) return;
      rec->wall_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - begin).count();
      rec->caller_cpu_ns[1] = thread_cpu_ns();
    }
  } stamp_{rec, rec ? std::chrono::steady_clock::now() : std::chrono::steady_clock::time_point{}};
  auto serial = [&] {
    const std::int64_t cpu0 = rec ? thread_cpu_ns() : 0;
    for (std::size_t t = 0; t < tasks; ++t) fn(ctx, t);
    if (rec) {
      rec->cpu_ns[0] = thread_cpu_ns() - cpu0;
      rec->ran[0] = std::uint32_t(tasks);
    }
  };
  if (!parallel) return serial();
  if (tasks == 0) return;
  std::unique_lock<std::mutex> run_lock(run_mutex_, std::try_to_lock);
  if (tasks == 1 || tasks > 0xffffffffu || workers_.empty() || in_task() || !run_lock.owns_lock()) return serial();
  if (rec && probe_->serial) {  // a run the workers would share, on the caller as one task of its own
    in_task() = true;
    serial();
    in_task() = false;
    return;
  }
  std::size_t first = 0;  // tasks the caller ran before the workers (probe::split)
  if (rec && probe_->split) {
    first = tasks / 2;
    in_task() = true;
    const std::int64_t cpu0 = thread_cpu_ns();
    for (std::size_t t = 0; t < first; ++t) fn(ctx, t);
    rec->cpu_ns[0] = thread_cpu_ns() - cpu0;
    rec->ran[0] = std::uint32_t(first);
    in_task() = false;
  }
  {
    // Wait until no worker is still inside the previous run's work().
    std::unique_lock<std::mutex> lk(m_);
    while (active_.load(std::memory_order_acquire) != 0) {
      lk.unlock();
      std::this_thread::yield();
      lk.lock();
    }
    mode_ = fp_mode();
    if (rec) rec->shared = true;
    record_ = rec;
    ctx_ = ctx;
    fn_ = fn;
    range_.store(std::uint64_t(tasks) << 32 | first, std::memory_order_relaxed);
    done_.store(first, std::memory_order_relaxed);
    generation_.fetch_add(1, std::memory_order_release);
  }
  cv_.notify_all();
  if (first == 0) work(true);
  for (unsigned i = 0; done_.load(std::memory_order_acquire) != tasks; ++i) relax(i);
}

CTNN_DECL void thread_pool::start(std::size_t n) {
  quit_ = false;
  const std::uint64_t g = generation_.load(std::memory_order_acquire);
  for (std::size_t i = 1; i < n; ++i) workers_.emplace_back([this, g] { loop(g); });
}
CTNN_DECL void thread_pool::stop() {
  {
    std::lock_guard<std::mutex> lk(m_);
    quit_ = true;
    generation_.fetch_add(1, std::memory_order_release);
  }
  cv_.notify_all();
  for (auto& w : workers_) w.join();
  workers_.clear();
}

CTNN_DECL void thread_pool::loop(std::uint64_t seen) {
  for (;;) {
    // Spin for about 200 us (the kernels of one training step come in quick
    // succession; yielding instead can cost a whole time slice on a busy
    // machine), then sleep until the next run().
    const auto until = std::chrono::steady_clock::now() + std::chrono::microseconds(200);
    for (unsigned i = 1; generation_.load(std::memory_order_acquire) == seen; ++i) {
      cpu_pause();
      if (i % 256 == 0 && std::chrono::steady_clock::now() > until) break;
    }
    {
      std::unique_lock<std::mutex> lk(m_);
      cv_.wait(lk, [&] { return quit_ || generation_.load(std::memory_order_acquire) != seen; });
      seen = generation_.load(std::memory_order_acquire);
      if (quit_) return;
      active_.fetch_add(1, std::memory_order_relaxed);
    }
    const unsigned own = fp_mode() & ~fp_status_bits, want = mode_ & ~fp_status_bits;
    if (own != want) set_fp_mode(want);
    work(false);
    if (own != want) set_fp_mode(own);
    active_.fetch_sub(1, std::memory_order_release);
  }
}
#endif

// Threads the CPU kernels use in all (the caller included).
inline std::size_t threads() { return thread_pool::global().size(); }
inline void set_threads(std::size_t n) { thread_pool::global().resize(n); }

}  // namespace ctnn::kernels::cpu
