#!/usr/bin/env bash
# Fails when include/rsverbs.h is not what cbindgen generates from src/ now.
set -uo pipefail
cd "$(dirname "$0")/.."
source ctest/lib.sh
tmp=$(mktemp)
cbindgen --quiet --config cbindgen.toml --crate rsverbs --output "$tmp"
if diff -u include/rsverbs.h "$tmp"; then
  pass "include/rsverbs.h is what cbindgen generates"
else
  fail "include/rsverbs.h is stale; run 'make header' and commit it"
fi
rm -f "$tmp"
finish
