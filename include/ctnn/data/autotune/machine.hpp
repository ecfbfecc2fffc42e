// ctnn/data/autotune/machine.hpp — the autotuner's probe of the machine.
//
//   detail::machine_cpu::busy_cores()  cores of the whole machine (every process)
//                                      busy since the previous call, from /proc/stat;
//                                      -1 on the first call or when unreadable
//   detail::free_memory_bytes()        bytes of memory the machine has free (-1: unknown)
// Linux only (/proc/stat, sysconf); what the tuner (autotune/tuner.hpp) adds to
// each window it hands the policy. Docs: docs/input-pipeline.md.
#pragma once
#include <algorithm>
#include <cstdio>
#include <thread>

#include <unistd.h>

namespace ctnn::data {

namespace detail {
// Cores of the whole machine busy since the previous call, from /proc/stat (-1 if unreadable).
class machine_cpu {
 public:
  double busy_cores() {
    std::FILE* f = std::fopen("/proc/stat", "r");
    if (!f) return -1;
    unsigned long long v[8] = {};
    const int n = std::fscanf(f, "cpu %llu %llu %llu %llu %llu %llu %llu %llu", &v[0], &v[1], &v[2], &v[3], &v[4], &v[5],
                              &v[6], &v[7]);
    std::fclose(f);
    if (n < 4) return -1;
    unsigned long long total = 0;
    for (auto x : v) total += x;
    const unsigned long long idle = v[3] + v[4];
    const double cores = std::max(1u, std::thread::hardware_concurrency());
    double r = -1;
    if (total_ && total > total_) {
      // signed: the kernel's iowait count can move backwards, so busy time may seem to shrink
      const double busy = double(total - idle) - double(total_ - idle_);
      r = std::clamp(cores * busy / double(total - total_), 0.0, cores);
    }
    total_ = total;
    idle_ = idle;
    return r;
  }

 private:
  unsigned long long total_ = 0, idle_ = 0;
};

// Bytes of memory the machine has free (-1 if unknown).
inline double free_memory_bytes() {
  const long pages = ::sysconf(_SC_AVPHYS_PAGES), size = ::sysconf(_SC_PAGESIZE);
  return pages > 0 && size > 0 ? double(pages) * double(size) : -1;
}
}  // namespace detail

}  // namespace ctnn::data
