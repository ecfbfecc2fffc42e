// ctnn/core/arena.hpp — one aligned heap allocation.
//
// An arena owns a zero-initialised, 64-byte-aligned block of `count` elements.
// Models keep parameters, gradients, non-trainable state, optimizer slots and
// activations in one arena laid out by their memory plan.
#pragma once
#include <cstddef>
#include <cstring>
#include <memory>
#include <new>
#include <utility>

namespace ctnn {

inline constexpr std::size_t arena_alignment = 64;

// Rounds n elements of T up so the next region stays 64-byte aligned.
template <class T>
constexpr std::size_t aligned_count(std::size_t n) noexcept {
  constexpr std::size_t per = arena_alignment / sizeof(T) ? arena_alignment / sizeof(T) : 1;
  return (n + per - 1) / per * per;
}

template <class T>
class arena {
 public:
  arena() = default;
  explicit arena(std::size_t count) : count_(count) {
    if (count_ == 0) return;
    data_ = static_cast<T*>(::operator new[](count_ * sizeof(T), std::align_val_t{arena_alignment}));
    std::memset(static_cast<void*>(data_), 0, count_ * sizeof(T));
  }
  arena(const arena& o) : arena(o.count_) {
    if (count_) std::memcpy(static_cast<void*>(data_), o.data_, count_ * sizeof(T));
  }
  arena(arena&& o) noexcept : data_(std::exchange(o.data_, nullptr)), count_(std::exchange(o.count_, 0)) {}
  arena& operator=(arena o) noexcept {
    std::swap(data_, o.data_);
    std::swap(count_, o.count_);
    return *this;
  }
  ~arena() {
    if (data_) ::operator delete[](data_, std::align_val_t{arena_alignment});
  }

  T* data() noexcept { return data_; }
  const T* data() const noexcept { return data_; }
  std::size_t size() const noexcept { return count_; }

 private:
  T* data_ = nullptr;
  std::size_t count_ = 0;
};

}  // namespace ctnn
