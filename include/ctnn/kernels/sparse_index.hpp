// ctnn/kernels/sparse_index.hpp — the typed index of a sparse dense layout, and the views its products take.
//
// A sparse layout keeps its index in one metadata buffer "index" (what a
// weights file holds: one uint8 tensor) made of typed fields stored back to
// back: packed_index<field<T, count>...> declares them. bytes is the
// buffer's extent; at<I>(meta) is field I as T* in a model's metadata block
// (the plan aligns it to 64 bytes; each field starts at a multiple of its
// alignment); read<I>(bytes) copies field I out of bytes of any alignment (a
// file's, for check_metadata). No layout computes a byte offset or casts.
// The views the products take, one type per layout (ops<B>::sparse_dense_forward
// and sparse_dense_backward dispatch on it):
//   bitmap_index   offsets [chunks + 1], 16-column bitmaps [chunks x K]  (layers/sparse_dense.hpp)
//   csc_index      column starts [N + 1], input rows [NNZ]               (layers/sparse_dense_csc.hpp)
//   rows_index     csc's storage, read by the per-unit kernels           (layers/sparse_dense_rows.hpp)
//   nm_index<Nk, M> the packed group positions                           (layers/sparse_dense_nm.hpp)
//   block_index<R, C> block column starts [N / C + 1], block rows [NB]     (layers/sparse_dense_block.hpp)
// The index decoding both backends share (host and device): bitmap_index::chunk_width,
// nm_code (the position of an N:M value).
#pragma once
#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <tuple>
#include <type_traits>
#include <vector>

#include "../config.hpp"

namespace ctnn::kernels {

// Count elements of T, one field of a packed index.
template <class T, std::size_t Count>
struct field {
  static_assert(std::is_unsigned_v<T>, "field: an index holds unsigned integers");
  using type = T;
  static constexpr std::size_t count = Count;
};

template <class... F>
struct packed_index {
  template <std::size_t I>
  using type = typename std::tuple_element_t<I, std::tuple<F...>>::type;

 private:
  static constexpr std::array<std::size_t, sizeof...(F) + 1> layout() {
    std::array<std::size_t, sizeof...(F) + 1> at{};
    const std::array<std::size_t, sizeof...(F)> size{sizeof(typename F::type)...}, count{F::count...};
    std::size_t n = 0;
    for (std::size_t i = 0; i < sizeof...(F); ++i) {
      n = (n + size[i] - 1) / size[i] * size[i];
      at[i] = n;
      n += size[i] * count[i];
    }
    at[sizeof...(F)] = n;
    return at;
  }
  static constexpr auto offsets = layout();

 public:
  static constexpr std::size_t bytes = offsets[sizeof...(F)];
  template <std::size_t I>
  static constexpr std::size_t offset = offsets[I];
  template <std::size_t I>
  static constexpr std::size_t count = std::tuple_element_t<I, std::tuple<F...>>::count;

  // Field I of a model's metadata block: the model's arena is storage from an
  // allocation function, whose integers exist there implicitly (C++20
  // [intro.object]/10), so the bytes are viewed, not converted.
  template <std::size_t I>
  static type<I>* at(std::byte* meta) noexcept {
    return static_cast<type<I>*>(static_cast<void*>(meta + offset<I>));
  }
  template <std::size_t I>
  static const type<I>* at(const std::byte* meta) noexcept {
    return static_cast<const type<I>*>(static_cast<const void*>(meta + offset<I>));
  }
  // Field I copied out of `bytes` bytes of any alignment (an index as a file holds it).
  template <std::size_t I>
  static std::vector<type<I>> read(const std::byte* bytes) {
    std::vector<type<I>> v(count<I>);
    std::memcpy(v.data(), bytes + offset<I>, v.size() * sizeof(type<I>));
    return v;
  }
};

// ---- the views the products take ----
struct bitmap_index {
  static constexpr std::size_t chunk_width = 16;  // columns per chunk
  const std::uint32_t* offsets;  // chunk c's first value; [chunks] the count used
  const std::uint16_t* bitmaps;  // [c * K + k]: which of chunk c's 16 columns input k feeds
};
struct csc_index {
  const std::uint32_t* starts;  // column j's values: [starts[j], starts[j + 1])
  const std::uint16_t* rows;    // each value's input row, ascending per column
};
struct rows_index {
  const std::uint32_t* starts;  // unit j's values: [starts[j], starts[j + 1])
  const std::uint16_t* inputs;  // each value's input, ascending per unit
};
template <std::size_t R, std::size_t C>
struct block_index {
  const std::uint32_t* starts;  // block column jb's blocks: [starts[jb], starts[jb + 1])
  const std::uint16_t* rows;    // each block's block row, ascending per block column
};
template <std::size_t Nk, std::size_t M>
struct nm_index {
  const std::uint8_t* codes;  // each value's position in its group of M inputs, bit_width(M - 1) bits
};
// The position of value p in its group: `bits` (<= 8) bits at bit p bits of
// codes[bytes], least significant first (a code spans at most two bytes).
CTNN_HOST_DEVICE inline unsigned nm_code(const std::uint8_t* codes, std::size_t bytes, std::size_t bits,
                                         std::size_t p) {
  const std::size_t at = p * bits, o = at >> 3;
  unsigned w = codes[o];
  if (o + 1 < bytes) w |= unsigned(codes[o + 1]) << 8;
  return (w >> (at & 7)) & ((1u << bits) - 1u);
}

}  // namespace ctnn::kernels
