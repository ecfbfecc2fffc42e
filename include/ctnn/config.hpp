// ctnn/config.hpp — version and the few macros every header may use.
//
// CTNN_HOST_DEVICE marks functions that nvcc may compile for the device; in a
// translation unit compiled without CUDA it expands to nothing, so the same
// declarations (and the same type layouts) are seen everywhere.
#pragma once

#define CTNN_VERSION_MAJOR 0
#define CTNN_VERSION_MINOR 1
#define CTNN_VERSION_PATCH 0

#if defined(__CUDACC__)
#define CTNN_HOST_DEVICE __host__ __device__
#else
#define CTNN_HOST_DEVICE
#endif

#if defined(_MSC_VER)
#define CTNN_FORCEINLINE __forceinline
#define CTNN_FORCEINLINE_LAMBDA
#else
#define CTNN_FORCEINLINE inline __attribute__((always_inline))
// After a lambda's parameter list: the lambda is always inlined (a loop body written once for two loops).
#define CTNN_FORCEINLINE_LAMBDA __attribute__((always_inline))
#endif

namespace ctnn {
inline constexpr int version_major = CTNN_VERSION_MAJOR;
inline constexpr int version_minor = CTNN_VERSION_MINOR;
inline constexpr int version_patch = CTNN_VERSION_PATCH;
}  // namespace ctnn
