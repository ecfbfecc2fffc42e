// A misspelled field of with_options' options: spelled with the type named
// (ctnn::optimizer_options{...}, as docs/training.md does), the first error
// line names the field. (A bare {...} fails class template argument deduction
// first and never names it.)
// first-error: clipnrom
// first-error: optimizer_options
#include <ctnn/ctnn.hpp>
void f() {
  ctnn::adam base{1e-3};
  ctnn::with_options opt{base, ctnn::optimizer_options{.clipnrom = 1.0}};
}
