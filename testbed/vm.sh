#!/bin/bash
# rsverbs test bed: boot Debian's stock kernel under qemu (TCG) with two
# Soft-RoCE devices (rxe0 on lo, rxe1 on dummy0) and run one command inside.
# The guest sees the host root (or a debootstrapped userland) read-only over
# 9p, with the repository at its host path.  See testbed/README.md.
#
#   testbed/vm.sh prepare
#   testbed/vm.sh root
#   testbed/vm.sh run [--timeout SECS] [--out HOSTDIR] [--mem MB] [--smp N]
#                     [--net MCASTADDR:PORT --mac MAC --ip ADDR/LEN] -- CMD [ARGS...]
#
# RSVERBS_SIW=1 also loads siw (testbed/siw.sh), RSVERBS_SIB=1 sib, the
# project's software InfiniBand HCA (testbed/sib.sh: sib0 and sib1).
# RSVERBS_KERNEL=bullseye|bookworm|bookworm-backports|trixie|sid and
# RSVERBS_USERLAND=bullseye|bookworm|trixie|sid (default bookworm: the host).
# RSVERBS_ARCH=arm64|ppc64el|s390x boots Debian's kernel of that
# architecture, with a userland of it (testbed/arch.sh, docs/architectures.md).
set -euo pipefail

TESTBED=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd -P)
# shellcheck source=testbed/arch.sh
. "$TESTBED/arch.sh"
CACHE=$(realpath -m "${RSVERBS_CACHE:-$HOME/.cache/rsverbs}")
# Host side (qemu, initramfs tools) and guest side (it runs host binaries).
PACKAGES=("$(arch_qemu_package)" busybox-static cpio kmod xz-utils iproute2 rdma-core
	ibverbs-providers ibverbs-utils rdmacm-utils perftest opensm infiniband-diags iputils-ping)
# Loaded by the initramfs itself; everything else is modprobed after the
# host root (with kmod) is mounted.  virtio_pci is a module in Debian's 6.1.
# virtio_net: eth0 of a networked guest (--net), loaded in every guest.
INITRD_MODULES=(virtio_pci 9pnet_virtio 9p virtio_net)
# Loaded by guest/stage2.sh (busybox insmod, in this order, computed here):
# crc32_generic: rdma_rxe of 6.1 needs the crypto "crc32" but modules.dep
# does not say so (without it `rdma link add` fails with ENOENT); kernels
# from 6.13 on have no crc32_generic (crc32 is a library there).  rdma_ucm
# pulls in rdma_cm/ib_cm/iw_cm/configfs for librdmacm users (mckey, rping).
# libcrc32c: what siw.ko needs (testbed/siw.sh; loaded with RSVERBS_SIW=1).
# 8021q: VLAN netdevs, whose GIDs rxe adds to its port (ctest/vm/select.sh).
STAGE2_MODULES=(crc32_generic rdma_rxe rdma_ucm dummy libcrc32c 8021q)

KSUITE=${RSVERBS_KERNEL:-bookworm}
USUITE=${RSVERBS_USERLAND:-bookworm}
case $KSUITE in bullseye | bookworm | bookworm-backports | trixie | sid) ;; *)
	printf 'testbed: RSVERBS_KERNEL=%s: not one of bullseye bookworm bookworm-backports trixie sid\n' "$KSUITE" >&2
	exit 2
	;;
esac
case $USUITE in bullseye | bookworm | trixie | sid) ;; *)
	printf 'testbed: RSVERBS_USERLAND=%s: not one of bullseye bookworm trixie sid\n' "$USUITE" >&2
	exit 2
	;;
esac
# The userland's packages (debootstrap --include, on top of minbase): what
# guest/stage2.sh, testbed/smoke.sh and every ctest/vm suite run (opensm
# and infiniband-diags: the subnet manager and rdma-core's own IB tools for
# ctest/vm/sib.sh, and ping across its IPoIB), and what ctest/build.sh compiles the test programs with.
USERLAND_PACKAGES=(bash coreutils util-linux iproute2 kmod procps gawk sed grep
	ibverbs-providers ibverbs-utils rdmacm-utils perftest opensm infiniband-diags iputils-ping
	gcc libc6-dev binutils make pkg-config libibverbs-dev librdmacm-dev libseccomp-dev
	strace valgrind)
USERLAND_RECIPE=1 # bump when the way a userland is built changes

# shellcheck source=testbed/apt.sh
. "$TESTBED/apt.sh"

log() { printf 'testbed: %s\n' "$*" >&2; }
note() { if [[ $VERBOSE_PREPARE == 1 ]]; then log "$@"; fi; }
die() {
	log "error: $*"
	exit 125
}
usage() {
	sed -n 's/^#   //p' "${BASH_SOURCE[0]}" >&2
	exit 2
}
as_root() { if ((EUID == 0)); then "$@"; else sudo -n "$@"; fi; }
apt_update() { as_root "$TESTBED/../tools/apt-get.sh" update -qq >&2; }

ensure_packages() {
	local p missing=()
	if [[ $USUITE != bookworm ]]; then PACKAGES+=(debootstrap); fi
	if ((ARCH_FOREIGN)); then PACKAGES+=(debootstrap qemu-user-static); fi
	for p in "${PACKAGES[@]}"; do
		dpkg-query -W -f='${db:Status-Abbrev}' "$p" 2>/dev/null | grep -q '^ii' ||
			missing+=("$p")
	done
	if ((${#missing[@]} == 0)); then
		note "packages: all installed"
		return
	fi
	log "packages: installing ${missing[*]}"
	apt_update
	as_root env DEBIAN_FRONTEND=noninteractive "$TESTBED/../tools/apt-get.sh" install -y -qq \
		--no-install-recommends "${missing[@]}" >&2
}

# Sets KPKG/KPKGVER: the image package that linux-image-amd64 depends on,
# e.g. "Depends: linux-image-6.1.0-56-amd64 (= 6.1.192-2)", and KPKGS: that
# package and what it depends on of the same version ("PKG=VERSION": sid's
# image only names linux-binary-* and linux-modules-*).  apt-cache is slow
# when apt keeps no binary cache (testbed/README.md), so the answer is remembered
# until the package lists change (apt-get update renames files in lists/).
# The bookworm kernel comes from the host's apt, the others from the private
# configuration of testbed/apt.sh.
find_kernel_pkg() {
	local i dep="" stamp memo=$CACHE/kernel-pkg
	if [[ $KSUITE != bookworm ]] || ((ARCH_FOREIGN)); then
		find_kernel_pkg_private
		return
	fi
	stamp=$(stat -c %Y /var/lib/apt/lists 2>/dev/null || echo none)
	if [[ -f $memo ]] && read -r i KPKG KPKGVER <"$memo" && [[ $i == "$stamp" ]]; then
		KPKGS=("$KPKG=$KPKGVER")
		return
	fi
	for i in 1 2; do
		dep=$(apt-cache show --no-all-versions linux-image-amd64 2>/dev/null |
			sed -n 's/^Depends: \(linux-image-[^ ,]*\) (= \([^)]*\)).*/\1 \2/p')
		[[ -n $dep ]] && break
		if ((i == 1)); then apt_update; fi # fresh machine: no package lists yet
	done
	[[ -n $dep ]] || die "apt-cache does not know linux-image-amd64"
	read -r KPKG KPKGVER <<<"$dep"
	KPKGS=("$KPKG=$KPKGVER")
	stamp=$(stat -c %Y /var/lib/apt/lists 2>/dev/null || echo none)
	echo "$stamp $KPKG $KPKGVER" >"$memo"
}

find_kernel_pkg_private() {
	local stamp memo=$CACHE/kernel-pkg.$KSUITE line p v
	((ARCH_FOREIGN == 0)) || memo=$CACHE/kernel-pkg.$KSUITE.$ARCH_DEB
	apt_private_setup
	apt_private_update
	stamp=$(stat -c %Y "$APT_DIR/state/lists")
	if [[ -f $memo ]] && read -r line <"$memo" && [[ $line == "$stamp "* ]]; then
		read -r _ KPKG KPKGVER _ <<<"$line"
		read -ra KPKGS <<<"${line#"$stamp $KPKG $KPKGVER"}"
		return
	fi
	KPKGS=()
	while read -r p v; do KPKGS+=("$p=$v"); done < <(apt_kernel_pkgs "$KSUITE")
	((${#KPKGS[@]})) || die "no kernel found for $KSUITE"
	KPKG=${KPKGS[0]%%=*} KPKGVER=${KPKGS[0]#*=}
	echo "$stamp $KPKG $KPKGVER ${KPKGS[*]}" >"$memo"
}

# Sets KDIR (the unpacked .debs with modules.dep), KVER and KERNEL.
# Packaging differs by release: up to bookworm the image package holds
# /boot/vmlinuz-KVER and /lib/modules/KVER/*.ko; from trixie (and 6.12 in
# bookworm-backports) the modules are /usr/lib/modules/KVER/*.ko.xz; in sid
# linux-image-KVER is empty and depends on linux-binary-KVER
# (/usr/lib/modules/KVER/vmlinuz) and linux-modules-KVER.  The unpacked tree
# is normalised to lib/modules/KVER with plain .ko files, so that host
# depmod/modprobe and busybox insmod in the guest handle every kernel.
fetch_kernel() {
	local pv pkg ver deb tmp vmlinuz debs=()
	mkdir -p "$CACHE/debs"
	for pv in "${KPKGS[@]}"; do
		pkg=${pv%%=*} ver=${pv#*=}
		deb=$CACHE/debs/${pkg}_${ver//:/%3a}_$ARCH_DEB.deb
		debs+=("$deb")
		if [[ -f $deb ]]; then
			note "kernel: $(basename "$deb") already downloaded"
			continue
		fi
		log "kernel: downloading $pkg=$ver${APT_CONFIG:+ ($KSUITE, private apt configuration)}"
		# Sandbox user root: apt's _apt user may not be able to write $CACHE.
		dl() { (cd "$CACHE/debs" && apt-get download -q -o APT::Sandbox::User=root "$1" >&2); }
		if [[ $KSUITE == bookworm ]] && ((ARCH_FOREIGN == 0)); then
			dl "$pv" || { apt_update && dl "$pv"; } || die "cannot download $pv"
		else
			dl "$pv" || { apt_private_update force && dl "$pv"; } || die "cannot download $pv"
		fi
	done
	KDIR=$CACHE/kernel/${KPKG}_$KPKGVER
	if [[ -d $KDIR ]]; then
		note "kernel: unpacked in $KDIR"
	else
		log "kernel: unpacking into $KDIR"
		tmp=$KDIR.tmp.$$
		rm -rf "$tmp"
		mkdir -p "$tmp"
		for deb in "${debs[@]}"; do dpkg-deb -x "$deb" "$tmp"; done
		if [[ ! -d $tmp/lib/modules && -d $tmp/usr/lib/modules ]]; then
			if [[ -d $tmp/lib ]]; then
				ln -s ../usr/lib/modules "$tmp/lib/modules"
			else
				ln -s usr/lib "$tmp/lib"
			fi
		fi
		KVER=$(ls "$tmp/lib/modules")
		# Compressed modules: decompressed here, once, so that neither the
		# initramfs' busybox nor an old userland's kmod need xz/zstd support.
		find "$tmp/lib/modules/$KVER/" -name '*.ko.xz' -print0 | xargs -0 -r -n 64 -P "$(nproc)" xz -d
		find "$tmp/lib/modules/$KVER/" -name '*.ko.zst' -print0 |
			xargs -0 -r -n 64 -P "$(nproc)" zstd -q -d --rm
		# The .deb ships no modules.dep (postinst normally runs depmod).
		depmod -b "$tmp" "$KVER"
		vmlinuz=$tmp/boot/vmlinuz-$KVER
		[[ -f $vmlinuz ]] || vmlinuz=$tmp/lib/modules/$KVER/vmlinuz
		mkdir -p "$tmp/boot"
		# Only x86's bzImage wraps its kernel; arm64's Image, s390x's
		# vmlinuz and ppc64el's vmlinux boot with -kernel as they are.
		if [[ $ARCH_DEB == amd64 ]]; then
			[[ -f $vmlinuz ]] || die "no vmlinuz in ${KPKGS[*]}"
			extract_vmlinux "$vmlinuz" "$tmp/boot/vmlinux-$KVER"
		else
			[[ -f $tmp/boot/$ARCH_KERNEL-$KVER || -f $vmlinuz ]] || die "no $ARCH_KERNEL in ${KPKGS[*]}"
		fi
		mv "$tmp" "$KDIR" # atomic: a present $KDIR is always complete
	fi
	KVER=$(ls "$KDIR/lib/modules")
	# x86: the unwrapped vmlinux, else (extraction failed) the bzImage.
	KERNEL=$KDIR/boot/$ARCH_KERNEL-$KVER
	[[ -s $KERNEL ]] || KERNEL=$KDIR/boot/vmlinuz-$KVER
	[[ -s $KERNEL ]] || KERNEL=$KDIR/lib/modules/$KVER/vmlinuz
}

# Decompress the bzImage's payload into the plain ELF vmlinux.  qemu boots
# that directly through its PVH entry point, which skips the in-guest
# decompression, seconds under TCG (testbed/README.md).  The payload is located by the boot protocol's
# header (setup_sects at 0x1f1, payload_offset/length at 0x248/0x24c):
# xz up to 6.x, zstd in Debian's 7.x.  On failure the bzImage is booted.
extract_vmlinux() { # BZIMAGE OUT
	local sects poff plen magic dec
	read -r sects < <(od -An -tu1 -j $((0x1f1)) -N1 "$1")
	read -r poff plen < <(od -An -tu4 -j $((0x248)) -N8 "$1")
	((sects)) || sects=4
	magic=$({ tail -c +$(((sects + 1) * 512 + poff + 1)) "$1" || true; } | head -c 4 | od -An -tx1 | tr -d ' \n')
	case $magic in
	fd377a58) dec=(xz -dc) ;;
	28b52ffd) dec=(zstd -dcq) ;;
	1f8b*) dec=(gzip -dc) ;;
	*) dec=() ;;
	esac
	# The payload ends with its decompressed size (4 bytes), which the
	# decompressors call trailing garbage: their status is ignored, the
	# result is checked instead.
	if ((${#dec[@]})); then
		{ tail -c +$(((sects + 1) * 512 + poff + 1)) "$1" || true; } | head -c "$plen" | "${dec[@]}" >"$2" 2>/dev/null || true
	fi
	if [[ -s $2 ]] && LC_ALL=C grep -qa 'Linux version' "$2" &&
		# qemu boots an ELF only through its PVH note (Xen type 0x12).
		readelf -n "$2" 2>/dev/null | grep -q '^ *Xen .*(0x00000012)'; then
		return
	fi
	log "kernel: cannot extract vmlinux (payload magic ${magic:-?}), will boot the (slower) bzImage"
	rm -f "$2"
}

# Sets BUSYBOX and BUSYBOX_VER: busybox-static of ARCH_DEB from bookworm,
# unpacked into the cache (the initramfs' busybox runs before any root).
foreign_busybox() {
	local ver deb dir
	apt_private_setup
	apt_private_update
	ver=$(apt_suite_version busybox-static bookworm) || die "no busybox-static for $ARCH_DEB"
	dir=$CACHE/busybox/$ARCH_DEB-$ver
	BUSYBOX=$dir/bin/busybox BUSYBOX_VER=$ver
	[[ -x $BUSYBOX ]] && return 0
	mkdir -p "$CACHE/debs"
	deb=$CACHE/debs/busybox-static_${ver//:/%3a}_$ARCH_DEB.deb
	[[ -f $deb ]] || (cd "$CACHE/debs" && apt-get download -q -o APT::Sandbox::User=root "busybox-static=$ver" >&2) ||
		die "cannot download busybox-static=$ver ($ARCH_DEB)"
	rm -rf "$dir.tmp"
	mkdir -p "$dir.tmp"
	dpkg-deb -x "$deb" "$dir.tmp"
	mv "$dir.tmp" "$dir"
}

# Sets INITRD: busybox + virtio/9p modules + guest/init + guest/stage2.sh +
# the insmod order of STAGE2_MODULES (paths in the kernel tree), keyed by
# kernel and busybox versions and a hash of the test-bed scripts.
build_initrd() {
	local bbver hash key tmp m ko bb=/bin/busybox
	bbver=$(dpkg-query -W -f='${Version}' busybox-static)
	if ((ARCH_FOREIGN)); then
		foreign_busybox
		bb=$BUSYBOX bbver=$BUSYBOX_VER
	fi
	hash=$(cat "$TESTBED/vm.sh" "$TESTBED/guest/init" "$TESTBED/guest/stage2.sh" |
		sha256sum | cut -c1-16)
	key=$(printf '%s\n' "$KPKG" "$KPKGVER" "$bbver" "$hash" "$ARCH_DEB" | sha256sum | cut -c1-16)
	INITRD=$CACHE/initramfs/$key.cpio
	if [[ -f $INITRD ]]; then
		note "initramfs: $INITRD (cached)"
		return
	fi
	log "initramfs: building $INITRD"
	tmp=$(mktemp -d)
	mkdir -p "$tmp"/{bin,etc,lib/modules,proc,sys,dev}
	cp "$bb" "$tmp/bin/busybox"
	cp "$TESTBED/guest/init" "$TESTBED/guest/stage2.sh" "$tmp/"
	for m in "${INITRD_MODULES[@]}"; do
		# virtio_pci is no module on s390x (virtio-ccw is built in).
		modprobe -d "$KDIR" -S "$KVER" --show-depends "$m" >/dev/null 2>&1 || continue
		modprobe -d "$KDIR" -S "$KVER" --show-depends "$m" |
			awk '$1 == "insmod" { print $2 }'
	done | awk '!seen[$0]++' | while read -r ko; do
		cp "$ko" "$tmp/lib/modules/"
		basename "$ko" >>"$tmp/etc/rsverbs-modules"
	done
	# Stage 2's modules, relative to the kernel tree (the guest's
	# /run/rsverbs/kroot); a module this kernel lacks is skipped.
	: >"$tmp/etc/rsverbs-stage2-modules"
	for m in "${STAGE2_MODULES[@]}"; do
		if ! modprobe -d "$KDIR" -S "$KVER" --show-depends "$m" >/dev/null 2>&1; then
			note "initramfs: $KVER has no module $m"
			continue
		fi
		modprobe -d "$KDIR" -S "$KVER" --show-depends "$m" |
			awk '$1 == "insmod" { print $2 }'
	done | awk '!seen[$0]++' | while read -r ko; do
		ko=$(realpath -s --relative-to="$KDIR" "$ko")
		[[ $ko != ../* ]] || die "module $ko outside $KDIR"
		grep -qxF "$(basename "$ko")" "$tmp/etc/rsverbs-modules" 2>/dev/null ||
			echo "$ko" >>"$tmp/etc/rsverbs-stage2-modules"
	done
	mkdir -p "$CACHE/initramfs"
	# Drop images of other script versions, but not fresh ones: another
	# checkout may be booting one right now.
	find "$CACHE/initramfs" -name '*.cpio' -mmin +1440 -delete
	# Uncompressed: it is small, and decompressing under TCG costs time.
	(cd "$tmp" && find . | LC_ALL=C sort | cpio -o -H newc -R 0:0 --quiet) >"$INITRD.tmp"
	printf 'kernel %s %s\nbusybox %s\nscripts %s\n' "$KPKG" "$KPKGVER" "$bbver" "$hash" \
		>"$CACHE/initramfs/$key.info"
	mv "$INITRD.tmp" "$INITRD"
	rm -rf "$tmp"
}

# Sets UROOT: the guest's root file system.  "/" (the host) for the bookworm
# userland; else a debootstrapped minbase root of USUITE with
# USERLAND_PACKAGES, in $CACHE/userland/SUITE-KEY, where KEY hashes the
# package list, the recipe version and the versions the private lists give
# for those packages (so a new gcc, rdma-core, ... in the suite means a new
# root).  The key is remembered until the private lists change.
prepare_userland() {
	UROOT=/
	[[ $USUITE != bookworm ]] || ((ARCH_FOREIGN)) || return 0
	apt_private_setup
	apt_private_update
	local stamp memo=$CACHE/userland/$USUITE.key key="" line vers dir tmp t0 name=$USUITE
	if ((ARCH_FOREIGN)); then
		name=$USUITE-$ARCH_DEB memo=$CACHE/userland/$name.key
		arch_binfmt
	fi
	mkdir -p "$CACHE/userland"
	stamp=$(stat -c %Y "$APT_DIR/state/lists")
	if [[ -f $memo ]] && read -r line <"$memo" && [[ ${line%% *} == "$stamp" ]]; then
		key=${line#* }
	fi
	if [[ -z $key ]]; then
		# One madison call for all packages: name and version, this suite only.
		vers=$(apt-cache madison "${USERLAND_PACKAGES[@]}" 2>/dev/null |
			awk -F' *[|] *' -v s="$USUITE" '{ sub(/^ */, "", $1); split($3, a, " ") }
				a[2] == s "/main" { print $1, $2 }' | LC_ALL=C sort -u)
		[[ -n $vers ]] || die "the private lists know no package of $USUITE"
		key=$(printf '%s\n' "$USERLAND_RECIPE" "${USERLAND_PACKAGES[*]}" "$APT_MIRROR" "$vers" "$ARCH_DEB" |
			sha256sum | cut -c1-16)
		echo "$stamp $key" >"$memo"
	fi
	dir=$CACHE/userland/$name-$key
	UROOT=$dir/root
	if [[ -d $UROOT ]]; then
		note "userland: $USUITE in $UROOT"
		return 0
	fi
	log "userland: debootstrap $USUITE ($ARCH_DEB) into $dir (about a minute; several for another architecture)"
	t0=$SECONDS
	tmp=$dir.tmp.$$
	rm -rf "$tmp"
	mkdir -p "$tmp" "$CACHE/userland/debs"
	# --cache-dir keeps the .debs, so a rebuild downloads only what changed.
	if ! as_root debootstrap --variant=minbase --arch="$ARCH_DEB" \
		--include="$(IFS=,; echo "${USERLAND_PACKAGES[*]}")" \
		--keyring="$APT_KEYRING" --cache-dir="$CACHE/userland/debs" \
		"$USUITE" "$tmp/root" "$APT_MIRROR" >"$tmp/debootstrap.log" 2>&1; then
		tail -n 30 "$tmp/debootstrap.log" >&2
		die "debootstrap $USUITE failed (log: $tmp/debootstrap.log)"
	fi
	# shellcheck disable=SC2016 # dpkg-query's format, not the shell's
	as_root chroot "$tmp/root" dpkg-query -W -f='${Package} ${Version}\n' >"$tmp/packages"
	as_root rm -rf "$tmp/root/var/cache/apt/archives/"*.deb
	printf 'suite %s\nmirror %s\nkey %s\nbuilt %s in %s s\n' "$USUITE" "$APT_MIRROR" "$key" \
		"$(date -u +%FT%TZ)" $((SECONDS - t0)) >"$tmp/info"
	mv "$tmp" "$dir"
	log "userland: $USUITE ready in $((SECONDS - t0)) s ($(du -sm "$dir" | cut -f1) MB)"
	# Older roots of this suite, built over a day ago (not fresh ones:
	# another checkout may be booting one).
	find "$CACHE/userland" -mindepth 1 -maxdepth 1 -name "$name-[0-9a-f]*" ! -name "$name-$key" \
		-mtime +0 -exec rm -rf {} + 2>/dev/null || true
}

# Another architecture's userland runs its own programs at build time
# (debootstrap's second stage, ctest/build.sh's compiler) through
# qemu-user-static: mounts binfmt_misc if it is not, and registers the
# interpreter from the package's own /usr/lib/binfmt.d entry if it is not.
arch_binfmt() {
	local name=$ARCH_QEMU_USER conf
	conf=/usr/lib/binfmt.d/$name.conf
	[[ -r $conf ]] || die "no $conf (package qemu-user-static)"
	if [[ ! -e /proc/sys/fs/binfmt_misc/register ]]; then
		as_root mount -t binfmt_misc binfmt_misc /proc/sys/fs/binfmt_misc || die "cannot mount binfmt_misc"
	fi
	if [[ ! -e /proc/sys/fs/binfmt_misc/$name ]]; then
		note "binfmt: registering $name"
		as_root sh -c "cat '$conf' > /proc/sys/fs/binfmt_misc/register" || die "cannot register $name with binfmt_misc"
	fi
}

prepare() {
	mkdir -p "$CACHE"
	exec 9>"$CACHE/.lock" # concurrent runs (make -j) must not race
	flock 9
	ensure_packages
	find_kernel_pkg
	fetch_kernel
	build_initrd
	prepare_userland
	# siw (Soft-iWARP, a provider without a multicast op), built out of tree
	# for this kernel; the guest loads it and adds siw0 on dummy0.
	SIW_KO=""
	if [[ ${RSVERBS_SIW:-0} == 1 ]]; then
		((ARCH_FOREIGN == 0)) || die "RSVERBS_SIW=1: siw is built for amd64 kernels only (testbed/siw.sh)"
		SIW_KO=$("$TESTBED/siw.sh" "$KPKG" "$KPKGVER") || die "RSVERBS_SIW=1: no siw.ko for $KPKG"
	fi
	# sib (the project's software InfiniBand HCA, testbed/sib/), built out of
	# tree for this kernel; the guest loads it: sib0 and sib1.
	SIB_KO=""
	if [[ ${RSVERBS_SIB:-0} == 1 ]]; then
		((ARCH_FOREIGN == 0)) || die "RSVERBS_SIB=1: sib is built for amd64 kernels only (testbed/sib.sh)"
		SIB_KO=$("$TESTBED/sib.sh" "$KPKG" "$KPKGVER") || die "RSVERBS_SIB=1: no sib.ko for $KPKG"
	fi
	exec 9>&-
	note "ready: kernel $KVER ($KPKGVER, $KSUITE, $ARCH_DEB), initramfs $INITRD, userland $USUITE ($UROOT)"
}

# qemu -virtfs path, with option-list commas escaped.
virtfs() { printf 'local,path=%s,mount_tag=%s,security_model=none%s' "${1//,/,,}" "$2" "$3"; }

# One guest at a time on this machine (TCG guests on 2 cores starve each
# other into timeouts): every run takes $CACHE/vm.lock, and waits for it.
# A script that runs several guests at once takes the lock itself and sets
# RSVERBS_VM_LOCK_HELD=1 for the guests it starts.
vm_lock() {
	if [[ ${RSVERBS_VM_LOCK_HELD:-} == 1 ]]; then return; fi
	mkdir -p "$CACHE"
	exec {VM_LOCK_FD}>>"$CACHE/vm.lock"
	if ! flock -n "$VM_LOCK_FD"; then
		log "waiting for $CACHE/vm.lock: another guest is running"
		flock "$VM_LOCK_FD"
	fi
	export RSVERBS_VM_LOCK_HELD=1
}

run() {
	local timeout=600 out="" mem=1024 smp="" net="" mac="" ip=""
	while (($#)); do
		case $1 in
		--timeout) timeout=${2:?}; shift 2 ;;
		--out) out=${2:?}; shift 2 ;;
		--mem) mem=${2:?}; shift 2 ;;
		--smp) smp=${2:?}; shift 2 ;;
		--net) net=${2:?}; shift 2 ;;
		--mac) mac=${2:?}; shift 2 ;;
		--ip) ip=${2:?}; shift 2 ;;
		--) shift; break ;;
		*) usage ;;
		esac
	done
	(($#)) || usage
	[[ $timeout =~ ^[0-9]+$ && $mem =~ ^[0-9]+$ && $smp =~ ^[0-9]*$ ]] || usage
	# A networked guest: eth0 on the L2 segment that every qemu with the same
	# --net MCASTADDR:PORT shares (qemu's -netdev socket,mcast=), with rxe2 on it.
	local netargs=()
	if [[ -n $net$mac$ip ]]; then
		[[ $net =~ ^2[2-3][0-9](\.[0-9]{1,3}){3}:[0-9]{1,5}$ ]] ||
			{ log "--net $net: want MCASTADDR:PORT (e.g. 230.0.0.1:40000)"; exit 2; }
		[[ $mac =~ ^([0-9a-f]{2}:){5}[0-9a-f]{2}$ && $ip =~ ^[0-9]{1,3}(\.[0-9]{1,3}){3}/[0-9]{1,2}$ ]] ||
			{ log "--net needs --mac xx:xx:xx:xx:xx:xx (lower case) and --ip A.B.C.D/LEN"; exit 2; }
		# shellcheck disable=SC2054 # the commas are qemu's
		netargs=(-netdev "socket,id=n0,mcast=$net,localaddr=127.0.0.1"
			-device "$ARCH_NET_DEV,netdev=n0,mac=$mac")
	fi
	vm_lock
	prepare

	local job tmpout="" serial nonce cwd
	job=$(mktemp -d "${TMPDIR:-/tmp}/rsverbs-job.XXXXXX")
	if [[ -n $out ]]; then
		mkdir -p "$out"
		out=$(cd "$out" && pwd -P)
		serial=$out/serial.log
	else
		tmpout=$(mktemp -d "${TMPDIR:-/tmp}/rsverbs-out.XXXXXX")
		out=$tmpout
		serial=$(mktemp "${TMPDIR:-/tmp}/rsverbs-serial.XXXXXX")
	fi
	# shellcheck disable=SC2064 # expand now: locals are gone at exit
	trap "rm -rf '$job' ${tmpout:+'$tmpout'}" EXIT
	trap 'exit 130' INT TERM # so that the EXIT trap cleans up

	# The job, read by the guest from a read-only share.  The nonce makes the
	# exit marker impossible to fake by output that merely contains the text.
	nonce=$(od -An -N8 -tx1 /dev/urandom | tr -d ' \n')
	cwd=$(pwd -P)
	{
		printf 'RSV_NONCE=%q\nRSV_CWD=%q\nRSV_KERNEL=%q\nRSV_USERLAND=%q\nRSV_ARCH=%q\nRSV_NET_IP=%q\nRSV_CMD=(' \
			"$nonce" "$cwd" "$KSUITE" "$USUITE" "$ARCH_DEB" "$ip"
		printf ' %q' "$@"
		printf ' )\n'
	} >"$job/job.sh"
	# Host paths the guest must see even if under its tmpfs /tmp, /run, ...
	# (or, with a userland root, anywhere): bound from the host root.
	printf '%s\n' "$cwd" "$(dirname "$TESTBED")" >"$job/expose"
	if [[ -n $SIW_KO ]]; then cp "$SIW_KO" "$job/siw.ko"; fi
	if [[ -n $SIB_KO ]]; then cp "$SIB_KO" "$job/sib.ko"; fi
	# Guest directories also bound at their host paths: /out (read-write)
	# and the job.
	printf '%s %s\n' /out "$out" /run/rsverbs/job "$job" >"$job/binds"
	local rootshare=()
	if [[ $UROOT != / ]]; then
		touch "$job/userland"
		rootshare=(-virtfs "$(virtfs "$UROOT" rsvuser ,readonly=on,multidevs=remap)")
	fi

	if [[ -z $smp ]]; then
		smp=$(nproc)
		if ((smp > 4)); then smp=4; fi
	fi
	# --foreground: keep qemu in our process group so ^C reaches it.
	# shellcheck disable=SC2054 # the commas are qemu's, not array separators
	local qemu=(timeout --foreground -k 10 "$timeout"
		"${ARCH_QEMU[@]}" -m "$mem" -smp "$smp"
		-nodefaults -no-user-config -display none -no-reboot -nic none "${netargs[@]}"
		-serial stdio -kernel "$KERNEL" -initrd "$INITRD"
		-append "console=$ARCH_CONSOLE panic=-1 quiet rdinit=/init ${RSVERBS_KERNEL_ARGS:-}"
		-virtfs "$(virtfs / hostroot ,readonly=on,multidevs=remap)" "${rootshare[@]}"
		-virtfs "$(virtfs "$KDIR" rsvkroot ,readonly=on)"
		-virtfs "$(virtfs "$job" rsvjob ,readonly=on)"
		-virtfs "$(virtfs "$out" rsvout "")")

	# Serial console -> log file, and the command's output (between the
	# start and exit markers) -> stdout, live.  mawk needs -W interactive to
	# not block-buffer a pipe.
	# shellcheck disable=SC2016 # awk program: $0 is awk's, not the shell's
	local awkprog='
		{ sub(/\r$/, ""); print > logf; fflush(logf) }
		verbose { print > "/dev/stderr"; fflush("/dev/stderr") }
		$0 == "RSVERBS_TESTBED_START " nonce { inside = 1; next }
		inside && match($0, "RSVERBS_TESTBED_EXIT=[0-9]+ " nonce "$") {
			pre = substr($0, 1, RSTART - 1)
			if (pre != "") { print pre; fflush() }
			st = substr($0, RSTART + 21); sub(/ .*/, "", st)
			print st > resf; close(resf); inside = 0; next
		}
		inside { print; fflush() }'
	local awk=(awk)
	if awk -W version 2>&1 | grep -q mawk; then awk=(awk -W interactive); fi

	local start=$SECONDS qst status
	set +e
	"${qemu[@]}" </dev/null | "${awk[@]}" -v nonce="$nonce" -v logf="$serial" \
		-v resf="$job/status" -v verbose="${RSVERBS_VERBOSE:-0}" "$awkprog"
	qst=${PIPESTATUS[0]}
	set -e

	local what rc=125
	if [[ -s $job/status ]]; then
		status=$(<"$job/status")
		if ((status == 0)); then
			[[ -n $tmpout ]] && rm -f "$serial"
			return 0
		fi
		what="command exited with status $status"
		rc=$status
	elif ((qst == 124 || qst == 137)); then
		what="guest timed out (--timeout $timeout)"
		rc=124
	elif grep -q 'Kernel panic' "$serial"; then
		what="guest kernel panic"
	else
		what="guest stopped without an exit marker (qemu status $qst)"
	fi
	{
		echo "testbed: ---- last 100 lines of the serial log ----"
		tail -n 100 "$serial"
		echo "testbed: ---- end of serial log ($serial) ----"
	} >&2
	log "FAILED: $what; qemu ran for $((SECONDS - start)) s"
	return "$rc"
}

VERBOSE_PREPARE=0
case ${1:-} in
prepare)
	VERBOSE_PREPARE=1
	prepare
	;;
root) # the guest's root for RSVERBS_USERLAND (prepared): / or a userland
	prepare
	echo "$UROOT"
	;;
run)
	shift
	run "$@"
	;;
*) usage ;;
esac
