// ctnn/data/padded_batch.hpp — variable-length sequences in a pipeline (tf.data's padded_batch).
//
// from_sequences<shape<Steps, F>, K, T>(xs, y): a source of samples whose x holds a whole
// number of steps (len * F values, 1 <= len <= Steps; its type's Steps is the network's
// static step count, so fit checks the pipeline against the network at compile time).
// padded_batch(ds, n, pad = 0, drop_remainder = false): each sample right-padded with `pad`
// to Steps steps (tf.data pads at the end), then batch(n). A sample longer than Steps steps,
// or not a whole number of steps, throws a pipeline_error naming the stage, the sample's
// steps and the network's. With masking<pad> before the recurrent layers the padded steps
// are skipped (docs/sequences.md, "Padded batches"). shape<Steps> is a sequence of one value
// per step (embedding's ids: pad 0 is what embedding<V, D, true> masks).
#pragma once
#include <cstddef>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "element.hpp"
#include "pipeline.hpp"
#include "stage.hpp"

namespace ctnn::data {

template <Shape S, class K, class T>
class sequences_stage final : public stage<sample<S, K, T>> {
  using E = sample<S, K, T>;
  using Y = typename E::target_type;
  struct store {
    std::vector<std::vector<T>> x;
    std::vector<Y> y;
  };
  struct iter final : iterator<E> {
    std::shared_ptr<const store> d;
    std::size_t i = 0;
    bool next(E& out) override {
      if (i == d->x.size()) return false;
      out.x = d->x[i];
      out.y.assign(d->y.begin() + std::ptrdiff_t(i * K::width), d->y.begin() + std::ptrdiff_t((i + 1) * K::width));
      ++i;
      return true;
    }
  };

 public:
  sequences_stage(std::vector<std::vector<T>> x, std::vector<Y> y)
      : d_(std::make_shared<store>(store{std::move(x), std::move(y)})) {
    if (d_->y.size() != d_->x.size() * K::width)
      throw std::invalid_argument("from_sequences: " + std::to_string(d_->x.size()) + " sequences but " +
                                  std::to_string(d_->y.size()) + " targets (" + std::to_string(K::width) + " each)");
  }
  iterator_ptr<E> open(const open_context&) const override {
    auto it = std::make_unique<iter>();
    it->d = d_;
    return it;
  }

 private:
  std::shared_ptr<const store> d_;
};

template <Shape S, class K = sparse_labels, class T = float>
  requires(S::rank == 1 || S::rank == 2)
dataset<sample<S, K, T>> from_sequences(std::vector<std::vector<T>> x, std::vector<target_element_t<K, T>> y) {
  return dataset<sample<S, K, T>>::source(std::make_shared<sequences_stage<S, K, T>>(std::move(x), std::move(y)),
                                          "from_sequences");
}

namespace detail {
// One sample right-padded to the type's Steps steps.
template <class E>
struct pad_steps {
  typename E::value_type pad;
  E operator()(E e) const {
    using S = typename E::sample_shape;
    constexpr std::size_t steps = S::dims[0], F = S::rank == 2 ? S::dims[1] : 1;
    if (e.x.size() % F != 0 || e.x.size() > S::size)
      throw std::length_error("padded_batch: a sequence of " + std::to_string(e.x.size()) + " values (" +
                              (e.x.size() % F ? "not a whole number of steps of " + std::to_string(F) + " features"
                                              : std::to_string(e.x.size() / F) + " steps") +
                              ") does not fit the network's " + std::to_string(steps) + " steps");
    e.x.resize(S::size, pad);
    return e;
  }
};
}  // namespace detail

template <class E>
  requires Sample<E> && (E::sample_shape::rank == 1 || E::sample_shape::rank == 2)
auto padded_batch(const dataset<E>& ds, std::size_t n, typename E::value_type pad = {}, bool drop_remainder = false) {
  return ds.map(detail::pad_steps<E>{pad}).named("padded_batch").batch(n, drop_remainder);
}

}  // namespace ctnn::data
