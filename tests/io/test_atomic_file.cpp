// atomic_file.hpp: what may be replaced, stale temporaries, the directory sync, and kill -9 at random moments.
#include <doctest/doctest.h>

#include <ctnn/core/errors.hpp>
#include <ctnn/io/atomic_file.hpp>

#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <thread>
#include <vector>

using namespace ctnn;
namespace fs = std::filesystem;

namespace {
struct tmpdir {
  fs::path p;
  tmpdir() {
    p = fs::temp_directory_path() / ("ctnn_atomic_" + std::to_string(::getpid()));
    fs::create_directories(p);
  }
  ~tmpdir() { fs::remove_all(p); }
};
std::string slurp(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}
std::size_t temporaries(const fs::path& dir) {
  std::size_t n = 0;
  for (auto& e : fs::directory_iterator(dir)) n += e.path().filename().string().find(".tmp-") != std::string::npos;
  return n;
}
// A pid that is not running: a child that has exited and been reaped.
pid_t dead_pid() {
  const pid_t c = ::fork();
  if (c == 0) ::_exit(0);
  ::waitpid(c, nullptr, 0);
  return c;
}
// A self-checking payload: its first 8 bytes are its length, every other byte is `fill`.
std::string payload(std::size_t n, char fill) {
  std::string s(n, fill);
  const std::uint64_t len = n;
  std::memcpy(s.data(), &len, 8);
  return s;
}
bool whole(const std::string& s) {
  if (s.size() < 8) return false;
  std::uint64_t len = 0;
  std::memcpy(&len, s.data(), 8);
  if (len != s.size()) return false;
  for (std::size_t i = 9; i < s.size(); ++i)
    if (s[i] != s[8]) return false;
  return true;
}
}  // namespace

TEST_CASE("write_file_atomically: refuses to replace a device, a directory or a symbolic link") {
  tmpdir t;
  // As root, /dev/full used to be "written" by renaming the temporary over the device node.
  if (fs::exists("/dev/full")) {
    CHECK_THROWS_WITH_AS(io::write_file_atomically("/dev/full", "x"), doctest::Contains("/dev/full: is not a regular file"),
                         io_error);
    CHECK(fs::is_character_file("/dev/full"));
  }
  fs::create_directory(t.p / "d");
  CHECK_THROWS_WITH_AS(io::write_file_atomically(t.p / "d", "x"), doctest::Contains("is a directory"), io_error);
  CHECK(fs::is_directory(t.p / "d"));
  io::write_file_atomically(t.p / "target", "old");
  fs::create_symlink(t.p / "target", t.p / "link");
  CHECK_THROWS_WITH_AS(io::write_file_atomically(t.p / "link", "new"), doctest::Contains("is a symbolic link"), io_error);
  CHECK(slurp(t.p / "target") == "old");
  CHECK(temporaries(t.p) == 0);
  // A regular file, or nothing, is replaced.
  io::write_file_atomically(t.p / "target", "new");
  CHECK(slurp(t.p / "target") == "new");
}

TEST_CASE("write_file_atomically: the temporaries of dead processes are removed on the next write, live ones kept") {
  tmpdir t;
  const fs::path f = t.p / "w.ctnn";
  const std::string dead = f.string() + ".tmp-" + std::to_string(dead_pid()) + "-3";
  const std::string live = f.string() + ".tmp-" + std::to_string(::getppid()) + "-0";  // our parent is alive
  const std::string other = (t.p / "other.ctnn").string() + ".tmp-" + std::to_string(dead_pid()) + "-0";
  const std::string lookalike = f.string() + ".tmp-notapid";
  for (const auto& p : {dead, live, other, lookalike}) std::ofstream(p) << "partial";
  io::write_file_atomically(f, "data");
  CHECK(slurp(f) == "data");
  CHECK(!fs::exists(dead));
  CHECK(fs::exists(live));
  CHECK(fs::exists(other));  // another file's temporaries are left to its own next write
  CHECK(fs::exists(lookalike));
}

TEST_CASE("write_file_atomically: kill -9 at random moments never leaves a torn file, the next write cleans up") {
  tmpdir t;
  const fs::path f = t.p / "ckpt";
  std::mt19937 g(14);
  std::uniform_int_distribution<int> delay_us(0, 20000);
  io::write_file_atomically(f, payload(1 << 20, 'a'));
  std::size_t kills = 0;
  for (int round = 0; round < 30; ++round) {
    const pid_t c = ::fork();
    REQUIRE(c >= 0);
    if (c == 0) {
      // The child checkpoints as fast as it can, 1 to 4 MiB each time, until it is killed.
      for (int i = 0;; ++i) io::write_file_atomically(f, payload(std::size_t(1 + i % 4) << 20, char('b' + i % 20)));
    }
    std::this_thread::sleep_for(std::chrono::microseconds(delay_us(g)));
    ::kill(c, SIGKILL);
    int status = 0;
    ::waitpid(c, &status, 0);
    kills += WIFSIGNALED(status);
    // The file is always one whole checkpoint, never absent, never a mix.
    REQUIRE(fs::is_regular_file(f));
    REQUIRE(whole(slurp(f)));
  }
  CHECK(kills == 30);
  // Temporaries of the killed writers may be there; the next write removes them all.
  io::write_file_atomically(f, payload(100, 'z'));
  CHECK(temporaries(t.p) == 0);
  CHECK(whole(slurp(f)));
  // The directory holds the file and nothing else.
  CHECK(std::distance(fs::directory_iterator(t.p), fs::directory_iterator()) == 1);
}
