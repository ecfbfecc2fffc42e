#!/usr/bin/env bash
# Two trees side by side, alternating: what <ctnn/ctnn.hpp> alone costs (header-only, and with
# the precompiled header of ctnn_precompile_headers), a network type's static_asserts with
# <ctnn/network.hpp> (bench/compile/static_network.cpp) and the edit loop with both helpers (the
# MLP and CNN examples compiled with the precompiled header and CTNN_COMPILED_KERNELS, and
# linked with the compiled part), against dlib's MLP compiled in the same rounds. The rows of
# bench/compile/edit_loop.sh that a header change moves, without its other modes.
#
#   bench/compile/alone_ab.sh [-n ROUNDS] [-o OUT] BEFORE AFTER
#
# BEFORE, AFTER: ctnn trees (their include/ and examples/). Set-up, once per tree and not
# measured: the two precompiled headers (with and without CTNN_COMPILED_KERNELS) and the
# compiled part's object. Then ROUNDS rounds (default 3); each compiles, tree by tree in turn
# (BEFORE, AFTER; the next round AFTER, BEFORE, so neither always runs first):
#   alone:header-only   $CXX $F -c (a file that includes <ctnn/ctnn.hpp> and nothing else)
#   alone:pch           the same with -include OUT/TREE/pch/ctnn.hpp
#   static:network      $CXX $F -c TREE/bench/compile/static_network.cpp (a network type and its
#                       static_asserts with <ctnn/network.hpp>; skipped when BEFORE has none)
#   mlp|cnn:edit        $CXX $F -DCTNN_COMPILED_KERNELS -include OUT/TREE/pchc/ctnn.hpp -c EXAMPLE,
#                       then links it with the compiled part (compile + link reported)
# and dlib's MLP (bench/peers/dlib_mlp.cpp, -c) when dlib is installed. F = $CXXFLAGS (default
# -std=c++20 -O3 -march=native -DNDEBUG) -I TREE/include. Prints one line per step (user
# seconds and peak KB of /usr/bin/time, the 1-minute load before it), then the medians, the
# ratio AFTER / BEFORE and the ratio to dlib's median. ccache is not used.
set -euo pipefail

rounds=3
out=build/alone-ab
while getopts "n:o:" opt; do
  case $opt in
    n) rounds=$OPTARG ;;
    o) out=$OPTARG ;;
    *) sed -n 8p "$0" | sed 's/^# *//' >&2; exit 2 ;;
  esac
done
shift $((OPTIND - 1))
[ $# = 2 ] || { sed -n 8p "$0" | sed 's/^# *//' >&2; exit 2; }
[ -x /usr/bin/time ] || { echo "$0: needs GNU time (/usr/bin/time; Debian: time)" >&2; exit 1; }
here=$(cd "$(dirname "$0")/../.." && pwd)
trees=("$(cd "$1" && pwd)" "$(cd "$2" && pwd)")
names=(before after)
CXX=${CXX:-g++}
read -r -a F <<< "${CXXFLAGS:--std=c++20 -O3 -march=native -DNDEBUG}"
mkdir -p "$out"
out=$(cd "$out" && pwd)
log=$out/runs.txt
: > "$log"

step() {  # step NAME CMD...: "NAME user_s peak_kb load" to the log
  local name=$1; shift
  local load; load=$(cut -d' ' -f1 /proc/loadavg)
  /usr/bin/time -o "$out/time" -f '%U %M' "$@" > /dev/null 2> "$out/err" || { cat "$out/err" >&2; exit 1; }
  echo "$name $(tail -1 "$out/time") $load" | tee -a "$log"
}

echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //') ($(nproc) cores); $($CXX --version | head -1)"
echo '#include <ctnn/ctnn.hpp>' > "$out/alone.cpp"
for i in 0 1; do
  t=${trees[$i]} n=${names[$i]}
  echo "$n: $t ($(git -C "$t" describe --always --dirty 2>/dev/null || echo '?'))"
  mkdir -p "$out/$n/pch" "$out/$n/pchc" "$out/$n/obj"
  echo '#include <ctnn/ctnn.hpp>' > "$out/$n/pch/ctnn.hpp"
  cp "$out/$n/pch/ctnn.hpp" "$out/$n/pchc/ctnn.hpp"
  printf '#define CTNN_COMPILED_KERNELS_DEFINE\n#include <ctnn/ctnn.hpp>\n' > "$out/$n/kernels.cpp"
  step "$n:setup:pch" "$CXX" "${F[@]}" -I "$t/include" -x c++-header "$out/$n/pch/ctnn.hpp" -o "$out/$n/pch/ctnn.hpp.gch"
  step "$n:setup:pchc" "$CXX" "${F[@]}" -I "$t/include" -DCTNN_COMPILED_KERNELS -x c++-header "$out/$n/pchc/ctnn.hpp" \
    -o "$out/$n/pchc/ctnn.hpp.gch"
  step "$n:setup:kernels" "$CXX" "${F[@]}" -I "$t/include" -c "$out/$n/kernels.cpp" -o "$out/$n/kernels.o"
done
dlib=0
[ -f /usr/include/dlib/dnn.h ] && dlib=1
for r in $(seq "$rounds"); do
  order="0 1"
  [ $((r % 2)) = 0 ] && order="1 0"
  for i in $order; do
    t=${trees[$i]} n=${names[$i]} o=$out/$n/obj
    step "$n:alone:header-only" "$CXX" "${F[@]}" -I "$t/include" -c "$out/alone.cpp" -o "$o/alone.o"
    step "$n:alone:pch" "$CXX" "${F[@]}" -I "$t/include" -Winvalid-pch -Werror=invalid-pch -include "$out/$n/pch/ctnn.hpp" \
      -c "$out/alone.cpp" -o "$o/alone.o"
    if [ -f "$t/bench/compile/static_network.cpp" ] && [ -f "${trees[0]}/bench/compile/static_network.cpp" ]; then
      step "$n:static:network" "$CXX" "${F[@]}" -I "$t/include" -c "$t/bench/compile/static_network.cpp" -o "$o/static.o"
    fi
    for p in mlp cnn; do
      step "$n:$p:edit:compile" "$CXX" "${F[@]}" -I "$t/include" -DCTNN_COMPILED_KERNELS -Winvalid-pch -Werror=invalid-pch \
        -include "$out/$n/pchc/ctnn.hpp" -c "$t/examples/fashion_mnist_$p.cpp" -o "$o/$p.o"
      step "$n:$p:edit:link" "$CXX" "$o/$p.o" "$out/$n/kernels.o" -o "$o/$p" -lz -pthread
    done
  done
  if [ $dlib = 1 ]; then
    step "dlib:mlp:compile" "$CXX" "${F[@]}" -c "$here/bench/peers/dlib_mlp.cpp" -o "$out/dlib.o"
  fi
done
python3 - "$log" <<'EOF'
import statistics, sys
rows = [l.split() for l in open(sys.argv[1])]
def med(name, i=1):
    v = [float(r[i]) for r in rows if r[0] == name]
    return statistics.median(v) if v else None
dlib = med("dlib:mlp:compile")
loads = [float(r[3]) for r in rows]
print(f"\nload (1-minute, before each step): {min(loads):.1f}-{max(loads):.1f}")
print("| measure | before, user s (median) | after | after / before | before / dlib | after / dlib | peak KB before / after |")
print("| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
for key, label in (("alone:header-only", "`#include <ctnn/ctnn.hpp>` alone, header-only"),
                   ("alone:pch", "`#include <ctnn/ctnn.hpp>` alone, precompiled"),
                   ("static:network", "a network type's static_asserts, `<ctnn/network.hpp>`"),
                   ("mlp:edit", "edit loop, MLP, both helpers (compile + link)"),
                   ("cnn:edit", "edit loop, CNN, both helpers (compile + link)")):
    def total(n):
        if key.endswith(":edit"):
            return med(f"{n}:{key}:compile") + med(f"{n}:{key}:link")
        return med(f"{n}:{key}")
    def kb(n):
        return med(f"{n}:{key}:compile" if key.endswith(":edit") else f"{n}:{key}", 2)
    if med(f"before:{key}" if not key.endswith(":edit") else f"before:{key}:compile") is None:
        continue
    b, a = total("before"), total("after")
    rb = f"{b / dlib:.3f}x" if dlib else "-"
    ra = f"{a / dlib:.3f}x" if dlib else "-"
    print(f"| {label} | {b:.2f} | {a:.2f} | {a / b:.3f} | {rb} | {ra} | {kb('before'):,.0f} / {kb('after'):,.0f} |")
if dlib:
    print(f"| dlib MLP, -c | {dlib:.2f} | | | | | {med('dlib:mlp:compile', 2):,.0f} |")
EOF
