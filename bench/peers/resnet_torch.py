#!/usr/bin/env python3
"""PyTorch peer of bench/bench_resnet.cpp: training throughput (samples/s, and
seconds per 60,000-image epoch) of the small ResNet of
examples/fashion_mnist_resnet.cpp: conv16 stem, a stride-2 residual block of 32
channels, a stride-2 block and a block of 64 (each block conv3x3-bn-relu-
conv3x3-bn plus x or a 1x1 stride-2 projection of x, then relu), global average
pooling, dense 10; batch 128, Adam, on a fixed batch of synthetic 28x28 images,
with the thread count given (default 1).

  env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE MALLOC_MMAP_THRESHOLD_=33554432 \
      MALLOC_TRIM_THRESHOLD_=4294967296 taskset -c 1 /work/peers-venv/bin/python bench/peers/resnet_torch.py --threads 1

The stride-2 convolutions pad 1 on every side where Keras' (and ctnn's) "same"
pads 0 before and 1 after: the same shapes and work. Prints which Python and
PyTorch ran (torch_env.py), then the median of --repeats timed runs of --steps
steps, in wall-clock and in the process's CPU time.
"""
import argparse
import statistics
import time

import torch
from torch import nn

from torch_env import describe


def bn(c):
    # ctnn's batch_normalization<0.9> (epsilon 1e-3) is PyTorch's momentum=0.1, eps=1e-3.
    return nn.BatchNorm2d(c, eps=1e-3, momentum=0.1)


class Block(nn.Module):
    """x + f(x), then relu; x through a 1x1 stride-2 convolution where f halves the size."""

    def __init__(self, cin, c, stride):
        super().__init__()
        self.f = nn.Sequential(nn.Conv2d(cin, c, 3, stride, 1), bn(c), nn.ReLU(), nn.Conv2d(c, c, 3, 1, 1), bn(c))
        self.projection = nn.Conv2d(cin, c, 1, stride) if stride != 1 or cin != c else nn.Identity()

    def forward(self, x):
        return torch.relu(self.f(x) + self.projection(x))


def make_net():
    return nn.Sequential(
        nn.Conv2d(1, 16, 3, 1, 1), bn(16), nn.ReLU(),  # 28x28x16
        Block(16, 32, 2),                              # 14x14x32
        Block(32, 64, 2), Block(64, 64, 1),            # 7x7x64
        nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(64, 10))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--batch", type=int, default=128)
    ap.add_argument("--steps", type=int, default=50)
    ap.add_argument("--repeats", type=int, default=3)
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    torch.set_num_interop_threads(1)
    torch.manual_seed(1)
    net = make_net()
    net.train()
    # the same count as ctnn's static_assert in examples/fashion_mnist_resnet.cpp
    assert sum(p.numel() for p in net.parameters()) == 147306, sum(p.numel() for p in net.parameters())
    opt = torch.optim.Adam(net.parameters(), lr=1e-3)
    loss_fn = nn.CrossEntropyLoss()
    x = torch.rand(a.batch, 1, 28, 28)
    y = torch.randint(0, 10, (a.batch,))

    def step():
        opt.zero_grad(set_to_none=True)
        loss = loss_fn(net(x), y)
        loss.backward()
        opt.step()

    for _ in range(10):  # warm-up
        step()
    rates, cpu_rates = [], []
    for _ in range(a.repeats):
        t0, c0 = time.perf_counter(), time.process_time()
        for _ in range(a.steps):
            step()
        rates.append(a.steps * a.batch / (time.perf_counter() - t0))
        cpu_rates.append(a.steps * a.batch / (time.process_time() - c0))
    rate, cpu_rate = statistics.median(rates), statistics.median(cpu_rates)
    print(describe())
    # cpu: samples per second of the process's CPU time (all its threads), the measure that
    # holds on a machine other processes share
    print(f"torch/resnet/batch:{a.batch}/threads:{a.threads} samples/s={rate:.0f} s/epoch={60000 / rate:.1f} "
          f"cpu samples/s={cpu_rate:.0f} cpu s/epoch={60000 / cpu_rate:.1f} "
          f"(median of {a.repeats} x {a.steps} steps: " + ", ".join(f"{r:.0f}" for r in rates) + ")")


if __name__ == "__main__":
    main()
