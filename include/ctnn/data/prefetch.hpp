// ctnn/data/prefetch.hpp — the prefetch stage: a producer thread runs ahead of the consumer.
//
// prefetch_stage<E>(up, depth): one thread pulls elements from upstream into
// a queue holding at most `depth` of them, so loading the next elements
// overlaps with whatever the consumer does in between (a training step).
// With autotune the depth starts at 2 (one element ready while the next is
// made: a step that costs a little more than usual does not stall the
// consumer) and the tuner may lower it to 1 or raise it up to 64,
// within its memory budget (the knob records the size of one element). An
// upstream exception is delivered after the elements queued before it.
// Destroying the iterator stops the producer and joins it.
#pragma once
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <exception>
#include <memory>
#include <mutex>
#include <thread>
#include <utility>

#include "element.hpp"
#include "stage.hpp"

namespace ctnn::data {

namespace detail {

template <class E>
class prefetch_iter final : public iterator<E> {
 public:
  prefetch_iter(iterator_ptr<E> up, std::size_t depth, std::shared_ptr<knob> k)
      : up_(std::move(up)), depth_(depth), knob_(std::move(k)) {
    thread_ = std::thread([this] { produce(); });
  }
  ~prefetch_iter() override {
    {
      std::lock_guard lk(m_);
      stop_ = true;
    }
    producer_cv_.notify_all();
    thread_.join();
  }

  bool next(E& out) override {
    std::unique_lock lk(m_);
    consumer_cv_.wait(lk, [&] { return !queue_.empty() || done_; });
    if (queue_.empty()) {
      if (error_) std::rethrow_exception(std::exchange(error_, nullptr));
      return false;
    }
    out = std::move(queue_.front());
    queue_.pop_front();
    lk.unlock();
    producer_cv_.notify_one();
    return true;
  }

 private:
  std::size_t depth() const { return knob_ ? knob_->value.load() : depth_; }

  void produce() {
    for (;;) {
      {
        std::unique_lock lk(m_);
        producer_cv_.wait(lk, [&] { return stop_ || queue_.size() < depth(); });
        if (stop_) return;
      }
      E e{};
      bool got = false;
      std::exception_ptr err;
      try {
        got = up_->next(e);
      } catch (...) {
        err = std::current_exception();
      }
      if (got && knob_) knob_->unit_bytes = element_bytes(e);
      {
        std::lock_guard lk(m_);
        if (got) queue_.push_back(std::move(e));
        else {
          error_ = std::move(err);  // released under the lock: the consumer owns it from here
          done_ = true;
        }
      }
      consumer_cv_.notify_one();
      if (!got) return;
    }
  }

  iterator_ptr<E> up_;
  std::size_t depth_;
  std::shared_ptr<knob> knob_;
  std::mutex m_;
  std::condition_variable producer_cv_, consumer_cv_;
  std::deque<E> queue_;
  std::exception_ptr error_;
  bool stop_ = false, done_ = false;
  std::thread thread_;  // last: started once everything above exists
};

}  // namespace detail

template <class E>
class prefetch_stage final : public stage<E> {
 public:
  static constexpr std::size_t max_tuned_depth = 64;
  static constexpr std::size_t tuned_start_depth = 2;
  prefetch_stage(stage_ptr<E> up, std::size_t depth) : up_(std::move(up)), depth_(depth) {
    if (depth == 0) throw std::invalid_argument("prefetch: the depth must be >= 1 (or data::autotune), got 0");
  }
  prefetch_stage(stage_ptr<E> up, autotune_t)
      : up_(std::move(up)),
        depth_(tuned_start_depth),
        knob_(std::make_shared<knob>(knob::prefetch_depth, tuned_start_depth, max_tuned_depth)) {}
  iterator_ptr<E> open(const open_context& ctx) const override {
    if (knob_ && ctx.tune) ctx.tune->enlist(knob_, ctx.meter ? ctx.meter->name.str() : std::string());
    return std::make_unique<detail::prefetch_iter<E>>(up_->open(ctx), depth_, knob_);
  }
  const std::shared_ptr<knob>& tuned() const { return knob_; }

 private:
  stage_ptr<E> up_;
  std::size_t depth_;
  std::shared_ptr<knob> knob_;
};

}  // namespace ctnn::data
