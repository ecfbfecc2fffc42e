// cpu<> against cuda<90>, the sparse group of layer types of tests/parity/parity.hpp
// over every policy CUDA takes (parity_cuda.hpp: CUDA's traits); and a pruned
// model trained one step on each backend, stripped to each sparse layout
// (strip_pruning through the generic model), predicts as on cpu<>.
#include "cuda/parity_cuda.hpp"

PARITY_SPARSE_CASES(ctnn::cuda<90>, "parity on cuda<90>")

namespace {
template <class Layout, class MC, class MD, class D>
void stripped_predicts_alike(const MC& c, const MD& d, const D& test) {
  auto sc = ctnn::strip_pruning<Layout>(c);
  auto sd = ctnn::strip_pruning<Layout>(d);
  parity::compare("stripped variables", parity::variables_of(sd).values, parity::variables_of(sc).values, false, 1e-4);
  CHECK(parity::variables_of(sd).bytes == parity::variables_of(sc).bytes);
  parity::compare("stripped predict", ctnn::predict(sd, test.batch(parity::samples)),
                  ctnn::predict(sc, test.batch(parity::samples)), false, 1e-4);
}
}  // namespace

TEST_CASE("parity on cuda<90>: a pruned model stripped to the bitmap, csc and rows layouts predicts as on cpu<>") {
  CTNN_REQUIRE_DEVICE();
  using Net = parity::pruned_net::net;
  auto c = ctnn::make_model<Net>(11);
  auto d = ctnn::make_model<Net, ctnn::precision::float32, ctnn::cuda<90>>(11);
  const auto train = parity::dataset<Net, float>(1);
  const auto test = parity::dataset<Net, float>(2);
  const ctnn::sparse_categorical_crossentropy loss{.from_logits = true};
  ctnn::adam oc{1e-2}, od{1e-2};
  ctnn::fit(c, loss, oc, train.batch(parity::samples), ctnn::epochs{1}, ctnn::update_pruning_step{});
  ctnn::fit(d, loss, od, train.batch(parity::samples), ctnn::epochs{1}, ctnn::update_pruning_step{});
  stripped_predicts_alike<ctnn::layout::bitmap>(c, d, test);
  stripped_predicts_alike<ctnn::layout::csc>(c, d, test);
  stripped_predicts_alike<ctnn::layout::rows>(c, d, test);
}
