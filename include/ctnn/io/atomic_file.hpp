// ctnn/io/atomic_file.hpp — writing a file so that it is never half-written.
//
// write_file_atomically(path, bytes) writes to "<path>.tmp-<pid>-<n>" in the
// same directory, fsyncs it, renames it over path, then fsyncs the directory
// so that the rename itself survives a power loss. It refuses to replace
// anything that is not a regular file (a directory, a device such as
// /dev/full, a FIFO, a symbolic link): only a regular file or nothing may be
// at path. Before writing it removes the temporaries "<path>.tmp-<pid>-<n>"
// that processes no longer running left behind (killed while writing); those
// of live processes are left alone. On any failure the temporary is removed,
// the old file is untouched and ctnn::io_error names the path and the cause.
#pragma once
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <filesystem>
#include <string>
#include <string_view>

#include "../core/errors.hpp"
#include "../core/separate.hpp"

namespace ctnn::io {

namespace detail {

// The pid in "<stem>.tmp-<pid>-<n>", or 0 when `name` is not such a temporary.
CTNN_LAZY CTNN_DECL pid_t stale_temporary_pid(std::string_view name, std::string_view stem)
#if CTNN_DEFINITIONS
{
  const std::string_view mark = ".tmp-";
  if (name.size() <= stem.size() + mark.size() || name.substr(0, stem.size()) != stem ||
      name.substr(stem.size(), mark.size()) != mark)
    return 0;
  std::string_view rest = name.substr(stem.size() + mark.size());
  long pid = 0;
  auto [p, ec] = std::from_chars(rest.data(), rest.data() + rest.size(), pid);
  if (ec != std::errc() || p == rest.data() || pid <= 0 || p == rest.data() + rest.size() || *p != '-') return 0;
  rest.remove_prefix(std::size_t(p - rest.data()) + 1);
  unsigned long n = 0;
  auto [q, ec2] = std::from_chars(rest.data(), rest.data() + rest.size(), n);
  if (ec2 != std::errc() || q != rest.data() + rest.size() || q == rest.data()) return 0;
  return pid_t(pid);
}
#else
;
#endif

// Removes the temporaries of `path` whose writer is no longer running.
CTNN_LAZY CTNN_DECL void remove_stale_temporaries(const std::filesystem::path& path)
#if CTNN_DEFINITIONS
{
  std::error_code ec;
  const std::filesystem::path dir = path.has_parent_path() ? path.parent_path() : std::filesystem::path(".");
  const std::string stem = path.filename().string();
  std::filesystem::directory_iterator it(dir, ec), end;
  for (; !ec && it != end; it.increment(ec)) {
    const pid_t pid = stale_temporary_pid(it->path().filename().string(), stem);
    if (pid == 0 || pid == ::getpid()) continue;
    if (::kill(pid, 0) == 0 || errno != ESRCH) continue;  // alive (or not ours to judge)
    std::error_code rm;
    if (it->is_regular_file(rm)) std::filesystem::remove(it->path(), rm);
  }
}
#else
;
#endif

CTNN_LAZY CTNN_DECL void sync_directory(const std::filesystem::path& path)
#if CTNN_DEFINITIONS
{
  const std::filesystem::path dir = path.has_parent_path() ? path.parent_path() : std::filesystem::path(".");
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) throw io_error("write_file_atomically", path, "cannot open its directory to sync the rename (" +
                                                               std::string(std::strerror(errno)) + ")");
  const int rc = ::fsync(fd);
  const int err = errno;
  ::close(fd);
  if (rc != 0 && err != EINVAL)  // some file systems cannot sync a directory; the rename is then as durable as they allow
    throw io_error("write_file_atomically", path, "fsync of its directory failed (" + std::string(std::strerror(err)) + ")");
}
#else
;
#endif

}  // namespace detail

CTNN_LAZY CTNN_DECL void write_file_atomically(const std::filesystem::path& path, std::string_view bytes)
#if CTNN_DEFINITIONS
{
  static std::atomic<unsigned> counter{0};
  struct stat st {};
  if (::lstat(path.c_str(), &st) == 0) {
    if (S_ISDIR(st.st_mode)) throw io_error("write_file_atomically", path, "is a directory, not a file");
    if (S_ISLNK(st.st_mode))
      throw io_error("write_file_atomically", path,
                     "is a symbolic link; it would be replaced by the file, not written through (give the target's path)");
    if (!S_ISREG(st.st_mode))
      throw io_error("write_file_atomically", path, "is not a regular file (a device, FIFO or socket); refusing to replace it");
  } else if (errno != ENOENT) {
    throw io_error("write_file_atomically", path, "cannot stat (" + std::string(std::strerror(errno)) + ")");
  }
  detail::remove_stale_temporaries(path);
  const std::filesystem::path tmp =
      path.string() + ".tmp-" + std::to_string(::getpid()) + "-" + std::to_string(counter++);
  auto fail = [&](const std::string& what) {
    const std::string err = std::strerror(errno);
    std::error_code ec;
    std::filesystem::remove(tmp, ec);
    throw io_error("write_file_atomically", path, what + " (" + err + ")");
  };
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) fail("cannot create a temporary file beside it");
  std::size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t w = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (w < 0) {
      if (errno == EINTR) continue;
      const int e = errno;
      ::close(fd);
      errno = e;
      fail("write failed");
    }
    done += std::size_t(w);
  }
  if (::fsync(fd) != 0) {
    const int e = errno;
    ::close(fd);
    errno = e;
    fail("fsync failed");
  }
  if (::close(fd) != 0) fail("close failed");
  if (::rename(tmp.c_str(), path.c_str()) != 0) fail("rename failed");
  detail::sync_directory(path);
}
#else
;
#endif

}  // namespace ctnn::io
