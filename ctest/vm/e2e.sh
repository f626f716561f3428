#!/usr/bin/env bash
# End-to-end multicast, in the guest: e2e.c sends UD datagrams to groups on
# rxe1 (dummy0: IPv4-mapped and IPv6 ff0e/ff05/ff02 MGIDs) and rxe0 (lo:
# IPv4 only; rxe cannot send IPv6 multicast from lo) and checks delivery:
# exactly once after attach + duplicate attach, none after detach, once after
# re-attach, none after the second detach, never to a QP that is not attached.
# Run as (a) rdma-core, (b) relinked against rsverbs, (c) rdma-core binary +
# LD_PRELOAD=librsverbs.so.1; the three delivery patterns must be identical.
set -uo pipefail
source "$(dirname "$0")/../lib.sh"
W=$(mktemp -d)
GROUPS_ARGS=(rxe1 239.1.2.3 ff0e::e2e:1 ff05::e2e:2 ff02::e2e:3 -- rxe0 239.1.2.4)
NGROUPS=5 NDEVS=2

run() { # run LABEL CMD...
  local label=$1 rc=0 start; shift
  start=$(date +%s%N)
  timeout -k 5 90 "$@" "${GROUPS_ARGS[@]}" > "$W/$label.out" 2> "$W/$label.err" || rc=$?
  echo "e2e: $label exited $rc after $(( ($(date +%s%N) - start) / 1000000 )) ms"
  grep -h '^e2e: phase' "$W/$label.err" | sed "s/^/  $label: /"
  if [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then
    fail "$label: timed out after 90 s"
  elif [ "$rc" -ne 0 ]; then
    fail "$label: exit status $rc, delivery differs from attach/detach state:"
    grep -E 'MISMATCH|^e2e: ' "$W/$label.err" | grep -v -E '^e2e: (phase|.*sgid index)' | sed 's/^/    /' >&2
  else
    pass "$label: every group delivered exactly once while attached, never while detached"
  fi
}

run reference "$BIN/e2e"
run relinked "$BIN/e2e.rsv"
run preload env LD_PRELOAD="$RSVERBS_LIB" "$BIN/e2e"

check "reference: ibv_attach_mcast served by libibverbs" \
  grep -q '^served-by ibv_attach_mcast=libibverbs.so.1 ibv_detach_mcast=libibverbs.so.1 _ibv_query_gid_ex=libibverbs.so.1$' "$W/reference.out"
for m in relinked preload; do
  check "$m: ibv_attach_mcast served by librsverbs" \
    grep -q '^served-by ibv_attach_mcast=librsverbs.so.1 ibv_detach_mcast=librsverbs.so.1 _ibv_query_gid_ex=librsverbs.so.1$' "$W/$m.out"
done

# The delivery pattern, line by line: the same as rdma-core's.
grep -v '^served-by' "$W/reference.out" > "$W/reference.pattern"
n=$(wc -l < "$W/reference.pattern")
want=$((4 * NGROUPS + NDEVS))
if [ "$n" -ne "$want" ]; then
  fail "reference: $n pattern lines, expected $want"
fi
for m in relinked preload; do
  grep -v '^served-by' "$W/$m.out" > "$W/$m.pattern"
  while IFS=$'\t' read -r a b; do
    if [ "$a" = "$b" ]; then pass "$m same as rdma-core: $a"; else fail "$m: rdma-core '$a' vs rsverbs '$b'"; fi
  done < <(paste "$W/reference.pattern" "$W/$m.pattern")
done

mkdir -p "$RESULTS_DIR/e2e" && cp "$W"/* "$RESULTS_DIR/e2e/"
rm -rf "$W"
finish
