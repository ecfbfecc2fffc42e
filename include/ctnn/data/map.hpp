// ctnn/data/map.hpp — the map stage: f applied to every element, on worker threads.
//
// map_stage<In, Out, F>: Out = f(In). With parallelism 1 f runs in the
// caller's thread. With parallelism p > 1 (or autotune) p workers each pull
// the next element from upstream (one at a time, under a lock), apply f and
// hand the result back; at most 2 * workers results wait ahead of the
// consumer. Results come out in input order unless order::any was asked for.
// With autotune it starts max(2, hardware cores, budget cores) workers and
// lets knob.value of them work; tuned to 1, f runs in the consumer's thread
// (as with parallelism 1) once the workers' results are delivered. The time
// spent in f is added to the knob (busy_ns), the tuner's measure of the
// loading cost, and to the stage's meter (stage_meter::work_ns) while a
// tuner is active, with or without autotune.
// If f throws on element i, the elements before i are delivered and then
// next() throws pipeline_error("map: the function threw on element i of pass
// e: ...") with f's exception nested; an upstream exception is rethrown as
// is, after the elements before it. Destroying the iterator stops and joins
// every worker (a worker inside f finishes that call first).
// A seeded map (dataset::map(f, random_seed{s}, ...), f(E, rng&)) gets, for
// element i of pass e, its own generator drawn from (s, e, i): the same
// numbers whichever worker runs it and however many there are, so random
// augmentation on parallel workers is reproducible; every pass differs.
#pragma once
#include <condition_variable>
#include <cstdint>
#include <cstddef>
#include <deque>
#include <exception>
#include <map>
#include <memory>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#include "../core/narrow_std.hpp"
#include "../core/rng.hpp"
#include "stage.hpp"

namespace ctnn::data {

enum class order { preserved, any };

// A map's parallelism: a number of workers, or autotune.
struct parallelism {
  std::size_t workers = 1;
  bool tuned = false;
  parallelism(std::size_t n = 1) : workers(n) {  // NOLINT: implicit on purpose
    if (n == 0) throw std::invalid_argument("map: parallelism must be >= 1 (or data::autotune), got 0");
  }
  parallelism(autotune_t) : tuned(true) {}  // NOLINT
};

// The seed of a map whose function takes a random source: map(f, random_seed{42}, ...).
struct random_seed {
  std::uint64_t value = 0;
};

namespace detail {

// f with its seed: called as f(element, generator of (seed, pass, index)).
template <class F>
struct seeded_fn {
  F f;
  std::uint64_t seed;
};
template <class F>
struct is_seeded : std::false_type {};
template <class F>
struct is_seeded<seeded_fn<F>> : std::true_type {};

// The generator of element `index` of pass `pass`.
inline rng map_rng(std::uint64_t seed, std::size_t pass, std::size_t index) {
  return rng::derive(rng::derive(seed, pass).next(), index);
}

template <class F, class In>
decltype(auto) call_map(const F& f, In&& in, std::size_t index, std::size_t pass) {
  if constexpr (is_seeded<F>::value) {
    rng g = map_rng(f.seed, pass, index);
    return f.f(std::forward<In>(in), g);
  } else {
    (void)index, (void)pass;
    return f(std::forward<In>(in));
  }
}

// Adds the time since t0 to the meter (the stage's own work), when it measures.
inline void add_work(const std::shared_ptr<stage_meter>& m, std::chrono::steady_clock::time_point t0) {
  m->work_ns += std::uint64_t(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - t0).count());
}

template <class In, class Out, class F>
class map_inline final : public iterator<Out> {
 public:
  map_inline(iterator_ptr<In> up, std::shared_ptr<const F> f, std::size_t epoch, std::shared_ptr<stage_meter> m)
      : up_(std::move(up)), f_(std::move(f)), epoch_(epoch), meter_(std::move(m)) {}
  bool next(Out& out) override {
    if (!up_->next(in_)) return false;
    const std::size_t i = index_++;
    const bool timed = meter_ && meter_->on.load(std::memory_order_relaxed);
    const auto t0 = timed ? std::chrono::steady_clock::now() : std::chrono::steady_clock::time_point{};
    try {
      out = call_map(*f_, std::move(in_), i, epoch_);
    } catch (...) {
      rethrow_user_error(std::current_exception(), "map", i, epoch_);
    }
    if (timed) add_work(meter_, t0);
    return true;
  }

 private:
  iterator_ptr<In> up_;
  std::shared_ptr<const F> f_;
  std::size_t epoch_, index_ = 0;
  std::shared_ptr<stage_meter> meter_;
  In in_{};
};

template <class In, class Out, class F>
class map_parallel final : public iterator<Out> {
  struct result {
    Out value{};
    std::exception_ptr error;
    bool from_f = false;  // error thrown by f (else by upstream)
    std::size_t index = 0;
  };

 public:
  map_parallel(iterator_ptr<In> up, std::shared_ptr<const F> f, std::size_t workers, std::shared_ptr<knob> k,
               order o, std::size_t epoch, std::shared_ptr<stage_meter> m)
      : up_(std::move(up)), f_(std::move(f)), knob_(std::move(k)), meter_(std::move(m)),
        ordered_(o == order::preserved), epoch_(epoch), workers_(workers), window_(2 * workers) {
    try {
      for (std::size_t i = 0; i < workers; ++i) threads_.emplace_back([this] { work(); });
    } catch (...) {
      stop();
      throw;
    }
  }
  ~map_parallel() override { stop(); }

  bool next(Out& out) override {
    std::unique_lock lk(m_);
    typename std::map<std::size_t, result>::iterator it;
    for (;;) {
      it = ordered_ ? ready_.find(delivered_) : ready_.begin();
      if (it != ready_.end()) break;
      if (delivered_ >= end_) return false;
      // Tuned to 1: f runs in this thread, as map(f, 1) would (no hand-off to a worker and back),
      // once the workers' results are all delivered.
      if (tuned_to_one() && reserved_ == 0 && !upstream_done_) {
        // The pull lock is taken before m_ is let go: a worker that reserves from here on (the knob
        // may be raised meanwhile) pulls after this element, so the order holds.
        std::unique_lock pl(pull_m_);
        lk.unlock();
        return next_inline(out, pl);
      }
      worker_cv_.notify_all();  // the knob may have been raised since they last looked
      // Tuned, the knob may drop to 1 after the check above, before a woken worker reserves: the
      // workers then start nothing, and the first to see it wakes this thread (work()), which
      // maps in its own thread. (Until 2026-12-02 this looked again every millisecond instead:
      // on 2 cores those wake-ups cost the tuned pipeline 1-3 % of its epoch.)
      consumer_waiting_ = true;
      consumer_cv_.wait(lk);
      consumer_waiting_ = false;
    }
    result r = std::move(it->second);
    ready_.erase(it);
    ++delivered_;
    --reserved_;
    lk.unlock();
    worker_cv_.notify_all();
    if (r.error) {
      if (r.from_f) rethrow_user_error(r.error, "map", r.index, epoch_);
      std::rethrow_exception(r.error);
    }
    out = std::move(r.value);
    return true;
  }

 private:
  bool tuned_to_one() const { return knob_ && knob_->value.load() <= 1; }
  // The knob's value (workers_ untuned), read once per decision: it moves without telling anyone,
  // so a decision that read it twice could see 2 and then 1 and wait although either alone says go.
  std::size_t knob_value() const { return knob_ ? knob_->value.load() : workers_; }
  // Workers that may be busy at knob value v.
  std::size_t limit(std::size_t v) const {
    return v <= 1 ? 0 : std::min(v, workers_);  // 1: the consumer's thread maps (next_inline)
  }
  // The consumer waits for a result no worker will make: nothing is in flight and the knob (at v)
  // says the consumer's thread maps (called under m_).
  bool consumer_stranded(std::size_t v) const { return knob_ && consumer_waiting_ && reserved_ == 0 && v <= 1; }

  // The next element mapped in the consumer's thread; only while no worker holds an element, and
  // called with pull_m_ held (pl).
  bool next_inline(Out& out, std::unique_lock<std::mutex>& pl) {
    In in{};
    bool got = false;
    std::exception_ptr up_error;
    const std::size_t seq = pulled_++;
    if (!upstream_finished_) {
      try {
        got = up_->next(in);
      } catch (...) {
        up_error = std::current_exception();
      }
      if (!got) upstream_finished_ = true;
    }
    pl.unlock();
    if (!got) {
      {
        std::lock_guard lk(m_);
        end_ = std::min(end_, seq);
        upstream_done_ = true;
      }
      worker_cv_.notify_all();
      if (up_error) std::rethrow_exception(up_error);
      return false;
    }
    const auto t0 = std::chrono::steady_clock::now();
    std::exception_ptr error;
    try {
      out = call_map(*f_, std::move(in), seq, epoch_);
    } catch (...) {
      error = std::current_exception();
    }
    const auto ns = std::uint64_t(
        std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - t0).count());
    knob_->busy_ns += ns;
    if (meter_ && meter_->on.load(std::memory_order_relaxed)) meter_->work_ns += ns;
    {
      std::lock_guard lk(m_);
      ++delivered_;
    }
    if (error) rethrow_user_error(error, "map", seq, epoch_);
    return true;
  }

  void work() {
    for (;;) {
      {
        std::unique_lock lk(m_);
        std::size_t v = 0;
        worker_cv_.wait(lk, [&] {
          v = knob_value();
          return stop_ || upstream_done_ || (reserved_ < window_ && busy_ < limit(v)) || consumer_stranded(v);
        });
        if (stop_ || upstream_done_) return;
        if (consumer_stranded(v)) {  // tuned to 1 while the consumer waited for a worker: it maps itself
          consumer_waiting_ = false;
          consumer_cv_.notify_all();
          continue;
        }
        ++reserved_;
        ++busy_;
      }
      In in{};
      bool got = false;
      std::exception_ptr up_error;
      std::size_t seq = 0;
      {
        std::lock_guard pl(pull_m_);
        seq = pulled_++;
        if (!upstream_finished_) {
          try {
            got = up_->next(in);
          } catch (...) {
            up_error = std::current_exception();
          }
          if (!got) upstream_finished_ = true;
        }
      }
      result r;
      r.index = seq;
      if (got) {
        const auto t0 = std::chrono::steady_clock::now();
        try {
          r.value = call_map(*f_, std::move(in), seq, epoch_);
        } catch (...) {
          r.error = std::current_exception();
          r.from_f = true;
        }
        const auto ns = std::uint64_t(
            std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - t0).count());
        if (knob_) knob_->busy_ns += ns;  // the tuner's measure of the loading cost
        if (meter_ && meter_->on.load(std::memory_order_relaxed)) meter_->work_ns += ns;
      }
      {
        std::lock_guard lk(m_);
        --busy_;
        if (got || up_error) {
          if (!r.error) r.error = std::move(up_error);  // moved under the lock
          ready_.emplace(seq, std::move(r));
          if (up_error) {
            end_ = std::min(end_, seq + 1);
            upstream_done_ = true;
          }
        } else {
          --reserved_;
          end_ = std::min(end_, seq);
          upstream_done_ = true;
        }
      }
      consumer_cv_.notify_all();
      worker_cv_.notify_all();
    }
  }

  void stop() {
    {
      std::lock_guard lk(m_);
      stop_ = true;
    }
    worker_cv_.notify_all();
    for (auto& t : threads_)
      if (t.joinable()) t.join();
  }

  iterator_ptr<In> up_;
  std::shared_ptr<const F> f_;
  std::shared_ptr<knob> knob_;
  std::shared_ptr<stage_meter> meter_;
  bool ordered_;
  std::size_t epoch_, workers_, window_;

  std::mutex pull_m_;  // guards up_, pulled_, upstream_finished_
  std::size_t pulled_ = 0;
  bool upstream_finished_ = false;

  std::mutex m_;  // guards everything below
  std::condition_variable worker_cv_, consumer_cv_;
  std::map<std::size_t, result> ready_;
  std::size_t reserved_ = 0, busy_ = 0, delivered_ = 0, end_ = std::size_t(-1);
  bool stop_ = false, upstream_done_ = false, consumer_waiting_ = false;
  std::vector<std::thread> threads_;  // last: started after everything above exists
};

}  // namespace detail

template <class In, class Out, class F>
class map_stage final : public stage<Out> {
 public:
  map_stage(stage_ptr<In> up, F f, parallelism p, order o, std::size_t tuned_workers)
      : up_(std::move(up)), f_(std::make_shared<const F>(std::move(f))), p_(p), order_(o) {
    if (p.tuned) knob_ = std::make_shared<knob>(knob::map_parallelism, 1, std::max<std::size_t>(1, tuned_workers));
  }
  iterator_ptr<Out> open(const open_context& ctx) const override {
    auto up = up_->open(ctx);
    if (knob_) {
      if (ctx.tune) ctx.tune->enlist(knob_, ctx.meter ? ctx.meter->name.str() : std::string());
      return std::make_unique<detail::map_parallel<In, Out, F>>(std::move(up), f_, knob_->max, knob_, order_, ctx.epoch,
                                                                ctx.meter);
    }
    if (p_.workers == 1)
      return std::make_unique<detail::map_inline<In, Out, F>>(std::move(up), f_, ctx.epoch, ctx.meter);
    return std::make_unique<detail::map_parallel<In, Out, F>>(std::move(up), f_, p_.workers, nullptr, order_, ctx.epoch,
                                                              ctx.meter);
  }
  const std::shared_ptr<knob>& tuned() const { return knob_; }

 private:
  stage_ptr<In> up_;
  std::shared_ptr<const F> f_;
  parallelism p_;
  order order_;
  std::shared_ptr<knob> knob_;
};

}  // namespace ctnn::data
