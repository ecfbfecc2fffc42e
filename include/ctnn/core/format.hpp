// ctnn/core/format.hpp — small text helpers for names, summaries and messages.
#pragma once
#include <charconv>
#include <string>

namespace ctnn::detail {

// Shortest round-trip text of a number: 0.001 -> "0.001", 2 -> "2".
inline std::string format_number(double v) {
  char buf[64];
  auto r = std::to_chars(buf, buf + sizeof buf, v);
  return std::string(buf, r.ptr);
}
inline std::string format_number(float v) {
  char buf[64];
  auto r = std::to_chars(buf, buf + sizeof buf, v);
  return std::string(buf, r.ptr);
}

}  // namespace ctnn::detail
