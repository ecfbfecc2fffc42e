// ctnn/data/fashion_mnist.hpp — Fashion-MNIST from its IDX files.
//
// train(dir) / test(dir): in_memory<shape<28, 28>, sparse_labels> datasets,
// pixels scaled to [0, 1], labels 0..9. dir defaults to $CTNN_FASHION_MNIST_DIR
// or /usr/share/datasets/fashion-mnist (Debian's dataset-fashion-mnist);
// files may be .gz or plain. Checks that images are 28x28 ubyte and that
// there are as many labels as images (idx_error naming the file otherwise).
#pragma once
#include <cstdlib>
#include <filesystem>
#include <string>
#include <system_error>

#include "in_memory.hpp"
#include "idx.hpp"
#include "../core/separate.hpp"

namespace ctnn::data::fashion_mnist {

using dataset = in_memory<shape<28, 28>, sparse_labels, float>;
}  // namespace ctnn::data::fashion_mnist

namespace ctnn::data {
// The dataset type's members (constructor, batch, shuffle, open, the cursor's next) are
// compiled once in the compiled part (core/separate.hpp); inlined where the compiler inlines.
CTNN_INSTANCE(template class in_memory<shape<28, 28>, sparse_labels, float>;)
}  // namespace ctnn::data

namespace ctnn::data::fashion_mnist {
inline constexpr std::size_t classes = 10;
inline constexpr const char* class_names[classes] = {"T-shirt/top", "Trouser", "Pullover", "Dress", "Coat",
                                                     "Sandal",      "Shirt",   "Sneaker",  "Bag",   "Ankle boot"};

CTNN_LAZY CTNN_DECL std::filesystem::path default_dir()
#if CTNN_DEFINITIONS
{
  if (const char* e = std::getenv("CTNN_FASHION_MNIST_DIR"); e && *e) return e;
  return "/usr/share/datasets/fashion-mnist";
}
#else
;
#endif

namespace detail {
// cold: once per load, a file-system lookup (optimized for size).
CTNN_LAZY [[gnu::cold]] CTNN_DECL std::filesystem::path find(const std::filesystem::path& dir, const std::string& stem)
#if CTNN_DEFINITIONS
{
  for (const char* ext : {".gz", ""}) {
    auto p = dir / (stem + ext);
    std::error_code ec;  // a look-up the system refuses (a name too long) is this reader's error, not filesystem_error
    const bool there = std::filesystem::exists(p, ec);
    if (ec) throw idx_error("fashion_mnist", p, "cannot be looked up (" + ec.message() + ")");
    if (there) return p;
  }
  throw idx_error("fashion_mnist", dir / stem, "neither " + (dir / (stem + ".gz")).string() + " nor " + (dir / stem).string() +
                  " exists (install Debian's dataset-fashion-mnist or set CTNN_FASHION_MNIST_DIR)");
}
#else
;
#endif

// The images and labels of one split ("train", "t10k"), checked: 28x28 ubyte images, as many
// ubyte labels, each a class 0..9.
struct files {
  idx_array images, labels;
};
CTNN_LAZY CTNN_DECL files read(const std::filesystem::path& dir, const std::string& prefix)
#if CTNN_DEFINITIONS
{
  const auto ipath = find(dir, prefix + "-images-idx3-ubyte");
  const auto lpath = find(dir, prefix + "-labels-idx1-ubyte");
  idx_array images = read_idx(ipath);
  idx_array labels = read_idx(lpath);
  if (images.type != 0x08 || images.dims.size() != 3 || images.dims[1] != 28 || images.dims[2] != 28)
    throw idx_error("fashion_mnist", ipath, "does not hold 28x28 ubyte images");
  if (labels.type != 0x08 || labels.dims.size() != 1)
    throw idx_error("fashion_mnist", lpath, "does not hold ubyte labels");
  if (labels.dims[0] != images.dims[0])
    throw idx_error("fashion_mnist", ipath, "has " + std::to_string(images.dims[0]) + " images but " +
                    lpath.string() + " has " + std::to_string(labels.dims[0]) + " labels");
  for (std::size_t i = 0; i < labels.bytes.size(); ++i)
    if (labels.bytes[i] >= classes)
      throw idx_error("fashion_mnist", lpath, "label " + std::to_string(int(labels.bytes[i])) + " of sample " +
                      std::to_string(i) + " is not a class 0..9");
  return {std::move(images), std::move(labels)};
}
#else
;
#endif

// cold: once per split (the compiled part holds it, and the dataset type's members).
CTNN_LAZY [[gnu::cold]] CTNN_DECL dataset load(const std::filesystem::path& dir, const std::string& prefix)
#if CTNN_DEFINITIONS
{
  const files f = read(dir, prefix);
  return dataset(f.images.as<float>(1.0 / 255.0), f.labels.as<std::int32_t>());
}
#else
;
#endif
}  // namespace detail

// CTNN_LAZY (core/separate.hpp), as detail::load: header-only function templates of nothing (called
// as train(dir)), so a program that never loads the data set instantiates none of it; with the
// compiled part, plain inline calls of its detail::load.
CTNN_LAZY inline dataset train(const std::filesystem::path& dir = default_dir()) { return detail::load(dir, "train"); }
CTNN_LAZY inline dataset test(const std::filesystem::path& dir = default_dir()) { return detail::load(dir, "t10k"); }

}  // namespace ctnn::data::fashion_mnist
