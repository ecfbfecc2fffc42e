#!/usr/bin/env bash
# Before/after comparison of the MLP and CNN training benchmarks of two trees,
# run side by side in one run on one machine (issue 23, item 9: within 3 %).
#
#   scripts/bench-compare.sh [-r ROUNDS] [-p REPS] [-a ARCHS] [-f REGEX] [-o OUT] [-B] [-T] BEFORE AFTER
#
# BEFORE / AFTER: a ctnn tree (directory) or a commit; a commit is checked out
# with `git worktree add --detach` into OUT/trees/<commit> (or reused there).
# For each tree and architecture it builds the targets ctnn_bench (bench_gemm +
# bench_mlp) and bench_cnn in OUT/build-{before,after}-ARCH (Release, -O3 -march=M
# -DNDEBUG, tests/examples/CUDA off, ccache, `nice -n 19`, -j2). ARCHS (default:
# both that the CPU runs) name the -march of each build and so the cpu<> tag the
# benchmarks get (xsimd's default_arch, printed at the start):
#   avx2    -march=x86-64-v3  -> cpu<fma3<avx2>>
#   avx512  -march=native     -> cpu<avx512bw> (only when the CPU has avx512bw)
# Then ROUNDS rounds (default 5), each running, per architecture, BEFORE then
# AFTER (A B A B ...), each with --benchmark_repetitions=REPS (default 1), one thread:
#   mlp/train_step batch 16, 64, 256; mlp/epoch batch 16, 64, 256; mlp/infer
#   batch 1 (ctnn_bench), cnn_train_step batch 64 (bench_cnn).
# -f REGEX keeps only the benchmarks whose name matches (to rerun a row).
# -B skips the builds (reuses OUT's binaries); -T only prints the table of the
# runs already in OUT/runs (of an interrupted run, say). A new run moves the
# previous OUT/runs to OUT/runs.<its time>.
# Prints one table: per benchmark and architecture the min and median over all
# rounds x repetitions of Google Benchmark's CPU time, before, after, and the
# ratio after / before (above 1: after is slower); `!` marks a ratio of the
# mins outside 0.97..1.03. The 1-minute load average is read before every run
# and summarised (min / max): on a shared machine compare ratios, not figures.
set -euo pipefail

rounds=5
reps=1
archs=
filter=.
out=build/bench-compare
build=1
table_only=0
usage() { sed -n 4p "$0" | sed 's/^# *//' >&2; exit 2; }
while getopts "r:p:a:f:o:BT" opt; do
  case $opt in
    r) rounds=$OPTARG ;;
    p) reps=$OPTARG ;;
    a) archs=$OPTARG ;;
    f) filter=$OPTARG ;;
    o) out=$OPTARG ;;
    B) build=0 ;;
    T) table_only=1 ;;
    *) usage ;;
  esac
done
shift $((OPTIND - 1))
[ $# -eq 2 ] || [ $table_only = 1 ] || usage

mkdir -p "$out"
out=$(cd "$out" && pwd)
here=$(cd "$(dirname "$0")/.." && pwd)

runs=$out/runs
table() {  # the table of the JSON files in $runs
python3 - "$runs" "$filter" <<'PY'
import glob, json, os, re, statistics, sys
runs, flt = sys.argv[1], re.compile(sys.argv[2])
t = {}  # (arch, name) -> side -> [cpu_time in us]
for path in glob.glob(f"{runs}/*.json"):
    _, arch, side, _ = os.path.basename(path)[:-5].split("-")
    try:
        bms = json.load(open(path))["benchmarks"]
    except ValueError:  # a run still being written (or cut short)
        print(f"skipped {path}: not complete")
        continue
    for bm in bms:
        if bm.get("run_type") == "aggregate":
            continue
        name = re.sub(r"/(real_time|iterations:1|min_time:[0-9.]+)", "", bm["name"])
        if not flt.search(name):
            continue
        scale = {"ns": 1e-3, "us": 1.0, "ms": 1e3, "s": 1e6}[bm["time_unit"]]
        t.setdefault((arch, name), {}).setdefault(side, []).append(bm["cpu_time"] * scale)
load = [float(x) for x in open(f"{runs}/load")]
t = {k: v for k, v in t.items() if "before" in v and "after" in v}  # rows both sides ran
if not t:
    sys.exit("no benchmark ran on both sides")
n = sorted({len(v[side]) for v in t.values() for side in v})
print(f"\nCPU time per iteration (us), min and median of {'/'.join(map(str, n))} runs per side; "
      f"ratio = after / before (above 1: slower); load average (1 min) {min(load):.2f}-{max(load):.2f}\n")
print("| benchmark | arch | before min | after min | ratio (min) | before median | after median | ratio (median) |")
print("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |")
for (arch, name), s in sorted(t.items(), key=lambda kv: (kv[0][1], kv[0][0])):
    b, a = s["before"], s["after"]
    rmin, rmed = min(a) / min(b), statistics.median(a) / statistics.median(b)
    mark = "" if 0.97 <= rmin <= 1.03 else " !"
    print(f"| {name} | {arch} | {min(b):,.1f} | {min(a):,.1f} | {rmin:.3f}{mark} | "
          f"{statistics.median(b):,.1f} | {statistics.median(a):,.1f} | {rmed:.3f} |")
PY
}
if [ $table_only = 1 ]; then table; exit; fi

tree_of() {  # a directory, or a commit checked out as a detached worktree under OUT/trees
  if [ -d "$1" ]; then
    [ -f "$1/include/ctnn/ctnn.hpp" ] || { echo "$0: $1: not a ctnn tree" >&2; exit 2; }
    (cd "$1" && pwd)
    return
  fi
  local c
  c=$(git -C "$here" rev-parse --short "$1^{commit}")
  if [ ! -d "$out/trees/$c" ]; then
    git -C "$here" worktree add --detach "$out/trees/$c" "$c" >&2
  fi
  echo "$out/trees/$c"
}
before=$(tree_of "$1")
after=$(tree_of "$2")

if [ -z "$archs" ]; then
  archs=avx2
  grep -qw avx512bw /proc/cpuinfo && archs="avx2 avx512"
fi
march_of() { case $1 in avx2) echo x86-64-v3 ;; avx512) echo native ;; *) echo "$0: unknown arch $1" >&2; exit 2 ;; esac; }

label() {  # commit of a tree, +dirty when its headers or benchmark sources differ from it
  local c
  c=$(git -C "$1" rev-parse --short HEAD 2>/dev/null || echo "?")
  git -C "$1" diff --quiet HEAD -- include 'bench/*.cpp' 2>/dev/null || c="$c+dirty"
  echo "$c"
}

echo "before: $before ($(label "$before"))"
echo "after:  $after ($(label "$after"))"
echo "cpu: $(lscpu | sed -n 's/^Model name: *//p' | head -n 1), $(nproc) cores; $(g++ --version | head -n 1)"

# The cpu<> tag each -march gives: xsimd's default_arch, as ops<cpu<>> uses it.
probe=$out/arch_probe.cpp
printf '#include <xsimd/xsimd.hpp>\n#include <cstdio>\nint main() { std::puts(xsimd::default_arch::name()); }\n' > "$probe"
for a in $archs; do
  g++ -std=c++20 -O1 -march="$(march_of "$a")" "$probe" -o "$out/arch_probe_$a"
  echo "arch $a: -march=$(march_of "$a") -> xsimd default_arch $("$out/arch_probe_$a")"
done

if [ $build = 1 ]; then
  for side in before after; do
    tree=$before
    [ $side = after ] && tree=$after
    for a in $archs; do
      dir=$out/build-$side-$a
      cmake -S "$tree" -B "$dir" -DCMAKE_BUILD_TYPE=Release \
        -DCMAKE_CXX_FLAGS_RELEASE="-O3 -march=$(march_of "$a") -DNDEBUG" \
        -DCTNN_BUILD_BENCHMARKS=ON -DCTNN_BUILD_TESTS=OFF -DCTNN_BUILD_EXAMPLES=OFF -DCTNN_CUDA=OFF \
        -DCMAKE_CXX_COMPILER_LAUNCHER=ccache > "$dir.configure.log"
      nice -n 19 cmake --build "$dir" -j2 --target ctnn_bench bench_cnn > "$dir.build.log"
      echo "built $dir"
    done
  done
fi

mlp='^mlp/(train_step|epoch)/batch:(16|64|256)/threads:1/|^mlp/infer/batch:1/threads:1/'
# Each program's benchmarks that -f keeps, as one anchored alternation ('' = none).
selected() {  # PROG DEFAULT_FILTER
  "$out/build-after-${archs%% *}/bench/$1" --benchmark_list_tests --benchmark_filter="$2" |
    grep -E -- "$filter" | sed 's/^/^/; s/$/$/' | paste -sd'|' || true
}
sel_mlp=$(selected ctnn_bench "$mlp")
sel_cnn=$(selected bench_cnn cnn_train_step)
[ -n "$sel_mlp$sel_cnn" ] || { echo "$0: no benchmark matches -f $filter" >&2; exit 2; }
[ -d "$runs" ] && mv "$runs" "$runs.$(date -u -r "$runs" +%Y%m%dT%H%M%S)"  # keep earlier runs
mkdir -p "$runs"
echo "start $(date -u +%FT%TZ), $rounds rounds x $reps repetitions, archs: $archs"
for ((r = 1; r <= rounds; r++)); do
  for a in $archs; do
    for side in before after; do
      dir=$out/build-$side-$a/bench
      for prog in ctnn_bench bench_cnn; do
        f=$sel_cnn
        [ $prog = ctnn_bench ] && f=$sel_mlp
        [ -n "$f" ] || continue
        cut -d' ' -f1 /proc/loadavg >> "$runs/load"
        CTNN_NUM_THREADS=1 "$dir/$prog" --benchmark_filter="$f" --benchmark_min_time=0.5 \
          --benchmark_repetitions="$reps" --benchmark_out="$runs/$r-$a-$side-$prog.json" \
          --benchmark_out_format=json > /dev/null 2>> "$runs/stderr"
      done
    done
  done
  echo "round $r done $(date -u +%TZ), load $(cut -d' ' -f1-3 /proc/loadavg)"
done
echo "end $(date -u +%FT%TZ)"

table
