#!/usr/bin/env bash
# A host program survives rsverbs leaving it (src/lifecycle.rs): dlopen,
# dlclose, then fork and exec, with the library from each linker (zig's
# lld and GNU ld), plain, under ASan and under valgrind memcheck. Before
# the fix the zig-linked library left its atfork handler behind and the
# forked child died of SIGSEGV (docs/security.md).
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
source ctest/lib.sh
B=${RSVERBS_BUILD:-$PWD/build}
O=ctest/out/unload; mkdir -p "$O"

twin_lib "$B" || fail "make LINKER=$other failed"

check "unload.c builds" cc -Wall -Wextra -Werror -O1 -g -o "$O/unload" ctest/unload.c -ldl
check "unload.c builds with ASan" cc -Wall -Wextra -Werror -O1 -g -fsanitize=address -fno-omit-frame-pointer \
  -o "$O/unload.asan" ctest/unload.c -ldl

ok() { grep -qx 'unload: ok' "$1"; }
for l in "$linker:$B/librsverbs.so.1" "$other:$twin/librsverbs.so.1"; do
  name=${l%%:*} lib=${l#*:}
  [ -f "$lib" ] || { fail "$name: no $lib"; continue; }
  "$O/unload" "$lib" 1 > "$O/$name.out" 2>&1
  check "$name: dlopen, dlclose, fork, exec: the children live ($(tail -1 "$O/$name.out"))" ok "$O/$name.out"
  "$O/unload" "$lib" 5 > "$O/$name.5.out" 2>&1
  check "$name: five loads and unloads, then fork: the children live" ok "$O/$name.5.out"
  rm -f "$O/$name.trace"
  RSVERBS_TRACE="$PWD/$O/$name.trace" "$O/unload" "$lib" 100 > "$O/$name.traced.out" 2>&1
  check "$name: 100 loads and unloads with RSVERBS_TRACE=FILE leave no fd open ($(tail -1 "$O/$name.traced.out"))" \
    ok "$O/$name.traced.out"
  ASAN_OPTIONS=detect_leaks=1 "$O/unload.asan" "$lib" 2 > "$O/$name.asan.out" 2>&1
  check "$name: the same under ASan, no error" ok "$O/$name.asan.out"
  if command -v valgrind >/dev/null; then
    valgrind -q --error-exitcode=9 --trace-children=no "$O/unload" "$lib" 2 > "$O/$name.vg.out" 2>&1
    check "$name: the same under valgrind memcheck, no error (rc $?)" ok "$O/$name.vg.out"
  else
    fail "$name: valgrind is not installed"
  fi
done
finish
