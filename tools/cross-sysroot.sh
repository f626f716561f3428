#!/usr/bin/env bash
# The libraries of another architecture that a cross build links against or
# records a dependency on, taken from Debian's own packages of that
# architecture, for a build machine that does not have them as packages (no
# dpkg --add-architecture, no libibverbs-dev:ARCH): docs/architectures.md.
#
#   tools/cross-sysroot.sh ARCH
#       prints the directory, made when missing:
#         root/      libibverbs1, libibverbs-dev, libnl-3-200 and
#                    libnl-route-3-200 unpacked together: the -L and
#                    -rpath-link of the rsverbs command's and the example's
#                    link (-libverbs)
#         pkg/NAME/  libc6, libgcc-s1 and libibverbs1 as dpkg-deb -R leaves
#                    them, DEBIAN/symbols included: debian/rules hands each
#                    to dpkg-shlibdeps (-S), which then finds the library of
#                    ARCH and its package's symbols file, so that the
#                    packages depend on libc6, libgcc-s1 and libibverbs1 as
#                    a native build's do
#   tools/cross-sysroot.sh --rustflags ARCH [DIR]
#       prints cargo's rustflags for that link: nothing when the cross gcc
#       finds a libibverbs.so of ARCH itself (libibverbs-dev:ARCH installed),
#       else -L and -rpath-link into DIR (default: the directory above)
#
# ARCH: Debian's name or the toolchain's (testbed/arch.sh). The packages are
# bookworm's (and bookworm-security's), the release the cross toolchain is
# from, fetched with apt-get download through a private apt configuration
# of ARCH made by testbed/apt.sh (the host's /etc/apt is only read), and
# cached in ${RSVERBS_CACHE:-~/.cache/rsverbs}/cross-sysroot/ARCH-KEY, KEY
# hashing the .deb file names (so their versions). The apt configuration is
# this script's own, cross-sysroot/apt-ARCH, not the test bed's apt-ARCH:
# that one lists the suites of the matrix cell that last used it, and
# setting it to bookworm alone would drop, say, sid's lists under a sid
# cell of that architecture running at the same time.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
LINK_PKGS=(libibverbs1 libibverbs-dev libnl-3-200 libnl-route-3-200)
SHLIBS_PKGS=(libc6 libgcc-s1 libibverbs1)
mapfile -t ALL_PKGS < <(printf '%s\n' "${LINK_PKGS[@]}" "${SHLIBS_PKGS[@]}" | LC_ALL=C sort -u)

rustflags=0
if [ "${1:-}" = --rustflags ]; then
	rustflags=1
	shift
fi
[ $# -ge 1 ] || { sed -n 's/^#   //p' "$0" >&2; exit 2; }
# shellcheck source=testbed/arch.sh
RSVERBS_ARCH=$1 . "$repo/testbed/arch.sh"
triplet=$ARCH_RUST-linux-gnu

if [ "$rustflags" = 1 ]; then
	dir=${2:-}
	if [ -z "$dir" ]; then
		found=$("$triplet-gcc" -print-file-name=libibverbs.so 2>/dev/null || true)
		[ "$found" = libibverbs.so ] || [ -z "$found" ] || exit 0
		dir=$("$0" "$ARCH_DEB")
	fi
	[ -e "$dir/root/usr/lib/$triplet/libibverbs.so" ] ||
		{ echo "cross-sysroot: no libibverbs.so of $ARCH_DEB in $dir/root" >&2; exit 1; }
	printf -- '-L native=%s -C link-arg=-Wl,-rpath-link=%s:%s\n' "$dir/root/usr/lib/$triplet" \
		"$dir/root/usr/lib/$triplet" "$dir/root/lib/$triplet"
	exit 0
fi

((ARCH_FOREIGN)) || { echo "cross-sysroot: $ARCH_DEB is this machine's architecture" >&2; exit 2; }
# testbed/apt.sh keeps its configuration in CACHE/apt-ARCH.
CACHE=$(realpath -m "${RSVERBS_CACHE:-$HOME/.cache/rsverbs}")/cross-sysroot
# shellcheck source=testbed/apt.sh
. "$repo/testbed/apt.sh"
apt_private_setup
apt_private_update >&2
# apt-get download --print-uris: 'URI' FILE SIZE HASH, one line a package,
# without downloading.
uris=$(apt-get download --print-uris "${ALL_PKGS[@]}" 2>/dev/null | LC_ALL=C sort -u) ||
	{ echo "cross-sysroot: apt-get download --print-uris failed (APT_CONFIG=$APT_CONFIG)" >&2; exit 1; }
[ "$(wc -l <<<"$uris")" = ${#ALL_PKGS[@]} ] ||
	{ echo "cross-sysroot: the private lists of $ARCH_DEB lack a package: $uris" >&2; exit 1; }
key=$(awk '{ print $2 }' <<<"$uris" | sha256sum | cut -c1-16)
dir=$CACHE/$ARCH_DEB-$key
if [ ! -d "$dir" ]; then
	tmp=$dir.tmp.$$
	rm -rf "$tmp"
	mkdir -p "$tmp/debs" "$tmp/root" "$tmp/pkg"
	echo "cross-sysroot: fetching ${ALL_PKGS[*]} ($ARCH_DEB) into $dir" >&2
	(cd "$tmp/debs" && apt-get download -q "${ALL_PKGS[@]}" >&2) ||
		{ rm -rf "$tmp"; echo "cross-sysroot: apt-get download failed" >&2; exit 1; }
	for p in "${LINK_PKGS[@]}"; do dpkg-deb -x "$tmp/debs/${p}_"*.deb "$tmp/root"; done
	for p in "${SHLIBS_PKGS[@]}"; do dpkg-deb -R "$tmp/debs/${p}_"*.deb "$tmp/pkg/$p"; done
	awk '{ print $2 }' <<<"$uris" >"$tmp/debs.list"
	rm -rf "$tmp/debs"
	# Another build may have made it meanwhile: the first one stays.
	mv -T "$tmp" "$dir" 2>/dev/null || rm -rf "$tmp"
fi
echo "$dir"
