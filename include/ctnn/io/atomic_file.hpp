// ctnn/io/atomic_file.hpp — writing a file so that it is never half-written.
//
// write_file_atomically(path, bytes) writes to "<path>.tmp-<pid>-<n>" in the
// same directory, flushes and fsyncs it, then renames it over path. On any
// failure the temporary is removed, the old file is untouched and
// std::runtime_error names the path and the cause.
#pragma once
#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <string_view>

namespace ctnn::io {

inline void write_file_atomically(const std::filesystem::path& path, std::string_view bytes) {
  static std::atomic<unsigned> counter{0};
  const std::filesystem::path tmp =
      path.string() + ".tmp-" + std::to_string(::getpid()) + "-" + std::to_string(counter++);
  auto fail = [&](const std::string& what) {
    const std::string err = std::strerror(errno);
    std::error_code ec;
    std::filesystem::remove(tmp, ec);
    throw std::runtime_error("write_file_atomically: " + path.string() + ": " + what + " (" + err + ")");
  };
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) fail("cannot create a temporary file beside it");
  std::size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t w = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (w < 0) {
      if (errno == EINTR) continue;
      ::close(fd);
      fail("write failed");
    }
    done += std::size_t(w);
  }
  if (::fsync(fd) != 0) {
    ::close(fd);
    fail("fsync failed");
  }
  if (::close(fd) != 0) fail("close failed");
  if (::rename(tmp.c_str(), path.c_str()) != 0) fail("rename failed");
}

}  // namespace ctnn::io
