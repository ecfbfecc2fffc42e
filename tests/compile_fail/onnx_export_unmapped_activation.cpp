// export_onnx of a model with an activation that has no ONNX operator: the
// first error is export.hpp's static_assert, naming the header that maps them.
// (Registered only where ctnn::onnx exists: it needs ONNX's headers.)
// first-error: export_onnx: this layer or activation has no ONNX mapping (see ctnn/onnx/export.hpp)
#define ONNX_ML 1
#define ONNX_NAMESPACE onnx
#include <ctnn/onnx/export.hpp>

#include <string>

// relu under another name, with no ONNX operator (its onnx_op is hidden)
struct my_relu : ctnn::relu {
  static std::string name() { return "my_relu"; }

 private:
  static constexpr const char* onnx_op = nullptr;
};
using net = ctnn::sequential<ctnn::input<4>, ctnn::dense<3, my_relu>>;
void f() { ctnn::export_onnx(ctnn::make_model<net>(1), "x.onnx"); }
