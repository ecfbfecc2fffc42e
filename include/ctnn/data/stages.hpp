// ctnn/data/stages.hpp — the serial pipeline stages.
//
// tensors_stage<S, K, T>: samples from values held in memory (shared, not copied).
// filter_stage<E, P>: the elements for which p(e) is true.
// shuffle_stage<E>: a buffer of n elements; each output is drawn uniformly from
//   it and replaced by the next upstream element (tf.data's shuffle), the draws
//   coming from rng::derive(seed, pass), so every pass has a fresh order and
//   the same seed gives the same orders. n >= the dataset size is a full shuffle.
// batch_stage<S, K, T>: n samples -> one batch_of; the last, smaller batch is
//   dropped with drop_remainder. Its buffers hold what arrives, not n samples
//   up front; an n whose batch would not fit in 64 bits of bytes throws
//   ctnn::size_error (a std::length_error) when the stage is made.
// repeat_stage<E>: `count` passes of upstream (count = forever: endless); each
//   inner pass gets its own pass number, so shuffles below differ per pass.
// take_stage / skip_stage: the first n elements / all but the first n.
// shard_stage<E>: of each pass, the elements i (0-based) with i % count == index (tf.data's
//   shard); count 0 or index >= count throws std::invalid_argument naming both.
#pragma once
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "../core/errors.hpp"
#include "../core/rng.hpp"
#include "element.hpp"
#include "stage.hpp"

namespace ctnn::data {

inline constexpr std::size_t forever = std::size_t(-1);

template <Shape S, class K, class T>
class tensors_stage final : public stage<sample<S, K, T>> {
  using E = sample<S, K, T>;
  using Y = typename E::target_type;
  struct store {
    std::vector<T> x;
    std::vector<Y> y;
  };
  struct iter final : iterator<E> {
    std::shared_ptr<const store> d;
    std::size_t i = 0, n = 0;
    bool next(E& out) override {
      if (i == n) return false;
      out.x.assign(d->x.begin() + std::ptrdiff_t(i * S::size), d->x.begin() + std::ptrdiff_t((i + 1) * S::size));
      out.y.assign(d->y.begin() + std::ptrdiff_t(i * K::width), d->y.begin() + std::ptrdiff_t((i + 1) * K::width));
      ++i;
      return true;
    }
  };

 public:
  tensors_stage(std::vector<T> x, std::vector<Y> y) : d_(std::make_shared<store>(store{std::move(x), std::move(y)})) {
    if (d_->x.size() % S::size != 0)
      throw std::invalid_argument("from_tensors: " + std::to_string(d_->x.size()) +
                                  " input values are not a whole number of samples of shape " + S::str());
    n_ = d_->x.size() / S::size;
    if (d_->y.size() != n_ * K::width)
      throw std::invalid_argument("from_tensors: " + std::to_string(n_) + " samples but " +
                                  std::to_string(d_->y.size()) + " target values (expected " +
                                  std::to_string(n_ * K::width) + ")");
  }
  iterator_ptr<E> open(const open_context&) const override {
    auto it = std::make_unique<iter>();
    it->d = d_;
    it->n = n_;
    return it;
  }
  std::size_t size() const { return n_; }

 private:
  std::shared_ptr<const store> d_;
  std::size_t n_ = 0;
};

template <class E, class P>
class filter_stage final : public stage<E> {
  struct iter final : iterator<E> {
    iterator_ptr<E> up;
    std::shared_ptr<const P> p;
    std::size_t index = 0, epoch = 0;
    bool next(E& out) override {
      while (up->next(out)) {
        bool keep = false;
        try {
          keep = (*p)(static_cast<const E&>(out));
        } catch (...) {
          detail::rethrow_user_error(std::current_exception(), "filter", index, epoch);
        }
        ++index;
        if (keep) return true;
      }
      return false;
    }
  };

 public:
  filter_stage(stage_ptr<E> up, P p) : up_(std::move(up)), p_(std::make_shared<const P>(std::move(p))) {}
  iterator_ptr<E> open(const open_context& ctx) const override {
    auto it = std::make_unique<iter>();
    it->up = up_->open(ctx);
    it->p = p_;
    it->epoch = ctx.epoch;
    return it;
  }

 private:
  stage_ptr<E> up_;
  std::shared_ptr<const P> p_;
};

template <class E>
class shuffle_stage final : public stage<E> {
  struct iter final : iterator<E> {
    iterator_ptr<E> up;
    std::vector<E> buf;
    rng g{0};
    bool up_done = false;
    bool next(E& out) override {
      if (buf.empty()) return false;
      const std::size_t j = std::size_t(g.below(buf.size()));
      out = std::move(buf[j]);
      E e{};
      if (!up_done && up->next(e)) {
        buf[j] = std::move(e);
      } else {
        up_done = true;
        buf[j] = std::move(buf.back());
        buf.pop_back();
      }
      return true;
    }
  };

 public:
  shuffle_stage(stage_ptr<E> up, std::size_t buffer, std::uint64_t seed) : up_(std::move(up)), n_(buffer), seed_(seed) {
    if (buffer == 0) throw std::invalid_argument("shuffle: the buffer size must be >= 1, got 0");
  }
  iterator_ptr<E> open(const open_context& ctx) const override {
    auto it = std::make_unique<iter>();
    it->up = up_->open(ctx);
    it->g = rng::derive(seed_, ctx.epoch);
    for (std::size_t i = 0; i < n_; ++i) {
      E e{};
      if (!it->up->next(e)) {
        it->up_done = true;
        break;
      }
      it->buf.push_back(std::move(e));
    }
    return it;
  }

 private:
  stage_ptr<E> up_;
  std::size_t n_;
  std::uint64_t seed_;
};

template <Shape S, class K, class T>
class batch_stage final : public stage<batch_of<S, K, T>> {
  using In = sample<S, K, T>;
  using Out = batch_of<S, K, T>;
  struct iter final : iterator<Out> {
    iterator_ptr<In> up;
    std::size_t n = 0;
    bool drop = false;
    In s;
    bool next(Out& out) override {
      // The buffers grow with the samples that arrive (their capacity is kept
      // between batches): batch(10'000'000) over 100 samples holds 100.
      out.x.clear();
      out.y.clear();
      std::size_t k = 0;
      for (; k < n && up->next(s); ++k) {
        if (s.x.size() != S::size || s.y.size() != K::width)
          throw pipeline_error("batch: a sample holds " + std::to_string(s.x.size()) + " values and " +
                               std::to_string(s.y.size()) + " targets, but its type says " +
                               std::to_string(S::size) + " and " + std::to_string(K::width) +
                               " (did a map resize it?)");
        out.x.insert(out.x.end(), s.x.begin(), s.x.end());
        out.y.insert(out.y.end(), s.y.begin(), s.y.end());
      }
      if (k == 0 || (drop && k < n)) return false;
      out.size = k;
      return true;
    }
  };

 public:
  batch_stage(stage_ptr<In> up, std::size_t n, bool drop_remainder) : up_(std::move(up)), n_(n), drop_(drop_remainder) {
    if (n == 0) throw std::invalid_argument("batch: the batch size must be >= 1, got 0");
    // A batch's values must be countable in bytes: refuse a size that would wrap.
    checked_mul(checked_mul(n, S::size, "batch: the batch size times the sample size"), sizeof(T),
                "batch: the batch's bytes");
  }
  iterator_ptr<Out> open(const open_context& ctx) const override {
    auto it = std::make_unique<iter>();
    it->up = up_->open(ctx);
    it->n = n_;
    it->drop = drop_;
    return it;
  }

 private:
  stage_ptr<In> up_;
  std::size_t n_;
  bool drop_;
};

template <class E>
class repeat_stage final : public stage<E> {
  struct iter final : iterator<E> {
    std::shared_ptr<const stage<E>> up_stage;
    iterator_ptr<E> up;
    open_context ctx;
    std::size_t outer = 0, pass = 0, count = 0;
    bool got_any = false;
    bool next(E& out) override {
      for (;;) {
        if (up->next(out)) {
          got_any = true;
          return true;
        }
        if (++pass >= count) return false;
        if (!got_any) return false;  // an empty pass: repeating it forever would never end
        got_any = false;
        up.reset();
        ctx.epoch = inner_epoch(outer, pass);
        up = up_stage->open(ctx);
      }
    }
  };
  static std::size_t inner_epoch(std::size_t outer, std::size_t pass) {
    return pass == 0 ? outer : std::size_t(rng::derive(outer, pass).next());
  }

 public:
  repeat_stage(stage_ptr<E> up, std::size_t count) : up_(std::move(up)), count_(count) {}
  iterator_ptr<E> open(const open_context& ctx) const override {
    auto it = std::make_unique<iter>();
    it->up_stage = up_;
    it->ctx = ctx;
    it->outer = ctx.epoch;
    it->count = count_;
    if (count_ == 0) {
      struct none final : iterator<E> {
        bool next(E&) override { return false; }
      };
      return std::make_unique<none>();
    }
    it->up = up_->open(ctx);
    return it;
  }

 private:
  stage_ptr<E> up_;
  std::size_t count_;
};

template <class E>
class take_stage final : public stage<E> {
  struct iter final : iterator<E> {
    iterator_ptr<E> up;
    std::size_t left = 0;
    bool next(E& out) override {
      if (left == 0) return false;
      if (!up->next(out)) return false;
      --left;
      return true;
    }
  };

 public:
  take_stage(stage_ptr<E> up, std::size_t n) : up_(std::move(up)), n_(n) {}
  iterator_ptr<E> open(const open_context& ctx) const override {
    auto it = std::make_unique<iter>();
    it->up = up_->open(ctx);
    it->left = n_;
    return it;
  }

 private:
  stage_ptr<E> up_;
  std::size_t n_;
};

template <class E>
class skip_stage final : public stage<E> {
  struct iter final : iterator<E> {
    iterator_ptr<E> up;
    std::size_t skip = 0;
    bool next(E& out) override {
      for (; skip > 0; --skip)
        if (!up->next(out)) return false;
      return up->next(out);
    }
  };

 public:
  skip_stage(stage_ptr<E> up, std::size_t n) : up_(std::move(up)), n_(n) {}
  iterator_ptr<E> open(const open_context& ctx) const override {
    auto it = std::make_unique<iter>();
    it->up = up_->open(ctx);
    it->skip = n_;
    return it;
  }

 private:
  stage_ptr<E> up_;
  std::size_t n_;
};

template <class E>
class shard_stage final : public stage<E> {
  struct iter final : iterator<E> {
    iterator_ptr<E> up;
    std::size_t count = 1, index = 0, i = 0;
    bool next(E& out) override {
      while (up->next(out))
        if (i++ % count == index) return true;
      return false;
    }
  };

 public:
  shard_stage(stage_ptr<E> up, std::size_t count, std::size_t index) : up_(std::move(up)), count_(count), index_(index) {
    if (count == 0) throw std::invalid_argument("shard: count must be >= 1, got 0 (index " + std::to_string(index) + ")");
    if (index >= count)
      throw std::invalid_argument("shard: index " + std::to_string(index) + " is not below count " +
                                  std::to_string(count) + " (index must be in [0, count))");
  }
  iterator_ptr<E> open(const open_context& ctx) const override {
    auto it = std::make_unique<iter>();
    it->up = up_->open(ctx);
    it->count = count_;
    it->index = index_;
    return it;
  }

 private:
  stage_ptr<E> up_;
  std::size_t count_, index_;
};

}  // namespace ctnn::data
