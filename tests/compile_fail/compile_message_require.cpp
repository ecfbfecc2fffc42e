// diag::require<false, &make>() (core/compile_message.hpp, included alone): the
// first error line holds make()'s text, numbers and dims included.
// first-error: layer 3 (probe<7>): input has rank 2 (4x5); the count is -12
#include <ctnn/core/compile_message.hpp>

#include <array>
#include <cstddef>

constexpr ctnn::diag::message probe_text() {
  ctnn::diag::message m;
  m << "layer " << 3 << " (probe<" << 7u << ">): input has rank " << 2ul << " (";
  m.dims(std::array<std::size_t, 2>{4, 5});
  return m << "); the count is " << -12;
}
constexpr bool ok = ctnn::diag::require<false, &probe_text>();
