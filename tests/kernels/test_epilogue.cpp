// A list of rules as one GEMM epilogue (fn::chain, kernels/functors.hpp) through
// ops<cpu<Arch>>::dense_forward on every architecture this CPU runs
// (tests/kernels/archs.hpp), in float, double, float16_t and bfloat16_t (the
// 16-bit types through backends/cpu/half_ops.hpp), against the scalar
// reference: reference::gemm_nn on the same (rounded) inputs, then each
// rule's scalar reference (kernels/activations_reference.hpp) in order.
// Tolerances: float 2e-5 K and double 1e-12 K absolute (inputs in [-1, 1]),
// as tests/kernels/test_gemm.cpp; 16-bit: the output's rounding, relative to
// the largest reference value (float16 2e-3, bfloat16 1.6e-2).
#include <doctest/doctest.h>

#include <ctnn/backends/cpu/half_ops.hpp>
#include <ctnn/backends/cpu/ops.hpp>
#include <ctnn/core/half.hpp>
#include <ctnn/core/rng.hpp>
#include <ctnn/kernels/activations_reference.hpp>
#include <ctnn/kernels/functors.hpp>
#include <ctnn/kernels/reference.hpp>

#include "kernels/archs.hpp"

#include <algorithm>
#include <cmath>
#include <string>
#include <type_traits>
#include <vector>

using namespace ctnn;

namespace {
namespace ref = kernels::reference;
using R = double;  // the reference's arithmetic

// The lists checked, each with its scalar reference applied in order.
const auto tanh_unit = fn::chain{fn::tanh_fn{}, fn::affine_fn<float>{0.5f, 0.5f}};  // tanh rescaled to (0, 1)
void tanh_unit_ref(R* y, std::size_t n) {
  ref::tanh_forward(y, n);
  for (std::size_t i = 0; i < n; ++i) y[i] = y[i] * 0.5 + 0.5;
}
const auto shift_sigmoid = fn::chain{fn::affine_fn<float>{2.0f, -0.25f}, fn::sigmoid_fn{}, fn::relu_fn{}};
void shift_sigmoid_ref(R* y, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) y[i] = y[i] * 2.0 + -0.25;
  ref::sigmoid_forward(y, n);
  ref::relu_forward(y, n);
}
const auto leaky_tanh = fn::chain{fn::leaky_relu_fn<float>{0.1f}, fn::tanh_fn{}};
void leaky_tanh_ref(R* y, std::size_t n) {
  ref::leaky_relu_forward(y, n, R(0.1f));
  ref::tanh_forward(y, n);
}

template <class T>
double tolerance(std::size_t K) {
  if constexpr (std::is_same_v<T, float>) return 2e-5 * double(K);
  else if constexpr (std::is_same_v<T, double>) return 1e-12 * double(K);
  else if constexpr (std::is_same_v<T, float16_t>) return 2e-3;
  else return 1.6e-2;
}

template <class T, class Arch, std::size_t K, std::size_t N, class E, class Ref>
void check_list(const E& e, Ref reference, const char* rule, std::size_t m, const char* arch) {
  rng g(K * 31 + N * 7 + m);
  std::vector<T> x(m * K), w(K * N), b(N), y(m * N);
  for (auto* v : {&x, &w, &b})
    for (auto& s : *v) s = T(g.uniform(-1, 1));
  std::vector<R> xr(x.begin(), x.end()), wr(w.begin(), w.end()), br(b.begin(), b.end()), want(m * N);
  ref::gemm_nn(xr.data(), wr.data(), br.data(), want.data(), m, K, N);
  reference(want.data(), want.size());
  ops<cpu<Arch>>::template dense_forward<K, N>(x.data(), w.data(), b.data(), y.data(), m, e);
  double worst = 0, largest = 1e-30;
  for (std::size_t i = 0; i < y.size(); ++i) {
    worst = std::max(worst, std::abs(double(y[i]) - want[i]));
    largest = std::max(largest, std::abs(want[i]));
  }
  constexpr bool half = !std::is_same_v<T, float> && !std::is_same_v<T, double>;
  INFO(arch << " " << rule << " K=" << K << " N=" << N << " m=" << m << " bytes=" << sizeof(T));
  CHECK(worst <= tolerance<T>(K) * (half ? largest : 1.0));
}

// Every list in float; in double and the 16-bit types (whose GEMM and rounding differ, not the
// way a list is applied) the longest list only: the product under it is the same path as under
// the empty list, the list's rules the float ones'. Each instantiation is a whole GEMM per architecture: the file
// was the suite's slowest to compile (124 s of CPU at -O3, loaded machine) with all four lists in
// all four types; 66 s at -O1 (g++ 12, every architecture) with the empty list in every type.
template <class T, class Arch, std::size_t K, std::size_t N>
void check_lists(std::size_t m, const char* arch) {
  if constexpr (std::is_same_v<T, float>) {
    check_list<T, Arch, K, N>(tanh_unit, tanh_unit_ref, "tanh, affine", m, arch);
    check_list<T, Arch, K, N>(leaky_tanh, leaky_tanh_ref, "leaky_relu, tanh", m, arch);
    check_list<T, Arch, K, N>(fn::chain<>{}, [](R*, std::size_t) {}, "empty list", m, arch);
  }
  check_list<T, Arch, K, N>(shift_sigmoid, shift_sigmoid_ref, "affine, sigmoid, relu", m, arch);
}

template <class T, class Arch>
void check_sizes(const char* arch) {
  for (std::size_t m : {1, 3, 64, 255}) {
    check_lists<T, Arch, 17, 3>(m, arch);
    check_lists<T, Arch, 129, 40>(m, arch);
  }
}
}  // namespace

static_assert(fn::epilogue_rule<std::remove_cvref_t<decltype(tanh_unit)>, float>);
static_assert(fn::epilogue_rule<std::remove_cvref_t<decltype(shift_sigmoid)>, xsimd::batch<float>>);

TEST_CASE("a list of rules (fn::chain) fuses into ops<cpu>::dense_forward on every architecture, float to bfloat16") {
  const int ran = test::for_each_arch("rule lists in the dense epilogue", [](auto arch, const char* name) {
    using A = decltype(arch);
    check_sizes<float, A>(name);
    check_sizes<double, A>(name);
    check_sizes<float16_t, A>(name);
    check_sizes<bfloat16_t, A>(name);
  });
  CHECK(ran >= 1);
}

TEST_CASE("fn::chain applies its rules in order, and chain<> is the identity") {
  const fn::chain c{fn::affine_fn<float>{2.0f, 1.0f}, fn::relu_fn{}};  // relu(2z + 1)
  CHECK(c.forward(-1.0f) == 0.0f);
  CHECK(c.forward(1.0f) == 3.0f);
  const fn::chain d{fn::relu_fn{}, fn::affine_fn<float>{2.0f, 1.0f}};  // 2 relu(z) + 1
  CHECK(d.forward(-1.0f) == 1.0f);
  CHECK(fn::chain<>{}.forward(-2.5) == -2.5);
}
