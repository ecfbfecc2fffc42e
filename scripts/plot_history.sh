#!/usr/bin/env bash
# Plots the training curves of a csv_logger file as a PNG with gnuplot.
#
#   scripts/plot_history.sh HISTORY.csv OUT.png [TITLE]
#
# HISTORY.csv is what ctnn::csv_logger writes (an "epoch" column counted from
# 0, then the log keys). The left panel shows loss and val_loss, the right one
# the first metric whose name contains "acc" (and its val_ twin), or the
# first other metric when there is none; epochs are counted from 1, as the
# logs do. Needs gnuplot (Debian: gnuplot-nox). The PNG is written to a
# temporary beside OUT.png and renamed, so a failed run leaves no half file.
set -euo pipefail
if [[ $# -lt 2 ]]; then
  echo "usage: plot_history.sh HISTORY.csv OUT.png [TITLE]" >&2
  exit 2
fi
in=$1
out=$2
title=${3:-training curves}
command -v gnuplot >/dev/null || { echo "plot_history: gnuplot is missing (apt-get install gnuplot-nox)" >&2; exit 1; }
[[ -r "$in" ]] || { echo "plot_history: $in: cannot read" >&2; exit 1; }
IFS=',' read -r -a keys < <(head -n 1 "$in" | tr -d '\r')
[[ "${keys[0]:-}" == epoch ]] || { echo "plot_history: $in: the first column is not 'epoch' (not a csv_logger file?)" >&2; exit 1; }
[[ $(wc -l < "$in") -ge 2 ]] || { echo "plot_history: $in: no epoch rows" >&2; exit 1; }
col() {  # the 1-based column of a key, or nothing
  local i
  for i in "${!keys[@]}"; do [[ "${keys[$i]}" == "$1" ]] && { echo $((i + 1)); return; }; done
}
loss=$(col loss)
[[ -n "$loss" ]] || { echo "plot_history: $in: no 'loss' column" >&2; exit 1; }
val_loss=$(col val_loss)
metric=""
for k in "${keys[@]}"; do
  [[ "$k" == *acc* && "$k" != val_* ]] && { metric=$k; break; }
done
if [[ -z "$metric" ]]; then
  skip=" epoch loss learning_rate seconds data_seconds compute_seconds input_share input_bound "
  for k in "${keys[@]}"; do
    [[ "$k" != val_* && "$skip" != *" $k "* ]] && { metric=$k; break; }
  done
fi
metric_col=""; val_metric_col=""
if [[ -n "$metric" ]]; then
  metric_col=$(col "$metric")
  val_metric_col=$(col "val_$metric")
fi
tmp="$out.tmp.$$"
trap 'rm -f "$tmp"' EXIT
{
  echo "set terminal pngcairo size 960,400 font 'sans,10'"
  echo "set output '$tmp'"
  echo "set datafile separator ','"
  echo "set key top right"
  echo "set grid"
  echo "set xlabel 'epoch'"
  rows=$(($(wc -l < "$in") - 1))
  echo "set xtics $(( rows > 20 ? 5 : 1 ))"
  echo "set multiplot layout 1,$([[ -n "$metric_col" ]] && echo 2 || echo 1) title '$title'"
  echo "set title 'loss'"
  plot="plot '$in' every ::1 using (\$1+1):$loss with linespoints title 'loss'"
  [[ -n "$val_loss" ]] && plot+=", '' every ::1 using (\$1+1):$val_loss with linespoints title 'val\\_loss'"
  echo "$plot"
  if [[ -n "$metric_col" ]]; then
    echo "set key bottom right"
    echo "set title '${metric//_/\\_}'"
    plot="plot '$in' every ::1 using (\$1+1):$metric_col with linespoints title '${metric//_/\\_}'"
    [[ -n "$val_metric_col" ]] && plot+=", '' every ::1 using (\$1+1):$val_metric_col with linespoints title 'val\\_${metric//_/\\_}'"
    echo "$plot"
  fi
  echo "unset multiplot"
} | gnuplot
mv "$tmp" "$out"
trap - EXIT
echo "plot_history: wrote $out"
