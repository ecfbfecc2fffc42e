#!/usr/bin/env python3
"""PyTorch peer of bench/bench_mlp.cpp: the same 784-256-128-10 relu MLP
(logits), Adam (lr 1e-3, betas 0.9/0.999, eps 1e-7 as Keras), cross-entropy on
Fashion-MNIST, one shuffled epoch over the 60000 training images at each batch
size; batch-1 inference latency (median). Threads: --threads sets
torch.set_num_threads (intra-op: MKL and oneDNN in PyPI's PyTorch 2.x); with
Debian's 1.13 the BLAS threads come from OPENBLAS_NUM_THREADS. Prints which
Python and PyTorch ran (torch_env.py), then one line per measurement.

  PY=build/peers-venv/bin/python   # bench/peers/setup.sh; or Debian's /usr/bin/python3
  env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE OPENBLAS_NUM_THREADS=1 \
      taskset -c 0 $PY bench/peers/torch_mlp.py --threads 1
"""
import argparse
import gzip
import os
import statistics
import time

import numpy as np
import torch

from torch_env import describe


def load(dir_, prefix):
    with gzip.open(os.path.join(dir_, f"{prefix}-images-idx3-ubyte.gz")) as f:
        x = np.frombuffer(f.read(), np.uint8, offset=16).reshape(-1, 784).astype(np.float32) / 255.0
    with gzip.open(os.path.join(dir_, f"{prefix}-labels-idx1-ubyte.gz")) as f:
        y = np.frombuffer(f.read(), np.uint8, offset=8).astype(np.int64)
    return torch.from_numpy(x), torch.from_numpy(y)


def mlp():
    torch.manual_seed(42)
    return torch.nn.Sequential(torch.nn.Linear(784, 256), torch.nn.ReLU(), torch.nn.Linear(256, 128),
                               torch.nn.ReLU(), torch.nn.Linear(128, 10))


def epoch(x, y, batch, warmup=0):
    """samples/s of one epoch; warmup > 0 runs only that many steps, untimed
    (a fresh process's first steps pay PyTorch's one-time set-up)."""
    model = mlp()
    opt = torch.optim.Adam(model.parameters(), lr=1e-3, betas=(0.9, 0.999), eps=1e-7)
    loss_fn = torch.nn.CrossEntropyLoss()
    g = torch.Generator().manual_seed(1)
    t0 = time.perf_counter()
    perm = torch.randperm(x.shape[0], generator=g)
    for i in range(0, warmup * batch if warmup else x.shape[0], batch):
        idx = perm[i:i + batch]
        xb, yb = x[idx], y[idx]
        opt.zero_grad(set_to_none=True)
        loss = loss_fn(model(xb), yb)
        loss.backward()
        opt.step()
    return x.shape[0] / (time.perf_counter() - t0)


def infer_latency(x):
    model = mlp().eval()
    xb = x[:1].clone()
    times = []
    with torch.no_grad():
        for _ in range(200):
            model(xb)
        for _ in range(5000):
            t0 = time.perf_counter_ns()
            model(xb)
            times.append(time.perf_counter_ns() - t0)
    return statistics.median(times) / 1000.0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--batches", default="16,64,256")
    ap.add_argument("--no-infer", action="store_true", help="skip the batch-1 latency")
    ap.add_argument("--data", default=os.environ.get("CTNN_FASHION_MNIST_DIR", "/usr/share/datasets/fashion-mnist"))
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    x, y = load(a.data, "train")
    print(describe(), flush=True)
    for b in (int(s) for s in a.batches.split(",") if s):
        epoch(x, y, b, warmup=20)
        print(f"torch/epoch/batch:{b}/threads:{a.threads} samples/s={epoch(x, y, b):.0f}", flush=True)
    if not a.no_infer:
        print(f"torch/infer/batch:1/threads:{a.threads} latency_us={infer_latency(x):.2f}")


if __name__ == "__main__":
    main()
