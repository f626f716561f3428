#!/usr/bin/env bash
# Totals every suite's results: the closing line of make check.
#   ctest/summary.sh [DIR]   DIR/*.results (default ctest/out)
set -euo pipefail
dir=${1:-$(cd "$(dirname "$0")" && pwd)/out}
p=0; f=0
for r in "$dir"/*.results; do
  [ -e "$r" ] || continue
  sp=$(grep -c '^PASS' "$r" || true); sf=$(grep -c '^FAIL' "$r" || true)
  printf '  %-14s %5d passed %3d failed\n' "$(basename "$r" .results)" "$sp" "$sf"
  p=$((p + sp)); f=$((f + sf))
done
echo "$p passed, $f failed"
[ "$f" -eq 0 ]
