#!/usr/bin/env bash
# Host-side sanitizer and static checks. Results are tallied like
# every other suite (ctest/out/sanitize.results, "N passed, N failed").
#
#   ctest/sanitize.sh              all host checks below
#   ctest/sanitize.sh asan-build   only build the ASan variants of the guest
#                                  robustness programs into ctest/out/bin
#                                  (NAME.asan: rdma-core only, the LD_PRELOAD
#                                  target; NAME.asan.rsv: relinked), used by
#                                  ctest/vm/robust_san.sh and stress.sh
#
# Host checks:
#   1. every `unsafe` block / impl / fn body in src/ has a `// SAFETY:`
#      comment (grep-based, in addition to clippy's
#      undocumented_unsafe_blocks, which src/lib.rs denies);
#   2. clippy on the library code with warnings denied, src/lib.rs denying
#      unwrap/expect/panic outside tests (the code reachable from the C
#      boundary), with std and as the C library builds it (no_std);
#   3. the Rust test binaries (unit tests, tests/*.rs and fuzz/fuzz_parsers.rs,
#      the fuzz corpus replay) run clean under valgrind memcheck.
#   4. no path-taking environment variable is read by src/.
set -uo pipefail
cd "$(dirname "$0")/.."
B=${RSVERBS_BUILD:-$PWD/build}
out=ctest/out/bin

asan_build() {
  mkdir -p "$out"
  local name src flags=(-O1 -g -fsanitize=address -fno-omit-frame-pointer -Wall -D_GNU_SOURCE -Iinclude)
  for name in robust stress devloss; do
    src=ctest/vm/$name.c
    [ -f "$src" ] || continue
    if [ "$out/$name.asan.rsv" -nt "$src" ] && [ "$out/$name.asan.rsv" -nt ctest/vm/common.h ] &&
       [ "$out/$name.asan.rsv" -nt "$B/librsverbs.so.1" ]; then continue; fi
    cc "${flags[@]}" -o "$out/$name.asan" "$src" -libverbs -ldl -lpthread -lm || return 1
    cc "${flags[@]}" -o "$out/$name.asan.rsv" "$src" -L"$B" -Wl,-rpath,"$B" -lrsverbs -libverbs -ldl -lpthread -lm || return 1
  done
  echo "sanitize: ASan guest binaries in $out"
}

if [ "${1:-}" = asan-build ]; then
  asan_build
  exit
fi

SUITE=sanitize
source ctest/lib.sh
T0=$(date +%s)
check "ASan builds of the guest robustness programs" asan_build

# ---- 1. SAFETY comments ---------------------------------------------------
# Every `unsafe {` block and `unsafe impl` needs a `// SAFETY:` comment on
# its own line or in the comment block directly above it (attribute lines
# skipped), as clippy's undocumented_unsafe_blocks wants. `unsafe fn`
# declarations carry a `# Safety` doc section instead (clippy's
# missing_safety_doc, below); `#[unsafe(no_mangle)]` is an attribute.
safety_check() {
  local f bad=0
  for f in $(find src tests fuzz -name '*.rs' 2>/dev/null | sort); do
    awk '
      { line[NR] = $0 }
      /unsafe[ ]*\{|unsafe impl/ && !/^[ \t]*\/\// {
        ok = ($0 ~ /SAFETY:/)
        for (i = NR - 1; i > 0 && !ok && (line[i] ~ /^[ \t]*\/\// || line[i] ~ /^[ \t]*#\[/); i--)
          if (line[i] ~ /SAFETY:/) ok = 1
        if (!ok) { printf "%s:%d: unsafe without a // SAFETY: comment: %s\n", FILENAME, NR, $0; bad = 1 }
      }
      END { exit bad }' "$f" >&2 || bad=1
  done
  return $bad
}
check "every unsafe block in src/, tests/ and fuzz/ has a // SAFETY: comment" safety_check

# ---- 2. clippy --------------------------------------------------------------
clippy_lib() {
  # unwrap/expect/panic are denied in non-test library code by src/lib.rs
  # itself (`cargo clippy -- -D clippy::expect_used` would also lint
  # build.rs, whose expect() runs at build time, never behind the C ABI).
  grep -Eq '^#!\[cfg_attr\(not\(test\), deny\(.*clippy::unwrap_used.*clippy::expect_used.*clippy::panic' src/lib.rs ||
    { echo "sanitize: src/lib.rs no longer denies unwrap/expect/panic outside tests" >&2; return 1; }
  cargo clippy --release --locked --lib --quiet -- -D warnings \
    -D clippy::undocumented_unsafe_blocks -D clippy::missing_safety_doc
}
if cargo clippy --version >/dev/null 2>&1; then
  check "clippy: no unwrap/expect/panic/undocumented unsafe in library code" clippy_lib
  # The C library's own build: no_std, with src/runtime.rs (docs/building.md).
  check "clippy: the C library's build (no_std: --no-default-features --cfg rsverbs_clib --cfg rsverbs_symver) lints clean" \
    cargo clippy --release --locked --lib --quiet --no-default-features -- --cfg rsverbs_clib --cfg rsverbs_symver -D warnings \
    -D clippy::undocumented_unsafe_blocks -D clippy::missing_safety_doc
  check "clippy: tests and benches lint clean (undocumented unsafe denied)" \
    cargo clippy --release --locked --all-targets --quiet -- -D warnings -D clippy::undocumented_unsafe_blocks
  check "clippy: the rsverbs command (src/tool) and its tests lint clean" \
    cargo clippy --release --locked --manifest-path src/tool/Cargo.toml --target-dir target/tool --all-targets --quiet -- \
    -D warnings -D clippy::undocumented_unsafe_blocks -D clippy::missing_safety_doc
else
  fail "clippy is not installed (rustup component add clippy)"
fi

# ---- 3. Rust tests under valgrind memcheck ----------------------------------
if command -v valgrind >/dev/null; then
  # The test harnesses only: examples (examples/attach.rs needs a device;
  # ctest/vm/rust.sh runs it) are built by cargo test but are no tests.
  bins=$(cargo test --release --locked --no-run --message-format=json 2>/dev/null |
    grep -v '"kind":\["example"\]' | sed -n 's/.*"executable":"\([^"]*\)".*/\1/p')
  [ -n "$bins" ] || fail "cargo test --no-run produced no test binary"
  for b in $bins; do
    n=$(basename "$b"); n=${n%-*}
    # Test failures are unit.sh's business; here only memcheck's verdict
    # counts (--error-exitcode=99). --test-threads=1 keeps reports readable.
    timeout 900 valgrind -q --tool=memcheck --error-exitcode=99 --leak-check=full --suppressions=ctest/valgrind.supp \
      --errors-for-leak-kinds=definite --show-leak-kinds=definite \
      "$b" --test-threads=1 -q > "ctest/out/valgrind-$n.log" 2>&1
    rc=$?
    tests=$(grep -o '[0-9]* passed; [0-9]* failed' "ctest/out/valgrind-$n.log" | tail -1)
    if [ $rc -ne 99 ] && [ $rc -ne 124 ] && [ -n "$tests" ] && ! grep -q '^==[0-9]*== ' "ctest/out/valgrind-$n.log"; then
      pass "valgrind memcheck: $n: no error, no definite leak ($tests)"
    else
      fail "valgrind memcheck: $n: exit $rc (see ctest/out/valgrind-$n.log)"
      grep '^==[0-9]*== ' "ctest/out/valgrind-$n.log" | head -30 >&2
    fi
  done
else
  fail "valgrind is not installed"
fi

# ---- 4. environment variables -------------------------------------------------
# rsverbs may read only the two boolean switches rdma-core reads for
# detach (RDMAV_ALLOW_DISASSOC_DESTROY, MLX4_DEVICE_FATAL_CLEANUP), with
# plain getenv in src/env.rs as rdma-core does, and its own RSVERBS_TRACE (which may name a file)
# and RSVERBS_MCAST_IPJOIN (a switch), each an env::Switch (src/env.rs, the
# one secure_getenv call: ignored in setuid/setgid programs) declared in
# src/trace/mod.rs and src/ipjoin/mod.rs. No other variable (SYSFS_PATH,
# RDMAV_*_PATH, HOME, TMPDIR) and no other way of reading the environment.
# (The library's: src/tool, the rsverbs command, is a program of its own,
# whose selftest report names the LD_PRELOAD it runs under.)
env_check() {
  local vars others
  vars=$(grep -rhoE --exclude-dir=tool '(var_os|var|getenv|secure_getenv|is_set|Switch::new)\((c)?"[A-Za-z0-9_]+"' src/ | sed -E 's/.*\(c?"//; s/"$//' |
    grep -v '^RSVERBS_TEST_' | sort -u) # (the unit tests' own, never set)
  echo "sanitize: environment variables read by src/: $(echo ${vars:-none})"
  [ -z "$(comm -23 <(echo "$vars") <(printf '%s\n' MLX4_DEVICE_FATAL_CLEANUP RDMAV_ALLOW_DISASSOC_DESTROY RSVERBS_MCAST_FABRICJOIN RSVERBS_MCAST_IPJOIN RSVERBS_TRACE))" ] || return 1
  # RSVERBS_TRACE only as a Switch, and only in src/trace/mod.rs.
  [ "$(grep -rlE --exclude-dir=tool '"RSVERBS_TRACE"' src/)" = src/trace/mod.rs ] &&
    grep -qE 'Switch::new\(c"RSVERBS_TRACE"\)' src/trace/mod.rs || return 1
  # RSVERBS_MCAST_IPJOIN and _FABRICJOIN the same way, only in src/ipjoin/mod.rs.
  for v in RSVERBS_MCAST_IPJOIN RSVERBS_MCAST_FABRICJOIN; do
    [ "$(grep -rlE --exclude-dir=tool "\"$v\"" src/)" = src/ipjoin/mod.rs ] &&
      grep -qE "Switch::new\\(c\"$v\"\\)" src/ipjoin/mod.rs || return 1
  done
  # The Switch reads with secure_getenv, and nothing else does.
  grep -qE 'secure_getenv\(self\.name\.as_ptr\(\)\)' src/env.rs || return 1
  # No other access: env::vars, environ, getenv or var_os elsewhere.
  others=$(grep -rnE --exclude-dir=tool 'env::vars|environ|getenv|secure_getenv|var_os' src/ |
    grep -vE '^src/[a-z_/]+\.rs:[0-9]+:\s*(//|///|//!)' |
    grep -vE '^src/env.rs:[0-9]+:.*(getenv\(c"(RDMAV_ALLOW_DISASSOC_DESTROY|MLX4_DEVICE_FATAL_CLEANUP)"\)|fn getenv\(name: &CStr\)|libc::getenv\(name\.as_ptr\(\)\)|fn secure_getenv\(|secure_getenv\(self\.name\.as_ptr\(\)\))' || true)
  [ -z "$others" ] || { echo "sanitize: other environment access: $others"; return 1; }
}
check "src/ reads no environment variable but the two detach switches, RSVERBS_TRACE, RSVERBS_MCAST_IPJOIN and RSVERBS_MCAST_FABRICJOIN (secure_getenv)" env_check

echo "sanitize: took $(( $(date +%s) - T0 )) s"
finish
