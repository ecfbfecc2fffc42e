// ctnn/data/fashion_mnist_files.hpp — Fashion-MNIST as a pipeline that decodes its files on every pass.
//
// fashion_mnist::train_files(dir) / test_files(dir): dataset<sample<shape<28,
// 28>, sparse_labels, float>> reading the IDX files (gzip or plain) each pass,
// pixels scaled to [0, 1]. Add .cache() to decode them once. dir as in
// fashion_mnist.hpp; a missing file throws idx_error naming it.
#pragma once
#include <filesystem>

#include "fashion_mnist.hpp"
#include "pipeline.hpp"

namespace ctnn::data::fashion_mnist {

using files_dataset = data::dataset<sample<shape<28, 28>, sparse_labels, float>>;

// Function templates (of nothing: called as train_files(dir)) so that a
// program that never calls them does not instantiate the pipeline for them:
// as plain inline functions they cost every translation unit that includes
// ctnn/ctnn.hpp about 50 MB of compiler memory (docs/performance.md).
// Not CTNN_LAZY (core/separate.hpp): with the compiled part that would make them
// its functions, and every program's compiled part would instantiate from_idx's
// pipeline, which a program that calls them instantiates anyway (it uses the
// dataset's members); templates of nothing in both modes.
template <int = 0>
files_dataset train_files(const std::filesystem::path& dir = default_dir()) {
  return from_idx<shape<28, 28>>(detail::find(dir, "train-images-idx3-ubyte"), detail::find(dir, "train-labels-idx1-ubyte"),
                                 1.0 / 255.0);
}
template <int = 0>
files_dataset test_files(const std::filesystem::path& dir = default_dir()) {
  return from_idx<shape<28, 28>>(detail::find(dir, "t10k-images-idx3-ubyte"), detail::find(dir, "t10k-labels-idx1-ubyte"),
                                 1.0 / 255.0);
}

}  // namespace ctnn::data::fashion_mnist
