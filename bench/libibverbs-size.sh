#!/usr/bin/env bash
# The bar librsverbs.so.1 is held to: the stripped size of libibverbs.so.1
# from Debian 12's libibverbs1 (rdma-core 44.0-2) of each architecture.
#   bench/libibverbs-size.sh [ARCH...]       prints bench/libibverbs-size.tsv's
#                                            lines (default: all four)
#   bench/libibverbs-size.sh --check [ARCH...]  fetches again and fails
#                                            unless the table says the same
# Each .deb is fetched with apt-get download through a private apt
# configuration of that architecture (testbed/apt.sh, bookworm alone, under
# ${RSVERBS_CACHE:-~/.cache/rsverbs}/libibverbs-size; the host's /etc/apt
# is only read), its sha256 checked against the lists, and its
# libibverbs.so.1 stripped the way bench/sizes.sh strips librsverbs.so.1
# (ARCH's strip, all symbols). ctest/crossarch.sh reads the checked-in table
# (no network at test time; the bar stays 44.0-2's even when bookworm's
# lists move on to a point release).
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
VERSION=44.0-2
TABLE=$repo/bench/libibverbs-size.tsv
check=0
if [ "${1:-}" = --check ]; then
	check=1
	shift
fi
[ $# -gt 0 ] || set -- amd64 arm64 ppc64el s390x
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
rc=0
for a in "$@"; do
	(
		# shellcheck source=testbed/arch.sh
		RSVERBS_ARCH=$a . "$repo/testbed/arch.sh"
		CACHE=$(realpath -m "${RSVERBS_CACHE:-$HOME/.cache/rsverbs}")/libibverbs-size
		# shellcheck source=testbed/apt.sh
		. "$repo/testbed/apt.sh"
		# bookworm alone (apt_private_setup narrows a foreign architecture's
		# suites itself; amd64's are the test bed's five otherwise).
		APT_SUITES=(bookworm) APT_SECURITY_SUITES=(bookworm)
		apt_private_setup
		apt_private_update >&2
		# 'URI' FILE SIZE SHA256:HASH
		read -r _ file _ hash < <(apt-get download --print-uris "libibverbs1=$VERSION" 2>/dev/null) ||
			{ echo "libibverbs-size: no libibverbs1 $VERSION of $ARCH_DEB in bookworm's lists" >&2; exit 1; }
		hash=${hash#SHA256:}
		d=$work/$ARCH_DEB
		mkdir -p "$d"
		(cd "$d" && apt-get download -q "libibverbs1=$VERSION" >&2)
		[ "$(sha256sum <"$d/$file" | cut -d' ' -f1)" = "$hash" ] ||
			{ echo "libibverbs-size: $file does not match its sha256" >&2; exit 1; }
		dpkg-deb -x "$d/$file" "$d/root"
		so=$(find "$d/root" -name 'libibverbs.so.1.*' -type f)
		strip="strip"
		((ARCH_FOREIGN == 0)) || strip=$ARCH_RUST-linux-gnu-strip
		"$strip" -o "$d/stripped" "$so"
		printf '%s\tlibibverbs1\t%s\t%s\t%s\n' "$ARCH_DEB" "$VERSION" "$hash" "$(stat -c %s "$d/stripped")"
	) >"$work/$a.line" || rc=1
	if ((check)); then
		if grep -qxF -f "$work/$a.line" "$TABLE"; then echo "$a: as in the table"; else echo "$a: differs from the table: $(cat "$work/$a.line")" >&2; rc=1; fi
	else
		cat "$work/$a.line"
	fi
done
exit "$rc"
