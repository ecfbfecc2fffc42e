// tests/quantization/int8_isa_launcher.cpp — what CTest runs for "quantization: int8 kernels built for
// ISA" (tests/CMakeLists.txt): int8_isa_launcher ISA PROGRAM [ARGS...].
//
// test_int8_<isa> is compiled for ISA as a whole, its static initializers included: built with
// -mavx512vnni -mavx512vl (which imply AVX512F), GCC copies doctest's TestCase objects with zmm
// registers while the test cases register themselves, before main() runs, so on a CPU without
// AVX-512 that program dies of SIGILL before its own check could skip it (seen on an AMD Zen 3).
// This launcher, built for the baseline x86-64 like nothing else the suite builds for another
// ISA, asks the CPU (and the OS, for the register state) first: where it lacks what ISA encodes it
// prints CTNN_SKIP (CTest: skipped) and exits 0; otherwise it executes PROGRAM with ARGS, whose
// own main checks again and runs the tests.
#include <cpuid.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

namespace {

struct cpu {
  unsigned l1c = 0, l7b = 0, l7c = 0, l71a = 0;
  unsigned long long xcr0 = 0;
};

cpu read_cpu() {
  cpu r;
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (__get_cpuid(1, &a, &b, &c, &d)) r.l1c = c;
  if (__get_cpuid_count(7, 0, &a, &b, &c, &d)) {
    r.l7b = b;
    r.l7c = c;
  }
  if (__get_cpuid_count(7, 1, &a, &b, &c, &d)) r.l71a = a;
  if ((r.l1c >> 27) & 1u) {  // OSXSAVE: xgetbv reads which register state the OS saves
    unsigned lo = 0, hi = 0;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    r.xcr0 = (static_cast<unsigned long long>(hi) << 32) | lo;
  }
  return r;
}

bool bit(unsigned v, int i) { return ((v >> i) & 1u) != 0; }

// What ISA needs, or nullptr where this CPU has it all.
const char* missing(const char* isa, const cpu& c) {
  const bool ymm_state = (c.xcr0 & 0x6) == 0x6;     // SSE and AVX state
  const bool zmm_state = (c.xcr0 & 0xe6) == 0xe6;   // and opmask, ZMM0-15 upper halves, ZMM16-31
  const bool avx2_fma = bit(c.l7b, 5) && bit(c.l1c, 12) && bit(c.l1c, 28) && ymm_state;
  if (!avx2_fma) return "AVX2 with FMA (the x86-64-v3 build)";
  if (std::strcmp(isa, "avx2") == 0) return nullptr;
  if (std::strcmp(isa, "vnni256") == 0)
    return bit(c.l7b, 16) && bit(c.l7b, 31) && bit(c.l7c, 11) && zmm_state
               ? nullptr
               : "AVX512F + AVX512VL + AVX512_VNNI with ZMM state (cpuid 7.0: EBX[16], EBX[31], ECX[11]; "
                 "the build's -mavx512vnni -mavx512vl imply AVX512F)";
  if (std::strcmp(isa, "avxvnni") == 0)
    return bit(c.l71a, 4) ? nullptr : "AVX-VNNI (cpuid 7.1: EAX[4])";
  return "";
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: %s avx2|vnni256|avxvnni PROGRAM [ARGS...]\n", argv[0]);
    return 2;
  }
  const char* why = missing(argv[1], read_cpu());
  if (why != nullptr && *why == '\0') {
    std::fprintf(stderr, "%s: unknown ISA '%s' (avx2, vnni256 or avxvnni)\n", argv[0], argv[1]);
    return 2;
  }
  if (why != nullptr) {
    std::printf("CTNN_SKIP: this CPU has no %s: test_int8_%s compiled, not run\n", why, argv[1]);
    return 0;
  }
  std::fflush(stdout);
  execv(argv[2], argv + 2);
  std::fprintf(stderr, "%s: cannot run %s: %s\n", argv[0], argv[2], std::strerror(errno));
  return 2;
}
