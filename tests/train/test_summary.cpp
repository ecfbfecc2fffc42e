// summary.hpp: the Keras-style table.
#include <doctest/doctest.h>

#include <ctnn/layers/dense.hpp>
#include <ctnn/layers/reshape.hpp>
#include <ctnn/train/summary.hpp>

#include <sstream>

using namespace ctnn;

TEST_CASE("summary lists each layer with output shape and parameters, then totals") {
  using net = sequential<input<28, 28>, flatten, dense<256, relu>, dense<10>>;
  std::ostringstream s;
  summary<net>(s);
  const std::string t = s.str();
  CHECK(t.find("flatten") != std::string::npos);
  CHECK(t.find("(None, 784)") != std::string::npos);
  CHECK(t.find("dense<256, relu>") != std::string::npos);
  CHECK(t.find("200,960") != std::string::npos);
  CHECK(t.find("Total params: 203,530") != std::string::npos);
  CHECK(t.find("Trainable params: 203,530") != std::string::npos);
}
