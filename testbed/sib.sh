#!/bin/bash
# rsverbs test bed: build sib.ko, the project's software InfiniBand HCA
# (testbed/sib/sib.c), out of tree for a Debian kernel package:
# against the kernel's linux-headers and linux-kbuild, unpacked into the
# cache by testbed/kheaders.sh (nothing is installed on the host), as
# testbed/siw.sh does for siw.  Loaded in the guest with RSVERBS_SIB=1
# (testbed/vm.sh); checked by ctest/vm/sib.sh.
#
#   testbed/sib.sh KPKG KPKGVER      print the path of sib.ko (built once per source, cached)
#     e.g. testbed/sib.sh linux-image-6.1.0-56-amd64 6.1.192-2
#
# Only Linux 6.1 is supported so far (testbed/sib/sib_compat.h); the module
# is compiled with the host's gcc, so only kernels built by the host's gcc
# major are accepted.
set -euo pipefail

TESTBED=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd -P)
CACHE=$(realpath -m "${RSVERBS_CACHE:-$HOME/.cache/rsverbs}")
log() { printf 'testbed: sib: %s\n' "$*" >&2; }
die() {
	log "error: $*"
	exit 125
}
(($# == 2)) || { sed -n 's/^#   //p' "$0" >&2; exit 2; }
KPKG=$1 KPKGVER=$2
SRC=$TESTBED/sib
# A new build for every change of the module's source or of this recipe.
key=$(cat "$SRC/sib.c" "$SRC/sib_compat.h" "$SRC/Kbuild" "$TESTBED/sib.sh" "$TESTBED/kheaders.sh" |
	sha256sum | cut -c1-12)
OUT=$CACHE/sib/${KPKG}_${KPKGVER}_$key
if [[ -s $OUT/sib.ko ]]; then
	echo "$OUT/sib.ko"
	exit 0
fi

# shellcheck source=testbed/apt.sh
. "$TESTBED/apt.sh"
# shellcheck source=testbed/kheaders.sh
. "$TESTBED/kheaders.sh"
apt_private_setup
apt_private_update

work=$(mktemp -d "${TMPDIR:-/tmp}/rsverbs-sib.XXXXXX")
trap 'rm -rf "$work"' EXIT
kheaders_unpack "$KPKG" "$KPKGVER" "$work"
mkdir "$work/src"
cp "$SRC/sib.c" "$SRC/sib_compat.h" "$SRC/Kbuild" "$work/src/"
log "building sib.ko for $KH_KV ($KH_KBUILD)"
# No BTF for the module (pahole is not needed; see testbed/siw.sh). W=1:
# the module's own files must build without a warning (the kernel's headers
# may have some at W=1: not ours).
make -s -C "$KH_DIR" M="$work/src" W=1 CONFIG_DEBUG_INFO_BTF_MODULES= modules >"$work/build.log" 2>&1 || {
	cat "$work/build.log" >&2
	die "sib build failed"
}
if grep -Eq '/src/sib[a-z_]*\.[ch]:[0-9]+:[0-9]+: warning:' "$work/build.log"; then
	cat "$work/build.log" >&2
	die "sib.ko built with warnings"
fi
vermagic=$(modinfo -F vermagic "$work/src/sib.ko")
[[ $vermagic == "$KH_KV-amd64 "* ]] || die "sib.ko has vermagic '$vermagic', not $KH_KV-amd64"
mkdir -p "$OUT.tmp"
cp "$work/src/sib.ko" "$OUT.tmp/"
printf 'kernel %s %s\nkbuild %s\nvermagic %s\ngcc %s\nsource %s\n' "$KPKG" "$KPKGVER" "$KH_KBUILD" \
	"$vermagic" "$(gcc -dumpfullversion)" "$key" >"$OUT.tmp/info"
rm -rf "$OUT" && mv "$OUT.tmp" "$OUT"
# Older builds for this kernel (other sources), over a day old.
find "$CACHE/sib" -mindepth 1 -maxdepth 1 -name "${KPKG}_${KPKGVER}_*" ! -name "${KPKG}_${KPKGVER}_$key" \
	-mtime +0 -exec rm -rf {} + 2>/dev/null || true
echo "$OUT/sib.ko"
