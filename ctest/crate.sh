#!/usr/bin/env bash
# The crate as Rust users get it (docs/rust.md): two dependents
# (ctest/consumer with the default features, ctest/consumer-nostd with
# default-features = false) build, neither builds the C archive, and a
# dependent's binary carries no constructor of the library; the packaged
# crate passes its own tests unpacked, as dh-cargo runs them; cargo
# publish --dry-run passes (--allow-dirty: make check runs on work trees).
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
source ctest/lib.sh
T=$PWD/target
log=$(mktemp)
trap 'rm -f "$log"' EXIT

check "a dependent with the default features builds (ctest/consumer)" \
  cargo build --release --quiet --manifest-path ctest/consumer/Cargo.toml --target-dir "$T/consumer"
check "a dependent with default-features = false builds and calls an export (ctest/consumer-nostd)" \
  sh -c "cargo build --quiet --manifest-path ctest/consumer-nostd/Cargo.toml --target-dir '$T/consumer-nostd' &&
         '$T/consumer-nostd/debug/rsverbs-consumer-nostd' | grep -q '= 22$'"
# What cargo builds of rsverbs for a dependent, fresh or not (its
# compiler-artifact messages; stale files in the target directory do not count).
archives=$(for m in consumer consumer-nostd; do
  cargo build --release --quiet --message-format=json --manifest-path ctest/$m/Cargo.toml --target-dir "$T/$m"
done | grep -o '"[^"]*librsverbs[^"]*\.a"')
check "no dependent builds the C archive (librsverbs*.a)${archives:+: $archives}" [ -z "$archives" ]
bin=$T/consumer/release/receiver
no_ctor() { ! nm "$bin" | grep -qE 'rsverbs9lifecycle|__register_atfork'; }
check "a dependent's binary has no constructor of the library (no rsverbs::lifecycle, no __register_atfork)" no_ctor

# Unpacked always at the same place, with fresh mtimes (tar -m): a test
# binary built from an earlier unpacking is then rebuilt, and its
# CARGO_MANIFEST_DIR (tests/layering.rs reads src/ there) exists.
pkg=$T/package-check/unpacked
rm -rf "$pkg" && mkdir -p "$pkg"
if cargo package --allow-dirty --no-verify --quiet --target-dir "$T/package-check" >"$log" 2>&1; then
  crate=$(ls "$T"/package-check/package/rsverbs-*.crate | tail -1)
  pass "cargo package: $(tar -tzf "$crate" | grep -vc '/$') files"
  leaked=$(tar -tzf "$crate" | grep -E '/(ctest|testbed|debian|bench|tools|demo|fuzz|\.ci|src/tool)/' | head -3)
  check "the package ships the crate only${leaked:+: $leaked}" [ -z "$leaked" ]
  tar -xmzf "$crate" -C "$pkg"
  dir=$(ls -d "$pkg"/rsverbs-*)
  if (cd "$dir" && cargo test --locked --target-dir "$T/package-test") >"$log" 2>&1 &&
     grep -q '^test result: ok' "$log" && ! grep -q '^test result: FAILED' "$log"; then
    pass "cargo test in the unpacked crate: $(grep '^test result: ok' "$log" | awk '{s += $4} END {print s}') tests passed"
  else
    fail "cargo test in the unpacked crate: $(grep -E '^test result|panicked|^error' "$log" | head -3 | tr '\n' ' ')"
  fi
else
  fail "cargo package: $(tail -3 "$log" | tr '\n' ' ')"
fi
if cargo publish --dry-run --allow-dirty --target-dir "$T/package-check" >"$log" 2>&1 && grep -q 'aborting upload due to dry run' "$log"; then
  pass "cargo publish --dry-run"
else
  fail "cargo publish --dry-run: $(grep -E '^error|^warning' "$log" | head -3 | tr '\n' ' ')"
fi
finish
