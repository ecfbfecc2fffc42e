#!/usr/bin/env python3
"""ONNX Runtime peer of bench/bench_int8_models.cpp: the same int8 models (ONNX QDQ files that
bench_int8_models writes with CTNN_INT8_ONNX_DIR=DIR), run by onnxruntime's CPU provider on one
thread with its default graph optimizations, and reshape_only.onnx (a Reshape alone: the cost of a
call from Python, to read the others against) (QDQ groups fused into its int8 kernels: QLinearConv,
QGemm / MatMulIntegerToFloat), at batch 1 and 64: microseconds per batch (median of --repeats
timed runs of --seconds each). onnxruntime from PyPI (pip install onnxruntime; the peers' venv
of bench/peers/setup.sh has it).

  taskset -c 1 build/peers-venv/bin/python bench/peers/ort_int8.py DIR [--clock cpu]
"""
import argparse
import statistics
import sys
import time

import numpy as np
import onnxruntime as ort


def timed(session, x, seconds, clock=time.perf_counter):
    feed = {session.get_inputs()[0].name: x}
    for _ in range(20):
        session.run(["output"], feed)
    n, t0 = 0, clock()
    while clock() - t0 < seconds:
        session.run(["output"], feed)
        n += 1
    return (clock() - t0) / n * 1e6


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("dir")
    ap.add_argument("--seconds", type=float, default=1.0)
    ap.add_argument("--repeats", type=int, default=3)
    # cpu: the calling thread's CPU time (time.thread_time; one intra-op thread runs in the
    # caller), to read against Google Benchmark's CPU column on a loaded machine
    ap.add_argument("--clock", choices=("wall", "cpu"), default="wall")
    a = ap.parse_args()
    clock = time.thread_time if a.clock == "cpu" else time.perf_counter
    print(f"onnxruntime {ort.__version__} python {sys.executable} numpy {np.__version__}")
    rng = np.random.default_rng(3)
    for name in ("reshape_only", "mlp", "cnn"):
        opts = ort.SessionOptions()
        opts.intra_op_num_threads = 1
        opts.inter_op_num_threads = 1
        opts.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        file = f"{a.dir}/{name}.onnx" if name == "reshape_only" else f"{a.dir}/int8_{name}.onnx"
        session = ort.InferenceSession(file, opts, providers=["CPUExecutionProvider"])
        shape = [d if isinstance(d, int) else 1 for d in session.get_inputs()[0].shape]
        for batch in (1, 64):
            x = rng.random([batch] + shape[1:], dtype=np.float32)
            us = statistics.median(timed(session, x, a.seconds, clock) for _ in range(a.repeats))
            print(f"ort/{name}{'' if name == 'reshape_only' else '/int8'}/{batch} us_per_batch={us:.2f} samples_per_s={batch / us * 1e6:.0f}")


if __name__ == "__main__":
    main()
