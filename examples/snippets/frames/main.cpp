// Frame for documentation blocks that are statements: they become main's body.
#include <ctnn/ctnn.hpp>

int main() {
// @snippet@
}
