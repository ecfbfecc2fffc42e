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

namespace ctnn::io {

template <class Bytes = std::string, class Error = io_error>
Bytes read_file(const std::filesystem::path& path, const std::string& operation,
                std::size_t max_bytes = std::numeric_limits<std::size_t>::max()) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    const int e = errno;
    throw Error(operation, path, e == ENOENT ? std::string("no such file") : "cannot open for reading (" +
                                                                                    std::string(std::strerror(e)) + ")");
  }
  struct closer {
    int fd;
    ~closer() { ::close(fd); }
  } c{fd};
  struct stat st {};
  if (::fstat(fd, &st) != 0) throw Error(operation, path, "cannot stat (" + std::string(std::strerror(errno)) + ")");
  if (S_ISDIR(st.st_mode)) throw Error(operation, path, "is a directory, not a file");
  if (!S_ISREG(st.st_mode)) throw Error(operation, path, "is not a regular file");
  if (std::size_t(st.st_size) > max_bytes)
    throw Error(operation, path, "the file holds " + std::to_string(st.st_size) + " bytes, more than the " +
                                        std::to_string(max_bytes) + " allowed");
  Bytes out;
  out.resize(std::size_t(st.st_size));
  std::size_t done = 0;
  for (;;) {
    if (done == out.size()) {  // the file may have grown since fstat
      if (out.size() >= max_bytes) {
        char probe;
        const ssize_t r = ::read(fd, &probe, 1);
        if (r == 0) break;
        if (r > 0) throw Error(operation, path, "the file holds more than the " + std::to_string(max_bytes) + " bytes allowed");
        if (errno == EINTR) continue;
        throw Error(operation, path, "read error (" + std::string(std::strerror(errno)) + ")");
      }
      out.resize(std::min(max_bytes, out.size() + 65536));
    }
    const ssize_t r = ::read(fd, out.data() + done, out.size() - done);
    if (r < 0) {
      if (errno == EINTR) continue;
      throw Error(operation, path, "read error (" + std::string(std::strerror(errno)) + ")");
    }
    if (r == 0) break;
    done += std::size_t(r);
  }
  out.resize(done);
  return out;
}

}  // namespace ctnn::io
