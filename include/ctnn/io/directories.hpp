// ctnn/io/directories.hpp — making, probing and removing directories, with errors that name them.
//
// create_directories(path, operation) makes path and its missing parents.
// exists(path, operation) says whether something is at path.
// remove_all(path, operation) removes the directory path and everything under
// it (nothing when path is missing); it refuses to remove anything that is not
// a directory. remove_file(path, operation) removes one file (nothing when it
// is missing). Every failure is ctnn::io_error "<operation>: <path>: <reason>",
// never std::filesystem::filesystem_error: a component of path that exists and
// is not a directory ("'build/tune' exists and is not a directory", e.g. an
// executable of the same name), or the system's reason (a name too long,
// permissions), with the component it concerns.
#pragma once
#include <filesystem>
#include <string>
#include <system_error>

#include "../core/errors.hpp"

namespace ctnn::io {

namespace detail {
// The type of what is at p (following symbolic links): not_found when nothing is, or io_error.
inline std::filesystem::file_type probe(const std::filesystem::path& p, const std::filesystem::path& path,
                                        const std::string& operation) {
  std::error_code ec;
  const auto st = std::filesystem::status(p, ec);
  if (st.type() == std::filesystem::file_type::none)
    throw io_error(operation, path, "cannot inspect '" + p.string() + "' (" + ec.message() + ")");
  return st.type();
}
// Every proper ancestor of path that exists must be a directory.
inline void check_parents(const std::filesystem::path& path, const std::string& operation) {
  std::filesystem::path prefix;
  const std::filesystem::path parent = path.parent_path();
  for (const auto& part : parent) {
    prefix /= part;
    if (part.empty()) continue;
    const auto t = probe(prefix, path, operation);
    if (t == std::filesystem::file_type::not_found) return;
    if (t != std::filesystem::file_type::directory)
      throw io_error(operation, path, "'" + prefix.string() + "' exists and is not a directory");
  }
}
// The type of what is at path itself (a symbolic link not followed), its parents checked first:
// not_found when nothing is, or io_error.
inline std::filesystem::file_type probe_entry(const std::filesystem::path& path, const std::string& operation) {
  check_parents(path, operation);
  std::error_code ec;
  const auto st = std::filesystem::symlink_status(path, ec);
  if (st.type() == std::filesystem::file_type::none)
    throw io_error(operation, path, "cannot inspect it (" + ec.message() + ")");
  return st.type();
}
}  // namespace detail

inline bool exists(const std::filesystem::path& path, const std::string& operation) {
  detail::check_parents(path, operation);
  return detail::probe(path, path, operation) != std::filesystem::file_type::not_found;
}

inline void create_directories(const std::filesystem::path& path, const std::string& operation) {
  if (path.empty()) throw io_error(operation, path, "the directory name is empty");
  std::filesystem::path prefix;
  for (const auto& part : path) {
    prefix /= part;
    if (part.empty()) continue;  // a trailing '/'
    const auto t = detail::probe(prefix, path, operation);
    if (t == std::filesystem::file_type::directory) continue;
    if (t != std::filesystem::file_type::not_found)
      throw io_error(operation, path, "'" + prefix.string() + "' exists and is not a directory");
    std::error_code ec;
    std::filesystem::create_directory(prefix, ec);
    if (ec && detail::probe(prefix, path, operation) != std::filesystem::file_type::directory)  // not made by another process meanwhile
      throw io_error(operation, path, "cannot create the directory '" + prefix.string() + "' (" + ec.message() + ")");
  }
}

inline void remove_all(const std::filesystem::path& path, const std::string& operation) {
  const auto t = detail::probe_entry(path, operation);
  if (t == std::filesystem::file_type::not_found) return;
  if (t != std::filesystem::file_type::directory)
    throw io_error(operation, path, "exists and is not a directory; refusing to remove it");
  std::error_code ec;
  std::filesystem::remove_all(path, ec);
  if (ec) throw io_error(operation, path, "cannot remove it (" + ec.message() + ")");
}

inline void remove_file(const std::filesystem::path& path, const std::string& operation) {
  const auto t = detail::probe_entry(path, operation);
  if (t == std::filesystem::file_type::not_found) return;
  if (t == std::filesystem::file_type::directory)
    throw io_error(operation, path, "is a directory, not a file; refusing to remove it");
  std::error_code ec;
  std::filesystem::remove(path, ec);
  if (ec) throw io_error(operation, path, "cannot remove it (" + ec.message() + ")");
}

}  // namespace ctnn::io
