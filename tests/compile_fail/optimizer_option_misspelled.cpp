// A misspelled optimizer option in the form optimizers/options.hpp shows: the
// first error names the field (g++: "has no non-static data member named
// 'clipnrom'"; clang: "field designator 'clipnrom' does not refer to any field").
#include <ctnn/ctnn.hpp>

int main() {
  ctnn::with_options opt{ctnn::adam{1e-3}, ctnn::optimizer_options{.clipnrom = 1.0}};
  (void)opt;
}
// first-error: clipnrom
// first-error: optimizer_options
