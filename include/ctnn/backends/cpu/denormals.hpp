// ctnn/kernels/cpu/denormals.hpp — flush-to-zero and denormals-are-zero for a scope.
//
// Values below FLT_MIN (denormals) cost a microcode assist per operation on
// Intel cores: an Adam update whose slots decay into that range ran 3x slower
// on an Ice Lake Xeon. fit() therefore runs each training step under
// denormal_guard, as TensorFlow's thread pools do: on x86 it sets MXCSR's FTZ
// (bit 15) and DAZ (bit 6) on the calling thread and restores the caller's
// mode when it ends; the thread pool runs every task under the mode of the
// thread that called run(), so its workers follow. Elsewhere (no SSE) the
// guard changes nothing and flushing_denormals() is false.
#pragma once
#if defined(__SSE__) || defined(__x86_64__)
#include <xmmintrin.h>
#define CTNN_HAS_MXCSR 1
#else
#define CTNN_HAS_MXCSR 0
#endif

namespace ctnn::kernels::cpu {

inline constexpr unsigned ftz_daz_bits = 0x8040u;  // MXCSR FTZ | DAZ
inline constexpr unsigned fp_status_bits = 0x3fu;  // MXCSR's sticky exception flags (not part of the mode)

// The calling thread's floating-point control and status word (0 where there is none).
inline unsigned fp_mode() noexcept {
#if CTNN_HAS_MXCSR
  return _mm_getcsr();
#else
  return 0;
#endif
}
// Sets the control bits of `mode`, keeping this thread's exception flags.
inline void set_fp_mode([[maybe_unused]] unsigned mode) noexcept {
#if CTNN_HAS_MXCSR
  _mm_setcsr((mode & ~fp_status_bits) | (_mm_getcsr() & fp_status_bits));
#endif
}
inline bool flushing_denormals() noexcept { return CTNN_HAS_MXCSR && (fp_mode() & ftz_daz_bits) == ftz_daz_bits; }

// Sets FTZ and DAZ (flush = true) or clears them (flush = false) on this
// thread until the guard ends, then restores the previous mode.
class denormal_guard {
 public:
  explicit denormal_guard(bool flush = true) noexcept : saved_(fp_mode()) {
    set_fp_mode(flush ? (saved_ | ftz_daz_bits) : (saved_ & ~ftz_daz_bits));
  }
  denormal_guard(const denormal_guard&) = delete;
  denormal_guard& operator=(const denormal_guard&) = delete;
  ~denormal_guard() { set_fp_mode(saved_); }

 private:
  unsigned saved_;
};

}  // namespace ctnn::kernels::cpu
