#!/usr/bin/env bash
# The Rust unit tests (encoders byte for byte against rdma-core captures,
# parsers, route cache), recorded one result per test.
set -uo pipefail
cd "$(dirname "$0")/.."
source ctest/lib.sh
out=$(mktemp)
cargo test --release --locked 2>&1 | tee "$out" | grep -E '^test result|FAILED|panicked' || true
while read -r _ name _ res; do
  case $res in ok) pass "$name" ;; ignored*) echo "skip $name (long run: make fuzz)" ;; *) fail "$name ($res)" ;; esac
done < <(grep -E '^test .* \.\.\. ' "$out")
grep -q '^test result: ok' "$out" || fail "cargo test did not finish cleanly"
rm -f "$out"
finish
