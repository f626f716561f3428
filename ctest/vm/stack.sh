#!/usr/bin/env bash
# The stack budget (docs/security.md): every export, every feature on
# (RSVERBS_TRACE=hints:FILE, its file opened again by the call itself,
# and RSVERBS_MCAST_IPJOIN=1), uses at most STACK_BUDGET bytes of stack
# (ctest/vm/stack.c measures each on a pattern-filled stack above a guard
# page, its first call on a fresh context and its steady state, and prints
# each figure); and every verb called from a signal handler on an 8 KiB
# alternate stack whose lower end is a guard page answers as when called
# normally, and as rdma-core alone does. Relinked and preloaded, plain,
# with both features, with the trace alone (hints), and with the fabric
# join and the trace (fabric). And the failure paths (docs/security.md),
# each with the fabric join and the trace: fabricfail (the join's open
# fails: a mount namespace where /dev/infiniband/rdma_cm is a regular
# file, ENODEV, its failed line and hint written in the call), pending (a
# collapsed ENODATA run pending before each first call, written by it
# with the file's re-open as root), eacces (the rdma_cm fd opened as root
# first, then a capability dropped from the bounding set before each
# attach, detach, join and leave: each meets EACCES and replaces the fd).
# On rxe1 by default (make check); on InfiniBand from ctest/vm/sibfaults.sh
# (make check-sib: STACK_DEV=sib0, SUITE=stack_ib, the groups and the LID by
# STACK_GROUPS, STACK_CRED_GROUP and STACK_LID, ctest/vm/stack.c;
# STACK_FABRIC=1, the fabric join's InfiniBand switch, for roce; STACK_MODES
# without pending). The port's link layer (sysfs) picks the expectations
# that differ: on InfiniBand RSVERBS_MCAST_IPJOIN=1 joins nothing (an IB
# port's GIDs have no netdev: docs/ipjoin.md) and a traced attach without a
# join gives no hint (no-ip-join is RoCE's: src/trace/hints.rs).
set -uo pipefail
source "$(dirname "$0")/../lib.sh"
W=$(mktemp -d)
trap 'mkdir -p "$RESULTS_DIR/$SUITE" && cp -r "$W"/. "$RESULTS_DIR/$SUITE/"; rm -rf "$W"' EXIT
DEV=${STACK_DEV:-rxe1}
FABRIC=${STACK_FABRIC:-roce}
LL=$(cat "/sys/class/infiniband/$DEV/ports/1/link_layer" 2>/dev/null)
# What a verb may take so that, called from a signal handler on an 8 KiB
# alternate stack (SIGSTKSZ on x86_64 and s390x: glibc bits/sigstack.h),
# it fits beside the kernel's signal frame, with 512 bytes for the C caller
# and the handler and about 600 to spare (docs/security.md, Stack budget).
#   x86_64:  8,192 - about 3,500 (rt_sigframe with AVX-512 xsave state)
#            - 512 - 596 = 3,584: 4 KiB with the caller's share.
#   s390x:   8,192 - 1,320 (arch/s390/kernel/signal.c rt_sigframe: the
#            160-byte save area, svc_insn, siginfo 128, ucontext_extended
#            1,024) - 512 - 600, rounded down to 512: 5,632. Every s390x
#            frame also keeps a 160-byte register save area (the ELF ABI).
#   ppc64le: 8,192 - 2,288 (arch/powerpc/kernel/signal_64.c rt_sigframe:
#            ucontext 1,440, tramp and pointers 64, siginfo 128, the
#            512-byte ABI red zone, then __SIGNAL_FRAMESIZE 128 and 16;
#            Debian's kernels have no CONFIG_PPC_TRANSACTIONAL_MEM, which
#            would add a second ucontext) - 512 - 600, rounded down: 4,608.
#            (Its SIGSTKSZ is 16 KiB; 8 KiB is what a program sized for
#            x86_64 gives.)
#   aarch64: x86_64's 3,584 (its SIGSTKSZ is 16 KiB and MINSIGSTKSZ 5 KiB:
#            the SVE state does not fit 8 KiB; it measures under 3,584).
case $(uname -m) in
  s390x) default_budget=5632 ;;
  ppc64le) default_budget=4608 ;;
  *) default_budget=3584 ;;
esac
BUDGET=${STACK_BUDGET:-$default_budget}

# rdma-core alone: the reference answers (the five verbs; no rsverbs_*).
timeout 120 env -u LD_PRELOAD -u RSVERBS_TRACE -u RSVERBS_MCAST_IPJOIN "$BIN/stack" "$DEV" normal > "$W/rdma-core" 2> "$W/rdma-core.err"
check "rdma-core alone: exits 0" test $? -eq 0

for mode in relinked preload; do
  if [ $mode = relinked ]; then P=("$BIN/stack.rsv"); else P=(env LD_PRELOAD="$RSVERBS_LIB" "$BIN/stack"); fi
  # hints: the trace alone, whose attach then writes hint[no-ip-join]
  # (its /proc reads and its longest line) instead of the IP join's lines.
  # fabric: the fabric join's engine (rdma_cm, docs/fabric-join.md) with
  # the trace, its event read and its hints written inside the attach.
  for feat in ${STACK_MODES:-plain features hints fabric fabricfail pending eacces}; do
    E=(-u RSVERBS_TRACE -u RSVERBS_MCAST_IPJOIN)
    F=(-u RSVERBS_MCAST_IPJOIN RSVERBS_MCAST_FABRICJOIN="$FABRIC" RSVERBS_TRACE="hints:$W/$mode.$feat.trace")
    [ $feat = fabricfail ] && E=("${F[@]}" STACK_JOIN_MAY_FAIL=1)
    [ $feat = pending ] && E=("${F[@]}" STACK_PENDING_RUN=1)
    [ $feat = eacces ] && E=("${F[@]}" STACK_CRED_CHANGE=1)
    [ $feat = features ] && E=(RSVERBS_MCAST_IPJOIN=1 RSVERBS_TRACE="hints:$W/$mode.$feat.trace")
    [ $feat = hints ] && E=(-u RSVERBS_MCAST_IPJOIN RSVERBS_TRACE="hints:$W/$mode.$feat.trace")
    [ $feat = fabric ] && E=(-u RSVERBS_MCAST_IPJOIN RSVERBS_MCAST_FABRICJOIN="$FABRIC" RSVERBS_TRACE="hints:$W/$mode.$feat.trace")
    l=$mode.$feat
    X=()
    if [ $feat = fabricfail ]; then
      : > "$W/not-rdma_cm"
      X=(unshare -m sh -c 'mount --bind "$0" /dev/infiniband/rdma_cm && exec "$@"' "$W/not-rdma_cm")
    fi
    timeout 120 "${X[@]}" env "${E[@]}" "${P[@]}" "$DEV" measure "$BUDGET" > "$W/$l.measure" 2> "$W/$l.measure.err"
    rc=$?
    sed "s/^/stack: $l: /" "$W/$l.measure"
    check "$l: served by librsverbs" grep -q 'served-by ibv_attach_mcast=librsverbs.so.1' "$W/$l.measure.err"
    check "$l: every export measured ($(grep -c 'first=' "$W/$l.measure") calls)" test "$(grep -c 'first=' "$W/$l.measure")" -ge 17
    peak=$(awk '/first=/ { for (i = 3; i <= 4; i++) { split($i, a, "="); if (a[2] > m) { m = a[2]; w = $1 " " $2 } } } END { print m " (" w ")" }' "$W/$l.measure")
    check "$l: every export within $BUDGET bytes of stack (rc $rc, deepest $peak)" test "$rc" -eq 0
    if [ $feat = features ] && [ "$LL" = InfiniBand ]; then
      # The IP join's netdevs are those of the port's GIDs (gid_attrs/ndevs,
      # src/ipjoin/mod.rs netdevs): an InfiniBand port has none, so it
      # joins nothing and writes no ipjoin line.
      check "$l: the calls were traced, the file opened again; on InfiniBand no IP join ($(grep -c 'ipjoin \(join\|leave\)' "$W/$l.trace" 2>/dev/null) join or leave lines)" \
        test "$(grep -c 'ibv_attach_mcast' "$W/$l.trace" 2>/dev/null)" -ge 2 -a "$(grep -c 'ipjoin \(join\|leave\)' "$W/$l.trace" 2>/dev/null)" -eq 0
    elif [ $feat = features ]; then
      check "$l: the calls were traced, the file opened again, the groups joined" \
        test "$(grep -c 'ibv_attach_mcast' "$W/$l.trace" 2>/dev/null)" -ge 2 -a "$(grep -c 'ipjoin join' "$W/$l.trace" 2>/dev/null)" -ge 2
    elif [ $feat = fabric ] && [ "$LL" = InfiniBand ]; then
      # Through the SA (opensm): the event's MLID is a multicast LID.
      check "$l: the calls were traced, the groups joined through rdma_cm and the SA ($(grep -c 'fabricjoin joined .* mlid=0x[c-f]' "$W/$l.trace" 2>/dev/null) with an MLID)" \
        test "$(grep -c 'fabricjoin joined netdev=ib[0-9]* .* mlid=0x[c-f][0-9a-f]\{3\} ' "$W/$l.trace" 2>/dev/null)" -ge 2
    elif [ $feat = fabric ]; then
      check "$l: the calls were traced, the groups joined through rdma_cm" \
        test "$(grep -c 'fabricjoin joined' "$W/$l.trace" 2>/dev/null)" -ge 2
    elif [ $feat = hints ] && [ "$LL" = InfiniBand ]; then
      # no-ip-join is for Ethernet ports only (hints.rs, facts::is_ethernet);
      # on InfiniBand an attach without the fabric join gives no hint.
      check "$l: the calls were traced, no hint on InfiniBand ($(grep -c 'hint\[' "$W/$l.trace" 2>/dev/null) hint lines)" \
        test "$(grep -c 'ibv_attach_mcast' "$W/$l.trace" 2>/dev/null)" -ge 2 -a "$(grep -c 'hint\[' "$W/$l.trace" 2>/dev/null)" -eq 0
    elif [ $feat = hints ]; then
      check "$l: the calls were traced with their hints" grep -q 'hint\[no-ip-join\]' "$W/$l.trace"
    elif [ $feat = fabricfail ]; then
      check "$l: the fabric joins failed at open, line and hint ($(grep -c 'step=open result=ENODEV' "$W/$l.trace" 2>/dev/null))" \
        test "$(grep -c 'fabricjoin join .* step=open result=ENODEV(19)$' "$W/$l.trace" 2>/dev/null)" -ge 2 -a \
        "$(grep -c 'hint\[fabric-join-failed\]: .* at open' "$W/$l.trace" 2>/dev/null)" -ge 2
    elif [ $feat = pending ]; then
      check "$l: ENODATA runs were written by later calls ($(grep -c ' ×3$' "$W/$l.trace" 2>/dev/null))" \
        test "$(grep -c '_ibv_query_gid_ex .* index=9\.\.11 .* result=ENODATA(61) ×3$' "$W/$l.trace" 2>/dev/null)" -ge 10
    elif [ $feat = eacces ]; then
      check "$l: the rdma_cm fd was replaced after each credential change ($(grep -c 'fabricjoin replaced' "$W/$l.trace" 2>/dev/null))" \
        test "$(grep -c 'fabricjoin replaced the rdma_cm fd: cause=cred-change' "$W/$l.trace" 2>/dev/null)" -ge 4
    fi
    timeout 120 "${X[@]}" env "${E[@]}" "${P[@]}" "$DEV" normal > "$W/$l.normal" 2> "$W/$l.normal.err"
    check "$l: called normally, exits 0" test $? -eq 0
    timeout 120 "${X[@]}" env "${E[@]}" "${P[@]}" "$DEV" signal > "$W/$l.signal" 2> "$W/$l.signal.err"
    rc=$?
    check "$l: every call from a handler on an 8 KiB sigaltstack, exits 0 (rc $rc)" test "$rc" -eq 0
    check "$l: the handler's answers equal the normal calls' ($(wc -l < "$W/$l.normal") lines)" diff -u "$W/$l.normal" "$W/$l.signal"
    check "$l: the verbs' answers equal rdma-core's" diff -u "$W/rdma-core" <(grep -v '^rsverbs_' "$W/$l.signal")
  done
done
finish
