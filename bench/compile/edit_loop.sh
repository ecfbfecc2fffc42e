#!/usr/bin/env bash
# The edit loop of issue 30: after a change of one width, what rebuilding the program's one
# translation unit and linking it costs, header-only and with the two helpers ctnn offers,
# against dlib's MLP compiled in the same rounds.
#
#   bench/compile/edit_loop.sh [-n ROUNDS] [-p PROGRAMS] [-o OUT]
#
# PROGRAMS (default "mlp cnn"): mlp = examples/fashion_mnist_mlp.cpp, cnn =
# examples/fashion_mnist_cnn.cpp. Set-up, once and reported apart: the precompiled
# <ctnn/ctnn.hpp> (what ctnn_precompile_headers sets up) for both modes below, and the
# compiled part's object (what ctnn_compiled_kernels builds: CTNN_COMPILED_KERNELS_DEFINE
# + <ctnn/ctnn.hpp>). Then ROUNDS rounds (default 3), each compiling
# every program in every mode in turn (so a change of load falls on all alike):
#   header-only   $CXX $F -c PROGRAM
#   pch           $CXX $F -include OUT/pch/ctnn.hpp -c PROGRAM
#   compiled      $CXX $F -DCTNN_COMPILED_KERNELS -c PROGRAM
#   pch+compiled  both
# and links each object (with the kernels' object where it needs it); <ctnn/ctnn.hpp> alone
# (header-only, and with the precompiled header as ctnn_precompile_headers gives it: a file that
# includes it and nothing else, compiled with -include OUT/pch/ctnn.hpp)
# and bench/compile/static_only.cpp (a network type and static_asserts only) and static_network.cpp
# (the same with <ctnn/network.hpp>), -c; and dlib's MLP
# (bench/peers/dlib_mlp.cpp, -c only: Debian's libdlib-dev) when dlib is installed.
# F = $CXXFLAGS (default -std=c++20 -O3 -march=native -DNDEBUG) -I include. Prints one line
# per step (user seconds and peak KB of /usr/bin/time, the 1-minute load before it), then
# per program and mode the median compile + link user time, the compile's peak memory, and
# the ratio to dlib's median. ccache is not used (the compiler is called directly).
set -euo pipefail

rounds=3
programs="mlp cnn"
out=build/edit-loop
while getopts "n:p:o:" opt; do
  case $opt in
    n) rounds=$OPTARG ;;
    p) programs=$OPTARG ;;
    o) out=$OPTARG ;;
    *) sed -n 5p "$0" | sed 's/^# *//' >&2; exit 2 ;;
  esac
done
here=$(cd "$(dirname "$0")/../.." && pwd)
CXX=${CXX:-g++}
read -r -a F <<< "${CXXFLAGS:--std=c++20 -O3 -march=native -DNDEBUG}"
F+=(-I "$here/include")
mkdir -p "$out/pch" "$out/pch_compiled" "$out/obj"
out=$(cd "$out" && pwd)
log=$out/runs.txt
: > "$log"
[ -x /usr/bin/time ] || { echo "$0: needs GNU time (/usr/bin/time; Debian: time)" >&2; exit 1; }

# step NAME CMD...: runs CMD under GNU time, appends "NAME user_s peak_kb load" to the log
step() {
  local name=$1; shift
  local load; load=$(cut -d' ' -f1 /proc/loadavg)
  /usr/bin/time -o "$out/time" -f '%U %M' "$@" > /dev/null 2> "$out/err" || { cat "$out/err" >&2; exit 1; }
  local t; t=$(tail -1 "$out/time")
  echo "$name $t $load" | tee -a "$log"
}
src() { case $1 in mlp) echo "$here/examples/fashion_mnist_mlp.cpp" ;; cnn) echo "$here/examples/fashion_mnist_cnn.cpp" ;; esac; }
for p in $programs; do  # checked here: an exit inside $(src ...) would only leave the subshell
  [ -n "$(src "$p")" ] || { echo "$0: unknown program $p (mlp, cnn)" >&2; exit 2; }
done

echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //') ($(nproc) cores); $($CXX --version | head -1)"
echo "ctnn: $here ($(git -C "$here" describe --always --dirty 2>/dev/null || echo '?')); flags: ${F[*]}"
echo '#include <ctnn/ctnn.hpp>' > "$out/pch/ctnn.hpp"
cp "$out/pch/ctnn.hpp" "$out/pch_compiled/ctnn.hpp"
printf '#define CTNN_COMPILED_KERNELS_DEFINE\n#include <ctnn/ctnn.hpp>\n' > "$out/kernels.cpp"
step setup:pch "$CXX" "${F[@]}" -x c++-header "$out/pch/ctnn.hpp" -o "$out/pch/ctnn.hpp.gch"
step setup:pch+compiled "$CXX" "${F[@]}" -DCTNN_COMPILED_KERNELS -x c++-header "$out/pch_compiled/ctnn.hpp" \
  -o "$out/pch_compiled/ctnn.hpp.gch"
step setup:kernels "$CXX" "${F[@]}" -c "$out/kernels.cpp" -o "$out/kernels.o"
dlib=0
[ -f /usr/include/dlib/dnn.h ] && dlib=1
for r in $(seq "$rounds"); do
  for p in $programs; do
    s=$(src "$p")
    o=$out/obj/$p
    step "$p:header-only:compile" "$CXX" "${F[@]}" -c "$s" -o "$o.o"
    step "$p:header-only:link" "$CXX" "$o.o" -o "$o" -lz -pthread
    step "$p:pch:compile" "$CXX" "${F[@]}" -Winvalid-pch -Werror=invalid-pch -include "$out/pch/ctnn.hpp" -c "$s" -o "$o.o"
    step "$p:pch:link" "$CXX" "$o.o" -o "$o" -lz -pthread
    step "$p:compiled:compile" "$CXX" "${F[@]}" -DCTNN_COMPILED_KERNELS -c "$s" -o "$o.o"
    step "$p:compiled:link" "$CXX" "$o.o" "$out/kernels.o" -o "$o" -lz -pthread
    step "$p:pch+compiled:compile" "$CXX" "${F[@]}" -DCTNN_COMPILED_KERNELS -Winvalid-pch -Werror=invalid-pch -include "$out/pch_compiled/ctnn.hpp" \
      -c "$s" -o "$o.o"
    step "$p:pch+compiled:link" "$CXX" "$o.o" "$out/kernels.o" -o "$o" -lz -pthread
  done
  # the umbrella header alone, and a program that only defines and checks a network type
  echo '#include <ctnn/ctnn.hpp>' > "$out/header_only.cpp"
  step "header:ctnn.hpp:compile" "$CXX" "${F[@]}" -c "$out/header_only.cpp" -o "$out/obj/header.o"
  step "header:ctnn.hpp+pch:compile" "$CXX" "${F[@]}" -Winvalid-pch -Werror=invalid-pch -include "$out/pch/ctnn.hpp" \
    -c "$out/header_only.cpp" -o "$out/obj/header.o"
  step "static:types-only:compile" "$CXX" "${F[@]}" -c "$here/bench/compile/static_only.cpp" -o "$out/obj/static.o"
  step "static:network.hpp:compile" "$CXX" "${F[@]}" -c "$here/bench/compile/static_network.cpp" -o "$out/obj/static_network.o"
  if [ $dlib = 1 ]; then
    step "dlib:mlp:compile" "$CXX" "${F[@]}" -c "$here/bench/peers/dlib_mlp.cpp" -o "$out/obj/dlib.o"
  fi
done
python3 - "$log" "$programs" <<'EOF'
import statistics, sys
rows = [l.split() for l in open(sys.argv[1])]
def med(name, i):
    v = [float(r[i]) for r in rows if r[0] == name]
    return statistics.median(v) if v else None
dlib = med("dlib:mlp:compile", 1)
print("\n| program | mode | compile + link, user s (median) | compile peak KB | / dlib MLP |")
print("| --- | --- | ---: | ---: | ---: |")
for p in sys.argv[2].split():
    for m in ("header-only", "pch", "compiled", "pch+compiled"):
        c, l = med(f"{p}:{m}:compile", 1), med(f"{p}:{m}:link", 1)
        kb = med(f"{p}:{m}:compile", 2)
        ratio = f"{(c + l) / dlib:.2f}x" if dlib else "-"
        print(f"| {p} | {m} | {c + l:.2f} ({c:.2f} + {l:.2f}) | {kb:,.0f} | {ratio} |")
for name, label in (("header:ctnn.hpp:compile", "`#include <ctnn/ctnn.hpp>` alone"),
                    ("header:ctnn.hpp+pch:compile", "`#include <ctnn/ctnn.hpp>` alone, precompiled (ctnn_precompile_headers)"),
                    ("static:types-only:compile", "bench/compile/static_only.cpp (types, static_asserts)"),
                    ("static:network.hpp:compile", "bench/compile/static_network.cpp (the same with <ctnn/network.hpp>)")):
    c = med(name, 1)
    if c is not None:
        ratio = f"{c / dlib:.2f}x" if dlib else "-"
        print(f"| {label} | -c | {c:.2f} | {med(name, 2):,.0f} | {ratio} |")
if dlib:
    print(f"| dlib MLP | -c | {dlib:.2f} | {med('dlib:mlp:compile', 2):,.0f} | 1 |")
for s in ("setup:pch", "setup:pch+compiled", "setup:kernels"):
    print(f"{s}: {med(s, 1):.2f} s, {med(s, 2):,.0f} KB (once)")
EOF
