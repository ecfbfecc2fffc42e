// layers/padding.hpp: the Keras output-size formulas, checked at compile time.
#include <doctest/doctest.h>

#include <ctnn/layers/padding.hpp>

using namespace ctnn;

// valid: floor((in - k) / s) + 1
static_assert(padded_out(28, 3, 1, padding::valid) == 26);
static_assert(padded_out(28, 5, 2, padding::valid) == 12);
static_assert(padded_out(13, 2, 2, padding::valid) == 6);
static_assert(padded_out(11, 2, 2, padding::valid) == 5);
static_assert(padded_out(3, 3, 1, padding::valid) == 1);
// same: ceil(in / s), independent of the window
static_assert(padded_out(28, 3, 1, padding::same) == 28);
static_assert(padded_out(28, 3, 2, padding::same) == 14);
static_assert(padded_out(13, 5, 2, padding::same) == 7);
static_assert(padded_out(1, 3, 3, padding::same) == 1);
// same: pad_total = max((out - 1) * s + k - in, 0), half before (rounded down)
static_assert(pad_before(28, 3, 1, padding::same) == 1);
static_assert(pad_before(28, 4, 1, padding::same) == 1);  // total 3: 1 before, 2 after
static_assert(pad_before(28, 3, 2, padding::same) == 0);  // total 1: 0 before, 1 after
static_assert(pad_before(13, 5, 2, padding::same) == 2);  // total 4
static_assert(pad_before(28, 3, 1, padding::valid) == 0);

TEST_CASE("padding: names and the formulas above were compiled") {
  CHECK(std::string(padding_name(padding::valid)) == "valid");
  CHECK(std::string(padding_name(padding::same)) == "same");
  CHECK(padded_out(10, 3, 3, padding::valid) == 3);
}
