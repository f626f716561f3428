#!/usr/bin/env bash
# The C examples (examples/c/, built by make into build/examples/), in the
# guest, on rxe1 (dummy0), as the README and docs/troubleshooting.md present
# them: mcast_recv attaches a group and joins it with rsverbs_mcast_join
# (on RoCE: the IP-level join, seen in /proc/net/igmp while it runs and gone
# after its leave); mcast_send, a send-only member, sends 10 datagrams;
# every one arrives, and both exit 0.
set -uo pipefail
source "$(dirname "$0")/../lib.sh"
B=$(dirname "$RSVERBS_LIB")/examples
DEV=rxe1 ND=dummy0 G=239.8.8.1 N=10
W=$(mktemp -d)
trap 'rm -rf "$RESULTS_DIR/examples" && mkdir -p "$RESULTS_DIR/examples" && cp -r "$W"/. "$RESULTS_DIR/examples/"; rm -rf "$W"' EXIT

if [ "${RSVERBS_USERLAND:-bookworm}" != bookworm ] || [ ! -x "$B/mcast_recv" ]; then
	echo "skip examples: $B/mcast_recv is built against the host's glibc (bookworm), for the host's architecture"
	finish
	exit
fi
held() { igmp_held "$ND" "$G"; }
gone() { ! held; }
check "before: $ND has not joined $G" gone

coproc RECV { exec "$B/mcast_recv" -d "$DEV" -n "$N" -t 60 "$G" 2>&1; }
rpid=$RECV_PID # bash unsets RECV_PID once the coproc has ended
exec {rout}<&"${RECV[0]}"
ready=0
while IFS= read -r -t 60 -u "$rout" line; do
	echo "$line" >> "$W/recv.out"
	case $line in "mcast_recv: ready"*) ready=1; break ;; esac
done
check "mcast_recv attached $G and joined it" test "$ready" = 1
check "while it runs, $ND has joined $G at IP level (rsverbs_mcast_join)" held

"$B/mcast_send" -d "$DEV" -n "$N" "$G" > "$W/send.out" 2>&1
src=$?
check "mcast_send exits 0 ($(tail -1 "$W/send.out"))" test "$src" = 0
check "mcast_send sent $N of $N" grep -qx "mcast_send: sent $N of $N to $G from GID index [0-9]*, Q_Key 0x1234567" "$W/send.out"

cat <&"$rout" >> "$W/recv.out"
wait "$rpid"
rrc=$?
check "mcast_recv exits 0 (status $rrc)" test "$rrc" = 0
check "mcast_recv received $N of $N" grep -qx "mcast_recv: received $N of $N" "$W/recv.out"
check "each of the $N datagrams once" test "$(grep -o '^mcast_recv: datagram [0-9]* of' "$W/recv.out" | sort -u | wc -l)" = "$N"
check "after its leave, $ND has left $G" gone
finish
