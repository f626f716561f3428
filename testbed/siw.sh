#!/bin/bash
# rsverbs test bed: build siw.ko (Soft-iWARP) out of tree for a Debian
# kernel package.  Debian builds its kernels without CONFIG_RDMA_SIW, but
# the driver's source is in linux-source-X.Y; it builds against the
# matching linux-headers-KV-{amd64,common} and linux-kbuild-X.Y, unpacked
# into the cache (nothing is installed on the host).  siw is a real
# provider with no multicast op (rdma-core's dummy_ops.c answers), and RC
# only.  See testbed/README.md.
#
#   testbed/siw.sh KPKG KPKGVER      print the path of siw.ko (built once, cached)
#     e.g. testbed/siw.sh linux-image-6.1.0-56-amd64 6.1.192-2
#
# The module is compiled with the host's gcc, so only kernels built by the
# host's gcc major are accepted (bookworm's 6.1 on a Debian 12 host).
set -euo pipefail

TESTBED=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd -P)
CACHE=$(realpath -m "${RSVERBS_CACHE:-$HOME/.cache/rsverbs}")
log() { printf 'testbed: siw: %s\n' "$*" >&2; }
die() {
	log "error: $*"
	exit 125
}
(($# == 2)) || { sed -n 's/^#   //p' "$0" >&2; exit 2; }
KPKG=$1 KPKGVER=$2
# linux-image-6.1.0-56-amd64 -> KV 6.1.0-56, series 6.1
KV=${KPKG#linux-image-}
KV=${KV%-amd64}
[[ $KV =~ ^([0-9]+\.[0-9]+)\. ]] || die "cannot read a kernel version from $KPKG"
SERIES=${BASH_REMATCH[1]}
OUT=$CACHE/siw/${KPKG}_$KPKGVER
if [[ -s $OUT/siw.ko ]]; then
	echo "$OUT/siw.ko"
	exit 0
fi

# shellcheck source=testbed/apt.sh
. "$TESTBED/apt.sh"
apt_private_setup
apt_private_update

work=$(mktemp -d "${TMPDIR:-/tmp}/rsverbs-siw.XXXXXX")
trap 'rm -rf "$work"' EXIT
# The kernel's headers and kbuild (testbed/kheaders.sh, shared with sib.sh;
# kbuild at the lowest version the archive has that satisfies the headers'
# dependency, see there).
# shellcheck source=testbed/kheaders.sh
. "$TESTBED/kheaders.sh"
KH_WHAT=siw kheaders_unpack "$KPKG" "$KPKGVER" "$work"
H=$KH_DIR
log "extracting drivers/infiniband/sw/siw from linux-source-$SERIES"
dpkg-deb --fsys-tarfile "$(kheaders_fetch "linux-source-$SERIES" "$KPKGVER")" |
	tar -xOf - "./usr/src/linux-source-$SERIES.tar.xz" |
	tar -xJf - -C "$work" --wildcards "linux-source-$SERIES/drivers/infiniband/sw/siw/*"
src=$work/linux-source-$SERIES/drivers/infiniband/sw/siw
log "building siw.ko for $KV"
# No BTF for the module: it would need pahole (dwarves), and a module
# without .BTF loads the same (scripts/Makefile.modfinal: only with
# CONFIG_DEBUG_INFO_BTF_MODULES, set in 6.12's configuration).
make -s -C "$H" M="$src" CONFIG_RDMA_SIW=m CONFIG_DEBUG_INFO_BTF_MODULES= modules >"$work/build.log" 2>&1 || {
	cat "$work/build.log" >&2
	die "siw build failed"
}
vermagic=$(modinfo -F vermagic "$src/siw.ko")
[[ $vermagic == "$KV-amd64 "* ]] || die "siw.ko has vermagic '$vermagic', not $KV-amd64"
mkdir -p "$OUT.tmp"
cp "$src/siw.ko" "$OUT.tmp/"
printf 'kernel %s %s\nvermagic %s\ngcc %s\n' "$KPKG" "$KPKGVER" "$vermagic" "$(gcc -dumpfullversion)" >"$OUT.tmp/info"
rm -rf "$OUT" && mv "$OUT.tmp" "$OUT"
echo "$OUT/siw.ko"
