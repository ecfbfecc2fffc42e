#!/usr/bin/env python3
"""bench_rnn against its PyTorch peer (pytorch_rnn.py) in paired rounds, and the
FMA peak (ctnn_bench's peak/fma) in the same rounds: docs/performance.md's
"Recurrent" table.

Each round runs, pinned to the same cores (taskset), ctnn's bench_rnn (every
case once, CTNN_NUM_THREADS = --threads), PyTorch's peer (--threads), and
peak/fma at that thread count; the order of ctnn and PyTorch alternates from
round to round. Per case it prints the medians over the rounds of ctnn's and
PyTorch's samples/s, the median of the per-round ratios, and ctnn's share of the
peak: GFLOP/s = flops per sample x samples/s over peak/fma's GFLOP/s, with the
GEMM flops of the case (inference: 2 S (F + U) G + 2 U 10 per sample, G = 4U or
3U; a training step counted as 3x that, the usual convention; the gate rules'
element-wise work is not counted).

  cmake --preset bench && cmake --build build/bench --target bench_rnn ctnn_bench -j2
  python3 bench/peers/rnn_rounds.py --isa avx512 --threads 1 --rounds 3 [--out DIR]
  python3 bench/peers/rnn_rounds.py --isa avx512 --threads 2 --rounds 3

--isa avx2|avx512 says which ctnn build runs, and PyTorch is held to the same
instruction set as compare.sh holds it (its isa_env): avx2 runs the peer with
ATEN_CPU_CAPABILITY=avx2 ONEDNN_MAX_CPU_ISA=AVX2 MKL_ENABLE_INSTRUCTIONS=AVX2,
avx512 with PyTorch's own dispatch. Without --isa it is read from the bench's path
(compare.sh's build-avx2 / build-avx512) or, failing that, from the -march of the
CMakeCache.txt above it (x86-64-v3: avx2; native: avx512 where the CPU has
AVX512BW); where neither says, the script stops and asks for --isa. The output's
second line names the ISA and the environment the peer ran with (its first is
torch_env.py's line, which shows the capability PyTorch dispatched to).

The peer's Python: --python, else $PEER_PYTHON, else build/peers-venv/bin/python.
"""
import argparse
import json
import os
import re
import statistics
import subprocess
import sys

S, F, U, CLASSES = 28, 28, 128, 10
GATES = {"lstm": 4, "gru": 3}


def flops(cell, kind):
    g = GATES[cell] * U
    f = 2 * S * (F + U) * g + 2 * U * CLASSES
    return 3 * f if kind == "train" else f


def run(cmd, env=None):
    r = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"rnn_rounds.py: {' '.join(cmd)} failed ({r.returncode}):\n{r.stderr[-2000:]}")
    return r.stdout


# compare.sh's isa_env: the variables that hold PyTorch (ATen, oneDNN, MKL) to the ctnn build's ISA
ISA_ENV = {"avx2": {"ATEN_CPU_CAPABILITY": "avx2", "ONEDNN_MAX_CPU_ISA": "AVX2", "MKL_ENABLE_INSTRUCTIONS": "AVX2"},
           "avx512": {}}


def infer_isa(bench):
    """avx2 or avx512 from the bench binary's path (compare.sh's build-avx2 / build-avx512) or the
    -march of the nearest CMakeCache.txt above it; None where neither says."""
    path = os.path.abspath(bench)
    m = re.search(r"(?:^|[/_-])(avx2|avx512)(?:$|[/_-])", path)
    if m:
        return m[1]
    d = os.path.dirname(path)
    while d != os.path.dirname(d):
        cache = os.path.join(d, "CMakeCache.txt")
        if os.path.exists(cache):
            with open(cache) as f:
                flags = " ".join(line for line in f if line.startswith("CMAKE_CXX_FLAGS"))
            if "-march=x86-64-v3" in flags:
                return "avx2"
            if "-march=native" in flags:
                with open("/proc/cpuinfo") as f:
                    return "avx512" if re.search(r"\bavx512bw\b", f.read()) else "avx2"
            return None
        d = os.path.dirname(d)
    return None


def ctnn_round(a, cpus):
    env = dict(os.environ, CTNN_NUM_THREADS=str(a.threads))
    out = run(["taskset", "-c", cpus, a.bench, "--benchmark_format=json", f"--benchmark_min_time={a.min_time}"], env)
    res = {}
    for b in json.loads(out)["benchmarks"]:
        m = re.match(r"(lstm|gru)_(train|inference)/(\d+)", b["name"])
        if m:
            res[(m[1], m[2], int(m[3]))] = b["samples_per_s"]
    return res, out


def torch_round(a, cpus):
    env = {k: v for k, v in os.environ.items() if k not in ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")}
    env = {k: v for k, v in env.items() if k not in ("ATEN_CPU_CAPABILITY", "ONEDNN_MAX_CPU_ISA",
                                                     "MKL_ENABLE_INSTRUCTIONS")}
    env.update(MALLOC_MMAP_THRESHOLD_="33554432", MALLOC_TRIM_THRESHOLD_="4294967296", **ISA_ENV[a.isa])
    here = os.path.dirname(os.path.abspath(__file__))
    out = run(["taskset", "-c", cpus, a.python, os.path.join(here, "pytorch_rnn.py"), "--threads", str(a.threads),
               "--seconds", str(a.seconds), "--repeats", "1"], env)
    res = {}
    for line in out.splitlines():
        m = re.match(r"torch/(lstm|gru)_(train|inference)/(\d+)/threads:\d+ samples/s=([\d.]+)", line)
        if m:
            res[(m[1], m[2], int(m[3]))] = float(m[4])
    return res, out


def peak_round(a, cpus):
    out = run(["taskset", "-c", cpus, a.peak, "--benchmark_format=json", f"--benchmark_filter=^peak/fma/{a.threads}/"])
    return [b["GFLOP/s"] for b in json.loads(out)["benchmarks"]][0], out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--bench", default="build/bench/bench/bench_rnn")
    ap.add_argument("--peak", default="build/bench/bench/ctnn_bench")
    ap.add_argument("--python", default=os.environ.get("PEER_PYTHON", "build/peers-venv/bin/python"))
    ap.add_argument("--min-time", dest="min_time", type=float, default=0.3)
    ap.add_argument("--seconds", type=float, default=0.6)
    ap.add_argument("--out", default="")
    ap.add_argument("--isa", choices=sorted(ISA_ENV), default=None,
                    help="the ctnn build's ISA, PyTorch held to it (default: from --bench's path or CMakeCache.txt)")
    a = ap.parse_args()
    if a.isa is None:
        a.isa = infer_isa(a.bench)
        if a.isa is None:
            ap.error(f"--isa avx2|avx512 is needed: neither {a.bench}'s path nor a CMakeCache.txt above it "
                     "names the build's ISA")
    isa_note = " ".join(f"{k}={v}" for k, v in ISA_ENV[a.isa].items()) or "none (PyTorch's own dispatch)"
    cpus = "1" if a.threads == 1 else ",".join(str(c) for c in range(a.threads))
    ours, theirs, peaks, logs, peer = [], [], [], [], ""
    for r in range(a.rounds):
        steps = [(ours, ctnn_round), (theirs, torch_round)]
        if r % 2:
            steps.reverse()
        for into, step in steps:
            res, out = step(a, cpus)
            into.append(res)
            logs.append(out)
            if into is theirs:
                peer = out.splitlines()[0]
        p, out = peak_round(a, cpus)
        peaks.append(p)
        logs.append(out)
        print(f"round {r + 1}: peak/fma {p:.1f} GFLOP/s", file=sys.stderr)
    if a.out:
        os.makedirs(a.out, exist_ok=True)
        with open(os.path.join(a.out, f"rnn_rounds_t{a.threads}.log"), "w") as f:
            f.write("\n".join(logs))
    print(peer)
    print(f"isa {a.isa}: ctnn {a.bench}; the peer's ISA environment: {isa_note}")
    peak = statistics.median(peaks)
    print(f"threads {a.threads} (taskset -c {cpus}), {a.rounds} paired rounds; peak/fma median {peak:.1f} GFLOP/s "
          f"({', '.join(f'{p:.1f}' for p in peaks)})")
    print("| case | batch | ctnn samples/s | PyTorch samples/s | ctnn / PyTorch (per-round ratios) | ctnn % of peak |")
    print("| --- | ---: | ---: | ---: | --- | ---: |")
    for key in sorted(ours[0], key=lambda k: (k[0] != "lstm", k[1] != "inference", k[2])):
        c = [o[key] for o in ours]
        t = [o[key] for o in theirs]
        ratios = [x / y if y > 0 else float("inf") for x, y in zip(c, t)]  # (the peer prints whole samples/s)
        share = flops(key[0], key[1]) * statistics.median(c) / 1e9 / peak
        print(f"| {key[0]} {key[1]} | {key[2]} | {statistics.median(c):.0f} | {statistics.median(t):.0f} | "
              f"{statistics.median(ratios):.2f} ({', '.join(f'{x:.2f}' for x in ratios)}) | {100 * share:.0f} % |")


if __name__ == "__main__":
    main()
