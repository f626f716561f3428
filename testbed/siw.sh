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
debs=$CACHE/debs
mkdir -p "$debs"
fetch() { # PKG=VER: into $debs once
	ls "$debs/${1%%=*}_${KPKGVER//:/%3a}_"*.deb >/dev/null 2>&1 && return
	log "downloading $1"
	(cd "$debs" && apt-get download -q -o APT::Sandbox::User=root "$1" >&2) || die "cannot download $1"
}
deb() { ls "$debs/${1}_${KPKGVER//:/%3a}_"*.deb; }
# First the small arch headers: their .config names the kernel's compiler
# (CONFIG_GCC_VERSION=120200 is gcc 12), which must be the host's gcc.
fetch "linux-headers-$KV-amd64=$KPKGVER"
dpkg-deb -x "$(deb "linux-headers-$KV-amd64")" "$work/root"
H=$work/root/usr/src/linux-headers-$KV-amd64
[[ -f $H/Makefile ]] || die "no $H/Makefile"
kcc=$(sed -n 's/^CONFIG_GCC_VERSION=\([0-9]*\)[0-9][0-9][0-9][0-9]$/\1/p' "$H/.config")
hcc=$(gcc -dumpversion | cut -d. -f1)
[[ $kcc == "$hcc" ]] || die "$KPKG was built with gcc-$kcc; the host has gcc-$hcc: no siw for it here"
# The headers name their kbuild package (linux-kbuild-6.1 in bookworm) and
# its lowest version, "linux-kbuild-6.1 (>= 6.1.192-2)": a later upload of
# kbuild may have replaced that very version in the archive (seen
# 2026-11-28: bookworm-security carried linux-kbuild-6.1 6.1.192-3 only,
# beside linux-headers-6.1.0-56-* 6.1.192-2), so the lowest version the
# archive has that satisfies the dependency is taken.
read -r kbuild kbuild_min < <(dpkg-deb -f "$(deb "linux-headers-$KV-amd64")" Depends |
	grep -o 'linux-kbuild-[^ ,]* (>= [^)]*)' | head -1 | sed 's/ (>= / /; s/)$//')
[[ -n $kbuild && -n $kbuild_min ]] || die "linux-headers-$KV-amd64 names no linux-kbuild (>= ...) dependency"
kbuild_ver=""
while read -r v; do
	dpkg --compare-versions "$v" ge "$kbuild_min" || continue
	if [[ -z $kbuild_ver ]] || dpkg --compare-versions "$v" lt "$kbuild_ver"; then kbuild_ver=$v; fi
done < <(apt-cache madison "$kbuild" 2>/dev/null | awk -F' *[|] *' '{ print $2 }')
[[ -n $kbuild_ver ]] || die "no $kbuild (>= $kbuild_min) in the archive"
for p in "linux-headers-$KV-common" "linux-source-$SERIES"; do fetch "$p=$KPKGVER"; done
kdeb() { ls "$debs/${kbuild}_${kbuild_ver//:/%3a}_"*.deb 2>/dev/null; }
if ! kdeb >/dev/null; then
	log "downloading $kbuild=$kbuild_ver"
	(cd "$debs" && apt-get download -q -o APT::Sandbox::User=root "$kbuild=$kbuild_ver" >&2) || die "cannot download $kbuild=$kbuild_ver"
fi
dpkg-deb -x "$(deb "linux-headers-$KV-common")" "$work/root"
dpkg-deb -x "$(kdeb)" "$work/root"
# Its Makefile includes the -common tree by absolute path: point it at ours.
sed -i "s|include /usr/src/|include $work/root/usr/src/|" "$H/Makefile"
log "extracting drivers/infiniband/sw/siw from linux-source-$SERIES"
dpkg-deb --fsys-tarfile "$(deb "linux-source-$SERIES")" |
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
