# shellcheck shell=bash
# rsverbs test bed: a Debian kernel's build tree for out-of-tree modules,
# unpacked into a work directory (nothing is installed on the host): the
# kernel's linux-headers-KV-amd64 and -common and the linux-kbuild-X.Y that
# the headers depend on.  Sourced by testbed/sib.sh (and available to
# testbed/siw.sh), after testbed/apt.sh's apt_private_setup and
# apt_private_update; needs CACHE, log and die.
#
#   kheaders_unpack KPKG KPKGVER WORK
#       unpacks into WORK/root, checks that the kernel was built by the
#       host's gcc major (else dies: "no $KH_WHAT for it here", which
#       ctest/matrix.sh reads for siw), and sets KH_KBUILD, KH_KV (6.1.0-56), KH_SERIES (6.1) and
#       KH_DIR (the -amd64 tree, its Makefile pointed at WORK's -common)
#   kheaders_fetch PKG VER
#       the .deb of PKG=VER in $CACHE/debs, downloaded once; prints its path
#
# The kbuild package: the headers name it and its lowest version,
# "linux-kbuild-6.1 (>= 6.1.192-2)"; a later upload of kbuild may have
# replaced that very version in the archive (seen 2026-11-28: bookworm-security
# carried linux-kbuild-6.1 6.1.192-3 only, beside linux-headers-6.1.0-56-*
# 6.1.192-2), so the lowest version apt knows that satisfies the dependency
# is taken (the closest to the kernel's own build; testbed/siw.sh's rule
# since 8f4d54f, moved here).

kheaders_fetch() { # PKG VER
	local debs=$CACHE/debs f
	mkdir -p "$debs"
	for f in "$debs/${1}_${2//:/%3a}_"*.deb; do
		[[ -e $f ]] && { echo "$f"; return 0; }
	done
	log "downloading $1=$2"
	(cd "$debs" && apt-get download -q -o APT::Sandbox::User=root "$1=$2" >&2) || die "cannot download $1=$2"
	for f in "$debs/${1}_${2//:/%3a}_"*.deb; do
		[[ -e $f ]] && { echo "$f"; return 0; }
	done
	die "downloaded $1=$2 but found no $debs/${1}_${2}_*.deb"
}

# kheaders_version PKG OP VER: the lowest version of PKG that apt knows and
# that satisfies "PKG (OP VER)" (no OP: any).
kheaders_version() {
	local best="" v
	while read -r v; do
		if [[ -n $2 ]]; then dpkg --compare-versions "$v" "$2" "$3" || continue; fi
		if [[ -z $best ]] || dpkg --compare-versions "$v" lt "$best"; then best=$v; fi
	done < <(apt-cache madison "$1" 2>/dev/null | awk -F' *[|] *' '{ print $2 }')
	[[ -n $best ]] || return 1
	echo "$best"
}

kheaders_unpack() { # KPKG KPKGVER WORK
	local kpkg=$1 kver=$2 work=$3 hdeb dep name op ver kcc hcc
	# linux-image-6.1.0-56-amd64 -> 6.1.0-56, series 6.1
	KH_KV=${kpkg#linux-image-}
	KH_KV=${KH_KV%-amd64}
	[[ $KH_KV =~ ^([0-9]+\.[0-9]+)\. ]] || die "cannot read a kernel version from $kpkg"
	KH_SERIES=${BASH_REMATCH[1]}
	# First the small arch headers: their .config names the kernel's
	# compiler (CONFIG_GCC_VERSION=120200 is gcc 12), which must be the host's.
	hdeb=$(kheaders_fetch "linux-headers-$KH_KV-amd64" "$kver")
	dpkg-deb -x "$hdeb" "$work/root"
	KH_DIR=$work/root/usr/src/linux-headers-$KH_KV-amd64
	[[ -f $KH_DIR/Makefile ]] || die "no $KH_DIR/Makefile"
	kcc=$(sed -n 's/^CONFIG_GCC_VERSION=\([0-9]*\)[0-9][0-9][0-9][0-9]$/\1/p' "$KH_DIR/.config")
	hcc=$(gcc -dumpversion | cut -d. -f1)
	[[ $kcc == "$hcc" ]] || die "$kpkg was built with gcc-$kcc; the host has gcc-$hcc: no ${KH_WHAT:-module} for it here"
	dpkg-deb -x "$(kheaders_fetch "linux-headers-$KH_KV-common" "$kver")" "$work/root"
	# The kbuild package the headers name, e.g. "linux-kbuild-6.1 (>= 6.1.192-2)".
	dep=$(dpkg-deb -f "$hdeb" Depends | tr ',' '\n' | grep -o 'linux-kbuild-[^|]*' | head -1)
	local re='^(linux-kbuild-[^ ]+) *(\((<<|<=|=|>=|>>) *([^ )]+)\))?'
	[[ $dep =~ $re ]] || die "no linux-kbuild in the Depends of $hdeb"
	name=${BASH_REMATCH[1]} op=${BASH_REMATCH[3]} ver=${BASH_REMATCH[4]}
	case $op in '<<') op=lt ;; '<=') op=le ;; '=') op=eq ;; '>=') op=ge ;; '>>') op=gt ;; esac
	ver=$(kheaders_version "$name" "$op" "$ver") || die "apt knows no $dep"
	dpkg-deb -x "$(kheaders_fetch "$name" "$ver")" "$work/root"
	# The Makefile includes the -common tree by absolute path: point it at ours.
	sed -i "s|include /usr/src/|include $work/root/usr/src/|" "$KH_DIR/Makefile"
	KH_KBUILD="$name $ver"
}
