// read_file.hpp: a whole file's bytes, or an io_error naming the operation, the path and the reason.
#include <doctest/doctest.h>

#include <ctnn/io/read_file.hpp>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <unistd.h>

using namespace ctnn;
namespace fs = std::filesystem;

TEST_CASE("read_file: bytes of a regular file, directories, devices, missing files and size limits refused, named") {
  const fs::path dir = fs::temp_directory_path() / ("ctnn_read_file_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  std::ofstream(dir / "f", std::ios::binary) << std::string("abc\0def", 7);
  CHECK(io::read_file(dir / "f", "test") == std::string("abc\0def", 7));
  CHECK(io::read_file<std::vector<char>>(dir / "f", "test").size() == 7);
  const std::string want = "test: " + dir.string() + ": is a directory";
  CHECK_THROWS_WITH_AS(io::read_file(dir, "test"), doctest::Contains(want.c_str()), io_error);
  CHECK_THROWS_WITH_AS(io::read_file(dir / "none", "test"), doctest::Contains("no such file"), io_error);
  if (fs::exists("/dev/null"))
    CHECK_THROWS_WITH_AS(io::read_file("/dev/null", "test"), doctest::Contains("is not a regular file"), io_error);
  CHECK_THROWS_WITH_AS(io::read_file(dir / "f", "test", 4), doctest::Contains("more than the 4 allowed"), io_error);
  try {
    io::read_file(dir / "none", "load");
  } catch (const io_error& e) {
    CHECK(e.path() == dir / "none");
    CHECK(e.reason() == "no such file");
  }
  fs::remove_all(dir);
}
