#!/usr/bin/env python3
"""Runs an ONNX model with onnxruntime: run_onnxruntime.py MODEL INPUT.npy OUTPUT.npy [noopt].

noopt: without graph optimizations (every QuantizeLinear/DequantizeLinear run as written, the
operators between in float), else onnxruntime's default (QDQ groups fused into int8 kernels).

Used by tests/onnx/test_onnx.cpp to check ctnn's exported models. Exit code 3 when
numpy or onnxruntime cannot be imported (the test then reports itself skipped).
"""
import sys

try:
    import numpy as np
    import onnxruntime as ort
except ImportError as e:  # the C++ test turns this into CTNN_SKIP
    print(f"missing: {e}", file=sys.stderr)
    sys.exit(3)

model, inp, out = sys.argv[1:4]
opts = ort.SessionOptions()
if sys.argv[4:5] == ["noopt"]:
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
opts.intra_op_num_threads = 1
session = ort.InferenceSession(model, opts, providers=["CPUExecutionProvider"])
x = np.load(inp)
(y,) = session.run(["output"], {session.get_inputs()[0].name: x})
np.save(out, y.astype(np.float32))
