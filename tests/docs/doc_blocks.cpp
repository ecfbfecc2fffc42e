// tests/docs/doc_blocks.cpp — compiles every C++ code block of Markdown files.
//
// Usage: ctnn_doc_blocks --cxx COMPILER --include DIR --root REPO --work DIR
//                        [--cxxflag FLAG]... [--not-compiled examples/snippets/NAME.cpp]...
//                        [--expect-fail LINE,LINE,...] FILE.md...
// --cxxflag adds a compiler flag (the build passes ONNX's definitions when
// ctnn::onnx exists); --not-compiled names a snippet file whose blocks are only
// checked against the file (its optional component is missing here).
//
// A block is a fence that opens with ```cpp or ```c++. The line just before it
// may say how the block is completed (blank or other lines: a complete program):
//   <!-- snippet: examples/snippets/NAME.cpp -->  the block is a verbatim copy of
//       that file (checked character for character) and the file is compiled
//   <!-- snippet: frame NAME -->  the block is pasted into
//       examples/snippets/frames/NAME.cpp at its line "// @snippet@"
// Any other "<!-- snippet:" comment is an error, so a typo cannot skip a block.
// Each block is compiled on its own with -std=c++20 -fsyntax-only (which still
// instantiates templates and evaluates every static_assert). A failure prints
// "FILE:LINE: ..." with the compiler's output and makes the run fail.
// --expect-fail turns the run into a test of this checker: it passes only if
// exactly the blocks opening at those lines fail.
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
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

bool source_of(const block& b, const std::string& doc, const fs::path& root, std::string& src, std::string& why) {
  if (b.marker.empty()) {
    src = line_directive(b, doc) + b.code;
    return true;
  }
  std::string m = b.marker.substr(std::string("<!-- snippet:").size());
  const auto end = m.rfind("-->");
  if (end == std::string::npos) {
    why = "the snippet comment is not closed with -->";
    return false;
  }
  m = trim(m.substr(0, end));
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
  if (m.rfind("examples/snippets/", 0) == 0 && m.size() > 4 && m.substr(m.size() - 4) == ".cpp") {
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
    return true;
  }
  why = "unknown snippet comment '" + b.marker + "' (use 'examples/snippets/NAME.cpp' or 'frame NAME')";
  return false;
}

}  // namespace

int main(int argc, char** argv) try {
  std::string cxx, include;
  fs::path root, work;
  std::set<std::size_t> expect_fail;
  bool testing_checker = false;
  std::vector<fs::path> files;
  std::string extra_flags;
  std::set<std::string> not_compiled;
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
    else if (a == "--cxxflag") extra_flags += " \"" + value() + "\"";
    else if (a == "--not-compiled") not_compiled.insert(value());
    else if (a == "--expect-fail") {
      testing_checker = true;
      std::istringstream s(value());
      std::string item;
      while (std::getline(s, item, ',')) expect_fail.insert(std::stoul(item));
    } else files.emplace_back(a);
  }
  if (cxx.empty() || include.empty() || root.empty() || work.empty() || files.empty())
    throw std::runtime_error("usage: ctnn_doc_blocks --cxx C --include DIR --root DIR --work DIR [--expect-fail L,...] FILE.md...");
  fs::create_directories(work);
  std::set<std::size_t> failed;
  std::size_t count = 0;
  for (const fs::path& md : files) {
    const std::string name = fs::relative(md, root).string();
    for (const block& b : blocks_of(md)) {
      ++count;
      const std::string where = name + ":" + std::to_string(b.line);
      std::string src, why;
      if (!source_of(b, name, root, src, why)) {
        std::cout << where << ": " << why << "\n";
        failed.insert(b.line);
        continue;
      }
      if (const auto m = b.marker.find("examples/snippets/"); m != std::string::npos) {
        const std::string file = b.marker.substr(m, b.marker.find(".cpp", m) + 4 - m);
        if (not_compiled.count(file)) {
          std::cout << where << ": equals " << file << " (not compiled: its optional component is missing)\n";
          continue;
        }
      }
      std::string stem = name;
      for (char& c : stem)
        if (c == '/' || c == '.') c = '_';
      const fs::path cpp = work / (stem + "_" + std::to_string(b.line) + ".cpp");
      const fs::path log = work / (stem + "_" + std::to_string(b.line) + ".log");
      std::ofstream(cpp, std::ios::binary) << src;
      const std::string cmd = "\"" + cxx + "\" -std=c++20 -fsyntax-only" + extra_flags + " -I\"" + include + "\" \"" + cpp.string() +
                              "\" > \"" + log.string() + "\" 2>&1";
      if (std::system(cmd.c_str()) != 0) {
        std::cout << where << ": the block does not compile (" << cpp.string() << "):\n" << read(log) << "\n";
        failed.insert(b.line);
      } else {
        std::cout << where << ": compiles\n";
      }
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
  return failed.empty() ? 0 : 1;
} catch (const std::exception& e) {
  std::cerr << "ctnn_doc_blocks: " << e.what() << "\n";
  return 2;
}
