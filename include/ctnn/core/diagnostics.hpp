// ctnn/core/diagnostics.hpp — every compile-time error message of ctnn, in one place.
//
// Each check is a class template whose arguments carry the numbers of the
// error (the layer's position, the sizes involved) and whose static_assert is
// one sentence naming the component. The compiler prints the instantiation, so
// the user reads, for example:
//   In instantiation of 'struct ctnn::diag::reshape_element_count_mismatch<
//       ctnn::diag::layer<2>, ctnn::diag::input_elements<784>,
//       ctnn::diag::target_elements<700>, false>':
//   error: static assertion failed: reshape: the input's element count differs
//       from the target shape's element count
// Positions count the layers after input<...>, starting at 1.
//
// The checks that know the place and the sizes also fail first through
// diag::require (core/compile_message.hpp), so the first `error:` line itself
// reads, for example (g++ 12; clang 19 prints the text in parts of at most 36 characters):
//   error: invalid application of 'sizeof' to incomplete type
//     'ctnn::diag::error<ctnn::diag::text<78>{"layer 2 (dense<128>): input has
//      rank 3 (26x26x8); put ctnn::flatten before it"}>'
// The messages are made by the *_text functions below.
#pragma once
#include <cstddef>

#include "compile_message.hpp"

namespace ctnn::diag {

template <std::size_t> struct layer {};
template <std::size_t> struct input_rank {};
template <std::size_t> struct input_elements {};
template <std::size_t> struct target_elements {};
template <std::size_t> struct dataset_elements {};
template <std::size_t> struct network_elements {};
template <std::size_t> struct target_width {};
template <std::size_t> struct output_width {};
template <std::size_t> struct input_height {};
template <std::size_t> struct input_width {};
template <std::size_t> struct window_height {};
template <std::size_t> struct window_width {};

template <class Layer, class Rank, bool Ok>
struct dense_input_not_flat {
  static_assert(Ok, "dense: the input of this layer is not flat (rank 1); put ctnn::flatten before it");
  static constexpr bool value = Ok;
};

// The sparse dense layers (layers/sparse_dense*.hpp): K rows of the kernel.
template <std::size_t> struct kernel_rows {};
template <class Layer, class Has, class Wants, bool Ok>
struct sparse_dense_input_mismatch {
  static_assert(Ok, "sparse_dense: the input of this layer is not flat or its feature count differs from K");
  static constexpr bool value = Ok;
};
template <class Layer, bool Ok>
struct sparse_dense_nnz_too_large {
  static_assert(Ok, "sparse_dense: this layer's NNZ exceeds K * N");
  static constexpr bool value = Ok;
};

template <class Layer, class Has, class Wants, bool Ok>
struct reshape_element_count_mismatch {
  static_assert(Ok, "reshape: the input's element count differs from the target shape's element count");
  static constexpr bool value = Ok;
};

template <bool Ok>
struct sequential_needs_input_first {
  static_assert(Ok, "sequential: the first element must be ctnn::input<dims...>, the shape of one sample");
  static constexpr bool value = Ok;
};

template <bool Ok>
struct sequential_needs_a_layer {
  static_assert(Ok, "sequential: a network needs at least one layer after ctnn::input<...>");
  static constexpr bool value = Ok;
};

template <class Layer, bool Ok>
struct not_a_layer_spec {
  static_assert(Ok, "sequential: this element is not a layer spec (it has no bind<InShape, T, Backend>)");
  static constexpr bool value = Ok;
};

template <class Dataset, class Network, bool Ok>
struct dataset_input_mismatch {
  static_assert(Ok, "fit: the dataset's samples have a different element count than the network's input");
  static constexpr bool value = Ok;
};

template <class Targets, class Outputs, bool Ok>
struct loss_target_width_mismatch {
  static_assert(Ok, "loss: the dataset's targets have a different width than the network's output");
  static constexpr bool value = Ok;
};

template <class Loss, bool Ok>
struct loss_target_kind_mismatch {
  static_assert(Ok, "loss: this loss needs the other kind of target (sparse class labels vs dense target vectors): "
                    "sparse_categorical_crossentropy takes class labels, categorical_crossentropy one-hot rows");
  static constexpr bool value = Ok;
};

template <class Outputs, bool Ok>
struct classification_needs_two_classes {
  static_assert(Ok, "loss: a categorical loss needs an output of at least 2 classes");
  static constexpr bool value = Ok;
};

// ---- convolution and pooling (layers/conv2d.hpp, layers/*_pool*.hpp) ----
template <class Layer, class Rank, bool Ok>
struct conv2d_input_rank {
  static_assert(Ok, "conv2d: the input of this layer is neither rank 3 (height, width, channels) nor rank 2 (height, width: one channel)");
  static constexpr bool value = Ok;
};

template <class Layer, class InH, class InW, class KH, class KW, bool Ok>
struct conv2d_kernel_larger_than_input {
  static_assert(Ok, "conv2d: with valid padding the kernel must fit in the input (kernel height <= input height and kernel width <= input width)");
  static constexpr bool value = Ok;
};

template <class Layer, class Rank, bool Ok>
struct pool2d_input_not_rank3 {
  static_assert(Ok, "pool2d: the input of this pooling layer is not rank 3 (height, width, channels)");
  static constexpr bool value = Ok;
};

template <class Layer, class InH, class InW, class PH, class PW, bool Ok>
struct pool2d_window_larger_than_input {
  static_assert(Ok, "pool2d: with valid padding the pooling window must fit in the input (pool size <= input height and width)");
  static constexpr bool value = Ok;
};

template <class Layer, class Rank, bool Ok>
struct global_average_pool_input_rank {
  static_assert(Ok, "global_average_pool: the input of this layer must have rank >= 2 (positions..., channels)");
  static constexpr bool value = Ok;
};

// ---- first-line messages (diag::require) ----
// "layer 2 (dense<128>): input has rank 3 (26x26x8); put ctnn::flatten before it"
template <std::size_t Pos, long long N, class In>
constexpr message dense_not_flat_text() {
  message m;
  m << "layer " << Pos << " (dense<" << N << ">): input has rank " << In::rank << " (";
  m.dims(In::dims) << "); put ctnn::flatten before it";
  return m;
}

template <std::size_t Pos, class Target, class In>
constexpr message reshape_count_text() {
  message m;
  m << "layer " << Pos << " (reshape<";
  m.dims(Target::dims) << ">): input has " << In::size << " elements (";
  m.dims(In::dims) << "), the target shape " << Target::size;
  return m;
}

template <std::size_t Pos, std::size_t F, std::size_t KH, std::size_t KW, class In>
constexpr message conv2d_rank_text() {
  message m;
  m << "layer " << Pos << " (conv2d<" << F << ", " << KH << ", " << KW << ">): input has rank " << In::rank << " (";
  m.dims(In::dims) << "); conv2d takes rank 3 (height x width x channels) or 2 (height x width)";
  return m;
}

template <std::size_t Pos, std::size_t F, std::size_t KH, std::size_t KW, class In>
constexpr message conv2d_kernel_text() {
  message m;
  m << "layer " << Pos << " (conv2d<" << F << ", " << KH << ", " << KW << ">): the " << KH << "x" << KW
    << " kernel does not fit the input ";
  m.dims(In::dims) << " with padding::valid";
  return m;
}

template <std::size_t Pos, class Kind, std::size_t P, class In>
constexpr message pool2d_rank_text() {
  message m;
  m << "layer " << Pos << " (" << Kind::name << "<" << P << ">): input has rank " << In::rank << " (";
  m.dims(In::dims) << "); pooling takes rank 3 (height x width x channels)";
  return m;
}

template <std::size_t Pos, class Kind, std::size_t P, class In>
constexpr message pool2d_window_text() {
  message m;
  m << "layer " << Pos << " (" << Kind::name << "<" << P << ">): the " << P << "x" << P << " window does not fit the input ";
  m.dims(In::dims) << " with padding::valid";
  return m;
}

template <std::size_t Pos, class In>
constexpr message global_average_pool_rank_text() {
  message m;
  m << "layer " << Pos << " (global_average_pool): input has rank " << In::rank << " (";
  m.dims(In::dims) << "); it takes rank 2 or more (positions..., channels)";
  return m;
}

// "dense<-1>: the number of units must be > 0"
template <long long N>
constexpr message units_text() {
  message m;
  m << "dense<" << N << ">: the number of units must be > 0";
  return m;
}

// "fit: the samples of the dataset are 28x28 (784 values); the network takes input<100> (100 values)"
// (no apostrophes in first-line messages: g++ prints them as \')
// Who: 0 fit, 1 fit's validation_data, 2 evaluate, 3 predict.
template <class DataShape, class NetShape, int Who = 0>
constexpr message dataset_input_text() {
  message m;
  constexpr const char* who[] = {"fit: the samples of the dataset are ", "fit: the samples of validation_data are ",
                                 "evaluate: the samples of the dataset are ", "predict: the samples of the dataset are "};
  m << who[Who];
  m.dims(DataShape::dims) << " (" << DataShape::size << " values); the network takes input<";
  m.dims(NetShape::dims) << "> (" << NetShape::size << " values)";
  return m;
}

// "sequential: its first element is ctnn::flatten; it must be ctnn::input<dims...>, the shape of one sample"
template <class First>
constexpr message input_first_text() {
  message m;
  m << "sequential: its first element is ";
  m.type<First>() << "; it must be ctnn::input<dims...>, the shape of one sample";
  return m;
}

// "layer 2 (not_a_layer): not a layer spec (it has no bind<InShape, T, Backend>)"
template <std::size_t Pos, class S>
constexpr message not_a_layer_text() {
  message m;
  m << "layer " << Pos << " (";
  m.type<S>() << "): not a layer spec (it has no bind<InShape, T, Backend>)";
  return m;
}

// "dropout<1>: the rate must be in [0, 1), got 1"
template <auto Rate>
constexpr message dropout_rate_text() {
  message m;
  m << "dropout<";
  m.decimal(double(Rate)) << ">: the rate must be in [0, 1), got ";
  m.decimal(double(Rate));
  return m;
}

}  // namespace ctnn::diag
