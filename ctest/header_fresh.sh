#!/usr/bin/env bash
# Fails when include/rsverbs.h is not what cbindgen generates from src/ now.
set -uo pipefail
cd "$(dirname "$0")/.."
source ctest/lib.sh
# cbindgen of the pinned version (the Makefile's deps-cbindgen: cargo install
# into the cache the first time), here rather than before make check's
# lanes start, so that its build runs beside the guest.
make -s deps-cbindgen > /dev/null || { fail "make deps-cbindgen (cbindgen for this check)"; finish; exit; }
tmp=$(mktemp)
cbindgen --quiet --config cbindgen.toml --crate rsverbs --output "$tmp"
if diff -u include/rsverbs.h "$tmp"; then
  pass "include/rsverbs.h is what cbindgen generates"
else
  fail "include/rsverbs.h is stale; run 'make header' and commit it"
fi
rm -f "$tmp"
finish
