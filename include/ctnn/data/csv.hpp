// ctnn/data/csv.hpp — a stage that streams samples from CSV files.
//
// csv_stage<S, K, T>(files, options): every non-blank line of every file (in
// order, read line by line on each pass) is one sample: S::size feature
// columns and K::width target columns, the targets first
// (options.targets_first, as in the MNIST CSV files) or last. A sparse label
// must be a non-negative integer; a feature or dense target a finite number
// (at most one sign; "nan", "inf" and values beyond T's range are refused,
// the latter as "out of range"). options.header skips each file's first
// line; options.delimiter separates fields (default ','). Any problem throws
// csv_error "from_csv: <file>:<line>:<column>: <what>" (line and column
// counted from 1) when the pass reaches it; earlier rows have been delivered.
#pragma once
#include <charconv>
#include <cmath>
#include <limits>
#include <cstddef>
#include <filesystem>
#include <fstream>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "../core/errors.hpp"
#include "element.hpp"
#include "stage.hpp"

namespace ctnn::data {

class csv_error : public io_error {
 public:
  using io_error::io_error;
};

struct csv_options {
  bool header = false;
  char delimiter = ',';
  bool targets_first = true;
};

template <Shape S, class K, class T>
class csv_stage final : public stage<sample<S, K, T>> {
  using E = sample<S, K, T>;
  using Y = typename E::target_type;
  static constexpr std::size_t columns = S::size + K::width;

  struct iter final : iterator<E> {
    std::shared_ptr<const std::vector<std::filesystem::path>> files;
    csv_options opt;
    std::size_t file = 0, line = 0;
    std::ifstream in;
    bool is_open = false;
    std::string text;

    [[noreturn]] void fail(std::size_t col, const std::string& what) const {
      throw csv_error("from_csv: " + (*files)[file].string() + ":" + std::to_string(line) +
                          (col ? ":" + std::to_string(col) : std::string()) + ": " + what,
                      (*files)[file]);
    }
    bool next(E& out) override {
      for (;;) {
        if (!is_open) {
          if (file == files->size()) return false;
          open_file((*files)[file]);
          is_open = true;
          line = 0;
        }
        if (!std::getline(in, text)) {
          if (in.bad()) fail(0, "read error");
          is_open = false;
          in.close();
          ++file;
          continue;
        }
        ++line;
        if (!text.empty() && text.back() == '\r') text.pop_back();
        if (opt.header && line == 1) continue;
        if (text.find_first_not_of(" \t") == std::string::npos) continue;
        parse(out);
        return true;
      }
    }
    void open_file(const std::filesystem::path& p) {
      // A directory opens as an ifstream and fails on the first read with std::ios_base::failure: refuse it here.
      std::error_code ec;
      const auto st = std::filesystem::status(p, ec);
      if (ec || !std::filesystem::exists(st)) throw csv_error("from_csv", p, "cannot open for reading (no such file)");
      if (std::filesystem::is_directory(st)) throw csv_error("from_csv", p, "is a directory, not a file");
      in = std::ifstream(p);
      if (!in) throw csv_error("from_csv", p, "cannot open for reading");
    }
    void parse(E& out) {
      out.x.resize(S::size);
      out.y.resize(K::width);
      std::string_view rest(text);
      std::size_t col = 0;
      while (true) {
        const std::size_t cut = rest.find(opt.delimiter);
        std::string_view f = rest.substr(0, cut);
        ++col;
        if (col > columns)
          fail(col, "more than the " + std::to_string(columns) + " columns a sample needs (" + std::to_string(S::size) +
                        " features + " + std::to_string(K::width) + " targets)");
        while (!f.empty() && (f.front() == ' ' || f.front() == '\t')) f.remove_prefix(1);
        while (!f.empty() && (f.back() == ' ' || f.back() == '\t')) f.remove_suffix(1);
        const std::string shown(f);
        if (!f.empty() && f.front() == '+') {
          f.remove_prefix(1);  // from_chars does not take a '+'; one sign at most
          if (!f.empty() && (f.front() == '+' || f.front() == '-')) fail(col, "'" + shown + "' is not a number");
        }
        const bool target = opt.targets_first ? col <= K::width : col > S::size;
        if constexpr (is_sparse_v<K>) {
          if (target) {
            std::int32_t v = 0;
            auto [p, ec] = std::from_chars(f.data(), f.data() + f.size(), v);
            if (ec == std::errc::result_out_of_range)
              fail(col, "'" + shown + "' is out of range for a class label (a 32-bit integer)");
            if (ec != std::errc() || p != f.data() + f.size() || v < 0)
              fail(col, "'" + shown + "' is not a class label (a non-negative integer)");
            out.y[0] = v;
          }
        }
        if (!target || !is_sparse_v<K>) {
          double v = 0;
          auto [p, ec] = std::from_chars(f.data(), f.data() + f.size(), v);
          if (!f.empty() && ec == std::errc::result_out_of_range && p == f.data() + f.size())
            fail(col, "'" + shown + "' is out of range for a " + std::to_string(8 * sizeof(T)) + "-bit floating-point value");
          if (f.empty() || ec != std::errc() || p != f.data() + f.size())
            fail(col, "'" + shown + "' is not a number");
          if (!std::isfinite(v)) fail(col, "'" + shown + "' is not a finite number");
          if (std::abs(v) > double(std::numeric_limits<T>::max()))
            fail(col, "'" + shown + "' is out of range for a " + std::to_string(8 * sizeof(T)) + "-bit floating-point value");
          const std::size_t k = opt.targets_first ? col - 1 - (target ? 0 : K::width) : col - 1 - (target ? S::size : 0);
          if (target) out.y[k] = static_cast<Y>(v);
          else out.x[k] = static_cast<T>(v);
        }
        if (cut == std::string_view::npos) break;
        rest.remove_prefix(cut + 1);
      }
      if (col < columns)
        fail(0, std::to_string(col) + " columns, a sample needs " + std::to_string(columns) + " (" +
                    std::to_string(S::size) + " features + " + std::to_string(K::width) + " targets)");
    }
  };

 public:
  csv_stage(std::vector<std::filesystem::path> files, csv_options opt)
      : files_(std::make_shared<const std::vector<std::filesystem::path>>(std::move(files))), opt_(opt) {
    if (files_->empty()) throw std::invalid_argument("from_csv: no file given");
  }
  iterator_ptr<E> open(const open_context&) const override {
    auto it = std::make_unique<iter>();
    it->files = files_;
    it->opt = opt_;
    return it;
  }

 private:
  std::shared_ptr<const std::vector<std::filesystem::path>> files_;
  csv_options opt_;
};

}  // namespace ctnn::data
