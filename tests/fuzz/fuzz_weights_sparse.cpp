// libFuzzer target: load_weights from an arbitrary file into networks with a sparse layer of
// every layout (bitmap, csc, rows, n:m 2:4 and 1:3, blocks 1x8 and 4x4), then predict a small batch with each
// model that accepted it, at batch sizes that take the kernels' gather and transposed paths.
// A bad file must throw weights_error (or io_error); anything else, and any out-of-bounds read
// by predict on a file that loaded, is a bug (load_weights checks every index, offset and count:
// io/weights.hpp, backends/cpu/sparse*.hpp validate).
#include <ctnn/ctnn.hpp>
#include <ctnn/layers/sparse_dense_block.hpp>
#include <ctnn/layers/sparse_dense_nm.hpp>
#include <ctnn/layers/sparse_dense_rows.hpp>

#include "../io/weights_file.hpp"

#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

namespace {
using bitmap_net = ctnn::sequential<ctnn::input<20>, ctnn::sparse_dense<20, 20, 60, ctnn::relu>, ctnn::dense<3>>;
using csc_net = ctnn::sequential<ctnn::input<20>, ctnn::sparse_dense_csc<20, 5, 25, ctnn::relu>, ctnn::dense<3>>;
using rows_net = ctnn::sequential<ctnn::input<20>, ctnn::sparse_dense_rows<20, 5, 25, ctnn::relu>, ctnn::dense<3>>;
using nm24_net = ctnn::sequential<ctnn::input<32>, ctnn::sparse_dense_nm<32, 4, 2, 4>, ctnn::dense<3>>;
using nm13_net = ctnn::sequential<ctnn::input<48>, ctnn::sparse_dense_nm<48, 4, 1, 3>, ctnn::dense<3>>;
// 1 x 8 blocks: 8 of 64 (index: 3 block column starts, u32, then 8 block rows, u16); 4 x 4: 6 of 32.
using block18_net = ctnn::sequential<ctnn::input<32>, ctnn::sparse_dense_block<32, 16, 64, 1, 8, ctnn::relu>, ctnn::dense<3>>;
using block44_net = ctnn::sequential<ctnn::input<32>, ctnn::sparse_dense_block<32, 16, 96, 4, 4, ctnn::relu>, ctnn::dense<3>>;

const std::filesystem::path& file() {
  static const std::filesystem::path p =
      std::filesystem::temp_directory_path() / ("ctnn_fuzz_weights_sparse_" + std::to_string(::getpid()) + ".ctnn");
  return p;
}

// Loads the file into a model of Net; when it loads, predicts 17 samples at batches 17 and 3.
template <class Net>
void load_and_predict() {
  static auto m = ctnn::make_model<Net>(1);
  try {
    ctnn::io::load_weights(m, file());
  } catch (const ctnn::io::weights_error&) {
    return;
  } catch (const ctnn::io_error&) {
    return;
  }
  static const std::vector<float> x = [] {
    std::vector<float> v(17 * Net::input_type::size);
    for (std::size_t i = 0; i < v.size(); ++i) v[i] = float(int(i % 7) - 3) / 4.0f;
    return v;
  }();
  (void)m.predict(x.data(), 17, 17);
  (void)m.predict(x.data(), 17, 3);
}

// The seeds: a valid file of each network, and files whose index was edited (the CRC
// recomputed) as the inputs that made predict read out of bounds before load_weights checked
// indices: a csc input row and a rows input index past the inputs, a csc column end and a
// bitmap chunk offset past the values.
template <class V>
void write_edited(const std::string& from, const std::string& to, std::size_t offset, V v) {
  auto d = weights_file::slurp(from);
  weights_file::set(d, weights_file::find(d, 0, "index").values_at + offset, v);
  weights_file::put_crc(d);
  weights_file::spit(to, d);
}
template <class Net>
void write_valid(const std::string& path) {
  auto m = ctnn::make_model<Net>(7);
  ctnn::io::save_weights(m, path);
}
void write_seeds(const std::string& dir) {
  write_valid<bitmap_net>(dir + "/valid_bitmap");
  write_valid<csc_net>(dir + "/valid_csc");
  write_valid<rows_net>(dir + "/valid_rows");
  write_valid<nm24_net>(dir + "/valid_nm_2_4");
  write_valid<nm13_net>(dir + "/valid_nm_1_3");
  write_valid<block18_net>(dir + "/valid_block_1_8");
  write_valid<block44_net>(dir + "/valid_block_4_4");
  // csc / rows index: 6 column starts (u32), then 25 input rows (u16)
  write_edited(dir + "/valid_csc", dir + "/regress_csc_row_past_inputs", 24 + 2 * 7, std::uint16_t(65535));
  write_edited(dir + "/valid_rows", dir + "/regress_rows_index_past_inputs", 24 + 2 * 3, std::uint16_t(40000));
  write_edited(dir + "/valid_csc", dir + "/regress_csc_column_end_past_values", 4 * 5, std::uint32_t(1u << 30));
  // bitmap index: 3 chunk offsets (u32), then 2 x 20 bitmaps (u16)
  write_edited(dir + "/valid_bitmap", dir + "/regress_bitmap_offset_past_values", 4 * 1, std::uint32_t(1u << 30));
  // 1:3 (16 groups, 2-bit positions, 16 bytes): the last value, unit 3's in inputs 45..47, gets
  // position 3, input 48, past the inputs (byte 15 holds positions 0, 1, 2, 0 of values 60..63)
  write_edited(dir + "/valid_nm_1_3", dir + "/regress_nm_position_past_inputs", 15, std::uint8_t(0xe4));
  // block index: a block row past the inputs (1 x 8: row 40000 of 32), a column start past the blocks
  // (4 x 4: 5 starts, u32, then 6 rows, u16)
  write_edited(dir + "/valid_block_1_8", dir + "/regress_block_row_past_inputs", 12, std::uint16_t(40000));
  write_edited(dir + "/valid_block_4_4", dir + "/regress_block_start_past_blocks", 4 * 2, std::uint32_t(1u << 30));
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  // CTNN_FUZZ_WRITE_SEED=dir writes the seed corpus (valid_* and regress_*) into dir first.
  static const bool seeded = [] {
    if (const char* dir = std::getenv("CTNN_FUZZ_WRITE_SEED")) write_seeds(dir);
    return true;
  }();
  (void)seeded;
  std::ofstream(file(), std::ios::binary).write(reinterpret_cast<const char*>(data), std::streamsize(size));
  load_and_predict<bitmap_net>();
  load_and_predict<csc_net>();
  load_and_predict<rows_net>();
  load_and_predict<nm24_net>();
  load_and_predict<nm13_net>();
  load_and_predict<block18_net>();
  load_and_predict<block44_net>();
  return 0;
}
