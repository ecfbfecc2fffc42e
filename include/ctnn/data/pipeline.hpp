// ctnn/data/pipeline.hpp — data::dataset<E>: a typed, concurrent input pipeline (tf.data style).
//
// A dataset<E> yields elements of type E: sample<S, K, T> from a source
// (from_tensors, from(in_memory), from_idx, from_csv), batch_of<S, K, T>
// after .batch(n). Every method returns a new dataset sharing the stages
// before it: map(f, parallelism, order), filter(p), shuffle(buffer, seed),
// batch(n, drop_remainder), cache() / cache(path), prefetch(n | autotune),
// repeat(count), take(n), skip(n), shard(count, index); named(label) labels the last stage.
// After shard(count, index), shuffle and map(f, random_seed) draw from shard_seed(seed):
// each shard its own stream (docs/distributed.md); before it, every shard the same. Each
// stage has a name by its kind and position ("map #2 (stage 3)", the source
// being stage 1) or its label ("map 'parse' (stage 3)"), which the tuner's
// explanations use. A dataset of batches satisfies
// data::Dataset, so fit() takes it and checks its sample shape, target kind
// and value type against the network at compile time. open(pass) starts one
// pass; its cursor reports step timings to the dataset's tuner when a stage
// is autotuned. Destroying a cursor stops and joins every thread of the pass.
#pragma once
#include <time.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

#include "../core/narrow_std.hpp"
#include "cache.hpp"
#include "csv.hpp"
#include "element.hpp"
#include "idx_files.hpp"
#include "in_memory.hpp"
#include "map.hpp"
#include "prefetch.hpp"
#include "stage.hpp"
#include "stages.hpp"

namespace ctnn::data {

namespace detail {
template <class E>
struct dataset_types {};
template <class S, class K, class T>
struct dataset_types<batch_of<S, K, T>> {
  using sample_shape = S;
  using target_kind = K;
  using value_type = T;
};

inline double process_cpu_seconds() {
  timespec ts{};
  ::clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return double(ts.tv_sec) + 1e-9 * double(ts.tv_nsec);
}

template <Shape S, class K, class T>
class in_memory_stage final : public stage<sample<S, K, T>> {
  using E = sample<S, K, T>;
  struct iter final : iterator<E> {
    in_memory<S, K, T> d;
    std::size_t i = 0;
    explicit iter(const in_memory<S, K, T>& src) : d(src) {}
    bool next(E& out) override {
      if (i == d.size()) return false;
      out.x.assign(d.features() + i * S::size, d.features() + (i + 1) * S::size);
      out.y.assign(d.targets() + i * K::width, d.targets() + (i + 1) * K::width);
      ++i;
      return true;
    }
  };

 public:
  explicit in_memory_stage(in_memory<S, K, T> d) : d_(std::move(d)) {}
  iterator_ptr<E> open(const open_context&) const override { return std::make_unique<iter>(d_); }

 private:
  in_memory<S, K, T> d_;
};
}  // namespace detail

template <class E>
class dataset : public detail::dataset_types<E> {
 public:
  using element_type = E;

  // A dataset whose source is s (named "source #1 (stage 1)" in the tuner's explanations).
  explicit dataset(stage_ptr<E> s, std::shared_ptr<tuner> t = nullptr)
      : dataset(std::move(s), std::move(t), {}, "source", cache_advice::no, true) {}

  class cursor {
   public:
    bool next(E& out) {
      if (!timed_) return it_->next(out);
      const auto t0 = clock::now();
      const bool got = it_->next(out);
      const auto t1 = clock::now();
      const double cpu = detail::process_cpu_seconds();
      if (have_last_)
        tuner_->observe(std::chrono::duration<double>(t1 - t0).count(), std::chrono::duration<double>(t1 - last_).count(),
                        cpu - last_cpu_);
      last_ = t1;
      last_cpu_ = cpu;
      have_last_ = true;
      return got;
    }

   private:
    friend class dataset;
    using clock = std::chrono::steady_clock;
    std::shared_ptr<tuner> tuner_;  // before it_: outlives the threads, which may enlist knobs until joined
    iterator_ptr<E> it_;
    bool timed_ = false, have_last_ = false;
    clock::time_point last_{};
    double last_cpu_ = 0;
  };

  cursor open(std::size_t pass) const {
    cursor c;
    c.it_ = stage_->open(open_context{pass, tuner_.get()});
    c.tuner_ = tuner_;
    c.timed_ = tuner_->active();
    if (c.timed_) tuner_->begin_pass(pass);
    return c;
  }

  template <class F>
    requires std::invocable<const F&, E&&>
  auto map(F f, parallelism p = 1, order o = order::preserved) const {
    using R = std::remove_cvref_t<std::invoke_result_t<const F&, E&&>>;
    static_assert(std::is_default_constructible_v<R> && std::is_move_assignable_v<R>,
                  "map: the function must return a default-constructible, movable element");
    const std::size_t tuned_workers = std::max<std::size_t>(
        {std::size_t(2), std::size_t(std::thread::hardware_concurrency()), tuner_->budget().cores});
    return with_shard(dataset<R>(std::make_shared<map_stage<E, R, F>>(stage_, std::move(f), p, o, tuned_workers), tuner_,
                                 kinds_, "map", cache_advice::if_deterministic, false));
  }
  // f(E, rng&) with a generator per element drawn from (seed, pass, element
  // index): reproducible with any parallelism and order (data/map.hpp).
  template <class F>
    requires std::invocable<const F&, E&&, rng&>
  auto map(F f, random_seed seed, parallelism p = 1, order o = order::preserved) const {
    using R = std::remove_cvref_t<std::invoke_result_t<const F&, E&&, rng&>>;
    static_assert(std::is_default_constructible_v<R> && std::is_move_assignable_v<R>,
                  "map: the function must return a default-constructible, movable element");
    using G = detail::seeded_fn<F>;
    const std::size_t tuned_workers = std::max<std::size_t>(
        {std::size_t(2), std::size_t(std::thread::hardware_concurrency()), tuner_->budget().cores});
    return with_shard(dataset<R>(std::make_shared<map_stage<E, R, G>>(stage_, G{std::move(f), shard_seed(seed.value)}, p, o,
                                                                     tuned_workers),
                                 tuner_, kinds_, "map", cache_advice::no, false));  // random augmentation: not to be cached
  }
  template <class P>
    requires std::predicate<const P&, const E&>
  dataset filter(P p) const {
    return next(std::make_shared<filter_stage<E, P>>(stage_, std::move(p)), "filter");
  }
  dataset shuffle(std::size_t buffer, std::uint64_t seed) const {
    return next(std::make_shared<shuffle_stage<E>>(stage_, buffer, shard_seed(seed)), "shuffle");
  }
  // Of each pass, the elements i (0-based) with i % count == index: rank `index` of `count`
  // workers reads its part (tf.data's shard). Shards compose: shard(a, i).shard(b, j) is
  // shard(a * b, i + a * j). count 0 or index >= count throws std::invalid_argument.
  dataset shard(std::size_t count, std::size_t index) const {
    dataset r = next(std::make_shared<shard_stage<E>>(stage_, count, index), "shard");
    r.shard_index_ = shard_index_ + shard_count_ * index;
    r.shard_count_ = shard_count_ * count;
    return r;
  }
  // The seed a shuffle or a seeded map after shard(count, index) uses for `seed`: seed itself
  // when the pipeline has no shard (or count 1), else rng::derive(seed, tag).next() with
  // tag = 2^32 * count + index: one stream per shard, reproducible from (seed, count, index).
  std::uint64_t shard_seed(std::uint64_t seed) const noexcept {
    if (shard_count_ == 1) return seed;
    return rng::derive(seed, (std::uint64_t(shard_count_) << 32) + std::uint64_t(shard_index_)).next();
  }
  std::size_t shard_count() const noexcept { return shard_count_; }
  std::size_t shard_index() const noexcept { return shard_index_; }
  auto batch(std::size_t n, bool drop_remainder = false) const
    requires Sample<E>
  {
    using S = typename E::sample_shape;
    using K = typename E::target_kind;
    using T = typename E::value_type;
    return with_shard(dataset<batch_of<S, K, T>>(std::make_shared<batch_stage<S, K, T>>(stage_, n, drop_remainder), tuner_,
                                                 kinds_, "batch", cache_advice::no, true));
  }
  dataset cache() const { return next(std::make_shared<memory_cache_stage<E>>(stage_), "cache"); }
  dataset cache(const std::filesystem::path& file) const
    requires Sample<E> || Batch<E>
  {
    return next(std::make_shared<file_cache_stage<E>>(stage_, file), "cache");
  }
  dataset prefetch(std::size_t depth) const {
    return next(std::make_shared<prefetch_stage<E>>(stage_, depth), "prefetch", false);
  }
  dataset prefetch(autotune_t a) const {
    return next(std::make_shared<prefetch_stage<E>>(stage_, a), "prefetch", false);  // its next() only waits
  }
  dataset repeat(std::size_t count = forever) const {
    return next(std::make_shared<repeat_stage<E>>(stage_, count), "repeat");
  }
  dataset take(std::size_t n) const { return next(std::make_shared<take_stage<E>>(stage_, n), "take"); }
  dataset skip(std::size_t n) const { return next(std::make_shared<skip_stage<E>>(stage_, n), "skip"); }

  // The same pipeline, its last stage labelled: the tuner's explanations call it
  // "map 'parse' (stage 2)" instead of "map #1 (stage 2)". The stage itself is shared.
  dataset named(std::string label) const {
    dataset r = *this;
    r.name_.label = std::move(label);
    r.stage_ = std::make_shared<metered_stage<E>>(raw_, r.name_, cache_, own_time_);
    return r;
  }
  // The name of the last stage ("map #1 (stage 2)", "from_csv 'train' (stage 1)").
  std::string last_stage_name() const { return name_.str(); }

  // A dataset whose source is s, of this kind ("from_csv") for the tuner's explanations; `cache`
  // says whether cache() after it saves work (a reader that parses or decodes files: yes).
  static dataset source(stage_ptr<E> s, std::string kind, cache_advice cache = cache_advice::no) {
    return dataset(std::move(s), nullptr, {}, std::move(kind), cache, true);
  }

  // The same pipeline with its own tuner and this budget (cores for map workers,
  // bytes for prefetch buffers, where verdicts are printed).
  dataset with_budget(const autotune_budget& b) const {
    check_budget(b, "with_budget");
    dataset r = *this;
    r.tuner_ = std::make_shared<tuner>(b);
    return r;
  }
  const tuner& autotuner() const { return *tuner_; }

 private:
  template <class>
  friend class dataset;

  // The stage `raw` after the stages named in `before` (their kinds, source first).
  dataset(stage_ptr<E> raw, std::shared_ptr<tuner> t, std::vector<std::string> before, std::string kind,
          cache_advice cache, bool own_time)
      : raw_(std::move(raw)), tuner_(t ? std::move(t) : std::make_shared<tuner>()), kinds_(std::move(before)),
        cache_(cache), own_time_(own_time) {
    name_.ordinal = 1 + std::size_t(std::count(kinds_.begin(), kinds_.end(), kind));
    name_.position = kinds_.size() + 1;
    name_.kind = kind;
    kinds_.push_back(std::move(kind));
    stage_ = std::make_shared<metered_stage<E>>(raw_, name_, cache_, own_time_);
  }
  dataset next(stage_ptr<E> raw, std::string kind, bool own_time = true) const {
    return with_shard(dataset(std::move(raw), tuner_, kinds_, std::move(kind), cache_advice::no, own_time));
  }
  // d (a dataset made from this one's stages) with this one's shard.
  template <class D>
  D with_shard(D d) const {
    d.shard_count_ = shard_count_;
    d.shard_index_ = shard_index_;
    return d;
  }

  stage_ptr<E> raw_;    // the last stage
  stage_ptr<E> stage_;  // the same, named and metered: what later stages read from
  std::shared_ptr<tuner> tuner_;
  std::vector<std::string> kinds_;  // the kind of every stage, source first
  data::stage_name name_;
  cache_advice cache_ = cache_advice::no;
  bool own_time_ = true;
  std::size_t shard_count_ = 1, shard_index_ = 0;  // the shards before the last stage, composed
};

// ---- sources ----

template <Shape S, class K = sparse_labels, class T = float>
dataset<sample<S, K, T>> from_tensors(std::vector<T> x, std::vector<target_element_t<K, T>> y) {
  return dataset<sample<S, K, T>>::source(std::make_shared<tensors_stage<S, K, T>>(std::move(x), std::move(y)),
                                          "from_tensors");
}

// The samples of an in_memory dataset (after its take/skip; its batch and shuffle settings do not apply).
template <Shape S, class K, class T>
dataset<sample<S, K, T>> from(const in_memory<S, K, T>& d) {
  return dataset<sample<S, K, T>>::source(std::make_shared<detail::in_memory_stage<S, K, T>>(d), "from");
}

template <Shape S, class K = sparse_labels, class T = float>
dataset<sample<S, K, T>> from_idx(std::vector<idx_shard> shards, double scale = 1.0) {
  if (shards.empty()) throw std::invalid_argument("from_idx: no file given");
  // reads and decodes (gunzip) the files on every pass: cache() after it saves that
  return dataset<sample<S, K, T>>::source(std::make_shared<idx_files_stage<S, K, T>>(std::move(shards), scale),
                                          "from_idx", cache_advice::yes);
}
template <Shape S, class K = sparse_labels, class T = float>
dataset<sample<S, K, T>> from_idx(const std::filesystem::path& images, const std::filesystem::path& labels,
                                  double scale = 1.0) {
  return from_idx<S, K, T>(std::vector<idx_shard>{{images, labels}}, scale);
}

template <Shape S, class K = sparse_labels, class T = float>
dataset<sample<S, K, T>> from_csv(std::vector<std::filesystem::path> files, csv_options opt = {}) {
  // reads and parses the text on every pass: cache() after it saves that
  return dataset<sample<S, K, T>>::source(std::make_shared<csv_stage<S, K, T>>(std::move(files), opt), "from_csv",
                                          cache_advice::yes);
}
template <Shape S, class K = sparse_labels, class T = float>
dataset<sample<S, K, T>> from_csv(const std::filesystem::path& file, csv_options opt = {}) {
  return from_csv<S, K, T>(std::vector<std::filesystem::path>{file}, opt);
}

}  // namespace ctnn::data
