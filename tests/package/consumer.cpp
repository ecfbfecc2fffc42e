// A user's program: a tiny network trained one step, its shape checked at compile time.
#include <ctnn/ctnn.hpp>

#include <cstdio>

using net = ctnn::sequential<ctnn::input<4>, ctnn::dense<8, ctnn::tanh>, ctnn::dense<3>>;
static_assert(net::parameter_count == 4 * 8 + 8 + 8 * 3 + 3);

int main() {
  auto m = ctnn::make_model<net>(1);
  const float x[4] = {1, 2, 3, 4};
  const float* y = m.forward(x, 1, false);
  std::printf("consumer: %zu parameters, first output %g\n", net::parameter_count, double(y[0]));
  return y[0] == y[0] ? 0 : 1;
}
