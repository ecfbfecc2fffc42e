// bench/pool_probe.cpp — where two threads lose in a training step, run by run (issue 25).
//
//   pool_probe mlp|cnn BATCH [ROUNDS [STEPS [split|- [gather|gather-shared]]]]
//
// Runs fit's training step (Adam) of the MLP (784-256-128-10, bench_mlp.cpp) or the CNN
// (bench_cnn.cpp) on a random batch with a pool of two threads and a probe attached
// (thread_pool::probe): ROUNDS (default 10) alternating blocks of STEPS steps (default 20) with
// every run's tasks in order on the caller ("one": the probe's serial mode, the same runs, tasks
// and plans) and shared with the worker ("two"). Per run of the step: its kernel (the task body's
// symbol), tasks, and the medians over the steps of
//   one    the CPU time of its tasks on one thread,
//   two    the CPU time of both threads in its tasks, over the steps where both ran tasks (n),
//   wall2  its wall time in those steps,
//   before the caller's CPU time from the previous run's return (or the step's start) to this
//          run's start, on one thread: the serial work between runs (the last line: after the last run),
// and two / one: how much more work the same tasks took on two threads; caller and worker: each
// thread's CPU a task in those steps (median) over one thread's (the run's one / tasks: tasks of
// unequal cost, as a K-block run's packing, blur it). CPU time is the thread's
// own (CLOCK_THREAD_CPUTIME_ID), so a loaded machine's other processes inflate the wall times but
// not these; the cache traffic they cause is still in them. With `split`, "two" is the probe's split
// mode: each shared run's first half of tasks on the caller, then the rest on the worker, one after
// the other (the data where two threads leave it; on a loaded machine the worker seldom joins a
// shared run in time, and the split always runs). The caller is pinned to the first CPU the
// process may use and the worker to the second. A run kept on the caller (shared "no") shows as
// "two" the caller's CPU in it in the two-thread steps (n: all of them) and its wall there: its
// data as two threads leave it (lines the worker last wrote cost the caller alone too). Summary:
// the runs that went to the worker, the ones kept on the caller, the step's CPU on two threads
// (both threads' CPU in the shared runs plus the caller's in its own) over one thread's in the same
// runs, its wall in and between runs, and the step's time outside every run. Build: target
// pool_probe (-DCTNN_BUILD_BENCHMARKS=ON); run pinned to two cores: `taskset -c 0,1`.
// With `gather` (the MLP only), every step trains on the next batch of a shuffled pass over
// Fashion-MNIST's training images, gathered as fit does before its step (in_memory's cursor:
// the "before" of the first run), instead of one fixed random batch; `gather-shared` gathers it
// over the pool (cursor::share_gather, as fit does since session 30: a run of its own).
#include <ctnn/ctnn.hpp>

#include "bench_nets.hpp"

#include <cxxabi.h>
#include <dlfcn.h>
#include <sched.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

namespace {

using ctnn_bench::cnn;
using ctnn_bench::mlp;

using pool_t = ctnn::kernels::cpu::thread_pool;

// The kernel of a task body thread_pool::call<F>: F's name without argument lists and namespaces.
std::string kernel_name(void (*fn)(void*, std::size_t)) {
  Dl_info info{};
  if (!dladdr(reinterpret_cast<void*>(fn), &info) || !info.dli_sname) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%p", reinterpret_cast<void*>(fn));
    return buf;
  }
  int status = 0;
  std::unique_ptr<char, void (*)(void*)> d(abi::__cxa_demangle(info.dli_sname, nullptr, nullptr, &status), std::free);
  std::string s = status == 0 ? d.get() : info.dli_sname;
  if (const auto call = s.find("::call<"); call != std::string::npos) s = s.substr(call + 7);
  std::string out;  // drop "(...)" argument lists and the namespaces
  int depth = 0;
  for (char c : s) {
    if (c == '(') ++depth;
    if (depth == 0) out += c;
    if (c == ')') --depth;
  }
  for (const char* ns : {"ctnn::kernels::cpu::", "ctnn::", "xsimd::", "simd::", "(void*, unsigned long)"})
    for (std::size_t p; (p = out.find(ns)) != std::string::npos;) out.erase(p, std::strlen(ns));
  return out.size() > 90 ? out.substr(0, 90) : out;
}

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

struct step_runs {
  std::vector<pool_t::run_record> runs;
  double wall_ns;
  std::int64_t cpu_begin, cpu_end;  // the caller's CPU time at the step's start and end
};

// Pins the calling thread to the first CPU of the process's mask and the pool's worker to the
// second; false when there are fewer than two or the worker never took a task.
bool pin(pool_t& pool) {
  cpu_set_t allowed;
  CPU_ZERO(&allowed);
  if (sched_getaffinity(0, sizeof allowed, &allowed) != 0) return false;
  int cpu[2] = {-1, -1};
  for (int c = 0, k = 0; c < CPU_SETSIZE && k < 2; ++c)
    if (CPU_ISSET(c, &allowed)) cpu[k++] = c;
  if (cpu[1] < 0) return false;
  auto to = [](int c) {
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(c, &one);
    return sched_setaffinity(0, sizeof one, &one) == 0;  // 0: the calling thread
  };
  const auto caller = std::this_thread::get_id();
  std::atomic<bool> pinned{false};
  for (int i = 0; i < 10000 && !pinned; ++i)
    pool.run(2, [&](std::size_t) {
      if (std::this_thread::get_id() != caller) pinned = to(cpu[1]);
      else std::this_thread::sleep_for(std::chrono::microseconds(50));  // time for the worker to join
    });
  return pinned && to(cpu[0]);
}

enum class gather_mode { none, serial, shared };

template <class Net>
int probe_steps(std::size_t batch, int rounds, int steps, bool split, gather_mode gather) {
  ctnn::kernels::cpu::set_threads(2);
  pool_t& pool = pool_t::global();
  if (!pin(pool)) std::fprintf(stderr, "pool_probe: threads not pinned (fewer than two CPUs?)\n");
  auto model = ctnn::make_model<Net>(1);
  ctnn::rng g(2);
  std::vector<float> x(batch * Net::input_shape.size);
  std::vector<std::int32_t> y(batch);
  for (auto& v : x) v = float(g.uniform());
  for (auto& v : y) v = std::int32_t(g.below(10));
  // gather: fit's next shuffled batch before every step (x and y then point into b)
  using set_t = ctnn::data::fashion_mnist::dataset;
  std::optional<set_t> train;
  std::optional<typename set_t::cursor> cur;
  typename set_t::batch_type b;
  std::size_t epoch = 0;
  const float* xs = x.data();
  const std::int32_t* ys = y.data();
  auto next = [&] {
    if (!train) return;
    if (!cur->next(b)) {
      cur.emplace(train->open(++epoch));
      cur->share_gather(gather == gather_mode::shared);
      cur->next(b);
    }
    xs = b.x.data();
    ys = b.y.data();
  };
  if (gather != gather_mode::none) {
    if constexpr (Net::input_shape.size == 784) {
      train.emplace(ctnn::data::fashion_mnist::train().shuffle(1).batch(batch, true));
      cur.emplace(train->open(epoch));
      cur->share_gather(gather == gather_mode::shared);
    }
  }
  ctnn::adam opt;
  ctnn::train_step step{model, ctnn::sparse_categorical_crossentropy{.from_logits = true}, opt};
  std::size_t it = 0;
  for (int i = 0; i < 20; ++i) {
    next();
    step.run(xs, ys, batch, 0, it++);
  }
  std::vector<step_runs> seen[2];  // [0] one thread, [1] two
  pool_t::probe p;
  p.records.reserve(4096);
  for (int r = 0; r < rounds; ++r)
    for (int mode = 0; mode < 2; ++mode) {
      p.serial = mode == 0;
      p.split = mode == 1 && split;
      for (int i = 0; i < steps; ++i) {
        p.records.clear();
        pool.attach(&p);
        const std::int64_t c0 = ctnn::kernels::cpu::thread_cpu_ns();
        const auto t0 = std::chrono::steady_clock::now();
        next();
        step.run(xs, ys, batch, 0, it++);
        const auto t1 = std::chrono::steady_clock::now();
        const std::int64_t c1 = ctnn::kernels::cpu::thread_cpu_ns();
        pool.attach(nullptr);
        seen[mode].push_back(
            {p.records, double(std::chrono::duration_cast<std::chrono::nanoseconds>(t1 - t0).count()), c0, c1});
      }
    }
  const std::size_t runs = seen[0].front().runs.size();
  for (const auto& mode : seen)
    for (const auto& s : mode)
      if (s.runs.size() != runs) {
        std::fprintf(stderr, "pool_probe: a step on %s thread(s) made %zu runs, the first step on one %zu\n",
                     &mode == &seen[0] ? "one" : "two", s.runs.size(), runs);
        return 1;
      }
  std::printf("run  tasks shared | before us |   one us   two us (n)   wall2 us | two/one | caller worker | kernel\n");
  double serial_cpu = 0;  // the caller's CPU between runs, one thread
  double one_shared = 0, two_shared = 0, wall_shared = 0, one_caller = 0, one_unpaired = 0, two_caller = 0, wall_caller = 0;
  for (std::size_t r = 0; r < runs; ++r) {
    std::vector<double> one, two, wall2, before, per_c, per_w;
    for (const auto& s : seen[0]) {
      one.push_back(double(s.runs[r].cpu_ns[0]));
      before.push_back(double(s.runs[r].caller_cpu_ns[0] - (r ? s.runs[r - 1].caller_cpu_ns[1] : s.cpu_begin)));
    }
    serial_cpu += median(before) / 1e3;
    bool shared = false;
    for (const auto& s : seen[1]) shared = shared || s.runs[r].shared;
    for (const auto& s : seen[1]) {
      const auto& q = s.runs[r];
      if (!shared) {  // a run on the caller alone: its CPU and wall in the two-thread steps
        two.push_back(double(q.cpu_ns[0]));
        wall2.push_back(double(q.wall_ns));
      } else if (q.ran[0] && q.ran[1]) {
        two.push_back(double(q.cpu_ns[0] + q.cpu_ns[1]));
        per_c.push_back(double(q.cpu_ns[0]) / double(q.ran[0]));
        per_w.push_back(double(q.cpu_ns[1]) / double(q.ran[1]));
        wall2.push_back(double(q.wall_ns));
      }
    }
    const double o = median(one) / 1e3, t = median(two) / 1e3, w = median(wall2) / 1e3;
    if (shared && !two.empty()) {
      one_shared += o;
      two_shared += t;
      wall_shared += w;
    } else {
      (shared ? one_unpaired : one_caller) += o;
      if (!shared) {
        two_caller += t;
        wall_caller += w;
      }
    }
    const double per_one = o / double(seen[0].front().runs[r].tasks);  // us a task on one thread
    std::printf("%3zu %6zu %6s | %9.1f | %8.1f %8.1f (%3zu) %8.1f | %7.3f | %6.3f %6.3f | %s\n", r,
                seen[0].front().runs[r].tasks, shared ? "yes" : "no", median(before) / 1e3, o, t, two.size(), w,
                two.empty() || o <= 0 ? 0.0 : t / o, per_c.empty() ? 0.0 : median(per_c) / 1e3 / per_one,
                per_w.empty() ? 0.0 : median(per_w) / 1e3 / per_one, kernel_name(seen[0].front().runs[r].fn).c_str());
  }
  {
    std::vector<double> after;
    for (const auto& s : seen[0]) after.push_back(double(s.cpu_end - s.runs.back().caller_cpu_ns[1]));
    serial_cpu += median(after) / 1e3;
    std::printf("after the last run: %.1f us; the caller's CPU between runs, one thread: %.1f us a step\n",
                median(after) / 1e3, serial_cpu);
  }
  auto step_median = [&](int mode) {
    std::vector<double> v;
    for (const auto& s : seen[mode]) v.push_back(s.wall_ns / 1e3);
    return median(v);
  };
  auto outside = [&](int mode) {  // the step's wall time outside its runs, median over steps
    std::vector<double> v;
    for (const auto& s : seen[mode]) {
      double in = 0;
      for (const auto& q : s.runs) in += double(q.wall_ns);
      v.push_back((s.wall_ns - in) / 1e3);
    }
    return median(v);
  };
  std::printf("shared runs (n > 0): one %.1f us, two %.1f us of CPU (%.3fx), wall %.1f us (one / wall %.2fx)\n",
              one_shared, two_shared, one_shared > 0 ? two_shared / one_shared : 0.0, wall_shared,
              wall_shared > 0 ? one_shared / wall_shared : 0.0);
  std::printf("shared runs that never had both threads (n = 0): one %.1f us; runs on the caller alone: %.1f us "
              "(in the two-thread steps: %.1f us of CPU, %.1f us of wall)\n",
              one_unpaired, one_caller, two_caller, wall_caller);
  // A step on two threads: both threads' CPU in the shared runs plus the caller's in its own runs,
  // against the same runs on one thread; its wall with the worker there (shared runs' wall, the
  // caller's runs, the time outside the runs).
  std::printf("step on two threads: CPU %.1f us (%.3fx one thread's %.1f in the same runs); wall in and between runs %.1f us\n",
              two_shared + two_caller, (two_shared + two_caller) / (one_shared + one_caller), one_shared + one_caller,
              wall_shared + wall_caller + outside(1));
  std::printf("the step outside its runs: %.1f us (one), %.1f us (two); steps: one %.1f us, two %.1f us (medians of wall time)\n",
              outside(0), outside(1), step_median(0), step_median(1));
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: pool_probe mlp|cnn BATCH [ROUNDS [STEPS [split|- [gather|gather-shared]]]]\n");
    return 2;
  }
  const std::string net = argv[1];
  const std::size_t batch = std::size_t(std::atol(argv[2]));
  const int rounds = argc > 3 ? std::atoi(argv[3]) : 10, steps = argc > 4 ? std::atoi(argv[4]) : 20;
  const bool split = argc > 5 && std::string(argv[5]) == "split";
  const std::string g = argc > 6 ? argv[6] : "";
  const gather_mode gather = g == "gather" ? gather_mode::serial : g == "gather-shared" ? gather_mode::shared : gather_mode::none;
  if ((!g.empty() && gather == gather_mode::none) || (gather != gather_mode::none && net != "mlp")) {
    std::fprintf(stderr, "pool_probe: the sixth argument is gather or gather-shared, for mlp only\n");
    return 2;
  }
  if (batch == 0 || rounds <= 0 || steps <= 0 || (net != "mlp" && net != "cnn")) {
    std::fprintf(stderr, "pool_probe: want mlp or cnn, a batch of at least 1, rounds and steps of at least 1\n");
    return 2;
  }
  return net == "mlp" ? probe_steps<mlp>(batch, rounds, steps, split, gather)
                      : probe_steps<cnn>(batch, rounds, steps, split, gather);
}
