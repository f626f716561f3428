#!/bin/bash
# Stage 2 of the rsverbs test-bed guest: PID 1 after switch_root, running the
# root's own bash (the host's, or the userland's) read-only over 9p.  Loads
# the RDMA modules, sets
# up the two Soft-RoCE devices, runs the job's command and reports its status
# on the console as "RSVERBS_TESTBED_EXIT=<n> <nonce>" for vm.sh to parse.
#
# No `set -e`: PID 1 must always reach poweroff, whatever fails.
set -uo pipefail

RSV=/run/rsverbs
KROOT=$RSV/kroot # unpacked kernel .deb with modules.dep (from vm.sh prepare)
BB=$RSV/busybox
export PATH=/usr/sbin:/usr/bin:/sbin:/bin
exec </dev/null

say() { echo "testbed-guest: $*"; }
halt() {
	sync
	$BB poweroff -f
	sleep 60 # never let PID 1 exit (that would be a kernel panic)
}
die() {
	say "FATAL: $*"
	halt
}

# shellcheck source=/dev/null # written by vm.sh: RSV_NONCE RSV_CWD RSV_CMD RSV_KERNEL RSV_USERLAND RSV_NET_IP
. $RSV/job/job.sh || die "cannot read job"
RSV_NET_IP=${RSV_NET_IP:-}
RSV_ARCH=${RSV_ARCH:-amd64}

# The root has no /lib/modules for this kernel, so point both the kernel's
# module autoloader and our own modprobe calls at the cached module tree
# (modules decompressed and depmod'ed on the host, so any kmod reads it).
printf '#!/bin/sh\nexec /sbin/modprobe -d %s "$@"\n' "$KROOT" >$RSV/modprobe
chmod +x $RSV/modprobe
echo $RSV/modprobe >/proc/sys/kernel/modprobe
echo rsverbs-guest >/proc/sys/kernel/hostname

# crc32_generic (where the kernel has it), rdma_rxe, rdma_ucm, dummy and
# their dependencies, in the insmod order vm.sh computed on the host with
# modprobe --show-depends: busybox insmod, whatever the root's kmod.
while read -r ko; do
	m=${ko##*/}
	m=${m%.ko}
	[ -d "/sys/module/${m//-/_}" ] && continue # built in, or autoloaded
	$BB insmod "$KROOT/$ko" || die "insmod $ko failed"
done <$RSV/rsverbs-stage2-modules

ip link set lo up
ip link add dummy0 type dummy
ip link set dummy0 up
ip addr add 192.0.2.1/24 dev dummy0
ip -6 addr add 2001:db8::1/64 dev dummy0 nodad
rdma link add rxe0 type rxe netdev lo || die "rdma link add rxe0"
rdma link add rxe1 type rxe netdev dummy0 || die "rdma link add rxe1"
# A networked guest (vm.sh --net/--ip): eth0 on the shared L2 segment, its
# address, the multicast range routed there (rxe looks up a route for every
# packet it sends: rxe_net.c, rxe_find_route4), and rxe2 on it.
NET_ENV=() NET_GID=""
if [ -n "$RSV_NET_IP" ]; then
	for ((i = 0; i < 100; i++)); do # at most ~10 s
		[ -d /sys/class/net/eth0 ] && break
		sleep 0.1
	done
	ip link set eth0 up || die "no eth0 (vm.sh --net)"
	ip addr add "$RSV_NET_IP" dev eth0 || die "ip addr add $RSV_NET_IP dev eth0"
	ip route add 224.0.0.0/4 dev eth0 || die "multicast route on eth0"
	rdma link add rxe2 type rxe netdev eth0 || die "rdma link add rxe2"
	IFS=. read -r o1 o2 o3 o4 <<<"${RSV_NET_IP%/*}"
	NET_GID=$(printf '0000:0000:0000:0000:0000:ffff:%02x%02x:%02x%02x' "$o1" "$o2" "$o3" "$o4")
	NET_ENV=(RSVERBS_NET_DEV=rxe2 RSVERBS_NET_IF=eth0 RSVERBS_NET_IP="${RSV_NET_IP%/*}")
	echo "rsverbs-${RSV_NET_IP%/*}" >/proc/sys/kernel/hostname
fi

# has_gid DEV GID: GID among the first 8 table entries.  Reads with the read
# builtin: forking cat for each of the 1024 sysfs entries is slow under TCG.
has_gid() {
	local f g
	for f in /sys/class/infiniband/"$1"/ports/1/gids/{0..7}; do
		read -r g <"$f" 2>/dev/null && [ "$g" = "$2" ] && return 0
	done
	return 1
}
ready() {
	[ -c /dev/infiniband/uverbs0 ] && [ -c /dev/infiniband/uverbs1 ] &&
		has_gid rxe0 0000:0000:0000:0000:0000:ffff:7f00:0001 &&
		has_gid rxe1 0000:0000:0000:0000:0000:ffff:c000:0201 &&
		{ [ -z "$NET_GID" ] || has_gid rxe2 "$NET_GID"; }
}
for ((i = 0; i < 300; i++)); do # at most ~30 s
	ready && break
	sleep 0.1
done
ready || die "rxe devices did not come up: $(ls /dev/infiniband 2>&1)"
say "rxe0 rxe1${NET_GID:+ rxe2} up after $(cut -d' ' -f1 /proc/uptime) s of guest uptime"

# RSVERBS_SIW=1 on the host: siw0 (Soft-iWARP, testbed/siw.sh) on dummy0.
SIW_ENV=()
if [ -e $RSV/job/siw.ko ]; then
	$BB insmod $RSV/job/siw.ko || die "insmod siw.ko"
	rdma link add siw0 type siw netdev dummy0 || die "rdma link add siw0"
	for ((i = 0; i < 100; i++)); do # at most ~10 s
		[ -d /sys/class/infiniband/siw0 ] && break
		sleep 0.1
	done
	[ -d /sys/class/infiniband/siw0 ] || die "siw0 did not come up"
	SIW_ENV=(RSVERBS_SIW=1)
	say "siw0 up"
fi

# RSVERBS_SIB=1 on the host: sib0 and sib1 (the project's software
# InfiniBand HCA, testbed/sib.sh), after ib_core and ib_uverbs (loaded
# above with rdma_rxe and rdma_ucm).
SIB_ENV=()
if [ -e $RSV/job/sib.ko ]; then
	$BB insmod $RSV/job/sib.ko || die "insmod sib.ko"
	for ((i = 0; i < 100; i++)); do # at most ~10 s
		[ -d /sys/class/infiniband/sib0 ] && [ -d /sys/class/infiniband/sib1 ] && break
		sleep 0.1
	done
	[ -d /sys/class/infiniband/sib1 ] || die "sib0 and sib1 did not come up"
	SIB_ENV=(RSVERBS_SIB=1)
	say "sib0 sib1 up"
fi

ulimit -l unlimited # ibv_reg_mr pins memory
cd "$RSV_CWD" || die "cwd $RSV_CWD not visible in the guest"
echo "RSVERBS_TESTBED_START $RSV_NONCE"
env -i PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
	HOME=/tmp USER=root LOGNAME=root SHELL=/bin/bash TERM=dumb LANG=C.UTF-8 \
	RSVERBS_GUEST=1 RSVERBS_OUT=/out RSVERBS_KERNEL="$RSV_KERNEL" RSVERBS_USERLAND="$RSV_USERLAND" RSVERBS_ARCH="$RSV_ARCH" \
	"${SIW_ENV[@]}" "${SIB_ENV[@]}" "${NET_ENV[@]}" "${RSV_CMD[@]}"
status=$?
echo "RSVERBS_TESTBED_EXIT=$status $RSV_NONCE"
sync
umount /out 2>/dev/null
halt
