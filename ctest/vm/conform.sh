#!/usr/bin/env bash
# Conformance, in the guest: conform.c run as (a) rdma-core, (b) relinked
# against rsverbs, (c) rdma-core binary + LD_PRELOAD=librsverbs.so.1, the
# five verbs each (ibv_query_gid and ibv_query_gid_table among them); then
# the same three under a seccomp filter that makes the verbs ioctl fail with
# ENOTTY, and with EPROTONOSUPPORT (the write() and sysfs fallbacks).
# Every case line must be identical in the three modes. CONFORM_DEVS
# (sib0,sib1 in make check-sib's InfiniBand cell): only those devices.
set -uo pipefail
source "$(dirname "$0")/../lib.sh"
W=$(mktemp -d)
# lap WHAT: how long WHAT took since t (ms), for where the suite's time goes.
lap() { local n; n=$(date +%s%N); echo "conform: $1 took $(( (n - t) / 1000000 )) ms"; t=$n; }

run_mode() { # run_mode LABEL "LINKS" WRAPPER...: LINKS of relinked, preload
  local label=$1 links=$2 t; shift 2
  t=$(date +%s%N)
  "$@" "$BIN/conform" ${CONFORM_DEVS:+"$CONFORM_DEVS"} > "$W/$label.ref" 2> "$W/$label.ref.err"
  echo $? > "$W/$label.ref.rc"
  lap "$label reference"
  if [[ " $links " == *" relinked "* ]]; then
    "$@" "$BIN/conform.rsv" ${CONFORM_DEVS:+"$CONFORM_DEVS"} > "$W/$label.relinked" 2> "$W/$label.relinked.err"
    echo $? > "$W/$label.relinked.rc"
    lap "$label relinked"
  fi
  env LD_PRELOAD="$RSVERBS_LIB" "$@" "$BIN/conform" ${CONFORM_DEVS:+"$CONFORM_DEVS"} > "$W/$label.preload" 2> "$W/$label.preload.err"
  echo $? > "$W/$label.preload.rc"
  lap "$label preload"
  grep -h '^served-by' "$W/$label".*.err
  local n; n=$(wc -l < "$W/$label.ref")
  if [ "$n" -lt 100 ]; then fail "$label: reference produced only $n lines"; cat "$W/$label.ref.err" >&2; return; fi
  # A run that stopped midway has fewer lines, each maybe identical: its
  # exit status says so.
  check "$label: the reference ran to its end (exit $(cat "$W/$label.ref.rc"))" [ "$(cat "$W/$label.ref.rc")" = 0 ]
  check "$label: reference served by libibverbs" grep -q 'served-by ibv_attach_mcast=libibverbs.so.1 ibv_detach_mcast=libibverbs.so.1 _ibv_query_gid_ex=libibverbs.so.1 ibv_query_gid=libibverbs.so.1 _ibv_query_gid_table=libibverbs.so.1' "$W/$label.ref.err"
  echo "conform: $label: rdma-core wrote past entry_size in $(grep -c '^overrun' "$W/$label.ref.err") cases"
  for m in $links; do
    check "$label: $m ran to its end (exit $(cat "$W/$label.$m.rc"))" [ "$(cat "$W/$label.$m.rc")" = 0 ]
    check "$label: $m never writes past entry_size" sh -c "! grep '^overrun' $W/$label.$m.err"

    check "$label: $m served by librsverbs" grep -q 'served-by ibv_attach_mcast=librsverbs.so.1 ibv_detach_mcast=librsverbs.so.1 _ibv_query_gid_ex=librsverbs.so.1 ibv_query_gid=librsverbs.so.1 _ibv_query_gid_table=librsverbs.so.1' "$W/$label.$m.err"
    # One result per case line: identical to the reference, or a failure
    # that shows both lines.
    local same=0 diffs=0
    while IFS=$'\t' read -r a b; do
      if [ "$a" = "$b" ]; then same=$((same + 1)); echo "PASS $label $m: $a" >> "$RESULTS_DIR/$SUITE.results"; else diffs=$((diffs + 1)); fail "$label $m: rdma-core '$a' vs rsverbs '$b'"; fi
    done < <(paste "$W/$label.ref" "$W/$label.$m")
    echo "conform: $label/$m: $same identical, $diffs different, of $n reference cases"
  done
}

run_mode ioctl "relinked preload"
# The groups-per-QP limit (8,193 attaches) only in the ioctl mode: attach
# and detach are write() commands there too (rdma-core cmd.c
# ibv_cmd_attach_mcast), so the noioctl modes would repeat it unchanged.
# CONFORM_FALLBACK_LINKS: the rsverbs programs of the fallback modes,
# "relinked preload" (make check) or "preload" (make matrix's cells: the
# relinked program runs the same code as the preloaded one once the ioctl
# fails, and the ioctl mode above runs all three; each fallback program
# takes about 30 s under TCG, reading the 1,024-entry GID table in sysfs).
fb_links=${CONFORM_FALLBACK_LINKS:-relinked preload}
# CONFORM_FALLBACK: no NULL entries for ibv_query_gid_table there, where
# rdma-core's sysfs walk would store through it.
run_mode noioctl-ENOTTY "$fb_links" env CONFORM_SKIP_GROUP_LIMIT=1 CONFORM_FALLBACK=1 "$BIN/noioctl" ENOTTY
run_mode noioctl-EPROTONOSUPPORT "$fb_links" env CONFORM_SKIP_GROUP_LIMIT=1 CONFORM_FALLBACK=1 "$BIN/noioctl" EPROTONOSUPPORT
grep -h 'conform:' "$W"/ioctl.ref.err
mkdir -p /out/conform && cp "$W"/* /out/conform/
rm -rf "$W"
finish
