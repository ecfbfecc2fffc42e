// ctnn/core/errors.hpp — ctnn's own exception types for bad files and bad sizes.
//
// io_error: a file could not be read or written, or its contents are not what
// the reader expects. what() is "<operation>: <path>: <reason>", e.g.
// "read_idx: data/x.idx: is a directory". path() and reason() give the two
// parts. Readers that have their own error type (data::idx_error,
// data::csv_error) derive from it, so `catch (const ctnn::io_error&)` catches
// every file problem. size_error: a size computed from user input (a batch
// size times a sample size, an IDX header's dimensions) does not fit in
// std::size_t; checked_mul(a, b, what) throws it instead of wrapping.
// numeric_error: a NaN or infinity where a finite number is required (a loss,
// a parameter after an update, an input value under data::check_numerics);
// the message names where (epoch and step, or the sample). printable(text, n):
// text from a file as a message may show it (printable ASCII, at most n characters).
#pragma once
#include <cstddef>
#include <filesystem>
#include <limits>
#include <stdexcept>
#include <string>
#include <string_view>

#include "separate.hpp"

namespace ctnn {

class io_error : public std::runtime_error {
 public:
  // cold: an error's path (callers' code around it is laid out as unlikely).
  [[gnu::cold]] io_error(const std::string& operation, const std::filesystem::path& path, const std::string& reason)
      : std::runtime_error(operation + ": " + path.string() + ": " + reason), path_(path), reason_(reason) {}
  // A message already formatted by the reader (e.g. "from_csv: f.csv:3:2: ..."), about `path`.
  [[gnu::cold]] io_error(const std::string& message, const std::filesystem::path& path)
      : std::runtime_error(message), path_(path), reason_(message) {}
  const std::filesystem::path& path() const noexcept { return path_; }
  const std::string& reason() const noexcept { return reason_; }

 private:
  std::filesystem::path path_;
  std::string reason_;
};

class numeric_error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class size_error : public std::length_error {
 public:
  using std::length_error::length_error;
};

namespace detail {
// checked_mul's error, built out of line (once per program, not at every call).
[[noreturn, gnu::cold, gnu::noinline]] CTNN_DECL void throw_product_overflow(std::size_t a, std::size_t b,
                                                                         const std::string& what)
#if CTNN_DEFINITIONS
{
  throw size_error(what + ": " + std::to_string(a) + " x " + std::to_string(b) + " does not fit in " +
                   std::to_string(8 * sizeof(std::size_t)) + " bits");
}
#else
;
#endif
}  // namespace detail

// Text from a file (a key, a name) as it may appear in a message: printable ASCII (other bytes as
// '?'), at most max_chars characters, then "..." when cut.
inline std::string printable(std::string_view text, std::size_t max_chars) {
  std::string r;
  for (const char c : text.substr(0, max_chars)) r += (c >= 0x20 && c < 0x7f) ? c : '?';
  return r + (text.size() > max_chars ? "..." : "");
}

// a * b, or size_error("<what>: a x b does not fit in 64 bits") when it would wrap.
inline std::size_t checked_mul(std::size_t a, std::size_t b, const std::string& what) {
  if (a != 0 && b > std::numeric_limits<std::size_t>::max() / a) detail::throw_product_overflow(a, b, what);
  return a * b;
}

}  // namespace ctnn
