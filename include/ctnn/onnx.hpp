// ctnn/onnx.hpp — ONNX export of a model, and import of an ONNX graph's weights
// into a matching model (the umbrella of onnx/export.hpp and onnx/import.hpp).
//
// Optional: link the CMake target ctnn::onnx (defined when Debian's libonnx-dev
// and libprotobuf-dev are found); the core never includes this.
//   export_onnx(m, path, opset = 17)  m's network and variables as an ONNX model
//                                     (onnx/export.hpp)
//   import_onnx(m, path)              an ONNX graph's weights into m when the graph
//                                     computes what m's network computes
//                                     (onnx/import.hpp)
// Each layer maps by its kind (its member `kind`, declared beside the layer) and
// each activation by its member onnx_op. Docs: docs/interop.md ("ONNX").
#pragma once
#include "onnx/export.hpp"
#include "onnx/import.hpp"
