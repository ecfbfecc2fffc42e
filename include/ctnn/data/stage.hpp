// ctnn/data/stage.hpp — what every pipeline stage implements.
//
// A stage<E> is an immutable description shared by every dataset built on it;
// open(ctx) starts one pass and returns an iterator<E>, whose next(out)
// stores the next element in out and returns false at the end of the pass.
// ctx carries the pass number (shuffles draw their order from it) and the
// tuner that autotuned stages enlist their knobs with. Iterators own their
// upstream iterator and any threads they start: destroying one (at the end of
// a pass, on break or while an exception unwinds) stops and joins them.
// pipeline_error reports a failure inside a stage, naming the stage and the
// element's index in the pass.
#pragma once
#include <cstddef>
#include <exception>
#include <memory>
#include <stdexcept>
#include <string>

#include "autotune.hpp"

namespace ctnn::data {

class pipeline_error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct open_context {
  std::size_t epoch = 0;
  tuner* tune = nullptr;  // may be null: autotuned stages then keep their start values
};

template <class E>
struct iterator {
  virtual ~iterator() = default;
  virtual bool next(E& out) = 0;
};
template <class E>
using iterator_ptr = std::unique_ptr<iterator<E>>;

template <class E>
struct stage {
  virtual ~stage() = default;
  virtual iterator_ptr<E> open(const open_context& ctx) const = 0;
};
template <class E>
using stage_ptr = std::shared_ptr<const stage<E>>;

namespace detail {
// Rethrows a user function's exception as a pipeline_error naming the stage and
// the element, with the original nested (std::rethrow_if_nested reaches it).
[[noreturn]] inline void rethrow_user_error(std::exception_ptr e, const std::string& where, std::size_t index,
                                            std::size_t epoch) {
  const std::string head =
      where + ": the function threw on element " + std::to_string(index) + " of pass " + std::to_string(epoch) + ": ";
  try {
    std::rethrow_exception(e);
  } catch (const std::exception& x) {
    std::throw_with_nested(pipeline_error(head + x.what()));
  } catch (...) {
    std::throw_with_nested(pipeline_error(head + "an exception that is not a std::exception"));
  }
}
}  // namespace detail

}  // namespace ctnn::data
