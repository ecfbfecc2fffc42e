#!/usr/bin/env python3
"""Quantizes a float ONNX model with onnxruntime's quantize_static, then runs the result:
ort_quantize_static.py FLOAT_MODEL CALIBRATION.npy QUANTIZED_MODEL INPUT.npy OUTPUT.npy NOOPT_OUTPUT.npy

QDQ format, per-channel symmetric int8 weights, int8 activations, min/max calibration over
CALIBRATION.npy (fed in batches of 50). OUTPUT.npy: QUANTIZED_MODEL run with onnxruntime's
default graph optimizations (QDQ groups fused into int8 kernels); NOOPT_OUTPUT.npy: without
them (every QuantizeLinear/DequantizeLinear run as written). Prints the quantized graph's
operators in order (one line). Used by tests/onnx/test_onnx_ort_qdq.cpp; exit code 3 when
numpy, onnx or onnxruntime's quantization tools cannot be imported (the test is then skipped).
"""
import sys

try:
    import numpy as np
    import onnxruntime as ort
    from onnxruntime.quantization import CalibrationDataReader, QuantFormat, QuantType, quantize_static
except ImportError as e:  # the C++ test turns this into CTNN_SKIP
    print(f"missing: {e}", file=sys.stderr)
    sys.exit(3)

src, cal, dst, inp, out, noopt = sys.argv[1:7]
calibration = np.load(cal)


class Reader(CalibrationDataReader):
    def __init__(self, name):
        self.batches = iter([{name: calibration[i : i + 50]} for i in range(0, len(calibration), 50)])

    def get_next(self):
        return next(self.batches, None)


name = ort.InferenceSession(src, providers=["CPUExecutionProvider"]).get_inputs()[0].name
quantize_static(src, dst, Reader(name), quant_format=QuantFormat.QDQ, per_channel=True,
                activation_type=QuantType.QInt8, weight_type=QuantType.QInt8,
                extra_options={"WeightSymmetric": True})
x = np.load(inp)
for path, level in [(out, None), (noopt, ort.GraphOptimizationLevel.ORT_DISABLE_ALL)]:
    opts = ort.SessionOptions()
    if level is not None:
        opts.graph_optimization_level = level
    opts.intra_op_num_threads = 1
    # Exact int8 products on x86 without VNNI (see run_onnxruntime.py): U8U8, not the saturating U8S8.
    opts.add_session_config_entry("session.x64quantprecision", "1")
    session = ort.InferenceSession(dst, opts, providers=["CPUExecutionProvider"])
    (y,) = session.run(None, {name: x})
    np.save(path, y.astype(np.float32))
import onnx  # (quantize_static needs it: present here)

print("quantize_static:", " ".join(n.op_type for n in onnx.load(dst).graph.node))
