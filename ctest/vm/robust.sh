#!/usr/bin/env bash
# Robustness, in the guest: bad input (NULL pointers, closed and missing
# fds, garbage handles, every odd size/port/index), fork and exec, and a
# route cached on a reused (context address, cmd_fd). robust.c runs as
# rdma-core, relinked and preloaded, on the ioctl route and under
# BIN/noioctl ENOTTY (write() + sysfs routes). (robust_san.sh runs the
# rsverbs modes again under AddressSanitizer and valgrind memcheck.)
#   R lines: identical to rdma-core's, live;
#   N lines (NULL arguments): rsverbs gives ret=22 errno=22, rdma-core's
#            answer (a crash) is recorded;
#   D lines (cmd_fd < 0): rsverbs gives EOPNOTSUPP; rdma-core's rxe
#            provider's answer is recorded.
set -uo pipefail
source "$(dirname "$0")/../lib.sh"
W=$(mktemp -d)
T0=$(date +%s)
DEV=${ROBUST_DEV:-rxe1}
TMO=${ROBUST_TIMEOUT:-300}

source "$(dirname "$0")/robust_lib.bash"

run_set() { # run_set LABEL WRAPPER...  (ref, relinked, preload)
  local label=$1; shift
  local arg=""; [ "$label" != ioctl ] && arg=fallback
  timeout "$TMO" "$@" "$BIN/robust" -d "$DEV" $arg > "$W/$label.ref" 2> "$W/$label.ref.err"
  check "$label: rdma-core reference exits 0" test $? -eq 0
  timeout "$TMO" "$@" "$BIN/robust.rsv" -d "$DEV" $arg > "$W/$label.relinked" 2> "$W/$label.relinked.err"
  check "$label: relinked exits 0" test $? -eq 0
  timeout "$TMO" env LD_PRELOAD="$RSVERBS_LIB" "$@" "$BIN/robust" -d "$DEV" $arg > "$W/$label.preload" 2> "$W/$label.preload.err"
  check "$label: preload exits 0" test $? -eq 0
  check "$label: reference served by libibverbs" grep -q 'served-by ibv_attach_mcast=libibverbs.so.1 ibv_detach_mcast=libibverbs.so.1 _ibv_query_gid_ex=libibverbs.so.1' "$W/$label.ref.err"
  for m in relinked preload; do
    check "$label: $m served by librsverbs" grep -q 'served-by ibv_attach_mcast=librsverbs.so.1 ibv_detach_mcast=librsverbs.so.1 _ibv_query_gid_ex=librsverbs.so.1' "$W/$label.$m.err"
    compare "$label $m" "$W/$label.ref" "$W/$label.$m"
    rsverbs_only "$label $m" "$W/$label.$m"
    grep -h '^reuse' "$W/$label.$m.err" | sed "s/^/robust: $label $m: /"
  done
  echo "robust: $label: rdma-core on NULL arguments: $(grep '^N ' "$W/$label.ref" | sed 's/^N //' | tr '\n' ';')"
  echo "robust: $label: rdma-core on cmd_fd < 0: $(grep '^D ' "$W/$label.ref" | sed 's/^D //' | tr '\n' ';')"
  echo "robust: $label: rsverbs on cmd_fd < 0: $(grep '^D ' "$W/$label.preload" | sed 's/^D //' | tr '\n' ';')"
}

t=$(date +%s)
run_set ioctl
echo "robust: ioctl set took $(( $(date +%s) - t )) s"
t=$(date +%s)
run_set noioctl-ENOTTY "$BIN/noioctl" ENOTTY
echo "robust: noioctl-ENOTTY set took $(( $(date +%s) - t )) s"

mkdir -p /out/robust && cp "$W"/* /out/robust/
rm -rf "$W"
echo "robust: suite took $(( $(date +%s) - T0 )) s"
finish
