#!/usr/bin/env python3
"""PyTorch peer of bench/bench_mlp.cpp: the same 784-256-128-10 relu MLP
(logits), Adam (lr 1e-3, betas 0.9/0.999, eps 1e-7 as Keras), cross-entropy on
Fashion-MNIST, one shuffled epoch over the 60000 training images at each batch
size; batch-1 inference latency (median). Threads: --threads sets
torch.set_num_threads (intra-op); BLAS threads come from the environment
(OPENBLAS_NUM_THREADS). Prints one line per measurement.

  env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE OPENBLAS_NUM_THREADS=1 \
      /usr/bin/python3 bench/peers/torch_mlp.py --threads 1
"""
import argparse
import gzip
import os
import statistics
import time

import numpy as np
import torch


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


def epoch(x, y, batch):
    model = mlp()
    opt = torch.optim.Adam(model.parameters(), lr=1e-3, betas=(0.9, 0.999), eps=1e-7)
    loss_fn = torch.nn.CrossEntropyLoss()
    g = torch.Generator().manual_seed(1)
    t0 = time.perf_counter()
    perm = torch.randperm(x.shape[0], generator=g)
    for i in range(0, x.shape[0], batch):
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
    ap.add_argument("--data", default=os.environ.get("CTNN_FASHION_MNIST_DIR", "/usr/share/datasets/fashion-mnist"))
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    x, y = load(a.data, "train")
    print(f"torch {torch.__version__} intra-op threads {torch.get_num_threads()} "
          f"OPENBLAS_NUM_THREADS={os.environ.get('OPENBLAS_NUM_THREADS', 'unset')}")
    for b in (int(s) for s in a.batches.split(",")):
        print(f"torch/epoch/batch:{b}/threads:{a.threads} samples/s={epoch(x, y, b):.0f}")
    print(f"torch/infer/batch:1/threads:{a.threads} latency_us={infer_latency(x):.2f}")


if __name__ == "__main__":
    main()
