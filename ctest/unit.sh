#!/usr/bin/env bash
# The Rust unit tests (encoders byte for byte against rdma-core captures,
# parsers, route cache), and those of the rsverbs command (src/tool: its
# argument, /proc and GROUP parsers, default-index rules, JSON writer, doctor
# on InfiniBand ports; tests/cli.rs runs the built binary: help, usage and
# runtime errors, their exit statuses and streams, no RDMA device needed),
# recorded one result per test, doctests (rsverbs::safe) included.
set -uo pipefail
cd "$(dirname "$0")/.."
source ctest/lib.sh
out=$(mktemp)
{ cargo test --release --locked
  cargo test --release --locked --manifest-path src/tool/Cargo.toml --target-dir target/tool; } 2>&1 |
  tee "$out" | grep -E '^test result|FAILED|panicked' || true
# "test NAME ... RESULT"; a doctest's NAME has spaces ("src/safe.rs - safe (line 8)").
while IFS= read -r line; do
  name=${line#test }; name=${name%% ... *}; res=${line##* ... }
  case $res in ok) pass "$name" ;; ignored*) echo "skip $name (ignored: a long run for make fuzz, or a child another test runs)" ;; *) fail "$name ($res)" ;; esac
done < <(grep -E '^test .* \.\.\. ' "$out")
grep -q '^test result: ok' "$out" && ! grep -q '^test result: FAILED' "$out" || fail "cargo test did not finish cleanly"
grep -q '^test cli::tests::' "$out" || fail "the rsverbs command's tests (src/tool) did not run"
# The crate's front page (src/lib.rs, what docs.rs would show first): its
# no_run example is compiled and linked as a doctest ("... - compile").
grep -qE '^test src/lib\.rs - \(line [0-9]+\)( - compile)? \.\.\. ok' "$out" ||
  fail "the crate's front-page example (src/lib.rs) was not built as a doctest"
rm -f "$out"
finish
