// ctnn/data/idx_files.hpp — a stage that reads IDX files (plain or gzip) on every pass.
//
// idx_files_stage<S, K, T>(shards, scale): shards is a list of {images,
// labels} file pairs read one after the other, each decoded when the pass
// reaches it (so a pass costs the decoding; put cache() after it to pay that
// once). Images must hold samples of S::size values (converted to T and
// multiplied by scale); labels one class per sample (sparse_labels, >= 0) or
// K::width values per sample (dense_targets). Every problem, in the first or
// in a later shard, throws idx_error naming the file; the samples of earlier
// shards have been delivered by then, nothing is skipped.
#pragma once
#include <cstddef>
#include <filesystem>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "element.hpp"
#include "idx.hpp"
#include "stage.hpp"

namespace ctnn::data {

struct idx_shard {
  std::filesystem::path images, labels;
};

template <Shape S, class K, class T>
class idx_files_stage final : public stage<sample<S, K, T>> {
  using E = sample<S, K, T>;
  using Y = typename E::target_type;
  struct iter final : iterator<E> {
    std::shared_ptr<const std::vector<idx_shard>> shards;
    double scale = 1;
    std::size_t shard = 0, i = 0, n = 0;
    std::vector<T> x;
    std::vector<Y> y;
    bool next(E& out) override {
      while (i == n) {
        if (shard == shards->size()) return false;
        load((*shards)[shard++]);
      }
      out.x.assign(x.begin() + std::ptrdiff_t(i * S::size), x.begin() + std::ptrdiff_t((i + 1) * S::size));
      out.y.assign(y.begin() + std::ptrdiff_t(i * K::width), y.begin() + std::ptrdiff_t((i + 1) * K::width));
      ++i;
      return true;
    }
    void load(const idx_shard& s) {
      const idx_array im = read_idx(s.images);
      const idx_array lb = read_idx(s.labels);
      const std::size_t count = im.dims[0];
      if (im.count() != count * S::size)
        throw idx_error("from_idx", s.images, "samples of " + std::to_string(count ? im.count() / count : 0) +
                        " values, but the pipeline's sample shape " + S::str() + " has " + std::to_string(S::size));
      if (lb.dims[0] != count)
        throw idx_error("from_idx", s.images, "has " + std::to_string(count) + " samples but " + s.labels.string() +
                                                  " has " + std::to_string(lb.dims[0]) + " labels");
      if (lb.count() != count * K::width)
        throw idx_error("from_idx", s.labels, std::to_string(lb.count() / std::max<std::size_t>(1, count)) +
                        " target values per sample, expected " + std::to_string(K::width));
      x = im.as<T>(scale);
      y = lb.as<Y>();
      if constexpr (is_sparse_v<K>)
        for (std::size_t j = 0; j < y.size(); ++j)
          if (y[j] < 0)
            throw idx_error("from_idx", s.labels, "label " + std::to_string(y[j]) + " of sample " +
                            std::to_string(j) + " is negative");
      n = count;
      i = 0;
    }
  };

 public:
  idx_files_stage(std::vector<idx_shard> shards, double scale)
      : shards_(std::make_shared<const std::vector<idx_shard>>(std::move(shards))), scale_(scale) {}
  iterator_ptr<E> open(const open_context&) const override {
    auto it = std::make_unique<iter>();
    it->shards = shards_;
    it->scale = scale_;
    return it;
  }

 private:
  std::shared_ptr<const std::vector<idx_shard>> shards_;
  double scale_;
};

}  // namespace ctnn::data
