// kernels/sparse_index.hpp: packed_index lays its fields out back to back, each at a
// multiple of its alignment; at<I> views a field in a metadata block and read<I>
// copies it out of bytes of any alignment.
#include <doctest/doctest.h>

#include <ctnn/kernels/sparse_index.hpp>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

using namespace ctnn::kernels;

using idx = packed_index<field<std::uint8_t, 3>, field<std::uint32_t, 2>, field<std::uint16_t, 3>>;
static_assert(idx::offset<0> == 0);
static_assert(idx::offset<1> == 4);   // 3 bytes, aligned up to 4
static_assert(idx::offset<2> == 12);  // 4 + 2 * 4
static_assert(idx::bytes == 18);
static_assert(idx::count<2> == 3);

TEST_CASE("packed_index: at<I> views each field, read<I> copies it from unaligned bytes") {
  alignas(64) std::byte meta[64]{};
  idx::at<0>(meta)[2] = 7;
  idx::at<1>(meta)[1] = 0xdeadbeefu;
  idx::at<2>(meta)[0] = 513;
  std::vector<std::byte> file(idx::bytes + 1);
  std::memcpy(file.data() + 1, meta, idx::bytes);  // one byte in: nothing aligned
  const auto a = idx::read<0>(file.data() + 1);
  const auto b = idx::read<1>(file.data() + 1);
  const auto c = idx::read<2>(file.data() + 1);
  CHECK(a == std::vector<std::uint8_t>{0, 0, 7});
  CHECK(b == std::vector<std::uint32_t>{0, 0xdeadbeefu});
  CHECK(c == std::vector<std::uint16_t>{513, 0, 0});
  const std::byte* cm = meta;
  CHECK(idx::at<1>(cm)[1] == 0xdeadbeefu);
}
