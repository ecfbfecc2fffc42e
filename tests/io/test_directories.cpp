// directories.hpp, and the weights files under a path that cannot be a directory: every failure an
// io_error naming the path and the reason, never std::filesystem::filesystem_error.
#include <doctest/doctest.h>

#include <ctnn/core/errors.hpp>
#include <ctnn/io/directories.hpp>
#include <ctnn/io/weights.hpp>
#include <ctnn/layers/dense.hpp>
#include <ctnn/train/model.hpp>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

using namespace ctnn;
namespace fs = std::filesystem;

namespace {
struct tmpdir {
  fs::path p;
  tmpdir() {
    p = fs::temp_directory_path() / ("ctnn_dirs_" + std::to_string(::getpid()));
    fs::remove_all(p);
    fs::create_directories(p);
    std::ofstream(p / "file") << "a regular file";
  }
  ~tmpdir() { fs::remove_all(p); }
};
std::string error_of(auto&& f) {
  try {
    f();
  } catch (const io_error& e) {
    return e.what();
  } catch (const std::exception& e) {
    return std::string("not an io_error: ") + e.what();
  }
  return "";
}
const std::string too_long(300, 'n');  // longer than a file name may be (ENAMETOOLONG)
}  // namespace

TEST_CASE("directories: create_directories, exists, remove_all and remove_file name the path and the reason") {
  tmpdir t;
  io::create_directories(t.p / "a" / "b" / "", "op");
  CHECK(fs::is_directory(t.p / "a" / "b"));
  io::create_directories(t.p / "a" / "b", "op");  // already there
  CHECK(io::exists(t.p / "a", "op"));
  CHECK_FALSE(io::exists(t.p / "none", "op"));
  const std::string file = (t.p / "file").string();
  // A path under a regular file (as root, where permissions do not stop anything, this is what cannot be written).
  CHECK(error_of([&] { io::create_directories(t.p / "file" / "sub", "op"); }) ==
        "op: " + file + "/sub: '" + file + "' exists and is not a directory");
  CHECK(error_of([&] { io::create_directories(t.p / "file", "op"); }) == "op: " + file + ": '" + file + "' exists and is not a directory");
  CHECK(error_of([&] { io::exists(t.p / "file" / "sub", "op"); }) == "op: " + file + "/sub: '" + file + "' exists and is not a directory");
  CHECK(error_of([&] { io::remove_all(t.p / "file" / "sub", "op"); }) == "op: " + file + "/sub: '" + file + "' exists and is not a directory");
  CHECK(error_of([&] { io::remove_all(t.p / "file", "op"); }) == "op: " + file + ": exists and is not a directory; refusing to remove it");
  CHECK(error_of([&] { io::remove_file(t.p / "a", "op"); }) == "op: " + (t.p / "a").string() + ": is a directory, not a file; refusing to remove it");
  const std::string e = error_of([&] { io::create_directories(t.p / too_long / "x", "op"); });
  CHECK(e.find("op: " + (t.p / too_long / "x").string() + ": cannot inspect '" + (t.p / too_long).string() + "' (File name too long)") == 0);
  CHECK(error_of([&] { io::exists(t.p / too_long, "op"); }).find("(File name too long)") != std::string::npos);
  CHECK(error_of([&] { io::remove_all(t.p / too_long, "op"); }).find("(File name too long)") != std::string::npos);
  CHECK(error_of([&] { io::remove_file(t.p / too_long, "op"); }).find("(File name too long)") != std::string::npos);
  CHECK(fs::is_regular_file(t.p / "file"));
  io::remove_all(t.p / "a", "op");
  io::remove_all(t.p / "a", "op");  // missing: nothing to do
  CHECK_FALSE(fs::exists(t.p / "a"));
  io::remove_file(t.p / "file", "op");
  io::remove_file(t.p / "file", "op");
  CHECK_FALSE(fs::exists(t.p / "file"));
}

TEST_CASE("weights: saving or loading under a regular file or with a name too long is an io_error naming the path") {
  tmpdir t;
  using net = sequential<input<3>, dense<2>>;
  auto m = make_model<net>(1);
  const fs::path under = t.p / "file" / "w.ctnn", longer = t.p / (too_long + ".ctnn");
  CHECK(error_of([&] { io::save_weights(m, under); }) == "write_file_atomically: " + under.string() + ": cannot stat (Not a directory)");
  CHECK(error_of([&] { io::load_weights(m, under); }) == "load_weights: " + under.string() + ": cannot open for reading (Not a directory)");
  CHECK_THROWS_AS(io::load_weights(m, under), io::weights_error);
  CHECK(error_of([&] { io::save_weights(m, longer); }) == "write_file_atomically: " + longer.string() + ": cannot stat (File name too long)");
  CHECK(error_of([&] { io::load_weights(m, longer); }) == "load_weights: " + longer.string() + ": cannot open for reading (File name too long)");
}
