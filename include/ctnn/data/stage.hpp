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
// element's index in the pass. metered_stage<E> wraps every stage a dataset
// builds: it gives the stage its name (kind, position, label) and, while a
// tuner is active, measures the stage's own work (its time in next() less
// its upstream's, per thread) for the tuner's verdict.
#pragma once
#include <cstddef>
#include <cstdint>
#include <exception>
#include <memory>
#include <stdexcept>
#include <string>

#include "../core/narrow_std.hpp"
#include "autotune.hpp"
#include "element.hpp"

namespace ctnn::data {

class pipeline_error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct open_context {
  std::size_t epoch = 0;
  tuner* tune = nullptr;  // may be null: autotuned stages then keep their start values
  std::shared_ptr<stage_meter> meter{};  // the meter of the stage being opened (its name; a map adds f's time)
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

// Nanoseconds spent in metered stages called from this thread's current metered call (its
// upstream's time, which the caller subtracts from its own).
inline std::uint64_t& metered_child_ns() {
  thread_local std::uint64_t ns = 0;
  return ns;
}

template <class E>
class metered_iter final : public iterator<E> {
 public:
  metered_iter(iterator_ptr<E> it, std::shared_ptr<stage_meter> m, bool own_time)
      : it_(std::move(it)), m_(std::move(m)), own_time_(own_time) {}
  bool next(E& out) override {
    if (!m_->on.load(std::memory_order_relaxed)) return it_->next(out);
    std::uint64_t& child = metered_child_ns();
    const std::uint64_t saved = child;
    child = 0;
    const auto t0 = std::chrono::steady_clock::now();
    bool got = false;
    try {
      got = it_->next(out);
    } catch (...) {
      child = saved;
      throw;
    }
    const auto el = std::uint64_t(
        std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - t0).count());
    if (own_time_) m_->work_ns += el > child ? el - child : 0;
    child = saved + el;
    if (got) {
      ++count_;
      ++m_->elements;
      m_->bytes += element_bytes(out);
    } else if (!ended_) {
      ended_ = true;
      std::uint64_t seen = m_->pass_elements.load();
      while (count_ > seen && !m_->pass_elements.compare_exchange_weak(seen, count_)) {
      }
    }
    return got;
  }

 private:
  iterator_ptr<E> it_;
  std::shared_ptr<stage_meter> m_;
  bool own_time_, ended_ = false;
  std::uint64_t count_ = 0;
};
}  // namespace detail

// A stage with its name and meter. own_time: the stage's time in next() less its upstream's is
// its work (false for map, which adds f's time itself, and prefetch, whose next() only waits).
template <class E>
class metered_stage final : public stage<E> {
 public:
  metered_stage(stage_ptr<E> inner, stage_name name, cache_advice cache, bool own_time)
      : inner_(std::move(inner)), meter_(std::make_shared<stage_meter>(std::move(name), cache)), own_time_(own_time) {}
  iterator_ptr<E> open(const open_context& ctx) const override {
    open_context c = ctx;
    c.meter = meter_;
    auto it = inner_->open(c);  // opens upstream first: meters enlist source first
    if (!ctx.tune) return it;
    ctx.tune->enlist(meter_);
    return std::make_unique<detail::metered_iter<E>>(std::move(it), meter_, own_time_);
  }
  const stage_ptr<E>& inner() const { return inner_; }
  const stage_meter& meter() const { return *meter_; }

 private:
  stage_ptr<E> inner_;
  std::shared_ptr<stage_meter> meter_;
  bool own_time_;
};

}  // namespace ctnn::data
