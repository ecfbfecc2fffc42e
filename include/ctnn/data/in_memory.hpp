// ctnn/data/in_memory.hpp — a dataset held in memory, batched and shuffled.
//
// in_memory<Shape, TargetKind, T>(x, y): n samples of Shape (x holds
// n * Shape::size values) with their targets. Configuration returns a new
// dataset sharing the same data:
//   .batch(n, drop_remainder = false)  mini-batch size (default 32)
//   .shuffle(seed)                     a fresh permutation every epoch,
//                                      drawn from (seed, epoch)
//   .take(n) / .skip(n)                the first n samples / all but them
// Sizes are checked when constructed (std::invalid_argument naming both); a
// batch size whose batch would not fit in 64 bits of bytes throws
// ctnn::size_error. A pass's buffers hold at most the samples there are.
// cursor::share_gather(true) (fit's loop and evaluate set it): the cursor copies a batch's samples over the
// CPU's thread pool (kernels::cpu::for_samples: one contiguous part of the batch a thread, from
// 2^14 values on; a copy, so the same batch on any thread count). Only for the thread that runs
// the model's steps: a copy from another thread (a prefetch stage) holding the pool would leave
// a step's product that starts meanwhile on one thread (docs/performance.md, "MLP training").
#pragma once
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "../core/errors.hpp"
#include "../core/separate.hpp"
#include "../core/rng.hpp"
#include "../core/shape.hpp"
#include "../core/targets.hpp"
#include "../backends/cpu/batch_split.hpp"
#include "element.hpp"

namespace ctnn::data {

namespace detail {
// in_memory's checks, for every sample shape and element type alike (not templates: the
// constructor of each dataset type keeps a compare and a call; cold).
CTNN_LAZY [[noreturn, gnu::cold, gnu::noinline]] CTNN_DECL void throw_in_memory_sizes(std::size_t values, std::size_t targets,
                                                                          std::size_t sample_size,
                                                                          std::size_t target_width,
                                                                          std::string (*shape)())
#if CTNN_DEFINITIONS
{
  if (values % sample_size != 0)
    throw std::invalid_argument("in_memory: " + std::to_string(values) +
                                " input values are not a whole number of samples of shape " + shape());
  const std::size_t n = values / sample_size;
  throw std::invalid_argument("in_memory: " + std::to_string(n) + " samples but " + std::to_string(targets) +
                              " target values (expected " + std::to_string(n * target_width) + ")");
}
#else
;
#endif
// in_memory::batch(n): n > 0, and a batch of n samples of sample_size values of
// value_bytes bytes has a size and bytes that fit in std::size_t.
CTNN_LAZY [[gnu::cold]] CTNN_DECL void check_in_memory_batch(std::size_t n, std::size_t sample_size, std::size_t value_bytes)
#if CTNN_DEFINITIONS
{
  if (n == 0) throw std::invalid_argument("in_memory::batch: the batch size must be > 0");
  checked_mul(checked_mul(n, sample_size, "in_memory::batch: the batch size times the sample size"), value_bytes,
              "in_memory::batch: the batch's bytes");
}
#else
;
#endif
}  // namespace detail

template <Shape S, class TargetKind, class T = float>
class in_memory {
 public:
  using sample_shape = S;
  using value_type = T;
  using target_kind = TargetKind;
  using target_type = target_element_t<TargetKind, T>;
  using batch_type = batch_of<S, TargetKind, T>;
  static constexpr std::size_t target_width = TargetKind::width;

 private:
  struct storage {
    std::vector<T> x;
    std::vector<target_type> y;
  };

 public:

  in_memory(std::vector<T> x, std::vector<target_type> y)
      : data_(std::make_shared<storage>(storage{std::move(x), std::move(y)})) {
    const std::size_t n = data_->x.size() / S::size;
    if (data_->x.size() % S::size != 0 || data_->y.size() != n * target_width)
      detail::throw_in_memory_sizes(data_->x.size(), data_->y.size(), S::size, target_width, &S::str);
    count_ = n;
  }

  in_memory batch(std::size_t n, bool drop_remainder = false) const {
    detail::check_in_memory_batch(n, S::size, sizeof(T));
    in_memory d = *this;
    d.batch_ = n;
    d.drop_remainder_ = drop_remainder;
    return d;
  }
  in_memory shuffle(std::uint64_t seed) const {
    in_memory d = *this;
    d.seed_ = seed;
    return d;
  }
  in_memory take(std::size_t n) const {
    in_memory d = *this;
    d.count_ = std::min(n, count_);
    return d;
  }
  in_memory skip(std::size_t n) const {
    in_memory d = *this;
    const std::size_t k = std::min(n, count_);
    d.first_ += k;
    d.count_ -= k;
    return d;
  }

  std::size_t size() const noexcept { return count_; }
  std::size_t batch_size() const noexcept { return batch_; }
  std::size_t batches_per_epoch() const noexcept {
    return count_ / batch_ + (!drop_remainder_ && count_ % batch_ != 0);
  }
  const T* features() const noexcept { return data_->x.data() + first_ * S::size; }
  const target_type* targets() const noexcept { return data_->y.data() + first_ * target_width; }

  // A pass over the data; it shares the samples and copies the settings, so
  // it stays valid after the dataset object it came from is gone.
  // (next and open: CTNN_OUTLINE, core/separate.hpp: a Fashion-MNIST program calls the compiled
  // part's instance, data/fashion_mnist.hpp)
  class cursor {
   public:
    // Copies the next batches over the CPU's thread pool (above); call from the steps' thread only.
    void share_gather(bool on) noexcept { share_ = on; }
    CTNN_OUTLINE bool next(batch_type& b) {
      const std::size_t remaining = count_ - pos_;
      if (remaining == 0 || (drop_remainder_ && remaining < batch_)) return false;
      const std::size_t n = std::min(batch_, remaining);
      if (b.x.size() < n * S::size) b.x.resize(n * S::size);
      if (b.y.size() < n * target_width) b.y.resize(n * target_width);
      // rows [i0, i1) of the batch; over the CPU's pool in contiguous parts (for_samples: the
      // caller the first, the worker the second, as the model's products split a batch's rows)
      auto rows = [&](std::size_t i0, std::size_t i1) {
        for (std::size_t i = i0; i < i1; ++i) {
          const std::size_t src = first_ + (order_.empty() ? pos_ + i : order_[pos_ + i]);
          std::copy_n(data_->x.data() + src * S::size, S::size, b.x.data() + i * S::size);
          std::copy_n(data_->y.data() + src * target_width, target_width, b.y.data() + i * target_width);
        }
      };
      if (share_) kernels::cpu::for_samples(n, S::size, rows);
      else rows(0, n);
      b.size = n;
      pos_ += n;
      return true;
    }

   private:
    friend class in_memory;
    std::shared_ptr<const storage> data_;
    std::vector<std::uint32_t> order_;
    std::size_t first_ = 0, count_ = 0, batch_ = 0, pos_ = 0;
    bool drop_remainder_ = false, share_ = false;
  };

  // One pass; with shuffle(seed), the order is a permutation drawn from (seed, epoch).
  CTNN_OUTLINE cursor open(std::size_t epoch) const {
    cursor c;
    c.data_ = data_;
    c.first_ = first_;
    c.count_ = count_;
    c.batch_ = batch_;
    c.drop_remainder_ = drop_remainder_;
    if (seed_) {
      c.order_.resize(count_);
      for (std::size_t i = 0; i < count_; ++i) c.order_[i] = std::uint32_t(i);  // 0, 1, ... (no <numeric>)
      rng g = rng::derive(*seed_, epoch);
      ctnn::shuffle(c.order_.begin(), count_, g);
    }
    return c;
  }

 private:
  std::shared_ptr<const storage> data_;
  std::size_t first_ = 0, count_ = 0, batch_ = 32;
  bool drop_remainder_ = false;
  std::optional<std::uint64_t> seed_;
};

}  // namespace ctnn::data
