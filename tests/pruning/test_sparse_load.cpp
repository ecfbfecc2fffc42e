// Loading the weights of a sparse layer of every layout (bitmap, csc, rows,
// n:m, block) from a hand-edited file: each index, offset and count the kernels read
// is checked when the file loads (io/weights.hpp, variable_ref::check), so an
// edited file with its CRC recomputed is refused with io::weights_error
// naming the file, the layer's 'index' and the bad value, the model is left
// as it was, and predict runs on it as before.
#include <doctest/doctest.h>

#include <ctnn/ctnn.hpp>
#include <ctnn/pruning.hpp>
#include <ctnn/layers/sparse_dense_nm.hpp>
#include <ctnn/layers/sparse_dense_rows.hpp>

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <utility>
#include <string>
#include <vector>

#include "io/weights_file.hpp"

using namespace ctnn;
namespace fs = std::filesystem;
namespace wf = weights_file;

namespace {
struct tmpdir {
  fs::path p;
  tmpdir() {
    p = fs::temp_directory_path() / ("ctnn_sparse_load_" + std::to_string(::getpid()));
    fs::create_directories(p);
  }
  ~tmpdir() { fs::remove_all(p); }
};

// The bytes of m's metadata buffers.
template <class M>
std::vector<std::byte> metadata(const M& m) {
  std::vector<std::byte> out;
  m.for_each_variable([&](const variable_ref& v) {
    if (v.kind == role::metadata) out.insert(out.end(), v.data, v.data + v.extent * v.element_bytes);
  });
  return out;
}

using edit = std::function<void(std::vector<char>&, const wf::tensor&)>;

// Saves a model of Net (seed 1), applies each edit to its layer-1 'index' in
// turn (the CRC recomputed) and checks that a model of Net (seed 2) refuses the
// file with the message `want` after "<file>: layer 1 metadata 'index': ",
// keeps its variables and predicts as before; the unedited file loads and
// then predicts as the saved model.
template <class Net>
void check_edits(const std::vector<std::pair<edit, std::string>>& edits) {
  tmpdir t;
  auto a = make_model<Net>(1), b = make_model<Net>(2);
  std::vector<float> x(5 * Net::input_type::size);
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = float(int(i % 7) - 3) / 4.0f;
  const auto before = b.predict(x.data(), 5);
  const std::vector<float> params(b.parameters().begin(), b.parameters().end());
  const auto meta = metadata(b);
  io::save_weights(a, t.p / "w.ctnn");
  const auto good = wf::slurp(t.p / "w.ctnn");
  const auto index = wf::find(good, 0, "index");
  for (const auto& [change, want] : edits) {
    CAPTURE(want);
    auto d = good;
    change(d, index);
    wf::put_crc(d);
    wf::spit(t.p / "bad.ctnn", d);
    CHECK_THROWS_WITH_AS(io::load_weights(b, t.p / "bad.ctnn"),
                         doctest::Contains(("bad.ctnn: layer 1 metadata 'index': " + want).c_str()), io::weights_error);
    CHECK(std::vector<float>(b.parameters().begin(), b.parameters().end()) == params);
    CHECK(metadata(b) == meta);
    CHECK(b.predict(x.data(), 5) == before);
  }
  io::load_weights(b, t.p / "w.ctnn");
  CHECK(b.predict(x.data(), 5) == a.predict(x.data(), 5));
}

// The u32 / u16 at position i of an index starting at `at`.
void set32(std::vector<char>& d, std::size_t at, std::size_t i, std::uint32_t v) { wf::set(d, at + 4 * i, v); }
std::uint32_t get32(const std::vector<char>& d, std::size_t at, std::size_t i) {
  return wf::get<std::uint32_t>(d, at + 4 * i);
}
void set16(std::vector<char>& d, std::size_t at, std::size_t i, std::uint16_t v) { wf::set(d, at + 2 * i, v); }
std::uint16_t get16(const std::vector<char>& d, std::size_t at, std::size_t i) {
  return wf::get<std::uint16_t>(d, at + 2 * i);
}
}  // namespace

TEST_CASE("sparse_dense (bitmap) weights: offsets, bitmap bits past the units and counts past the values are refused") {
  // K 20, N 20: chunk 0 holds columns 0..15, chunk 1 columns 16..19; 60 values
  using net = sequential<input<20>, sparse_dense<20, 20, 60, relu>, dense<3>>;
  constexpr std::size_t K = 20, chunks = 2, bitmaps = 4 * (chunks + 1);
  check_edits<net>({
      {[](auto& d, auto& t) { set32(d, t.values_at, 0, 1); }, "chunk 0 (columns 0..15) starts at value 1, not 0"},
      {[](auto& d, auto& t) { set32(d, t.values_at, 1, get32(d, t.values_at, 1) + 1); },
       "chunk 0 (columns 0..15) starts at value 0 and marks 40 weights, but the next offset is 41, not 40"},
      {[](auto& d, auto& t) { set16(d, t.values_at + bitmaps, K + 3, get16(d, t.values_at + bitmaps, K + 3) | 0x20); },
       "the bitmap of input 3 in chunk 1 (columns 16..19) marks column 21, past the 20 units"},
      {[](auto& d, auto& t) {
         for (std::size_t k = 0; k < K; ++k) set16(d, t.values_at + bitmaps, k, 0xffff);
       },
       "chunk 0 (columns 0..15) marks weights up to value 320, past the 60 values stored"},
      {[](auto& d, auto& t) { set32(d, t.values_at, 2, 4000000000u); },
       "chunk 1 (columns 16..19) starts at value 40 and marks 20 weights, but the next offset is 4000000000, not 60"},
  });
}

namespace {
// What csc and rows share: unit starts [N + 1] (uint32), then input rows [NNZ] (uint16).
template <std::size_t N, std::size_t NNZ>
std::vector<std::pair<edit, std::string>> by_unit_edits() {
  constexpr std::size_t rows = 4 * (N + 1);
  return {
      {[](auto& d, auto& t) { set32(d, t.values_at, 0, 2); }, "column 0 starts at value 2, not 0"},
      {[](auto& d, auto& t) { set32(d, t.values_at, N, NNZ + 1000); },
       "column " + std::to_string(N - 1) + " ends at value " + std::to_string(NNZ + 1000) + ", past the " +
           std::to_string(NNZ) + " values stored"},
      {[](auto& d, auto& t) { set32(d, t.values_at, 3, get32(d, t.values_at, 2) - 1); },
       "column 2 ends at value 9, before its start 10"},
      {[](auto& d, auto& t) { set16(d, t.values_at + rows, 1, 20); },
       "value 1 (column 0) has input row 20, but the layer has 20 inputs"},
      {[](auto& d, auto& t) { set16(d, t.values_at + rows, 7, 65535); },
       "value 7 (column 1) has input row 65535, but the layer has 20 inputs"},
      {[](auto& d, auto& t) { set16(d, t.values_at + rows, 2, get16(d, t.values_at + rows, 1)); },
       "value 2 (column 0) has input row 7, not above the row before it (7): rows ascend within a column"},
  };
}
}  // namespace

TEST_CASE("sparse_dense_csc weights: column starts and input rows out of range or out of order are refused") {
  // 25 of the 100 weights of a 20 x 5 kernel, spread evenly (every 4th in row-major order):
  // 5 per column; column 0's rows are 3, 7, 11, 15, 19, column 1's 2, 6, ...
  check_edits<sequential<input<20>, sparse_dense_csc<20, 5, 25, relu>, dense<3>>>(by_unit_edits<5, 25>());
}

TEST_CASE("sparse_dense_rows weights: unit starts and input indices out of range or out of order are refused") {
  check_edits<sequential<input<20>, sparse_dense_rows<20, 5, 25, relu>, dense<3>>>(by_unit_edits<5, 25>());
}

TEST_CASE("sparse_dense_nm weights: positions outside their group or not ascending are refused") {
  // 2:4 over 32 inputs and 4 units: 8 groups, 16 values of 2 bits per unit; value 0 is
  // unit 0's first in inputs 0..3 (position 0), value 1 its second (position 1)
  check_edits<sequential<input<32>, sparse_dense_nm<32, 4, 2, 4>, dense<3>>>({
      {[](auto& d, auto& t) {  // value 1 takes value 0's position
         const auto b = std::uint8_t(d[t.values_at]);
         d[t.values_at] = char((b & ~0x0c) | (b & 3) << 2);
       },
       "value 1 (unit 0, inputs 0..3) has position 0, not above the one before it (0): positions ascend within a group"},
  });
  // 1:3 over 48 inputs: positions take 2 bits, so 3 is representable and would name the next
  // group's first input; value 17 is unit 1's in inputs 3..5, at bits 34 and 35
  check_edits<sequential<input<48>, sparse_dense_nm<48, 4, 1, 3>, dense<3>>>({
      {[](auto& d, auto& t) { d[t.values_at + 4] = char(std::uint8_t(d[t.values_at + 4]) | 0x0c); },
       "value 17 (unit 1, inputs 3..5) has position 3, but a group holds 3 inputs"},
  });
}

TEST_CASE("sparse_dense_block weights: block column starts and block rows out of range or out of order are refused") {
  // 5 blocks of 2 x 4 in a 20 x 8 kernel (10 block rows, 2 block columns), spread evenly: all
  // in block column 1, block rows 1, 3, 5, 7, 9; the index: starts {0, 0, 5} (u32), then the rows (u16)
  check_edits<sequential<input<20>, sparse_dense_block<20, 8, 40, 2, 4, relu>, dense<3>>>({
      {[](auto& d, auto& t) { set32(d, t.values_at, 0, 1); }, "block column 0 starts at block 1, not 0"},
      {[](auto& d, auto& t) { set32(d, t.values_at, 2, 6); }, "block column 1 ends at block 6, past the 5 blocks stored"},
      {[](auto& d, auto& t) {
         set32(d, t.values_at, 1, 4);
         set32(d, t.values_at, 2, 3);
       },
       "block column 1 ends at block 3, before it starts (4)"},
      {[](auto& d, auto& t) { set16(d, t.values_at + 12, 0, 10); },
       "block 0 (block column 1) has block row 10, but the layer has 10"},
      {[](auto& d, auto& t) { set16(d, t.values_at + 12, 1, get16(d, t.values_at + 12, 0)); },
       "block 1 (block column 1) has block row 1, not above the one before (1)"},
  });
}
