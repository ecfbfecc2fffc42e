// ctnn/data/csv.hpp — a stage that streams samples from CSV files.
//
// csv_stage<S, K, T>(files, options): every non-blank line of every file (in
// order, read line by line on each pass) is one sample: S::size feature
// columns and K::width target columns. csv_options, in declaration order
// (designated initializers must keep it) and with their defaults:
//   .header = false          skip each file's first line (the column names)
//   .delimiter = ','         the field separator
//   .targets = column::first where the K::width target columns are:
//                            column::first (as the MNIST CSV files),
//                            column::last, or column::named("label") (the
//                            first target column's name in the header; needs
//                            header = true); the features are the others, in order.
// A header whose target-like name (label, target, class, y; any case) is at
// the other end than `targets` says is refused with a hint, and a label that
// does not parse says where the targets were read from: a file with its
// target last does not train silently on its first column. A sparse label
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

// Where the target columns of a CSV row are (csv_options::targets).
struct column {
  enum class kind : unsigned char { first, last, named };
  kind where = kind::first;
  std::string name;  // kind::named: the header's name of the first target column

  static column named(std::string n) { return column{kind::named, std::move(n)}; }
  static const column first;
  static const column last;
};
inline const column column::first{column::kind::first, {}};
inline const column column::last{column::kind::last, {}};

struct csv_options {
  bool header = false;
  char delimiter = ',';
  column targets = column::first;
};

namespace detail {
inline bool target_like(std::string_view name) {
  std::string s;
  for (char c : name)
    if (c != '"' && c != ' ' && c != '\t') s += char(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
  return s == "label" || s == "labels" || s == "target" || s == "targets" || s == "class" || s == "y";
}
inline std::string unquoted(std::string_view f) {
  while (!f.empty() && (f.front() == ' ' || f.front() == '\t' || f.front() == '"')) f.remove_prefix(1);
  while (!f.empty() && (f.back() == ' ' || f.back() == '\t' || f.back() == '"')) f.remove_suffix(1);
  return std::string(f);
}
}  // namespace detail

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
    std::size_t tstart = 0;  // the 0-based column where this file's targets begin

    std::string where_targets() const {
      return "the targets are read from column " + std::to_string(tstart + 1) +
             (opt.targets.where == column::kind::first  ? " (targets = column::first, the default; a file with its "
                                                          "targets last needs targets = column::last)"
              : opt.targets.where == column::kind::last ? " (targets = column::last)"
                                                        : " (targets = column::named(\"" + opt.targets.name + "\"))");
    }
    // The header line: find a named target column; refuse a target-like name at the other end.
    void read_header() {
      std::vector<std::string> names;
      std::string_view rest(text);
      for (;;) {
        const std::size_t cut = rest.find(opt.delimiter);
        names.push_back(detail::unquoted(rest.substr(0, cut)));
        if (cut == std::string_view::npos) break;
        rest.remove_prefix(cut + 1);
      }
      if (opt.targets.where == column::kind::named) {
        std::size_t i = 0;
        while (i < names.size() && names[i] != opt.targets.name) ++i;
        if (i == names.size()) {
          std::string all;
          for (const auto& n : names) all += (all.empty() ? "" : ", ") + n;
          fail(0, "the header has no column named '" + opt.targets.name + "' (it has: " + all + ")");
        }
        if (i + K::width > columns)
          fail(i + 1, "the target column '" + opt.targets.name + "' leaves no room for " + std::to_string(K::width) +
                          " target columns in a row of " + std::to_string(columns));
        tstart = i;
        return;
      }
      if (names.size() < 2) return;
      const std::string& first = names.front();
      const std::string& last = names.back();
      if (opt.targets.where == column::kind::first && detail::target_like(last) && !detail::target_like(first))
        fail(0, "the header names the last column '" + last + "' but the targets are read from the first ('" + first +
                    "'); set targets = column::last or column::named(\"" + last + "\")");
      if (opt.targets.where == column::kind::last && detail::target_like(first) && !detail::target_like(last))
        fail(0, "the header names the first column '" + first + "' but the targets are read from the last ('" + last +
                    "'); set targets = column::first or column::named(\"" + first + "\")");
    }

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
          tstart = opt.targets.where == column::kind::last ? S::size : 0;
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
        if (opt.header && line == 1) {
          read_header();
          continue;
        }
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
        const bool target = col - 1 >= tstart && col - 1 < tstart + K::width;
        if constexpr (is_sparse_v<K>) {
          if (target) {
            std::int32_t v = 0;
            auto [p, ec] = std::from_chars(f.data(), f.data() + f.size(), v);
            if (ec == std::errc::result_out_of_range)
              fail(col, "'" + shown + "' is out of range for a class label (a 32-bit integer); " + where_targets());
            if (ec != std::errc() || p != f.data() + f.size() || v < 0)
              fail(col, "'" + shown + "' is not a class label (a non-negative integer); " + where_targets());
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
          const std::size_t k = target ? col - 1 - tstart : col - 1 < tstart ? col - 1 : col - 1 - K::width;
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
      : files_(std::make_shared<const std::vector<std::filesystem::path>>(std::move(files))), opt_(std::move(opt)) {
    if (files_->empty()) throw std::invalid_argument("from_csv: no file given");
    if (opt_.targets.where == column::kind::named && !opt_.header)
      throw std::invalid_argument("from_csv: targets = column::named(\"" + opt_.targets.name +
                                  "\") needs header = true (the names are in the header)");
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
