#!/usr/bin/env bash
# Device loss, in the guest, on a Soft-RoCE device of our own (rxedl on
# dummydl: rxe0/rxe1 of the other suites are never touched):
#   devloss delete: `rdma link delete` with a QP attached and calls in
#     flight, the sysfs fallback on the deleted device's missing files, then
#     the device recreated and new contexts (also on the old context's
#     address and fd) -- each run deletes and recreates rxedl;
#   devloss eio: a disassociated device (seccomp EIO on the verbs ioctl and
#     write()), with RDMAV_ALLOW_DISASSOC_DESTROY / MLX4_DEVICE_FATAL_CLEANUP
#     unset, "1", "0" and "", on the ioctl route and the write() route.
# Every R line identical for rdma-core, relinked and preloaded (live).
set -uo pipefail
source "$(dirname "$0")/../lib.sh"
W=$(mktemp -d)
T0=$(date +%s)
ND=dummydl RD=rxedl

dummy_rxe $ND $RD 198.18.0.1/24 2001:db8:d1::1/64
check "set up $RD on $ND" test $? -eq 0
for ((i = 0; i < 300; i++)); do
  read -r g < /sys/class/infiniband/$RD/ports/1/gids/1 2>/dev/null &&
    [ "$g" != 0000:0000:0000:0000:0000:0000:0000:0000 ] && break
  sleep 0.1
done

modes=(ref relinked preload)
cmd_for() {
  case $1 in
    ref) cmd=("$BIN/devloss") ;;
    relinked) cmd=("$BIN/devloss.rsv") ;;
    preload) cmd=(env LD_PRELOAD="$RSVERBS_LIB" "$BIN/devloss") ;;
  esac
}

# compare_set LABEL: $W/LABEL.{ref,relinked,preload}
compare_set() {
  local label=$1 m n a b same diffs
  n=$(grep -c '^R ' "$W/$label.ref")
  [ "$n" -ge 5 ] || { fail "$label: rdma-core gave only $n result lines"; cat "$W/$label.ref.err" >&2; }
  check "$label: rdma-core served by libibverbs" grep -q 'served-by ibv_attach_mcast=libibverbs.so.1 ibv_detach_mcast=libibverbs.so.1 _ibv_query_gid_ex=libibverbs.so.1' "$W/$label.ref.err"
  for m in relinked preload; do
    check "$label $m: served by librsverbs" grep -q 'served-by ibv_attach_mcast=librsverbs.so.1 ibv_detach_mcast=librsverbs.so.1 _ibv_query_gid_ex=librsverbs.so.1' "$W/$label.$m.err"
    [ "$(grep -c '^R ' "$W/$label.$m")" -eq "$n" ] || fail "$label $m: $(grep -c '^R ' "$W/$label.$m") result lines vs $n"
    same=0 diffs=0
    while IFS=$'\t' read -r a b; do
      if [ "$a" = "$b" ]; then same=$((same + 1)); echo "PASS $label $m: $a" >> "$RESULTS_DIR/$SUITE.results"
      else diffs=$((diffs + 1)); fail "$label $m: rdma-core '$a' vs rsverbs '$b'"; fi
    done < <(paste <(grep '^R ' "$W/$label.ref") <(grep '^R ' "$W/$label.$m"))
    echo "devloss: $label $m: $same identical, $diffs different"
  done
}

# ---- rdma link delete / recreate ------------------------------------------
for m in "${modes[@]}"; do
  cmd_for $m
  t=$(date +%s)
  # tcache off: lets the new context land on the deleted one's address
  timeout 240 env GLIBC_TUNABLES=glibc.malloc.tcache_count=0 "${cmd[@]}" delete -d $RD -i $ND -o rxe1 \
    > "$W/delete.$m" 2> "$W/delete.$m.err"
  rc=$?
  check "delete $m: exits 0 (no crash, no hang)" test $rc -eq 0
  grep -h 'reuse\|calls in flight' "$W/delete.$m.err" | sed "s/^/devloss: delete $m: /"
  echo "devloss: delete $m took $(( $(date +%s) - t )) s"
  # Whatever happened, the device must be back for the next run.
  if [ ! -e /sys/class/infiniband/$RD ]; then
    timeout 60 rdma link add $RD type rxe netdev $ND; sleep 2
  fi
done
compare_set delete
grep -h '^R loss' "$W/delete.ref" | sed "s/^R /devloss: rdma-core: /"
# Linux 6.1 rxe cannot disassociate: the deletion waits for our close, and
# the calls in flight keep their normal results (GID 3 is empty: ENODATA).
if grep -q '^R loss rdma-link-delete-returned-while-context-open=no' "$W/delete.ref"; then
  check "delete: calls in flight kept working while the deletion waited (no disassociation)" \
    sh -c "grep -q '^R loss in-flight query results={0,61}\$' '$W/delete.ref' && grep -q '^R loss in-flight attach results={0} detach results={0}\$' '$W/delete.ref'"
else
  echo "devloss: this kernel's rxe disassociates: calls after the loss were answered as above"
fi

# ---- a disassociated device: EIO ------------------------------------------
for route in ioctl write; do
  # allow0, allow0-mlx4-0: on before rdma-core 40.0, off from 40.0 (any value
  # of RDMAV_ALLOW_DISASSOC_DESTROY counted; docs/rdma-core-releases.md D1).
  w=""; envsets="none allow1 allow0 allow-empty mlx4 mlx4-0 allow0-mlx4-0"
  [ $route = write ] && w=-w envsets="none allow1"
  for envset in $envsets; do
    case $envset in
      none) e=() ;;
      allow1) e=(RDMAV_ALLOW_DISASSOC_DESTROY=1) ;;
      allow0) e=(RDMAV_ALLOW_DISASSOC_DESTROY=0) ;;
      allow-empty) e=(RDMAV_ALLOW_DISASSOC_DESTROY=) ;;
      mlx4) e=(MLX4_DEVICE_FATAL_CLEANUP=1) ;;
      mlx4-0) e=(MLX4_DEVICE_FATAL_CLEANUP=0) ;;
      allow0-mlx4-0) e=(RDMAV_ALLOW_DISASSOC_DESTROY=0 MLX4_DEVICE_FATAL_CLEANUP=0) ;;
    esac
    label=eio-$route-$envset
    for m in "${modes[@]}"; do
      cmd_for $m
      timeout 120 env "${e[@]}" "${cmd[@]}" eio -d $RD $w > "$W/$label.$m" 2> "$W/$label.$m.err"
      check "$label $m: exits 0" test $? -eq 0
    done
    compare_set "$label"
    echo "devloss: $label: rdma-core detach after loss: $(grep '^R eio-detach-attached ' "$W/$label.ref" | sed 's/^R //')"
  done
done

dummy_rxe_remove
trap - EXIT
check "$RD and $ND removed" sh -c "[ ! -e /sys/class/infiniband/$RD ] && ! ip link show $ND >/dev/null 2>&1"
mkdir -p /out/devloss && cp "$W"/* /out/devloss/
rm -rf "$W"
echo "devloss: suite took $(( $(date +%s) - T0 )) s"
finish
