// ctnn/data/check_numerics.hpp — refuse input batches that hold NaN or infinity.
//
// check_numerics(ds) wraps any data::Dataset (in_memory, a batched pipeline)
// and yields the same batches; each batch's input values are scanned (one
// pass over the values the trainer is about to read, as TensorFlow's
// tf.debugging.check_numerics) and the first NaN or infinity throws
// ctnn::numeric_error "check_numerics: input value j of sample i of pass p
// (batch b, row r) is NaN". Samples are counted from 0 within the pass, in
// the order the dataset delivers them. Targets are not checked.
#pragma once
#include <cstddef>
#include <string>
#include <utility>

#include "../core/errors.hpp"
#include "../train/numerics.hpp"
#include "element.hpp"
#include "dataset.hpp"

namespace ctnn::data {

template <Dataset D>
class checked_dataset {
 public:
  using sample_shape = typename D::sample_shape;
  using value_type = typename D::value_type;
  using target_kind = typename D::target_kind;
  using batch_type = batch_of<typename D::sample_shape, target_kind, value_type>;

  explicit checked_dataset(D d) : d_(std::move(d)) {}

  class cursor {
   public:
    bool next(batch_type& b) {
      if (!up_.next(b)) return false;
      const std::size_t n = b.size * sample_shape::size;
      if (const std::size_t j = ctnn::detail::first_non_finite(b.x.data(), n); j != n) {
        const std::size_t row = j / sample_shape::size;
        throw numeric_error("check_numerics: input value " + std::to_string(j % sample_shape::size) + " of sample " +
                            std::to_string(seen_ + row) + " of pass " + std::to_string(pass_) + " (batch " +
                            std::to_string(batch_) + ", row " + std::to_string(row) + ") is " +
                            ctnn::detail::non_finite_name(double(b.x[j])));
      }
      seen_ += b.size;
      ++batch_;
      return true;
    }

   private:
    friend class checked_dataset;
    explicit cursor(decltype(std::declval<const D&>().open(std::size_t{})) up, std::size_t pass)
        : up_(std::move(up)), pass_(pass) {}
    decltype(std::declval<const D&>().open(std::size_t{})) up_;
    std::size_t pass_ = 0, seen_ = 0, batch_ = 0;
  };

  cursor open(std::size_t epoch) const { return cursor(d_.open(epoch), epoch); }
  std::size_t batches_per_epoch() const
    requires requires(const D& d) { d.batches_per_epoch(); }
  {
    return d_.batches_per_epoch();
  }
  const D& inner() const noexcept { return d_; }

 private:
  D d_;
};

template <Dataset D>
checked_dataset<D> check_numerics(D d) {
  return checked_dataset<D>(std::move(d));
}

}  // namespace ctnn::data
