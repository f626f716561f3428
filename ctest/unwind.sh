#!/usr/bin/env bash
# A thread that ends inside a verb does not take the process with it
# (ctest/unwind.c; docs/security.md, promise 15 and "Thread
# cancellation"): pthread_cancel while a traced verb blocks in its write,
# and pthread_exit() from a signal handler that interrupted it, with the
# library from each linker (zig's lld and GNU ld). Both aborted the process
# before the library's syscalls were raw and its personality let a forced
# unwind pass.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
source ctest/lib.sh
B=${RSVERBS_BUILD:-$PWD/build}
O=ctest/out/unwind; mkdir -p "$O"

twin_lib "$B" || fail "make LINKER=$other failed"

check "unwind.c builds" cc -Wall -Wextra -Werror -O1 -g -pthread -o "$O/unwind" ctest/unwind.c -ldl

for l in "$linker:$B/librsverbs.so.1" "$other:$twin/librsverbs.so.1"; do
  name=${l%%:*} lib=${l#*:}
  [ -f "$lib" ] || { fail "$name: no $lib"; continue; }
  for mode in cancel sigexit; do
    RSVERBS_TRACE=1 timeout 60 "$O/unwind" "$lib" "$mode" > "$O/$name.$mode.out" 2>&1
    rc=$?
    check "$name: $mode inside a traced verb: the process lives (rc $rc: $(tail -1 "$O/$name.$mode.out"))" \
      grep -q '^unwind: ok' "$O/$name.$mode.out"
  done
done
finish
