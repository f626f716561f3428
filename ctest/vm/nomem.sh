#!/usr/bin/env bash
# Memory exhaustion (docs/security.md, promise 16): every
# allocation librsverbs.so.1 makes fails (ctest/vm/nomem.c interposes
# malloc and fails the calls whose caller is in the library), on a fresh
# context: each verb answers exactly as in the same program's run with
# memory, relinked and preloaded, plain and with every feature on
# (RSVERBS_MCAST_IPJOIN=1, RSVERBS_TRACE=hints:FILE), and the process
# exits 0. Plain, no verb allocates at all (counted: 0 made). Before, the
# first verb's route discovery allocated, and the failure aborted.
set -uo pipefail
source "$(dirname "$0")/../lib.sh"
W=$(mktemp -d)
trap 'mkdir -p "$RESULTS_DIR/nomem" && cp -r "$W"/. "$RESULTS_DIR/nomem/"; rm -rf "$W"' EXIT
DEV=${NOMEM_DEV:-rxe1} NET=${NOMEM_NET:-dummy0}

for mode in relinked preload; do
  if [ $mode = relinked ]; then P=("$BIN/nomem.rsv"); else P=(env LD_PRELOAD="$RSVERBS_LIB" "$BIN/nomem"); fi
  for feat in plain features; do
    # Plain: no feature, whatever the suite's environment says.
    E=(-u RSVERBS_TRACE -u RSVERBS_MCAST_IPJOIN); [ $feat = features ] && E=(RSVERBS_MCAST_IPJOIN=1 RSVERBS_TRACE="hints:$W/$mode.$feat.trace")
    l=$mode.$feat
    timeout 120 env "${E[@]}" "${P[@]}" "$DEV" "$NET" > "$W/$l.mem" 2> "$W/$l.mem.err"
    rc=$?
    check "$l: with memory, exits 0 (rc $rc)" test "$rc" -eq 0
    timeout 120 env "${E[@]}" "${P[@]}" "$DEV" "$NET" fail > "$W/$l.nomem" 2> "$W/$l.nomem.err"
    rc=$?
    check "$l: every rsverbs allocation failed, the process exits 0 (rc $rc: $(grep -h 'allocations' "$W/$l.nomem.err"))" test "$rc" -eq 0
    check "$l: served by librsverbs" grep -q 'served-by ibv_attach_mcast=librsverbs.so.1' "$W/$l.nomem.err"
    check "$l: every verb answers as with memory ($(wc -l < "$W/$l.mem") calls)" diff -u "$W/$l.mem" "$W/$l.nomem"
    check "$l: the verbs succeeded" test "$(grep -c 'ret=0 ' "$W/$l.nomem")" -ge 6
    # rsverbs_mcast_join/_leave (ENOMEM, never EINVAL): with memory 0 and 0;
    # without, the join ENOMEM (never EINVAL, "no such port") and the
    # leave of what was not joined EADDRNOTAVAIL.
    check "$l: explicit join and leave with memory: 0, 0" \
      test "$(grep -c '^member \(join\|leave\) ret=0 errno=' "$W/$l.mem.err")" -eq 2
    check "$l: explicit join without memory: ENOMEM ($(grep -h '^member join' "$W/$l.nomem.err"))" \
      grep -qx 'member join ret=-1 errno=12' "$W/$l.nomem.err"
    check "$l: its leave: EADDRNOTAVAIL" grep -qx 'member leave ret=-1 errno=99' "$W/$l.nomem.err"
    if [ $feat = plain ]; then
      check "$l: no verb allocates ($(grep -h 'allocations' "$W/$l.mem.err"))" grep -q 'allocations: 0 failed, 0 made' "$W/$l.mem.err"
    else
      check "$l: the features' allocations were failed, said once on stderr" \
        test "$(grep -c 'out of memory' "$W/$l.nomem.err")" -le 1
    fi
  done
done
finish
