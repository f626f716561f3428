#!/usr/bin/env bash
# Draws the cost curves of `make bench` as one SVG with gnuplot (Debian's
# gnuplot-nox: a plotting tool we only need here, installed on first use):
# per curve, relinked ÷ rdma-core and preloaded ÷ rdma-core against N, with
# the 1.0 line.
#   bench/plot.sh CURVES-RATIOS.TSV OUT.svg|OUT.png
set -euo pipefail
in=$1 out=$2
if ! command -v gnuplot > /dev/null; then
  echo "bench/plot.sh: installing gnuplot-nox" >&2
  if [ "$(id -u)" = 0 ]; then apt-get install -y -qq --no-install-recommends gnuplot-nox > /dev/null; else sudo apt-get install -y -qq gnuplot-nox > /dev/null; fi
fi
mkdir -p "$(dirname "$out")"
d=$(mktemp -d)
trap 'rm -rf "$d"' EXIT
for k in groups qps contexts threads; do awk -F'\t' -v k="$k" '$1 == k { print $2, $4, $5 }' "$in" > "$d/$k.dat"; done
term='svg size 1000,700 dynamic font "sans,11"'
case $out in *.png) term='png size 1000,700' ;; esac
gnuplot <<GP
set terminal $term
set output "$out"
set multiplot layout 2,2 title "rsverbs ÷ rdma-core per attach+detach pair (below 1: rsverbs is faster)"
set yrange [0.5:1.3]
set grid
set key bottom right
set ylabel "ratio to rdma-core"
set logscale x 2
set xlabel "groups on the QP (the timed one included)"
plot "$d/groups.dat" using 1:2 with linespoints title "relinked", "" using 1:3 with linespoints title "preloaded", 1 with lines lc rgb "gray" notitle
unset logscale x
set xlabel "QPs in the group (this one included)"
plot "$d/qps.dat" using 1:2 with linespoints title "relinked", "" using 1:3 with linespoints title "preloaded", 1 with lines lc rgb "gray" notitle
set logscale x 2
set xlabel "contexts in the process"
plot "$d/contexts.dat" using 1:2 with linespoints title "relinked", "" using 1:3 with linespoints title "preloaded", 1 with lines lc rgb "gray" notitle
set xlabel "threads (inverse throughput)"
plot "$d/threads.dat" using 1:2 with linespoints title "relinked", "" using 1:3 with linespoints title "preloaded", 1 with lines lc rgb "gray" notitle
unset multiplot
GP
echo "bench/plot.sh: wrote $out"
