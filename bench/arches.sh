#!/usr/bin/env bash
# The by-architecture table of BENCHMARKS.md: each architecture's make bench
# (bench/run.sh; RSVERBS_ARCH for another one) leaves its headline figures
# in bench/results/ARCH.tsv (checked in), all measured side by side in that
# architecture's one boot; the table puts them next to each other.
#   bench/arches.sh row OUTDIR ARCH     the TSV of a run's guest output (stdout)
#   bench/arches.sh table               the Markdown table of every bench/results/*.tsv
#   bench/arches.sh splice FILE         replaces the table between FILE's markers
set -euo pipefail
cd "$(dirname "$0")/.."
BEGIN_MARK='<!-- bench/arches.sh: begin -->' END_MARK='<!-- bench/arches.sh: end -->'

# The metrics, in the table's order: key, label.
METRICS=(
  "a.preloaded/floor|(a) attach+detach, preloaded ÷ floor (target ≤ 1.03)"
  "a.preloaded/rdma-core|(a) attach+detach, preloaded ÷ rdma-core"
  "b.preloaded/rdma-core|(b) query, populated, preloaded ÷ rdma-core (target ≤ 1.00)"
  "c.preloaded/rdma-core|(c) query, empty, preloaded ÷ rdma-core (target ≤ 1.00)"
  "d.preloaded/rdma-core|(d) scan of all indices, preloaded ÷ rdma-core"
  "noise.max|A/A noise ±, largest of (a)-(d)"
  "instr.a|instructions per attach or detach: rdma-core → preloaded"
  "instr.b|instructions per query, populated: rdma-core → preloaded"
  "sys.preloaded|system calls per call, preloaded (b)/(a)/(c)"
  "stripped|stripped librsverbs.so.1, bytes"
  "kernel|guest kernel"
  "commit|commit, date"
)

row() { # OUTDIR ARCH
  local o=$1 a=$2 lib
  echo -e "arch\t$a"
  awk '$1 == "SUMMARY" && $2 ~ /^[abcd]$/ {
      op = $2; n = substr($3, 7) + 0; if (n > nmax) nmax = n
      for (i = 4; i <= NF; i++) { split($i, kv, "="); split(kv[2], v, "/"); r[kv[1]] = v[3]; f[kv[1]] = v[4] }
      printf "%s.preloaded/rdma-core\t%.3f\n", op, r["preloaded"]
      if (op == "a") printf "a.preloaded/floor\t%.3f\n", f["preloaded"]
    }
    END { printf "noise.max\t%.1f%%\n", 100 * nmax }' "$o/latency-summary.txt"
  awk '$1 == "a" || $1 == "b" { printf "instr.%s\t%.1f → %.1f\n", $1, $2, $4 }' "$o/ir.summary"
  awk '$1 == "preloaded" { printf "sys.preloaded\t%s/%s/%s\n", $2, $3, $4 }' "$o/syscalls.txt"
  lib=$(dirname "$o")/lib/librsverbs.so.1
  echo -e "stripped\t$(bench/sizes.sh "$lib" | sed -n 's/^| the whole file | \([0-9]*\) .*/\1/p')"
  echo -e "kernel\t$(awk '{ print $2 }' "$o/kernel.txt") ($(sed -n 's/^libibverbs1 \([^,]*\),.*/rdma-core \1/p' "$o/rdma-core.txt"))"
  echo -e "commit\t$(git rev-parse --short HEAD 2>/dev/null || echo unknown), $(date -u +%F)"
}

table() {
  local files=() f m key label
  for f in bench/results/amd64.tsv bench/results/*.tsv; do
    [ -e "$f" ] || continue
    [[ " ${files[*]-} " == *" $f "* ]] || files+=("$f")
  done
  [ ${#files[@]} -gt 0 ] || { echo "(no architecture has been measured yet: bench/results/ is empty)"; return; }
  printf '| figure |'; for f in "${files[@]}"; do printf ' %s |' "$(awk -F'\t' '$1 == "arch" { print $2 }' "$f")"; done; echo
  printf '|---|'; for f in "${files[@]}"; do printf -- '---:|'; done; echo
  for m in "${METRICS[@]}"; do
    key=${m%%|*} label=${m#*|}
    printf '| %s |' "$label"
    for f in "${files[@]}"; do printf ' %s |' "$(awk -F'\t' -v k="$key" '$1 == k { print $2 }' "$f")"; done
    echo
  done
}

splice() { # FILE: the table between the markers (FILE must have them)
  local file=$1 tmp
  grep -qF "$BEGIN_MARK" "$file" || { echo "bench/arches.sh: no marker in $file" >&2; return 1; }
  tmp=$(mktemp)
  table > "$tmp.table"
  awk -v b="$BEGIN_MARK" -v e="$END_MARK" -v t="$tmp.table" '
    $0 == b { print; while ((getline l < t) > 0) print l; skip = 1; next }
    $0 == e { skip = 0 }
    !skip' "$file" > "$tmp"
  mv "$tmp" "$file"
  rm -f "$tmp.table"
}

case ${1:-} in
  row) [ $# = 3 ] || exit 2; row "$2" "$3" ;;
  table) table ;;
  splice) [ $# = 2 ] || exit 2; splice "$2" ;;
  *) sed -n 's/^#   //p' "$0" >&2; exit 2 ;;
esac
