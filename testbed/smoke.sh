#!/bin/bash
# Guest-side self test of the test bed (used by `make check`):
#   testbed/vm.sh run -- testbed/smoke.sh
# Shows the two Soft-RoCE devices and checks that they are fully usable:
# uverbs nodes present, `rdma link` lists both ACTIVE, IPv4 GIDs populated.
set -euo pipefail

fail() {
	echo "smoke: FAIL: $*" >&2
	exit 1
}
[[ ${RSVERBS_GUEST:-} == 1 ]] ||
	fail "run inside the test bed: testbed/vm.sh run -- testbed/smoke.sh"

echo "== ibv_devices"
ibv_devices

# DEV IPV4-MAPPED-GID (as ibv_devinfo prints it)
for spec in rxe0:::ffff:127.0.0.1 rxe1:::ffff:192.0.2.1; do
	dev=${spec%%:*} gid=${spec#*:}
	echo "== ibv_devinfo -v -d $dev (excerpt)"
	info=$(ibv_devinfo -v -d "$dev") || fail "ibv_devinfo -d $dev"
	grep -E 'hca_id|transport:|node_guid|max_qp:|max_cqe|max_mr_size|state:|active_mtu|link_layer|gid_tbl_len|GID\[ *[0-3]\]' <<<"$info"
	grep -q 'state:.*PORT_ACTIVE' <<<"$info" || fail "$dev port not active"
	grep -q "GID\[.*\]:.*$gid, RoCE v2" <<<"$info" || fail "$dev lacks GID $gid"
done

echo "== /dev/infiniband"
ls -l /dev/infiniband
for n in 0 1; do
	[[ -c /dev/infiniband/uverbs$n ]] || fail "/dev/infiniband/uverbs$n missing"
done

echo "== rdma link"
links=$(rdma link)
echo "$links"
for dev in rxe0 rxe1; do
	grep -q "^link $dev/1 state ACTIVE" <<<"$links" || fail "rdma link: $dev not ACTIVE"
done

echo "smoke: OK ($(uname -r), $(nproc) vCPUs)"
