#!/usr/bin/env python3
"""bench_rnn of two builds (A = before, B = after) in paired rounds, case by case:
for each case of bench_rnn, `--rounds` pairs of runs (A B, then B A, alternating),
one core (taskset -c --cpu, CTNN_NUM_THREADS=1). Prints per case the best
samples/s of each build and the median (range) of the per-pair ratios B / A, of
wall-clock samples/s and of samples per CPU second (Google Benchmark's cpu_time
of the calling thread): on a shared machine the CPU-time ratio swings far less
(another vCPU's load shows up in the wall time). Above 1: B is faster.

  python3 bench/rnn_builds.py BENCH_RNN_A BENCH_RNN_B [--rounds 6] [--cpu 1] [--filter lstm_train]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("a")
    ap.add_argument("b")
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("--cpu", default="1")
    ap.add_argument("--min-time", dest="min_time", default="0.3")
    ap.add_argument("--filter", default="", help="only the cases whose name contains this")
    a = ap.parse_args()
    cases = [f"{c}_{k}/{n}" for k in ("inference", "train") for c in ("lstm", "gru") for n in (1, 16, 64, 256)]
    cases = [c for c in cases if a.filter in c + "/"]
    env = dict(os.environ, CTNN_NUM_THREADS="1")

    def run(binary, case):
        r = subprocess.run(["taskset", "-c", a.cpu, binary, f"--benchmark_filter=^{case}/real_time$",
                            "--benchmark_format=json", f"--benchmark_min_time={a.min_time}"],
                           capture_output=True, text=True, env=env)
        if r.returncode != 0:
            sys.exit(f"rnn_builds.py: {binary} {case} failed ({r.returncode}):\n{r.stderr[-2000:]}")
        x = json.loads(r.stdout)["benchmarks"][0]
        return x["samples_per_s"], int(case.split("/")[1]) / (x["cpu_time"] * 1e-6)  # cpu_time: us

    print("| case | A samples/s (best) | B samples/s (best) | B / A, wall: median (range) | B / A, CPU time: median (range) |")
    print("| --- | ---: | ---: | --- | --- |")
    for case in cases:
        pairs = []
        for i in range(a.rounds):
            order = ("a", "b") if i % 2 == 0 else ("b", "a")
            v = {side: run(getattr(a, side), case) for side in order}
            pairs.append((v["a"], v["b"]))
        wall = [b[0] / x[0] for x, b in pairs]
        cpu = [b[1] / x[1] for x, b in pairs]
        print(f"| {case} | {max(x[0] for x, _ in pairs):,.0f} | {max(b[0] for _, b in pairs):,.0f} | "
              f"{statistics.median(wall):.3f}x ({min(wall):.2f}-{max(wall):.2f}) | "
              f"{statistics.median(cpu):.3f}x ({min(cpu):.2f}-{max(cpu):.2f}) |", flush=True)


if __name__ == "__main__":
    main()
