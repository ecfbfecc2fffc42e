#!/usr/bin/env python3
"""PyTorch peer of bench/bench_cnn.cpp: training throughput (samples/s) of the
Fashion-MNIST CNN of examples/fashion_mnist_cnn.cpp (conv32-pool-bn-conv64-
pool-bn-dense128-dropout-dense10), batch 64, Adam, on a fixed batch of
synthetic 28x28 images, with the thread count given (default 1). Python:
build/peers-venv/bin/python (bench/peers/setup.sh, PyTorch 2.x from PyPI) or
Debian's /usr/bin/python3 (python3-torch 1.13).

  env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE MALLOC_MMAP_THRESHOLD_=33554432 \
      MALLOC_TRIM_THRESHOLD_=4294967296 build/peers-venv/bin/python bench/peers/cnn_torch.py --threads 1

The malloc settings keep glibc from returning PyTorch's large buffers to the
kernel after every step. Prints which Python and PyTorch ran (torch_env.py),
then the median of --repeats timed runs of --steps steps.
"""
import argparse
import statistics
import time

import torch
from torch import nn

from torch_env import describe


def make_net():
    # Keras BatchNormalization(momentum=0.99, epsilon=1e-3) is PyTorch's momentum=0.01, eps=1e-3.
    return nn.Sequential(
        nn.Conv2d(1, 32, 3), nn.ReLU(), nn.MaxPool2d(2), nn.BatchNorm2d(32, eps=1e-3, momentum=0.01),
        nn.Conv2d(32, 64, 3), nn.ReLU(), nn.MaxPool2d(2), nn.BatchNorm2d(64, eps=1e-3, momentum=0.01),
        nn.Flatten(), nn.Linear(1600, 128), nn.ReLU(), nn.Dropout(0.5), nn.Linear(128, 10))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--repeats", type=int, default=3)
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    torch.set_num_interop_threads(1)
    torch.manual_seed(1)
    net = make_net()
    net.train()
    opt = torch.optim.Adam(net.parameters(), lr=1e-3)
    loss_fn = nn.CrossEntropyLoss()
    x = torch.rand(a.batch, 1, 28, 28)
    y = torch.randint(0, 10, (a.batch,))

    def step():
        opt.zero_grad(set_to_none=True)
        loss = loss_fn(net(x), y)
        loss.backward()
        opt.step()

    for _ in range(20):  # warm-up
        step()
    rates = []
    for _ in range(a.repeats):
        t0 = time.perf_counter()
        for _ in range(a.steps):
            step()
        rates.append(a.steps * a.batch / (time.perf_counter() - t0))
    print(describe())
    print(f"torch/cnn/batch:{a.batch}/threads:{a.threads} samples/s={statistics.median(rates):.0f} "
          f"(median of {a.repeats} x {a.steps} steps: " + ", ".join(f"{r:.0f}" for r in rates) + ")")


if __name__ == "__main__":
    main()
