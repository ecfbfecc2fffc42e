// A user's program at the xtensor edge (linked with ctnn::xtensor): one sample in as an
// xtensor_fixed, the output typed by the network's shape, a variable as an xtensor view.
#include <ctnn/ctnn.hpp>
#include <ctnn/xtensor.hpp>

#include <cstdio>

using net = ctnn::sequential<ctnn::input<4>, ctnn::dense<3>>;

int main() {
  auto m = ctnn::make_model<net>(1);
  const ctnn::input_tensor_t<decltype(m)> x = {1.f, 2.f, 3.f, 4.f};
  const auto y = ctnn::predict_sample(m, x);
  const auto kernel = ctnn::variable<0, "kernel">(m);
  std::printf("consumer_xtensor: output of %zu values, kernel %zu x %zu\n", y.size(), kernel.shape()[0],
              kernel.shape()[1]);
  return y.size() == 3 && kernel.shape()[0] == 4 && kernel.shape()[1] == 3 ? 0 : 1;
}
