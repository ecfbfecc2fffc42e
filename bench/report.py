#!/usr/bin/env python3
"""Turns one run of ctnn_bench (--benchmark_out=FILE.json) and the outputs of
bench/peers/torch_mlp.py into the markdown tables of docs/performance.md:
every ctnn figure next to its peer from the same run, as a ratio.

  python3 bench/report.py bench.json torch1.txt torch2.txt... [--dlib dlib.json]
torch1.txt: torch_mlp.py --threads 1 with OPENBLAS_NUM_THREADS=1 (the one-thread peer);
torch2.txt...: two-core settings; the best batch-256 figure among them is the two-core peer.
dlib.json: peer_dlib_mlp --benchmark_out (batch-1 inference), when it was built.
The measured FMA peak (peak/fma in ctnn_bench) gives each GEMM's share of the machine.
"""
import json
import re
import sys


def load_bench(path):
    """Benchmark entries by name; with repetitions, the median of each."""
    out = {}
    for b in json.load(open(path))["benchmarks"]:
        if b.get("run_type") == "aggregate" and b.get("aggregate_name") != "median":
            continue
        name = b["name"].replace("_median", "").replace("/real_time", "").replace("/iterations:1", "")
        name = re.sub(r"/repeats:\d+", "", name)
        out[name] = b
    return out


def load_torch(path):
    epoch, infer, header = {}, {}, ""
    for line in open(path):
        if line.startswith("torch "):
            header = line.strip()
        m = re.match(r"torch/epoch/batch:(\d+)/threads:(\d+) samples/s=([\d.]+)", line)
        if m:
            epoch[int(m[1])] = float(m[3])
        m = re.match(r"torch/infer/batch:1/threads:(\d+) latency_us=([\d.]+)", line)
        if m:
            infer[int(m[1])] = float(m[2])
    return header, epoch, infer


def main():
    args = sys.argv[1:]
    dlib = None
    if "--dlib" in args:
        i = args.index("--dlib")
        dlib = load_bench(args[i + 1])
        del args[i:i + 2]
    bench = load_bench(args[0])
    t1 = load_torch(args[1])
    t2s = [load_torch(p) for p in args[2:]]
    gf = lambda n: bench[n]["GFLOP/s"] / 1e9 if bench[n]["GFLOP/s"] > 1e6 else bench[n]["GFLOP/s"]
    peak = {t: gf(f"peak/fma/{t}") for t in (1, 2) if f"peak/fma/{t}" in bench}
    if peak:
        print("Measured fp32 FMA peak (peak/fma, same run): " +
              ", ".join(f"{peak[t]:.1f} GFLOP/s on {t} thread{'s' if t > 1 else ''}" for t in sorted(peak)) + "\n")

    print("### GEMM (GFLOP/s; ratio = ctnn / OpenBLAS sgemm, same operand layouts)\n")
    print("| product | shape K x N | batch | ctnn 1T | OpenBLAS 1T | ratio 1T | ctnn 2T | OpenBLAS 2T | ratio 2T |")
    print("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for shape in ("784x256", "256x128", "128x10"):
        for op in ("fwd", "bww", "bwi"):
            for m in (1, 16, 64, 256):
                c1, o1 = gf(f"gemm/ctnn/{op}/{shape}/{m}/1"), gf(f"gemm/openblas/{op}/{shape}/{m}/1")
                c2, o2 = gf(f"gemm/ctnn/{op}/{shape}/{m}/2"), gf(f"gemm/openblas/{op}/{shape}/{m}/2")
                print(f"| {op} | {shape} | {m} | {c1:.1f} | {o1:.1f} | {c1 / o1:.2f} | {c2:.1f} | {o2:.1f} | {c2 / o2:.2f} |")
    for t in (1, 2):
        c, o = gf(f"gemm/ctnn/square/1024/1024/{t}"), gf(f"gemm/openblas/square/1024/1024/{t}")
        print(f"| square 1024 | 1024x1024 | 1024 | {'' if t == 2 else f'{c:.1f}'} | {'' if t == 2 else f'{o:.1f}'} | "
              f"{'' if t == 2 else f'{c / o:.2f}'} | {'' if t == 1 else f'{c:.1f}'} | {'' if t == 1 else f'{o:.1f}'} | "
              f"{'' if t == 1 else f'{c / o:.2f}'} |")
    for t in sorted(peak):
        c, o = gf(f"gemm/ctnn/square/1024/1024/{t}"), gf(f"gemm/openblas/square/1024/1024/{t}")
        print(f"\nSquare 1024, {t} thread{'s' if t > 1 else ''}: ctnn at {100 * c / peak[t]:.0f} % of the measured peak, "
              f"OpenBLAS at {100 * o / peak[t]:.0f} %.", end="")
    print()

    print("\n### Training the MLP with Adam, one epoch of Fashion-MNIST (samples/s)\n")
    print(f"Peer: {t1[0]}\n")
    print("| batch | threads | ctnn fit() | PyTorch | ratio | ctnn train step alone |")
    print("| ---: | ---: | ---: | ---: | ---: | ---: |")
    for m in (16, 64, 256):
        c = bench[f"mlp/epoch/batch:{m}/threads:1"]["samples/s"]
        s = bench[f"mlp/train_step/batch:{m}/threads:1"]["samples/s"]
        p = t1[1][m]
        print(f"| {m} | 1 | {c:,.0f} | {p:,.0f} | {c / p:.2f} | {s:,.0f} |")
    best = max(((t[1].get(256, 0.0), t[0]) for t in t2s), default=(0.0, ""))
    c = bench["mlp/epoch/batch:256/threads:2"]["samples/s"]
    s = bench["mlp/train_step/batch:256/threads:2"]["samples/s"]
    if best[0]:
        print(f"| 256 | 2 | {c:,.0f} | {best[0]:,.0f} | {c / best[0]:.2f} | {s:,.0f} |")
        print(f"\nTwo-core peer (best of the settings tried): {best[1]}")
        for t in t2s:
            print(f"- {t[0]}: {t[1].get(256, 0):,.0f} samples/s at batch 256")

    print("\n### Batch-1 inference latency (us; ratio = PyTorch / ctnn)\n")
    print("| threads | ctnn | PyTorch | ratio |")
    print("| ---: | ---: | ---: | ---: |")
    for t in (1, 2):
        n = f"mlp/infer/batch:1/threads:{t}"
        if n not in bench:
            continue
        c = bench[n]["real_time"] / (1000.0 if bench[n]["time_unit"] == "ns" else 1.0)
        peer = t1[2].get(1) if t == 1 else next((x[2].get(2) for x in t2s if 2 in x[2]), None)
        print(f"| {t} | {c:.2f} | {peer if peer else '-'} | {peer / c:.2f} |" if peer else f"| {t} | {c:.2f} | - | - |")
    if dlib:
        d = dlib["peer/dlib/infer/batch:1/threads:1"]
        us = d["real_time"] / (1000.0 if d["time_unit"] == "ns" else 1.0)
        c = bench["mlp/infer/batch:1/threads:1"]
        cu = c["real_time"] / (1000.0 if c["time_unit"] == "ns" else 1.0)
        print(f"\ndlib 19.24 (`peer_dlib_mlp`, net(image), 1 thread): {us:.2f} us; ratio dlib / ctnn = {us / cu:.2f}")


if __name__ == "__main__":
    main()
