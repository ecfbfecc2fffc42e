// csv.hpp: rows as samples, and errors naming file, line and column.
#include <doctest/doctest.h>

#include <ctnn/data/csv.hpp>
#include <ctnn/data/pipeline.hpp>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <vector>

using namespace ctnn;
namespace fs = std::filesystem;

namespace {
struct tmpdir {
  fs::path p;
  tmpdir() {
    p = fs::temp_directory_path() / ("ctnn_csv_" + std::to_string(::getpid()));
    fs::create_directories(p);
  }
  ~tmpdir() { fs::remove_all(p); }
  fs::path write(const std::string& name, const std::string& text) const {
    std::ofstream(p / name) << text;
    return p / name;
  }
};
template <class E>
std::vector<E> all(const data::dataset<E>& d) {
  std::vector<E> out;
  auto c = d.open(0);
  E e;
  while (c.next(e)) out.push_back(e);
  return out;
}
using S3 = data::sample<shape<3>>;
}  // namespace

TEST_CASE("from_csv: label first, features after, header, CRLF and blank lines") {
  tmpdir t;
  const auto f = t.write("a.csv", "label,a,b,c\r\n2, 0.5,1,-3\r\n\r\n0,1e-2,+2,4\r\n");
  auto rows = all(data::from_csv<shape<3>>(f, {.header = true}));
  REQUIRE(rows.size() == 2);
  CHECK(rows[0].y[0] == 2);
  CHECK(rows[0].x == std::vector<float>{0.5f, 1, -3});
  CHECK(rows[1].x == std::vector<float>{0.01f, 2, 4});
}

TEST_CASE("from_csv: dense targets last, another delimiter, several files in order") {
  tmpdir t;
  using K = dense_targets<shape<2>>;
  const auto f1 = t.write("1.csv", "1;2;3;0.5;0.25\n");
  const auto f2 = t.write("2.csv", "4;5;6;1;0\n");
  auto rows = all(data::from_csv<shape<3>, K>({f1, f2}, {.delimiter = ';', .targets = data::column::last}));
  REQUIRE(rows.size() == 2);
  CHECK(rows[0].x == std::vector<float>{1, 2, 3});
  CHECK(rows[0].y == std::vector<float>{0.5f, 0.25f});
  CHECK(rows[1].y == std::vector<float>{1, 0});
}

TEST_CASE("from_csv: every bad row is reported with file, line and column") {
  tmpdir t;
  auto err = [&](const std::string& text) {
    const auto f = t.write("bad.csv", text);
    try {
      (void)all(data::from_csv<shape<3>>(f));
    } catch (const data::csv_error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  const std::string at = "from_csv: " + (t.p / "bad.csv").string();
  CHECK(err("1,2,3,4\n1,2,x,4\n") == at + ":2:3: 'x' is not a number");
  CHECK(err("1,2,3,4\n1,2,,4\n") == at + ":2:3: '' is not a number");
  CHECK(err("1,2,3\n") == at + ":1: 3 columns, a sample needs 4 (3 features + 1 targets)");
  CHECK(err("1,2,3,4,5\n") == at + ":1:5: more than the 4 columns a sample needs (3 features + 1 targets)");
  const std::string hint = "; the targets are read from column 1 (targets = column::first, the default; a file with its "
                           "targets last needs targets = column::last)";
  CHECK(err("0,1,2,3\n-1,2,3,4\n") == at + ":2:1: '-1' is not a class label (a non-negative integer)" + hint);
  CHECK(err("2.5,2,3,4\n") == at + ":1:1: '2.5' is not a class label (a non-negative integer)" + hint);
  CHECK_THROWS_WITH_AS(all(data::from_csv<shape<3>>(t.p / "missing.csv")), doctest::Contains("missing.csv: cannot open"),
                       data::csv_error);
}

TEST_CASE("from_csv: a bad row in a later file comes after the good rows, through prefetch") {
  tmpdir t;
  const auto good = t.write("good.csv", "1,1,1,1\n2,2,2,2\n");
  const auto bad = t.write("bad.csv", "3,3,3,3\n4,4,oops,4\n");
  auto d = data::from_csv<shape<3>>({good, bad}).map([](S3 s) { return s; }, 2).prefetch(2);
  auto c = d.open(0);
  S3 s;
  for (int want : {1, 2, 3}) {
    REQUIRE(c.next(s));
    CHECK(s.y[0] == want);
  }
  CHECK_THROWS_WITH_AS(c.next(s), doctest::Contains("bad.csv:2:3: 'oops' is not a number"), data::csv_error);
}

// Issue 14, items 5 and 8.
TEST_CASE("from_csv: nan, inf, a doubled sign and out-of-range numbers are refused with the reason") {
  tmpdir t;
  auto err = [&](const std::string& text) {
    const auto f = t.write("odd.csv", text);
    try {
      (void)all(data::from_csv<shape<3>>(f));
    } catch (const data::csv_error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  const std::string at = "from_csv: " + (t.p / "odd.csv").string();
  CHECK(err("1,nan,3,4\n") == at + ":1:2: 'nan' is not a finite number");
  CHECK(err("1,2,-inf,4\n") == at + ":1:3: '-inf' is not a finite number");
  CHECK(err("1,2,3,Infinity\n") == at + ":1:4: 'Infinity' is not a finite number");
  CHECK(err("1,+-5,3,4\n") == at + ":1:2: '+-5' is not a number");
  CHECK(err("1,++5,3,4\n") == at + ":1:2: '++5' is not a number");
  CHECK(err("1,1e400,3,4\n") == at + ":1:2: '1e400' is out of range for a 32-bit floating-point value");
  CHECK(err("1,1e39,3,4\n") == at + ":1:2: '1e39' is out of range for a 32-bit floating-point value");
  CHECK(err("99999999999,1,2,3\n") == at + ":1:1: '99999999999' is out of range for a class label (a 32-bit integer)" +
                                           "; the targets are read from column 1 (targets = column::first, the default; a "
                                           "file with its targets last needs targets = column::last)");
  CHECK(err("1,+5,-2,3e2\n") == "no error");
}

TEST_CASE("from_csv: a directory is a csv_error (an io_error) naming it") {
  tmpdir t;
  fs::create_directory(t.p / "d.csv");
  CHECK_THROWS_WITH_AS(all(data::from_csv<shape<3>>(t.p / "d.csv")), doctest::Contains("d.csv: is a directory"),
                       ctnn::io_error);
}

TEST_CASE("from_csv: targets = column::first (the default), column::last or column::named") {
  tmpdir t;
  static_assert(std::is_same_v<decltype(data::csv_options{}.targets), data::column>);
  CHECK(data::csv_options{}.targets.where == data::column::kind::first);  // the default, explicit
  const auto last = t.write("last.csv", "a,b,c,label\n0.5,1,2,3\n");
  auto rows = all(data::from_csv<shape<3>>(last, {.header = true, .targets = data::column::last}));
  REQUIRE(rows.size() == 1);
  CHECK(rows[0].x == std::vector<float>{0.5f, 1, 2});
  CHECK(rows[0].y[0] == 3);
  const auto mid = t.write("mid.csv", "a,label,b,c\n0.5,4,1,2\n");
  rows = all(data::from_csv<shape<3>>(mid, {.header = true, .targets = data::column::named("label")}));
  REQUIRE(rows.size() == 1);
  CHECK(rows[0].x == std::vector<float>{0.5f, 1, 2});
  CHECK(rows[0].y[0] == 4);
  // two dense target columns starting at the named one
  const auto two = t.write("two.csv", "a,t1,t2,b\n1,0.25,0.75,2\n");
  auto r2 = all(data::from_csv<shape<2>, dense_targets<shape<2>>>(two, {.header = true, .targets = data::column::named("t1")}));
  REQUIRE(r2.size() == 1);
  CHECK(r2[0].x == std::vector<float>{1, 2});
  CHECK(r2[0].y == std::vector<float>{0.25f, 0.75f});
}

TEST_CASE("from_csv: a file with its target last is not read silently with the default") {
  tmpdir t;
  // The header says where the label is: refused with a hint.
  const auto f = t.write("h.csv", "pixel0,pixel1,pixel2,label\n0,12,255,3\n");
  CHECK_THROWS_WITH_AS(all(data::from_csv<shape<3>>(f, {.header = true})),
                       doctest::Contains(":1: the header names the last column 'label' but the targets are read from "
                                         "the first ('pixel0'); set targets = column::last or column::named(\"label\")"),
                       data::csv_error);
  // The mirror mistake.
  const auto g = t.write("g.csv", "Label,a,b,c\n3,0,12,255\n");
  CHECK_THROWS_WITH_AS(all(data::from_csv<shape<3>>(g, {.header = true, .targets = data::column::last})),
                       doctest::Contains("the header names the first column 'Label'"), data::csv_error);
  // No header: a feature that is not a label says where the targets were read from.
  const auto h = t.write("n.csv", "0.5,0.25,1,3\n");
  CHECK_THROWS_WITH_AS(all(data::from_csv<shape<3>>(h)),
                       doctest::Contains("a file with its targets last needs targets = column::last"), data::csv_error);
  // A name that is not in the header, and a name without a header.
  CHECK_THROWS_WITH_AS(all(data::from_csv<shape<3>>(f, {.header = true, .targets = data::column::named("y")})),
                       doctest::Contains("the header has no column named 'y' (it has: pixel0, pixel1, pixel2, label)"),
                       data::csv_error);
  CHECK_THROWS_WITH_AS(data::from_csv<shape<3>>(f, {.targets = data::column::named("label")}),
                       doctest::Contains("needs header = true"), std::invalid_argument);
}
