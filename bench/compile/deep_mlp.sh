#!/usr/bin/env bash
# Compile time and memory against depth (issue 30): generates a program with N
# `dense<64, relu>` layers (input<64>, N layers, dense<10>) and one `fit`, and
# compiles it against each TREE, the trees alternating, for each N.
#
#   bench/compile/deep_mlp.sh [-n ROUNDS] [-d "50 100 200 300"] [-s] TREE [TREE ...]
#   bench/compile/deep_mlp.sh -g N > deep.cpp      # only print the program
#
# $CXX (g++) $CXXFLAGS (-std=c++20 -O3 -march=native -DNDEBUG) -I TREE/include -c
# (-s: -fsyntax-only). Prints one line per compile: user seconds and peak KB
# (%U %M of GNU time), the 1-minute load; then medians per tree and depth.
set -euo pipefail
rounds=3
depths="50 100 200 300"
syntax=0
gen=
while getopts "n:d:sg:" opt; do
  case $opt in
    n) rounds=$OPTARG ;;
    d) depths=$OPTARG ;;
    s) syntax=1 ;;
    g) gen=$OPTARG ;;
    *) exit 2 ;;
  esac
done
shift $((OPTIND - 1))

program() {  # N -> the program on stdout
  echo '#include <ctnn/ctnn.hpp>'
  echo '#include <vector>'
  echo 'using net = ctnn::sequential<ctnn::input<64>,'
  for ((i = 0; i < $1; ++i)); do echo '  ctnn::dense<64, ctnn::relu>,'; done
  echo '  ctnn::dense<10>>;'
  cat <<'CPP'
static_assert(net::output_shape == ctnn::shape<10>{});
int main() {
  std::vector<float> x(256 * 64, 0.5f);
  std::vector<std::int32_t> y(256, 1);
  const ctnn::data::in_memory<ctnn::shape<64>, ctnn::sparse_labels> data{x, y};
  auto m = ctnn::make_model<net>(1);
  ctnn::adam opt{1e-3};
  ctnn::fit(m, ctnn::sparse_categorical_crossentropy{.from_logits = true}, opt, data.batch(32), ctnn::epochs{1});
  return 0;
}
CPP
}
if [ -n "$gen" ]; then program "$gen"; exit 0; fi
[ $# -gt 0 ] || { echo "usage: $0 [-n ROUNDS] [-d DEPTHS] [-s] TREE [TREE ...]" >&2; exit 2; }

cxx=${CXX:-g++}
read -r -a flags <<< "${CXXFLAGS:--std=c++20 -O3 -march=native -DNDEBUG}"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for n in $depths; do program "$n" > "$tmp/deep$n.cpp"; done
echo "compiler: $($cxx --version | head -n 1); flags: ${flags[*]}$([ $syntax = 1 ] && echo " -fsyntax-only")"
echo "cpu: $(lscpu 2>/dev/null | sed -n 's/^Model name: *//p' | head -n 1), $(nproc) cores"
printf "%-5s %-28s %6s %8s %10s %6s\n" round tree depth user_s peak_KB load1
for ((r = 1; r <= rounds; r++)); do
  for n in $depths; do
    for t in "$@"; do
      name="$(basename "$t")@$(git -C "$t" rev-parse --short HEAD)$(git -C "$t" diff --quiet HEAD -- include || echo +dirty)"
      load=$(cut -d' ' -f1 /proc/loadavg)
      if [ $syntax = 1 ]; then out=(-fsyntax-only); else out=(-c -o "$tmp/x.o"); fi
      if /usr/bin/time -f "%U %M" -o "$tmp/time" "$cxx" "${flags[@]}" -I"$t/include" "${out[@]}" "$tmp/deep$n.cpp" 2> "$tmp/err"; then
        read -r user peak < "$tmp/time"
      else
        user=fail; peak=$(tail -n 1 "$tmp/time" | cut -d' ' -f2); head -n 3 "$tmp/err" >&2
      fi
      printf "%-5s %-28s %6s %8s %10s %6s\n" "$r" "$name" "$n" "$user" "$peak" "$load"
      echo "$name $n $user $peak" >> "$tmp/res"
    done
  done
done
echo; echo "medians over $rounds rounds:"
for n in $depths; do
  for t in "$@"; do
    name="$(basename "$t")@$(git -C "$t" rev-parse --short HEAD)$(git -C "$t" diff --quiet HEAD -- include || echo +dirty)"
    med() { awk -v a="$name" -v n="$n" -v c="$1" '$1 == a && $2 == n { print $c }' "$tmp/res" | sort -g |
      awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }
    printf "%-28s %6s %8s s %10s KB\n" "$name" "$n" "$(med 3)" "$(med 4)"
  done
done
