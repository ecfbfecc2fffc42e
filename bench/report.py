#!/usr/bin/env python3
"""Turns one run of ctnn_bench (--benchmark_out=FILE.json) and the outputs of
bench/peers/torch_mlp.py into the markdown tables of docs/performance.md:
every ctnn figure next to its peer from the same run, as a ratio.

  python3 bench/report.py bench.json torch1.txt torch2.txt... [--dlib dlib.json]
  python3 bench/report.py compare RUNS   (bench/peers/compare.sh's rounds: issue 25's
                                          tables per architecture, see compare())
torch1.txt: torch_mlp.py --threads 1 with OPENBLAS_NUM_THREADS=1 (the one-thread peer);
torch2.txt...: two-core settings; the best batch-256 figure among them is the two-core peer.
dlib.json: peer_dlib_mlp --benchmark_out (batch-1 inference), when it was built.
The measured FMA peak (peak/fma in ctnn_bench) gives each GEMM's share of the machine.
"""
import glob
import json
import os
import re
import statistics
import sys

# Floating-point work of one training sample of the 784-256-128-10 MLP: forward
# 2*(784*256 + 256*128 + 128*10), dW as much, dX as much but for the first layer
# (its input needs no gradient). Forward alone (inference): the first term.
MLP_FWD_FLOP = 2 * (784 * 256 + 256 * 128 + 128 * 10)
MLP_STEP_FLOP = 3 * MLP_FWD_FLOP - 2 * 784 * 256
# The CNN's products per training sample (convolutions as 2*out*K*K*Cin each,
# the two dense layers; no batch_norm, pooling or Adam): forward
# conv1 26*26*32*9, conv2 11*11*64*288, dense 1600*128 and 128*10, times 3 but
# for conv1's input gradient.
CNN_FWD_FLOP = 2 * (26 * 26 * 32 * 9 + 11 * 11 * 64 * 288 + 1600 * 128 + 128 * 10)
CNN_STEP_FLOP = 3 * CNN_FWD_FLOP - 2 * 26 * 26 * 32 * 9


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


def _norm(name):
    return re.sub(r"/(real_time|iterations:1|min_time:[0-9.]+)", "", name)


def _gflops(b):
    return b["GFLOP/s"] / 1e9 if b["GFLOP/s"] > 1e6 else b["GFLOP/s"]


def _us(b):
    return b["real_time"] * {"ns": 1e-3, "us": 1.0, "ms": 1e3, "s": 1e6}[b["time_unit"]]


def _rng(xs, fmt):
    return fmt.format(xs[0]) if len(xs) == 1 else f"{fmt.format(min(xs))}-{fmt.format(max(xs))}"


def compare(runs):
    """Issue 25's tables from bench/peers/compare.sh's RUNS directory: per
    architecture, the median over rounds of every figure, ctnn / PyTorch as the
    ratio of the medians with the range of the per-round ratios, and each ctnn
    figure as a share of peak/fma of the same builds and rounds."""
    c = {}  # (arch, name) -> [value per round]
    t = {}  # (arch, name) -> [value per round]
    hdr = {}  # arch -> set of the peer's header lines
    for path in sorted(glob.glob(os.path.join(runs, "*.json"))):
        _, arch, _, _ = os.path.basename(path)[:-5].split("-")
        try:
            bms = json.load(open(path))["benchmarks"]
        except ValueError:
            print(f"skipped {path}: not complete")
            continue
        for b in bms:
            if b.get("run_type") == "aggregate" or b.get("error_occurred"):
                continue
            n = _norm(b["name"])
            if n.startswith("peak/"):
                v = _gflops(b)
            elif n.startswith("mlp/infer"):
                v = _us(b)
            elif n.startswith("cnn_train_step"):
                v = b["samples_per_s"]
                n = f"cnn/threads:{os.path.basename(path)[:-5].split('-')[3]}"
            elif "samples/s" in b:
                v = b["samples/s"]
            else:  # a benchmark these tables do not read (bench_cnn's conv2/..., mlp/gather)
                continue
            c.setdefault((arch, n), []).append(v)
    for path in sorted(glob.glob(os.path.join(runs, "*.txt"))):
        arch = os.path.basename(path).split("-")[1]
        for line in open(path):
            if line.startswith("torch ") and " python " in line:
                hdr.setdefault(arch, set()).add(re.sub(r" intra-op threads \d+", "", line.strip()))
            m = re.match(r"torch/(epoch|cnn)/batch:(\d+)/threads:(\d+) samples/s=([\d.]+)", line)
            if m:
                n = f"mlp/epoch/batch:{m[2]}/threads:{m[3]}" if m[1] == "epoch" else f"cnn/threads:{m[3]}"
                t.setdefault((arch, n), []).append(float(m[4]))
            m = re.match(r"torch/infer/batch:1/threads:(\d+) latency_us=([\d.]+)", line)
            if m:
                t.setdefault((arch, f"mlp/infer/batch:1/threads:{m[1]}"), []).append(float(m[2]))
    loads = {}
    if os.path.exists(os.path.join(runs, "load")):
        for line in open(os.path.join(runs, "load")):
            a, v = line.split()
            loads.setdefault(a, []).append(float(v))
    # The runs themselves keep the 1-minute load near 1-1.4 on 2 CPUs (81fc675's quiet run: 0.75-1.36);
    # above the CPU count (runs/cpus, written by compare.sh) something else was running.
    cpus_file = os.path.join(runs, "cpus")
    cpus = int(open(cpus_file).read().split()[0]) if os.path.exists(cpus_file) else (os.cpu_count() or 1)
    med = lambda d, a, n: statistics.median(d[(a, n)]) if (a, n) in d else None

    def ratio(a, n, inverse=False):  # median ratio and the range of the per-round ratios
        if (a, n) not in c or (a, n) not in t:
            return "-"
        x, y = c[(a, n)], t[(a, n)]
        rs = [(q / p if inverse else p / q) for p, q in zip(x, y)]
        r = (med(t, a, n) / med(c, a, n)) if inverse else (med(c, a, n) / med(t, a, n))
        return f"{r:.2f}x ({_rng(rs, '{:.2f}')})"

    for arch in sorted({a for a, _ in c}, reverse=True):
        tag = {"avx512": "cpu<avx512bw> (-march=native)",
               "avx2": "cpu<fma3<avx2>> (-march=x86-64-v3; an AVX2 build on this CPU, "
                       "PyTorch limited to AVX2)"}.get(arch, arch)
        ld = loads.get(arch, [])
        n_rounds = max(len(v) for (a, _), v in c.items() if a == arch)
        print(f"## {tag}\n")
        print(f"Medians of {n_rounds} rounds, ctnn and PyTorch alternating; ratios: of the medians "
              f"(per-round range in brackets). Load average (1 min) before the runs: "
              + (f"{min(ld):.2f}-{max(ld):.2f}" + (f" (loaded: above the {cpus} CPUs)" if max(ld) > cpus else "") if ld else "not logged")
              + ".\n")
        for h in sorted(hdr.get(arch, [])):
            print(f"Peer: {h}\n")
        pk = {th: med(c, arch, f"peak/fma/{th}") for th in (1, 2)}
        for th in (1, 2):
            if pk[th]:
                ind = med(c, arch, f"peak/fma_independent/{th}")
                print(f"peak/fma, {th} thread{'s' if th > 1 else ''}: {pk[th]:.1f} GFLOP/s"
                      + (f" (peak/fma_independent {ind:.1f}, {100 * (pk[th] / ind - 1):+.1f} %)" if ind else ""))
        share = lambda g, th: f"{100 * g / pk[th]:.0f} %" if pk.get(th) else "-"
        print("\n### MLP fit (mlp/epoch, samples/s; % of peak = samples/s x 1.007 MFLOP / peak/fma)\n")
        print("| batch | threads | ctnn fit() | PyTorch | ctnn / PyTorch | target | ctnn fit, % of peak |")
        print("| ---: | ---: | ---: | ---: | --- | --- | ---: |")
        for th in (1, 2):
            for b in (64, 256):
                n = f"mlp/epoch/batch:{b}/threads:{th}"
                x, y = med(c, arch, n), med(t, arch, n)
                if x is None and y is None:
                    continue
                goal = 2.5 if b == 64 else 1.5
                met = "" if x is None or y is None else (" met" if x / y >= goal else " missed")
                print(f"| {b} | {th} | {x or 0:,.0f} | {y or 0:,.0f} | {ratio(arch, n)} | >= {goal}x:{met} | "
                      f"{share(x * MLP_STEP_FLOP * 1e-9, th) if x else '-'} |")
        print("\n### MLP training step alone (mlp/train_step, samples/s) against the peak\n")
        print("| batch | threads | ctnn step | GFLOP/s | % of peak | target (1 thread) | 1 -> 2 threads |")
        print("| ---: | ---: | ---: | ---: | ---: | --- | ---: |")
        for th in (1, 2):
            for b in (16, 64, 256):
                x = med(c, arch, f"mlp/train_step/batch:{b}/threads:{th}")
                if x is None:
                    continue
                g = x * MLP_STEP_FLOP * 1e-9
                goal = {16: 35, 64: 50, 256: 60}[b]
                tg = (f">= {goal} %: " + ("met" if pk[1] and 100 * g / pk[1] >= goal else "missed")) if th == 1 else ""
                one = med(c, arch, f"mlp/train_step/batch:{b}/threads:1")
                sc = f"{x / one:.2f}x" + (" (target >= 1.8x)" if b == 256 else "") if th == 2 and one else ""
                print(f"| {b} | {th} | {x:,.0f} | {g:.1f} | {share(g, th)} | {tg} | {sc} |")
        print("\n### CNN training step, batch 64 (samples/s; % of peak: its convolutions and dense products, "
              f"{CNN_STEP_FLOP / 1e6:.1f} MFLOP a sample)\n")
        print("| threads | ctnn | PyTorch | ctnn / PyTorch | target | ctnn % of peak | PyTorch % of peak |")
        print("| ---: | ---: | ---: | --- | --- | ---: | ---: |")
        for th in (1, 2):
            n = f"cnn/threads:{th}"
            x, y = med(c, arch, n), med(t, arch, n)
            if x is None and y is None:
                continue
            goal = 3 if th == 1 else 2
            met = "" if x is None or y is None else (" met" if x / y >= goal else " missed")
            print(f"| {th} | {x or 0:,.0f} | {y or 0:,.0f} | {ratio(arch, n)} | >= {goal}x:{met} | "
                  f"{share(x * CNN_STEP_FLOP * 1e-9, th) if x else '-'} | {share(y * CNN_STEP_FLOP * 1e-9, th) if y else '-'} |")
        x1, x2 = med(c, arch, "cnn/threads:1"), med(c, arch, "cnn/threads:2")
        y1, y2 = med(t, arch, "cnn/threads:1"), med(t, arch, "cnn/threads:2")
        if x1 and x2 and y1 and y2:
            print(f"\nCNN 1 -> 2 threads: ctnn {x2 / x1:.2f}x (target >= 1.8x), PyTorch {y2 / y1:.2f}x.")
        print("\n### Batch-1 inference (us, median; ratio = PyTorch / ctnn)\n")
        print("| threads | ctnn | PyTorch | PyTorch / ctnn | target | ctnn GFLOP/s, % of peak |")
        print("| ---: | ---: | ---: | --- | --- | ---: |")
        for th in (1, 2):
            n = f"mlp/infer/batch:1/threads:{th}"
            x, y = med(c, arch, n), med(t, arch, n)
            if x is None:
                continue
            g = MLP_FWD_FLOP / (x * 1e3)
            tg = ("<= 5 us: " + ("met" if x <= 5 else "missed")) if th == 1 else ""
            print(f"| {th} | {x:.2f} | {f'{y:.2f}' if y else '-'} | {ratio(arch, n, inverse=True)} | {tg} | "
                  f"{g:.1f}, {share(g, th)} |")
        print()


def main():
    args = sys.argv[1:]
    if args[:1] == ["compare"]:
        compare(args[1])
        return
    dlib = None
    if "--dlib" in args:
        i = args.index("--dlib")
        dlib = load_bench(args[i + 1])
        del args[i:i + 2]
    cnn = None
    if "--cnn" in args:
        i = args.index("--cnn")
        cnn = args[i + 1:i + 5]
        del args[i:i + 5]
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
    share = lambda v, t: f"{100 * v * MLP_STEP_FLOP * 1e-9 / peak[t]:.0f} %" if t in peak else "-"
    print("| batch | threads | ctnn fit() | PyTorch | ratio | ctnn fit, % of peak | ctnn train step alone | step, % of peak |")
    print("| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for m in (16, 64, 256):
        c = bench[f"mlp/epoch/batch:{m}/threads:1"]["samples/s"]
        s = bench[f"mlp/train_step/batch:{m}/threads:1"]["samples/s"]
        p = t1[1][m]
        print(f"| {m} | 1 | {c:,.0f} | {p:,.0f} | {c / p:.2f} | {share(c, 1)} | {s:,.0f} | {share(s, 1)} |")
    best = max(((t[1].get(256, 0.0), t[0]) for t in t2s), default=(0.0, ""))
    c = bench["mlp/epoch/batch:256/threads:2"]["samples/s"]
    s = bench["mlp/train_step/batch:256/threads:2"]["samples/s"]
    if best[0]:
        print(f"| 256 | 2 | {c:,.0f} | {best[0]:,.0f} | {c / best[0]:.2f} | {share(c, 2)} | {s:,.0f} | {share(s, 2)} |")
        print(f"\nTwo-core peer (best of the settings tried): {best[1]}")
        for t in t2s:
            print(f"- {t[0]}: {t[1].get(256, 0):,.0f} samples/s at batch 256")

    if cnn:
        print("\n### CNN training step, batch 64 (samples/s)\n")
        print("| threads | ctnn | PyTorch | ratio | ctnn, % of peak (convolutions and dense products) |")
        print("| ---: | ---: | ---: | ---: | ---: |")
        for t, (cj, tt) in enumerate(((cnn[0], cnn[1]), (cnn[2], cnn[3])), start=1):
            c = next(iter(load_bench(cj).values()))["samples_per_s"]
            m = re.search(r"samples/s=([\d.]+)", open(tt).read())
            p = float(m[1]) if m else 0.0
            pk = f"{100 * c * CNN_STEP_FLOP * 1e-9 / peak[t]:.0f} %" if t in peak else "-"
            print(f"| {t} | {c:,.0f} | {p:,.0f} | {c / p if p else 0:.2f} | {pk} |")

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
