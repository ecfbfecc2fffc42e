// The op-set contract (core/backend_ops.hpp): ops<cpu<Arch>> satisfies
// BackendOps and each of its named sub-concepts on every architecture type; a
// backend whose ops lack a part fails exactly the sub-concept of that part
// (tests/compile_fail/backend_ops_missing_updates.cpp shows the message a
// model of it gives); cuda<90> is checked under nvcc (tests/cuda/test_ops.cu).
#include <doctest/doctest.h>

#include <ctnn/backends/cpu/ops.hpp>
#include <ctnn/core/backend.hpp>

#include <string>

using namespace ctnn;

static_assert(BackendOps<cpu<>>);
static_assert(Backend<cpu<>>);
static_assert(has_product_ops<cpu<>> && has_elementwise_ops<cpu<>> && has_reduction_ops<cpu<>> &&
              has_conversion_ops<cpu<>> && has_optimizer_update_ops<cpu<>> && has_loss_ops<cpu<>>);
static_assert(has_layer_ops<cpu<>>);  // batch_norm and dropout (backends/cpu/normalization.hpp)
// A GEMM epilogue is a rule or a list of them (kernels/functors.hpp), on scalars and on batches;
// has_product_ops passes dense_forward a list (fn::chain) as well as a single rule.
static_assert(fn::epilogue_rule<fn::chain<fn::tanh_fn, fn::affine_fn<float>, fn::relu_fn>, float> &&
              fn::epilogue_rule<fn::chain<fn::tanh_fn, fn::affine_fn<float>, fn::relu_fn>, double> &&
              fn::epilogue_rule<fn::chain<fn::sigmoid_fn, fn::leaky_relu_fn<float>>, xsimd::batch<float>> &&
              fn::epilogue_rule<fn::chain<>, float> && fn::epilogue_rule<fn::relu_fn, xsimd::batch<double>>);
static_assert(!fn::epilogue_rule<fn::scale<float>, float>);  // a map rule, not an epilogue
static_assert(sizeof(fn::chain<fn::leaky_relu_fn<float>, fn::affine_fn<float>>) == 3 * sizeof(float));  // flat
static_assert(BackendOps<cpu<xsimd::sse2>>);
#if XSIMD_WITH_AVX2
static_assert(BackendOps<cpu<xsimd::avx2>>);
#endif
// The thread pool is the CPU backend's own: for_chunks and threads() are not ops.
template <class B>
concept exposes_executor = requires { ops<B>::threads(); } || requires { ops<B>::for_chunks(1, [](std::size_t, std::size_t) {}); };
static_assert(!exposes_executor<cpu<>>);

namespace {
// A host backend whose ops are the CPU's but for the optimizer updates.
struct partial_backend {
  using memory = host_memory;
  static std::string name() { return "partial"; }
};
// One with no ops at all.
struct no_ops_backend {
  using memory = host_memory;
  static std::string name() { return "no_ops"; }
};
}  // namespace

template <>
struct ctnn::ops<partial_backend> {
  using base = ops<cpu<>>;
  template <std::size_t K, std::size_t N, class T>
  static void dense_forward(const T* x, const T* w, const T* b, T* y, std::size_t m) {
    base::dense_forward<K, N>(x, w, b, y, m);
  }
};

static_assert(has_backend_ops<partial_backend> && !BackendOps<partial_backend> && !Backend<partial_backend>);
static_assert(!has_optimizer_update_ops<partial_backend> && !has_elementwise_ops<partial_backend>);
static_assert(!has_backend_ops<no_ops_backend> && !BackendOps<no_ops_backend>);
static_assert(!has_layer_ops<partial_backend>);

// A host backend that inherits the CPU's ops (the counting backend of tests/train) satisfies all of it.
namespace {
struct inheriting_backend {
  using memory = host_memory;
  static std::string name() { return "inheriting"; }
};
}  // namespace
template <>
struct ctnn::ops<inheriting_backend> : ctnn::ops<ctnn::cpu<>> {};
static_assert(BackendOps<inheriting_backend> && Backend<inheriting_backend>);

// One whose ops lack map, through which every optimizer's update runs (optimizers/base.hpp):
// only has_optimizer_update_ops fails (the CPU's named element-wise ops call their own map).
namespace {
struct no_map_backend {
  using memory = host_memory;
  static std::string name() { return "no_map"; }
};
}  // namespace
template <>
struct ctnn::ops<no_map_backend> : ctnn::ops<ctnn::cpu<>> {
  static void map() = delete;
};
static_assert(!has_optimizer_update_ops<no_map_backend> && !BackendOps<no_map_backend>);
static_assert(has_product_ops<no_map_backend> && has_elementwise_ops<no_map_backend> &&
              has_reduction_ops<no_map_backend> && has_conversion_ops<no_map_backend> && has_loss_ops<no_map_backend>);

// One whose ops lack map_rows (the recurrent cells' rule over row-strided arrays, layers/recurrent.hpp):
// has_elementwise_ops names it.
namespace {
struct no_map_rows_backend {
  using memory = host_memory;
  static std::string name() { return "no_map_rows"; }
};
}  // namespace
template <>
struct ctnn::ops<no_map_rows_backend> : ctnn::ops<ctnn::cpu<>> {
  static void map_rows() = delete;
};
static_assert(!has_elementwise_ops<no_map_rows_backend> && !BackendOps<no_map_rows_backend>);
static_assert(has_product_ops<no_map_rows_backend> && has_optimizer_update_ops<no_map_rows_backend> &&
              has_reduction_ops<no_map_rows_backend> && has_layer_ops<no_map_rows_backend>);

// The step's scalars region: 32 bytes (loss sum, loss scale, penalty, flag), 8-byte aligned.
static_assert(sizeof(step_scalars) == 32 && alignof(step_scalars) == 8 && step_scalars_bytes == 64);

TEST_CASE("the op-set contract holds for cpu<> at compile time") { CHECK(BackendOps<cpu<>>); }
