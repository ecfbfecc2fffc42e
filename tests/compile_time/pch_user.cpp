// Built with ctnn_precompile_headers(ctnn_pch_user): no #include of ctnn here, so
// this file compiles only through the precompiled <ctnn/ctnn.hpp>.
using net = ctnn::sequential<ctnn::input<4>, ctnn::dense<8, ctnn::relu>, ctnn::dense<2>>;
static_assert(net::parameter_count == 4 * 8 + 8 + 8 * 2 + 2);

int main() {
  auto m = ctnn::make_model<net>(1);
  float x[4] = {1, 2, 3, 4};
  return m.predict(x, 1).size() == 2 ? 0 : 1;
}
