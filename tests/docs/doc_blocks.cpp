// tests/docs/doc_blocks.cpp — compiles every C++ code block of Markdown files
// and runs every block that is a whole program.
//
// Usage: ctnn_doc_blocks --cxx COMPILER --include DIR --root REPO --work DIR
//                        [--cxxflag FLAG]... [--run-flag FLAG]... [--link ARG]...
//                        [--timeout SECONDS] [--not-compiled examples/snippets/NAME.cpp]...
//                        [--optimize-flag FLAG]... [--compiled-kernels OBJECT]
//                        [--pch-dir DIR]
//                        [--expect-fail LINE,LINE,...] FILE.md...
// --cxxflag adds a compiler flag (the build passes ONNX's definitions when
// ctnn::onnx exists); --run-flag adds a flag used only to build the programs
// that are run (the build's optimisation flags), --link an argument of their
// link line (libraries: zlib, -pthread, ONNX's; a program compiles and links in
// one command, so a --link flag that defines a macro, as -pthread defines
// _REENTRANT, must be a --cxxflag too, or g++ rejects the precompiled header
// below, which is then an error); --optimize-flag adds a flag,
// after the --run-flag ones, to the programs marked "optimized: WHY" (below; the
// build passes -O1 where its --run-flag flags say -O0); --not-compiled names a snippet
// file whose blocks are only checked against the file (its optional component
// is missing here).
// --compiled-kernels compiles every block in ctnn's compiled mode
// (-DCTNN_COMPILED_KERNELS) and links the programs with OBJECT (a translation
// unit that defined CTNN_COMPILED_KERNELS_DEFINE, built with the same flags);
// --pch-dir puts DIR first on the include path, where g++ finds
// ctnn/ctnn.hpp.gch, a precompiled <ctnn/ctnn.hpp> built with the same flags
// (and -DCTNN_COMPILED_KERNELS), which it reads when that is a block's first
// include (not for the programs built with --optimize-flag flags, which parse
// it: g++ does not read a precompiled header built at another -O level, and
// the few such programs do not pay for a second one). So the blocks compile as a user's edit loop does (docs/performance.md,
// "Compile time and memory"). Either is ignored, with a note, where it is older
// than a header under --include (a build that did not rebuild it).
//
// A block is a fence that opens with ```cpp or ```c++. The line just before it
// may say how the block is completed (blank or other lines: a complete program):
//   <!-- snippet: examples/snippets/NAME.cpp -->  the block is a verbatim copy of
//       that file (checked character for character) and the file is compiled
//   <!-- snippet: frame NAME -->  the block is pasted into
//       examples/snippets/frames/NAME.cpp at its line "// @snippet@"
//   <!-- snippet: compile only: WHY -->  a complete program that is compiled
//       but not run; WHY (not empty) says why it cannot run in the test
//   <!-- snippet: examples/snippets/NAME.cpp, compile only: WHY -->  both
//   <!-- snippet: optimized: WHY -->  a complete program that is built with
//       the --optimize-flag flags too, because it runs long without them (it
//       trains); WHY (not empty) says so. Every other block is built without
//       them: at -O0 in the release preset, where most programs run in well under
//       a second and compile in a third of -O1's time
//   <!-- snippet: examples/snippets/NAME.cpp, optimized: WHY -->  both
//   <!-- snippet: include/ctnn/PATH.hpp -->  the block is a verbatim copy of
//       that header (checked character for character), compiled as a
//       translation unit that includes it
// Any other "<!-- snippet:" comment is an error, so a typo cannot skip a block.
// A fragment (a frame block) is compiled with -std=c++20 -fsyntax-only and the
// --run-flag flags (which still instantiates templates and evaluates every
// static_assert; the flags as the programs', so one precompiled header serves both). A block
// that is a whole program (its own text has "int main") is compiled and linked
// with the --run-flag and --link arguments and run in an empty scratch
// directory under --work (also its TMPDIR, so the files it writes stay there):
// it must exit with 0 within --timeout seconds (default 120). A program that
// reads Fashion-MNIST ("fashion_mnist::" in its text) while the data set is
// missing ($CTNN_FASHION_MNIST_DIR, else /usr/share/datasets/fashion-mnist) is
// only compiled; the run then ends with "CTNN_SKIP:" if nothing failed, which
// CTest reports as skipped. A failure prints "FILE:LINE: ..." with the
// compiler's or the program's output and makes the run fail.
// --expect-fail turns the run into a test of this checker: it passes only if
// exactly the blocks opening at those lines fail.
#include <sys/wait.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

namespace fs = std::filesystem;

namespace {

struct block {
  std::size_t line = 0;  // of the opening fence, counted from 1
  std::string marker;    // the "<!-- snippet: ... -->" text before it, or empty
  std::string code;
};

std::string read(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  if (!in) throw std::runtime_error("cannot read " + p.string());
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

std::string trim(std::string s) {
  const auto b = s.find_first_not_of(" \t\r");
  if (b == std::string::npos) return "";
  const auto e = s.find_last_not_of(" \t\r");
  return s.substr(b, e - b + 1);
}

bool is_cpp_fence(const std::string& line) {
  const std::string t = trim(line);
  return t == "```cpp" || t == "```c++" || t == "```C++";
}

std::vector<block> blocks_of(const fs::path& md) {
  std::istringstream in(read(md));
  std::vector<block> out;
  std::string line, prev;
  std::size_t n = 0;
  while (std::getline(in, line)) {
    ++n;
    if (is_cpp_fence(line)) {
      block b;
      b.line = n;
      const std::string p = trim(prev);
      if (p.rfind("<!-- snippet:", 0) == 0) b.marker = p;
      std::string body;
      bool closed = false;
      while (std::getline(in, line)) {
        ++n;
        if (trim(line).rfind("```", 0) == 0) {
          closed = true;
          break;
        }
        b.code += line + "\n";
      }
      if (!closed) throw std::runtime_error(md.string() + ":" + std::to_string(b.line) + ": the code block is never closed");
      out.push_back(std::move(b));
      prev.clear();
      continue;
    }
    prev = line;
  }
  return out;
}

// The program to compile for a block, or an error message.
// Errors in a block point into the Markdown file.
std::string line_directive(const block& b, const std::string& doc) {
  return "#line " + std::to_string(b.line + 1) + " \"" + doc + "\"\n";
}

// What the "<!-- snippet: ... -->" comment before a block says.
struct marker_info {
  std::string what;          // "", "examples/snippets/NAME.cpp", "include/ctnn/PATH.hpp" or "frame NAME"
  bool compile_only = false;
  bool optimized = false;    // built with the --optimize-flag flags too
  std::string why;           // why a compile-only program is not run, or why it is optimized
};

bool parse_marker(const std::string& marker, marker_info& info, std::string& why) {
  if (marker.empty()) return true;
  std::string m = marker.substr(std::string("<!-- snippet:").size());
  const auto end = m.rfind("-->");
  if (end == std::string::npos) {
    why = "the snippet comment is not closed with -->";
    return false;
  }
  m = trim(m.substr(0, end));
  // "[WHAT,] TAG WHY": WHY into info.why, WHAT left in m
  const auto take_tag = [&](const std::string& tag) {
    const auto at = m.find(tag);
    if (at == std::string::npos) return false;
    info.why = trim(m.substr(at + tag.size()));
    m = trim(m.substr(0, at));
    if (!m.empty() && m.back() == ',') m = trim(m.substr(0, m.size() - 1));
    return true;
  };
  const auto snippet_file = [&] {
    return m.rfind("examples/snippets/", 0) == 0 && m.size() > 4 && m.substr(m.size() - 4) == ".cpp";
  };
  if (take_tag("optimized:")) {
    info.optimized = true;
    if (info.why.empty()) {
      why = "'optimized:' must say why the program needs the optimization (what it runs that long)";
      return false;
    }
    if (m.empty()) return true;
    if (m.find("compile only") != std::string::npos) {
      why = "'optimized' is for programs that run; a compile-only program is not run";
      return false;
    }
    if (snippet_file()) {
      info.what = m;
      return true;
    }
    why = "'optimized' is for whole programs, alone or after 'examples/snippets/NAME.cpp,' (not '" + m + "')";
    return false;
  }
  if (take_tag("compile only:")) {
    info.compile_only = true;
    if (info.why.empty()) {
      why = "'compile only:' must say why the program cannot run in the test";
      return false;
    }
    if (m.rfind("frame ", 0) == 0) {
      why = "'compile only' is for whole programs; a frame's fragment is never run";
      return false;
    }
  }
  if (m.empty() && info.compile_only) return true;
  if (m.rfind("frame ", 0) == 0 || snippet_file() ||
      (m.rfind("include/ctnn/", 0) == 0 && m.size() > 4 && m.substr(m.size() - 4) == ".hpp" && !info.compile_only)) {
    info.what = m;
    return true;
  }
  why = "unknown snippet comment '" + marker +
        "' (use 'examples/snippets/NAME.cpp', 'include/ctnn/PATH.hpp', 'frame NAME', 'compile only: WHY' or "
        "'optimized: WHY')";
  return false;
}

bool source_of(const block& b, const marker_info& info, const std::string& doc, const fs::path& root, std::string& src,
               std::string& why) {
  const std::string& m = info.what;
  if (m.empty()) {
    src = line_directive(b, doc) + b.code;
    return true;
  }
  if (m.rfind("frame ", 0) == 0) {
    const fs::path frame = root / "examples/snippets/frames" / (trim(m.substr(6)) + ".cpp");
    if (!fs::exists(frame)) {
      why = "no frame " + frame.string();
      return false;
    }
    const std::string f = read(frame);
    const std::string mark = "// @snippet@";
    const auto at = f.find(mark);
    if (at == std::string::npos) {
      why = frame.string() + " has no line '// @snippet@'";
      return false;
    }
    src = f.substr(0, at) + line_directive(b, doc) + b.code + f.substr(at + mark.size());
    return true;
  }
  const fs::path file = root / m;
  if (!fs::exists(file)) {
    why = "no file " + file.string();
    return false;
  }
  src = read(file);
  if (src != b.code) {
    why = "the block differs from " + m + " (copy the file into the document verbatim)";
    return false;
  }
  if (m.rfind("include/", 0) == 0) src = "#include <" + m.substr(8) + ">\n";  // a header: compiled where it lives
  return true;
}

// A whole program: the block's own text defines main.
bool is_program(const std::string& code) {
  static const std::regex main_def(R"(\bint\s+main\s*\()");
  return std::regex_search(code, main_def);
}

// Where a program that reads Fashion-MNIST finds it (data/fashion_mnist.hpp's default_dir).
fs::path fashion_mnist_dir() {
  if (const char* e = std::getenv("CTNN_FASHION_MNIST_DIR"); e && *e) return e;
  return "/usr/share/datasets/fashion-mnist";
}

bool fashion_mnist_present() {
  const fs::path d = fashion_mnist_dir();
  for (const char* stem : {"train-images-idx3-ubyte", "train-labels-idx1-ubyte", "t10k-images-idx3-ubyte",
                           "t10k-labels-idx1-ubyte"})
    if (!fs::exists(d / stem) && !fs::exists(d / (std::string(stem) + ".gz"))) return false;
  return true;
}

// std::system's status as an exit code (-1 when the shell could not run it).
int exit_code(int status) {
  if (status == -1) return -1;
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return -1;
}

// Whether `built` exists and is newer than every file under `include`.
bool newer_than_headers(const fs::path& built, const fs::path& include) {
  std::error_code ec;
  const auto t = fs::last_write_time(built, ec);
  if (ec) return false;
  for (const auto& e : fs::recursive_directory_iterator(include, ec))
    if (e.is_regular_file() && e.last_write_time() >= t) return false;
  return !ec;
}

std::string tail(const std::string& s, std::size_t n) {
  return s.size() <= n ? s : "[...]\n" + s.substr(s.size() - n);
}

std::string quote(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

}  // namespace

int main(int argc, char** argv) try {
  std::string cxx, include;
  fs::path root, work;
  std::set<std::size_t> expect_fail;
  bool testing_checker = false;
  std::vector<fs::path> files;
  std::string extra_flags, run_flags, optimize_flags, link_args;
  int timeout_s = 120;
  std::set<std::string> not_compiled;
  fs::path compiled_kernels, pch_dir;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) throw std::runtime_error(a + " needs a value");
      return argv[++i];
    };
    if (a == "--cxx") cxx = value();
    else if (a == "--include") include = value();
    else if (a == "--root") root = value();
    else if (a == "--work") work = value();
    else if (a == "--cxxflag") extra_flags += " " + quote(value());
    else if (a == "--run-flag") run_flags += " " + quote(value());
    else if (a == "--optimize-flag") optimize_flags += " " + quote(value());
    else if (a == "--link") link_args += " " + quote(value());
    else if (a == "--timeout") timeout_s = std::stoi(value());
    else if (a == "--not-compiled") not_compiled.insert(value());
    else if (a == "--compiled-kernels") compiled_kernels = value();
    else if (a == "--pch-dir") pch_dir = value();
    else if (a == "--expect-fail") {
      testing_checker = true;
      std::istringstream s(value());
      std::string item;
      while (std::getline(s, item, ',')) expect_fail.insert(std::stoul(item));
    } else files.emplace_back(a);
  }
  if (cxx.empty() || include.empty() || root.empty() || work.empty() || files.empty() || timeout_s <= 0)
    throw std::runtime_error("usage: ctnn_doc_blocks --cxx C --include DIR --root DIR --work DIR [--cxxflag F]... "
                             "[--run-flag F]... [--link A]... [--timeout S] [--not-compiled F]... [--optimize-flag F]... "
                             "[--compiled-kernels OBJECT] [--pch-dir DIR] [--expect-fail L,...] FILE.md...");
  work = fs::absolute(work);
  fs::create_directories(work);
  // Compiled mode and the precompiled header, where they are newer than every header. The
  // programs built with --optimize-flag flags parse <ctnn/ctnn.hpp> (where there are no such
  // flags, the header serves them too).
  std::string mode_flags, optimized_mode_flags, mode_link;
  if (!compiled_kernels.empty()) {
    if (newer_than_headers(compiled_kernels, include)) {
      mode_flags += " -DCTNN_COMPILED_KERNELS";
      optimized_mode_flags = mode_flags;
      mode_link += " " + quote(compiled_kernels.string());
      if (!pch_dir.empty()) {
        if (newer_than_headers(pch_dir / "ctnn" / "ctnn.hpp.gch", include)) {
          // A header g++ finds but rejects (other flags than the blocks') fails the block.
          mode_flags = " -I" + quote(pch_dir.string()) + " -Winvalid-pch -Werror=invalid-pch" + mode_flags;
          if (optimize_flags.empty()) optimized_mode_flags = mode_flags;
        } else {
          std::cout << "note: " << (pch_dir / "ctnn" / "ctnn.hpp.gch").string()
                    << " is missing or older than a header: blocks parse <ctnn/ctnn.hpp>\n";
        }
      }
    } else {
      std::cout << "note: " << compiled_kernels.string()
                << " is missing or older than a header: blocks compile header-only\n";
    }
  }
  std::set<std::size_t> failed;
  std::vector<std::string> not_run;  // programs that were only compiled because their data set is missing
  std::size_t count = 0;
  for (const fs::path& md : files) {
    const std::string name = fs::relative(md, root).string();
    for (const block& b : blocks_of(md)) {
      ++count;
      const std::string where = name + ":" + std::to_string(b.line);
      std::string src, why;
      marker_info info;
      if (!parse_marker(b.marker, info, why) || !source_of(b, info, name, root, src, why)) {
        std::cout << where << ": " << why << "\n";
        failed.insert(b.line);
        continue;
      }
      if (not_compiled.count(info.what)) {
        std::cout << where << ": equals " << info.what << " (not compiled: its optional component is missing)\n";
        continue;
      }
      std::string stem = name;
      for (char& c : stem)
        if (c == '/' || c == '.') c = '_';
      stem += "_" + std::to_string(b.line);
      const fs::path cpp = work / (stem + ".cpp");
      const fs::path log = work / (stem + ".log");
      std::ofstream(cpp, std::ios::binary) << src;
      const bool program = is_program(b.code);
      const bool data_missing = program && b.code.find("fashion_mnist::") != std::string::npos && !fashion_mnist_present();
      if (info.optimized && !program) {
        std::cout << where << ": 'optimized' marks a whole program (its text defines main), not a fragment\n";
        failed.insert(b.line);
        continue;
      }
      const bool run = program && !info.compile_only && !data_missing;
      // A program marked "optimized" is built with the --optimize-flag flags (and their header) too,
      // where it runs; a fragment, or a program only compiled, is checked with the --run-flag flags.
      const bool optimized = run && info.optimized;
      const fs::path exe = work / stem;
      const std::string compile = quote(cxx) + " -std=c++20" + (optimized ? optimized_mode_flags : mode_flags) +
                                  extra_flags + " -I" + quote(include) + " " + run_flags +
                                  (optimized ? optimize_flags : std::string()) + " " +
                                  (run ? quote(cpp.string()) + " -o " + quote(exe.string()) + mode_link + link_args
                                       : " -fsyntax-only " + quote(cpp.string())) +
                                  " > " + quote(log.string()) + " 2>&1";
      const auto c0 = std::chrono::steady_clock::now();
      if (std::system(compile.c_str()) != 0) {
        std::cout << where << ": the block does not " << (run ? "build" : "compile") << " (" << cpp.string() << "):\n"
                  << read(log) << "\n";
        failed.insert(b.line);
        continue;
      }
      std::ostringstream built;
      built << std::fixed << std::setprecision(1)
            << std::chrono::duration<double>(std::chrono::steady_clock::now() - c0).count() << " s";
      if (!run) {
        std::cout << where << ": compiles (" << built.str() << ")";
        if (info.compile_only) std::cout << " (a program not run: " << info.why << ")";
        if (data_missing) {
          std::cout << " (a program not run: " << fashion_mnist_dir().string() << " is missing)";
          not_run.push_back(where);
        }
        std::cout << "\n";
        continue;
      }
      // An empty scratch directory: the program's files (weights, a tuner's project) land there.
      const fs::path dir = work / (stem + ".run");
      fs::remove_all(dir);
      fs::create_directories(dir);
      const fs::path out = work / (stem + ".out");
      const std::string cmd = "cd " + quote(dir.string()) + " && TMPDIR=" + quote(dir.string()) +
                              " timeout --kill-after=5 " + std::to_string(timeout_s) + " " + quote(exe.string()) +
                              " > " + quote(out.string()) + " 2>&1 < /dev/null";
      const auto t0 = std::chrono::steady_clock::now();
      const int code = exit_code(std::system(cmd.c_str()));
      const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      std::ostringstream took;
      took << std::fixed << std::setprecision(1) << seconds << " s";
      if (code == 0) {
        std::cout << where << ": compiles (" << built.str() << (optimized ? ", optimized" : "") << ") and runs (exit 0, "
                  << took.str() << ")\n";
        continue;
      }
      std::cout << where << ": the program "
                << (code == 124 || code == 128 + 9
                        ? "did not end within " + std::to_string(timeout_s) + " s" +
                              (optimized || optimize_flags.empty()
                                   ? std::string()
                                   : " (built without the --optimize-flag flags: a program that trains can be "
                                     "marked '<!-- snippet: optimized: WHY -->')")
                        : "exited with " + std::to_string(code))
                << " (" << took.str() << "; " << exe.string() << " in " << dir.string() << "); its output:\n"
                << tail(read(out), 4000) << "\n";
      failed.insert(b.line);
    }
  }
  if (testing_checker) {
    if (failed != expect_fail) {
      std::cout << "the checker did not fail exactly the expected blocks\n";
      return 1;
    }
    std::cout << "the checker failed exactly the " << failed.size() << " broken blocks\n";
    return 0;
  }
  if (count == 0) std::cout << "no C++ blocks\n";
  if (!failed.empty()) return 1;
  if (!not_run.empty())  // reported as skipped by CTest (SKIP_REGULAR_EXPRESSION), only when nothing failed
    std::cout << "CTNN_SKIP: " << not_run.size() << " program(s) compiled but not run: " << fashion_mnist_dir().string()
              << " is missing (apt-get install dataset-fashion-mnist)\n";
  return 0;
} catch (const std::exception& e) {
  std::cerr << "ctnn_doc_blocks: " << e.what() << "\n";
  return 2;
}
