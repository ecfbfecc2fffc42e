#!/usr/bin/env python3
"""Runs an ONNX model with onnxruntime: run_onnxruntime.py MODEL INPUT.npy OUTPUT.npy [NOOPT_OUTPUT.npy].

OUTPUT.npy: with onnxruntime's default graph optimizations (QDQ groups fused into int8 kernels);
NOOPT_OUTPUT.npy, when given: also without them (every QuantizeLinear/DequantizeLinear run as
written, the operators between in float), in the same process.

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
x = np.load(inp)
for path, level in [(out, None)] + [(p, ort.GraphOptimizationLevel.ORT_DISABLE_ALL) for p in sys.argv[4:5]]:
    opts = ort.SessionOptions()
    if level is not None:
        opts.graph_optimization_level = level
    opts.intra_op_num_threads = 1
    # Exact int8 products on x86 CPUs without VNNI (AVX2 alone): onnxruntime's default U8S8 kernels
    # there sum pairs of u8 x s8 products in 16 bits (vpmaddubsw), which saturate with 8-bit weights
    # (up to 36 output steps off ctnn's exact sums on an AMD Zen 3). This option makes them U8U8;
    # it changes nothing on a CPU with VNNI (nor on other platforms).
    opts.add_session_config_entry("session.x64quantprecision", "1")
    session = ort.InferenceSession(model, opts, providers=["CPUExecutionProvider"])
    (y,) = session.run(["output"], {session.get_inputs()[0].name: x})
    np.save(path, y.astype(np.float32))
