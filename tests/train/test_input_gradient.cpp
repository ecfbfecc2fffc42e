// The backward pass computes a layer's dL/dx only when a layer below it has
// parameters (train/model.hpp, input_gradient_needed): the first dense layer of
// flatten -> dense -> ... computes no dX = dY W^T. A backend whose ops are
// cpu<>'s but count dense_backward_input per input width checks which layers
// run it; the parameters after a step equal cpu<>'s bit for bit.
#include <doctest/doctest.h>

#include <ctnn/ctnn.hpp>

#include <cstdint>
#include <map>
#include <vector>

namespace {
struct dx_counting_cpu {
  using memory = ctnn::host_memory;
  static std::string name() { return "dx_counting_cpu"; }
  static inline std::map<std::size_t, int> dx_calls;  // input width K -> calls
};
}  // namespace

template <>
struct ctnn::ops<dx_counting_cpu> : ctnn::ops<ctnn::cpu<>> {
  template <std::size_t K, std::size_t N, class T>
  static void dense_backward_input(const T* dy, const T* w, T* dx, std::size_t m) {
    ++dx_counting_cpu::dx_calls[K];
    ctnn::ops<ctnn::cpu<>>::dense_backward_input<K, N>(dy, w, dx, m);
  }
};

namespace {
template <class Net, std::size_t in>
void check_dx_calls(std::map<std::size_t, int> expected) {
  constexpr std::size_t n = 8;
  std::vector<float> x(n * in);
  std::vector<std::int32_t> y(n);
  ctnn::rng g(3);
  for (auto& v : x) v = float(g.uniform(-1, 1));
  for (auto& v : y) v = std::int32_t(g.below(4));
  auto m = ctnn::make_model<Net, float, dx_counting_cpu>(42);
  auto ref = ctnn::make_model<Net>(42);
  const ctnn::sparse_categorical_crossentropy loss{.from_logits = true};
  ctnn::adam o1, o2;
  ctnn::train_step s1{m, loss, o1};
  ctnn::train_step s2{ref, loss, o2};
  dx_counting_cpu::dx_calls.clear();
  for (std::size_t i = 0; i < 2; ++i) {
    s1.run(x.data(), y.data(), n, 0, i);
    s2.run(x.data(), y.data(), n, 0, i);
  }
  for (auto& [k, c] : expected) c *= 2;  // two steps
  CHECK(dx_counting_cpu::dx_calls == expected);
  CHECK(std::vector<float>(m.parameters().begin(), m.parameters().end()) ==
        std::vector<float>(ref.parameters().begin(), ref.parameters().end()));
}
}  // namespace

TEST_CASE("backward: no dX for a first dense layer, behind layers without parameters too") {
  // flatten (no parameters) then dense: the 12 -> 16 layer computes no dX
  check_dx_calls<ctnn::sequential<ctnn::input<3, 4>, ctnn::flatten, ctnn::dense<16, ctnn::relu>,
                                  ctnn::dense<8, ctnn::relu>, ctnn::dense<4>>, 12>({{16, 1}, {8, 1}});
  // dense first
  check_dx_calls<ctnn::sequential<ctnn::input<12>, ctnn::dense<16>, ctnn::dense<4>>, 12>({{16, 1}});
  // layers without parameters between two dense layers do not stop the second one's dX
  check_dx_calls<ctnn::sequential<ctnn::input<12>, ctnn::dense<16>, ctnn::dropout<0.25f>, ctnn::relu, ctnn::dense<4>>,
                 12>({{16, 1}});
}
