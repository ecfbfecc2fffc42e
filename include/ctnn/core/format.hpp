// ctnn/core/format.hpp — small text helpers for names, summaries and messages.
#pragma once
#include <charconv>
#include <cstddef>
#include <initializer_list>
#include <string>
#include <string_view>

#include "separate.hpp"

namespace ctnn::detail {

// Text that can also be built at compile time, so that layer names built from it are
// constants of the summary's table (train/summary.hpp). decimal(v): std::to_string, which is
// not constexpr in C++20. concat({...}): the parts joined; a layer's name() passes its
// options' names as std::string_view of temporaries (g++ 12's libstdc++ rejects moving or
// appending to a short std::string in a constant expression; clang 19 with libstdc++ 12
// rejects every short std::string there, so under it the names are built at run time).
constexpr std::string decimal(std::size_t v) {
  char buf[24];
  std::size_t at = sizeof buf;
  do {
    buf[--at] = char('0' + v % 10);
    v /= 10;
  } while (v != 0);
  return std::string(buf + at, buf + sizeof buf);
}
constexpr std::string concat(std::initializer_list<std::string_view> parts) {
  std::size_t n = 0;
  for (std::string_view p : parts) n += p.size();
  char* text = new char[n + 1];
  std::size_t at = 0;
  for (std::string_view p : parts)
    for (char c : p) text[at++] = c;
  std::string s(text, text + n);
  delete[] text;
  return s;
}

// Shortest round-trip text of a number: 0.001 -> "0.001", 2 -> "2". Compiled once in the compiled
// part (core/separate.hpp).
CTNN_DECL std::string format_number(double v)
#if CTNN_DEFINITIONS
{
  char buf[64];
  auto r = std::to_chars(buf, buf + sizeof buf, v);
  return std::string(buf, r.ptr);
}
#else
;
#endif
CTNN_DECL std::string format_number(float v)
#if CTNN_DEFINITIONS
{
  char buf[64];
  auto r = std::to_chars(buf, buf + sizeof buf, v);
  return std::string(buf, r.ptr);
}
#else
;
#endif

}  // namespace ctnn::detail
