// ctnn/io/read_file.hpp — reading a whole file, with errors that name it.
//
// read_file(path, operation) returns the file's bytes. It refuses what is not
// a regular file (a directory, a device, a FIFO) and reports every failure as
// ctnn::io_error "<operation>: <path>: <reason>" with the system's reason
// ("no such file", "is a directory", "Permission denied", ...), never a
// std::ios_base::failure. max_bytes (default: no limit) bounds what is read.
// Error (default io_error) is the type thrown: a reader's own type derived
// from io_error, constructible from (operation, path, reason).
#pragma once
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <cstring>
#include <filesystem>
#include <limits>
#include <string>

#include "../core/errors.hpp"
#include "../core/separate.hpp"

namespace ctnn::io {

namespace detail {
enum class read_failure { open, stat, directory, not_regular, too_large, grew_too_large, read };

// The reason text of a failure, built out of line and once: the error paths
// are cold, and formatting them inline repeated that code in every instance
// of read_file (docs/performance.md, compile memory).
CTNN_LAZY [[gnu::cold, gnu::noinline]] CTNN_DECL std::string read_failure_reason(read_failure f, int err, std::size_t size,
                                                                    std::size_t max_bytes)
#if CTNN_DEFINITIONS
{
  switch (f) {
    case read_failure::open:
      return err == ENOENT ? std::string("no such file") : "cannot open for reading (" + std::string(std::strerror(err)) + ")";
    case read_failure::stat: return "cannot stat (" + std::string(std::strerror(err)) + ")";
    case read_failure::directory: return "is a directory, not a file";
    case read_failure::not_regular: return "is not a regular file";
    case read_failure::too_large:
      return "the file holds " + std::to_string(size) + " bytes, more than the " + std::to_string(max_bytes) + " allowed";
    case read_failure::grew_too_large: return "the file holds more than the " + std::to_string(max_bytes) + " bytes allowed";
    case read_failure::read: return "read error (" + std::string(std::strerror(err)) + ")";
  }
  return "unknown failure";
}
#else
;
#endif

template <class Error>
[[noreturn, gnu::cold, gnu::noinline]] void throw_read_failure(const std::filesystem::path& path, const std::string& operation,
                                                              read_failure f, int err, std::size_t size = 0,
                                                              std::size_t max_bytes = 0) {
  throw Error(operation, path, read_failure_reason(f, err, size, max_bytes));
}
}  // namespace detail

template <class Bytes = std::string, class Error = io_error>
Bytes read_file(const std::filesystem::path& path, const std::string& operation,
                std::size_t max_bytes = std::numeric_limits<std::size_t>::max()) {
  using detail::read_failure;
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) detail::throw_read_failure<Error>(path, operation, read_failure::open, errno);
  struct closer {
    int fd;
    ~closer() { ::close(fd); }
  } c{fd};
  struct stat st {};
  if (::fstat(fd, &st) != 0) detail::throw_read_failure<Error>(path, operation, read_failure::stat, errno);
  if (S_ISDIR(st.st_mode)) detail::throw_read_failure<Error>(path, operation, read_failure::directory, 0);
  if (!S_ISREG(st.st_mode)) detail::throw_read_failure<Error>(path, operation, read_failure::not_regular, 0);
  if (std::size_t(st.st_size) > max_bytes)
    detail::throw_read_failure<Error>(path, operation, read_failure::too_large, 0, std::size_t(st.st_size), max_bytes);
  Bytes out;
  out.resize(std::size_t(st.st_size));
  std::size_t done = 0;
  for (;;) {
    if (done == out.size()) {  // the file may have grown since fstat
      if (out.size() >= max_bytes) {
        char probe;
        const ssize_t r = ::read(fd, &probe, 1);
        if (r == 0) break;
        if (r > 0) detail::throw_read_failure<Error>(path, operation, read_failure::grew_too_large, 0, 0, max_bytes);
        if (errno == EINTR) continue;
        detail::throw_read_failure<Error>(path, operation, read_failure::read, errno);
      }
      out.resize(std::min(max_bytes, out.size() + 65536));
    }
    const ssize_t r = ::read(fd, out.data() + done, out.size() - done);
    if (r < 0) {
      if (errno == EINTR) continue;
      detail::throw_read_failure<Error>(path, operation, read_failure::read, errno);
    }
    if (r == 0) break;
    done += std::size_t(r);
  }
  out.resize(done);
  return out;
}
CTNN_INSTANCE(template std::string read_file<std::string, io_error>(const std::filesystem::path&, const std::string&,
                                                                  std::size_t);)

}  // namespace ctnn::io
