// ctnn/network.hpp — network types alone: sequential, input, shapes, the precision policies, every
// float layer spec (dense, convolutions, pooling, normalization, dropout, reshape, padding and
// resizing, the graph layers, embedding, masking, time_distributed) and the compile-time plan
// (parameter counts, memory plans). No backend's kernels (nor xsimd's register headers: cpu<> names
// its architecture through backends/cpu/default_arch.hpp; nor the thread pool), no training, no
// data: for a program or a header that only defines network types and checks them at compile time
// (static_assert of shapes, parameter counts and memory plans), which then compiles in a fraction of what
// <ctnn/ctnn.hpp> costs (issue 30; docs/performance.md "Compile time and memory"). To build a model
// of such a type, include <ctnn/ctnn.hpp> (or train/model.hpp) as well. The quantized and sparse
// layers (their int8 and sparse kernels) are not here, nor the recurrent layers (simple_rnn, lstm,
// gru, bidirectional: their memory plan holds the recurrent kernel packed as the backend's GEMM
// packs it, so their headers bring the CPU backend's ops; include them beside this one).
#pragma once
#include "core/input.hpp"
#include "core/plan.hpp"
#include "core/precision.hpp"
#include "core/sequential.hpp"
#include "core/shape.hpp"
#include "layers/activation.hpp"
#include "layers/add.hpp"
#include "layers/average_pool2d.hpp"
#include "layers/batch_norm.hpp"
#include "layers/branch.hpp"
#include "layers/concatenate.hpp"
#include "layers/conv1d.hpp"
#include "layers/conv2d.hpp"
#include "layers/dag.hpp"
#include "layers/dense.hpp"
#include "layers/depthwise_conv2d.hpp"
#include "layers/dropout.hpp"
#include "layers/embedding.hpp"
#include "layers/global_average_pool.hpp"
#include "layers/initializers.hpp"
#include "layers/layer_normalization.hpp"
#include "layers/masking.hpp"
#include "layers/max_pool2d.hpp"
#include "layers/padding.hpp"
#include "layers/reshape.hpp"
#include "layers/residual.hpp"
#include "layers/time_distributed.hpp"
#include "layers/up_sampling2d.hpp"
#include "layers/zero_padding2d.hpp"
