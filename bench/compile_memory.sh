#!/usr/bin/env bash
# Compile time and peak memory of the MLP (and CNN) programs against one or more trees.
#
#   bench/compile_memory.sh [-n ROUNDS] [-s] [-p PROGRAMS] TREE [TREE ...]
#
# TREE is the root of a ctnn checkout (a worktree of any commit, e.g.
# `git worktree add /tmp/base-1e8b681 1e8b681`). Each round compiles, for every
# tree in turn (so the trees alternate and a change in the machine's load falls
# on all of them alike):
#   mlp_1e8b681  bench/compile/mlp_1e8b681.cpp of THIS checkout, the same
#                program for every tree (the example as it was before issue 9);
#   example      TREE/examples/fashion_mnist_mlp.cpp, the tree's own example;
#   cnn          TREE/examples/fashion_mnist_cnn.cpp, the tree's own CNN example
#                (PROGRAMS, -p "...", default "mlp_1e8b681 example").
# with  $CXX $CXXFLAGS -I TREE/include -c FILE  (default: g++ -std=c++20 -O3
# -march=native -DNDEBUG, the command of docs/performance.md) and prints one
# line per compile: wall, user and user+system seconds and peak resident memory from
# /usr/bin/time, the object's code bytes (all .text sections,
# inline functions' included), and the 1-minute load average read
# just before the compile. -s compiles with -fsyntax-only instead (no object).
# A summary per tree and program follows: min / median / max of each figure.
# Peak memory does not depend on the machine's load; time does, so compare
# times only between trees measured in the same alternating series.
set -euo pipefail

rounds=3
syntax=0
programs="mlp_1e8b681 example"
while getopts "n:sp:" opt; do
  case $opt in
    n) rounds=$OPTARG ;;
    s) syntax=1 ;;
    p) programs=$OPTARG ;;
    *) echo "usage: $0 [-n ROUNDS] [-s] [-p PROGRAMS] TREE [TREE ...]" >&2; exit 2 ;;
  esac
done
shift $((OPTIND - 1))
if [ $# -eq 0 ]; then
  echo "usage: $0 [-n ROUNDS] [-s] [-p PROGRAMS] TREE [TREE ...]" >&2
  exit 2
fi

here=$(cd "$(dirname "$0")/.." && pwd)
program=$here/bench/compile/mlp_1e8b681.cpp
cxx=${CXX:-g++}
read -r -a flags <<< "${CXXFLAGS:--std=c++20 -O3 -march=native -DNDEBUG}"
[ -x /usr/bin/time ] || { echo "$0: needs /usr/bin/time (GNU time)" >&2; exit 2; }

trees=()
for t in "$@"; do
  [ -f "$t/include/ctnn/ctnn.hpp" ] || { echo "$0: $t: no include/ctnn/ctnn.hpp (not a ctnn tree)" >&2; exit 2; }
  trees+=("$(cd "$t" && pwd)")
done

label() {  # directory@commit of a tree, +dirty when its headers differ from the commit
  local c
  c=$(git -C "$1" rev-parse --short HEAD 2>/dev/null || echo "?")
  if ! git -C "$1" diff --quiet HEAD -- include 2>/dev/null; then c="$c+dirty"; fi
  echo "$(basename "$1")@$c"
}

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
results=$tmp/results

echo "compiler: $($cxx --version | head -n 1)"
echo "flags: ${flags[*]}$([ $syntax = 1 ] && echo " -fsyntax-only")"
echo "cpu: $(lscpu 2>/dev/null | sed -n 's/^Model name: *//p' | head -n 1), $(nproc) cores"
printf "%-5s %-30s %-12s %8s %8s %8s %10s %10s %6s\n" round tree program wall_s user_s usys_s peak_KB text_B load1
for ((r = 1; r <= rounds; r++)); do
  for t in "${trees[@]}"; do
    name=$(label "$t")
    for prog in $programs; do
      case $prog in
        mlp_1e8b681) src=$program ;;
        example) src=$t/examples/fashion_mnist_mlp.cpp ;;
        cnn) src=$t/examples/fashion_mnist_cnn.cpp ;;
        *) echo "$0: unknown program $prog" >&2; exit 2 ;;
      esac
      [ -f "$src" ] || continue
      load=$(cut -d' ' -f1 /proc/loadavg)
      rm -f "$tmp/x.o"
      if [ $syntax = 1 ]; then
        out=(-fsyntax-only)
      else
        out=(-c -o "$tmp/x.o")
      fi
      (cd "$tmp" && /usr/bin/time -f "%e %U %S %M" -o "$tmp/time" "$cxx" "${flags[@]}" -I"$t/include" "${out[@]}" "$src")
      read -r wall user sys peak < "$tmp/time"
      usys=$(echo "$user $sys" | awk '{ printf "%.2f", $1 + $2 }')
      text=-
      [ -f "$tmp/x.o" ] && text=$(size -A "$tmp/x.o" | awk '$1 ~ /^\.text/ { s += $2 } END { print s }')
      printf "%-5s %-30s %-12s %8s %8s %8s %10s %10s %6s\n" "$r" "$name" "$prog" "$wall" "$user" "$usys" "$peak" "$text" "$load"
      echo "$name $prog $wall $user $usys $peak $text $load" >> "$results"
    done
  done
done

echo
echo "summary (min / median / max over $rounds rounds):"
printf "%-30s %-12s %-24s %-24s %-24s %-26s %-10s %s\n" tree program wall_s user_s usys_s peak_KB text_B load1
for t in "${trees[@]}"; do
  name=$(label "$t")
  for prog in $programs; do
    awk -v n="$name" -v p="$prog" '$1 == n && $2 == p' "$results" > "$tmp/sel" || true
    [ -s "$tmp/sel" ] || continue
    stat() {  # column -> "min / median / max"
      cut -d' ' -f"$1" "$tmp/sel" | sort -g | awk '{ v[NR] = $1 } END {
        m = NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2; printf "%s / %s / %s", v[1], m, v[NR] }'
    }
    printf "%-30s %-12s %-24s %-24s %-24s %-26s %-10s %s\n" "$name" "$prog" "$(stat 3)" "$(stat 4)" "$(stat 5)" "$(stat 6)" \
      "$(cut -d' ' -f7 "$tmp/sel" | sort -u | tr '\n' ' ')" "$(stat 8)"
  done
done
