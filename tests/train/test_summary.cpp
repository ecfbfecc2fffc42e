// summary.hpp: the Keras-style table: its rows are a constexpr table of plain descriptors
// (summary_table<Net>) formatted by one function, and the tables below are the bytes the
// per-layer formatting printed before (9b03e66), for layers with constant names, names
// computed at run time (dropout<0.5>, leaky_relu<0.2>, l2<0.001>), and graph layers' children.
#include <doctest/doctest.h>

#include <ctnn/ctnn.hpp>
#include <ctnn/layers/dag.hpp>
#include <ctnn/layers/residual.hpp>
#include <ctnn/quantization/convert.hpp>
#include <ctnn/train/summary.hpp>

#include <sstream>
#include <string>
#include <string_view>

using namespace ctnn;

namespace {
using mlp = sequential<input<28, 28>, flatten, dense<256, relu>, dense<128, relu>, dense<10>>;
using cnn = sequential<input<28, 28>, conv2d<32, 3, 3, 1, padding::valid, relu>, max_pool2d<2>, batch_norm,
                       conv2d<64, 3, 3, 1, padding::valid, relu>, max_pool2d<2>, batch_norm, flatten,
                       dense<128, relu>, dropout<0.5f>, dense<10>>;
using diamond_net = sequential<input<8>,
                               dag<node<"a", dense<16, relu>>, node<"b", dense<16>, "a">, node<"c", dense<16>, "in">,
                                   node<"out", add_join, "b", "c", "a">>,
                               dense<2>>;
using res = sequential<input<8, 8, 2>, residual<conv2d<4, 3, 3, 2, padding::same, relu>, conv2d<4, 3, 3, 1, padding::same>>,
                       global_average_pool, dense<3>>;
using misc = sequential<input<6>, embedding<8, 4>, lstm<8>, dense<5, leaky_relu<0.2f>, l2<0.001f>, he_uniform>,
                        dense<up_to<7>, sigmoid>, batch_normalization<0.9, 1e-5>, dense<3, ctnn::tanh, he_normal>>;
using cat = sequential<input<4, 4, 2>,
                       dag<node<"c", conv2d<3, 3, 3, 1, padding::same>>, node<"j", concatenate_join<-1>, "in", "c", "in">>,
                       average_pool2d<2, 1, padding::same>, flatten, dense<4, relu, l1<0.01f>>>;
using big = sequential<input<784>, dense<256, relu>, dense<10>>;

template <class Net>
std::string table() {
  std::ostringstream out;
  summary<Net>(out);
  return out.str();
}

// The row's name: its constant, else nullptr.
constexpr bool same(const char* a, std::string_view b) { return a && std::string_view(a) == b; }
// Whether names are built at compile time: under g++ 12; clang 19 with libstdc++ 12 cannot hold
// a short std::string in a constant expression (core/format.hpp), and its rows point at name().
constexpr bool constant_names = summary_table<mlp>[1].name != nullptr;
#if defined(__GNUC__) && !defined(__clang__)
static_assert(constant_names, "summary: g++ builds the layers' names at compile time");
#endif
}  // namespace

TEST_CASE("summary lists each layer with output shape and parameters, then totals") {
  using net = sequential<input<28, 28>, flatten, dense<256, relu>, dense<10>>;
  const std::string t = table<net>();
  CHECK(t.find("flatten") != std::string::npos);
  CHECK(t.find("(None, 784)") != std::string::npos);
  CHECK(t.find("dense<256, relu>") != std::string::npos);
  CHECK(t.find("200,960") != std::string::npos);
  CHECK(t.find("Total params: 203,530") != std::string::npos);
  CHECK(t.find("Trainable params: 203,530") != std::string::npos);
}

// The rows are data: names the compiler can build are constants of the table (no per-layer
// code formats them), the others point at the layer's name(); children follow their parent.
static_assert(summary_table<mlp>.size() == 5 && same(summary_table<mlp>[0].name, "input"));
static_assert(summary_table<mlp>[2].parameters == 200960 && summary_table<mlp>[2].rank == 1 &&
              summary_table<mlp>[2].dims[0] == 256 && summary_table<mlp>[2].depth == 0);
static_assert(!constant_names ||
              (same(summary_table<mlp>[1].name, "flatten") && same(summary_table<mlp>[2].name, "dense<256, relu>")));
static_assert(!constant_names || (same(summary_table<cnn>[1].name, "conv2d<32, 3, 3, 1, valid, relu>") &&
                                  same(summary_table<cnn>[2].name, "max_pool2d<2>") &&
                                  same(summary_table<cnn>[3].name, "batch_norm")));
static_assert(summary_table<cnn>[9].name == nullptr && summary_table<cnn>[9].name_of != nullptr);  // dropout<0.5>
static_assert(summary_table<diamond_net>.size() == 7 && summary_table<diamond_net>[2].depth == 1 &&
              summary_table<diamond_net>[2].label != nullptr && summary_table<diamond_net>[3].child == 1);
static_assert(!constant_names || (same(summary_table<diamond_net>[1].name, "dag") && same(summary_table<res>[2].name, "branch")));
static_assert(summary_table<res>[3].depth == 2 && summary_table<res>[3].parameters == 76);

TEST_CASE("summary: every row has its name, as a constant or through the layer's name()") {
  for (const auto& row : summary_table<misc>) CHECK((row.name != nullptr) != (row.name_of != nullptr));
  CHECK((summary_table<misc>[3].name_of != nullptr));  // dense<5, leaky_relu<0.2>, l2<0.001>, ...>: floats at run time
  CHECK(summary_table<misc>[3].name_of() == "dense<5, leaky_relu<0.2>, l2<0.001>, he_uniform>");
}

TEST_CASE("summary: the MLP example, byte for byte") {
  CHECK(table<mlp>() == R"(Model: sequential
================================================================
Layer (type)                Output Shape                 Param #
================================================================
input                       (None, 28, 28)                     0
flatten                     (None, 784)                        0
dense<256, relu>            (None, 256)                  200,960
dense<128, relu>            (None, 128)                   32,896
dense<10>                   (None, 10)                     1,290
================================================================
Total params: 235,146 (918.54 KB)
Trainable params: 235,146 (918.54 KB)
Non-trainable params: 0 (0.00 KB)
)");
}

TEST_CASE("summary: the CNN example (dropout's name at run time), byte for byte") {
  CHECK(table<cnn>() == R"(Model: sequential
======================================================================
Layer (type)                      Output Shape                 Param #
======================================================================
input                             (None, 28, 28)                     0
conv2d<32, 3, 3, 1, valid, relu>  (None, 26, 26, 32)               320
max_pool2d<2>                     (None, 13, 13, 32)                 0
batch_norm                        (None, 13, 13, 32)                64
conv2d<64, 3, 3, 1, valid, relu>  (None, 11, 11, 64)            18,496
max_pool2d<2>                     (None, 5, 5, 64)                   0
batch_norm                        (None, 5, 5, 64)                 128
flatten                           (None, 1600)                       0
dense<128, relu>                  (None, 128)                  204,928
dropout<0.5>                      (None, 128)                        0
dense<10>                         (None, 10)                     1,290
======================================================================
Total params: 225,418 (880.54 KB)
Trainable params: 225,226 (879.79 KB)
Non-trainable params: 192 (0.75 KB)
)");
}

TEST_CASE("summary: a dag: each node as the call it is, byte for byte") {
  CHECK(table<diamond_net>() == R"(Model: sequential
================================================================
Layer (type)                Output Shape                 Param #
================================================================
input                       (None, 8)                          0
dag                         (None, 16)                       560
  a = dense<16, relu>(in)   (None, 16)                       144
  b = dense<16>(a)          (None, 16)                       272
  c = dense<16>(in)         (None, 16)                       144
  out = add(b, c, a)        (None, 16)                         0
dense<2>                    (None, 2)                         34
================================================================
Total params: 594 (2.32 KB)
Trainable params: 594 (2.32 KB)
Non-trainable params: 0 (0.00 KB)
)");
}

TEST_CASE("summary: residual: the block and the projection under it, byte for byte") {
  CHECK(table<res>() == R"(Model: sequential
========================================================================
Layer (type)                        Output Shape                 Param #
========================================================================
input                               (None, 8, 8, 2)                    0
residual                            (None, 4, 4, 4)                  236
  branch                            (None, 4, 4, 4)                  224
    conv2d<4, 3, 3, 2, same, relu>  (None, 4, 4, 4)                   76
    conv2d<4, 3, 3, 1, same>        (None, 4, 4, 4)                  148
  conv2d<4, 1, 1, 2, valid>         (None, 4, 4, 4)                   12
global_average_pool                 (None, 4)                          0
dense<3>                            (None, 3)                         15
========================================================================
Total params: 251 (0.98 KB)
Trainable params: 251 (0.98 KB)
Non-trainable params: 0 (0.00 KB)
)");
}

TEST_CASE("summary: options in names: leaky_relu, l2, an initializer, up_to, batch_normalization's own, byte for byte") {
  CHECK(table<misc>() == R"(Model: sequential
======================================================================================
Layer (type)                                      Output Shape                 Param #
======================================================================================
input                                             (None, 6)                          0
embedding<8, 4>                                   (None, 6, 4)                      32
lstm<8>                                           (None, 8)                        416
dense<5, leaky_relu<0.2>, l2<0.001>, he_uniform>  (None, 5)                         45
dense<up_to<7>, sigmoid>                          (None, 7)                         42
batch_normalization<0.9, 1e-05>                   (None, 7)                         14
dense<3, tanh, he_normal>                         (None, 3)                         24
======================================================================================
Total params: 587 (2.29 KB)
Trainable params: 573 (2.24 KB)
Non-trainable params: 14 (0.05 KB)
)");
}

TEST_CASE("summary: a dag with concatenate, pooling with a stride and padding, l1, byte for byte") {
  CHECK(table<cat>() == R"(Model: sequential
========================================================================
Layer (type)                        Output Shape                 Param #
========================================================================
input                               (None, 4, 4, 2)                    0
dag                                 (None, 4, 4, 7)                   57
  c = conv2d<3, 3, 3, 1, same>(in)  (None, 4, 4, 3)                   57
  j = concatenate<-1>(in, c, in)    (None, 4, 4, 7)                    0
average_pool2d<2, 1, same>          (None, 4, 4, 7)                    0
flatten                             (None, 112)                        0
dense<4, relu, l1<0.01>>            (None, 4)                        452
========================================================================
Total params: 509 (1.99 KB)
Trainable params: 509 (1.99 KB)
Non-trainable params: 0 (0.00 KB)
)");
}

TEST_CASE("summary: int8 layers: parameters as state bytes, byte for byte") {
  CHECK(table<quantized_t<big>>() == R"(Model: sequential
===================================================================================
Layer (type)                                   Output Shape                 Param #
===================================================================================
input                                          (None, 784)                        0
quantized_dense<784, 256, relu, full_integer>  (None, 256)                        0
quantized_dense<256, 10, full_integer>         (None, 10)                         0
===================================================================================
Total params: 204,610 (203.76 KB)
Trainable params: 0 (0.00 KB)
Non-trainable params: 204,610 (203.76 KB)
)");
}
