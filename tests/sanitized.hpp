// tests/sanitized.hpp — whether this test program is built under AddressSanitizer (the asan
// presets): a learning test there runs a shorter slice, which checks the path, not the accuracy
// (the release suite checks the accuracy).
#pragma once

namespace ctnn::test {
#if defined(__SANITIZE_ADDRESS__)
inline constexpr bool sanitized = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
inline constexpr bool sanitized = true;
#else
inline constexpr bool sanitized = false;
#endif
#else
inline constexpr bool sanitized = false;
#endif
}  // namespace ctnn::test
