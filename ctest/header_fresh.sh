#!/usr/bin/env bash
# Fails when include/rsverbs.h is not what cbindgen generates from src/ now.
set -euo pipefail
cd "$(dirname "$0")/.."
tmp=$(mktemp)
trap 'rm -f "$tmp"' EXIT
cbindgen --quiet --config cbindgen.toml --crate rsverbs --output "$tmp"
if ! diff -u include/rsverbs.h "$tmp"; then
  echo "header_fresh: FAIL include/rsverbs.h is stale; run 'make header' and commit it" >&2
  exit 1
fi
echo "header_fresh: ok"
