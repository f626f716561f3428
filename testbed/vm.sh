#!/bin/bash
# rsverbs test bed: boot Debian's stock kernel under qemu (TCG) with two
# Soft-RoCE devices (rxe0 on lo, rxe1 on dummy0) and run one command inside.
# The guest sees the host root read-only over 9p, so host binaries, libraries
# and the repository are at the same paths.  See testbed/README.md.
#
#   testbed/vm.sh prepare
#   testbed/vm.sh run [--timeout SECS] [--out HOSTDIR] [--mem MB] -- CMD [ARGS...]
set -euo pipefail

TESTBED=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd -P)
CACHE=$(realpath -m "${RSVERBS_CACHE:-$HOME/.cache/rsverbs}")
# Host side (qemu, initramfs tools) and guest side (it runs host binaries).
PACKAGES=(qemu-system-x86 busybox-static cpio kmod xz-utils iproute2 rdma-core
	ibverbs-providers ibverbs-utils rdmacm-utils perftest)
# Loaded by the initramfs itself; everything else is modprobed after the
# host root (with kmod) is mounted.  virtio_pci is a module in Debian's 6.1.
INITRD_MODULES=(virtio_pci 9pnet_virtio 9p)

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
apt_update() { as_root apt-get update -qq >&2; }

ensure_packages() {
	local p missing=()
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
	as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
		--no-install-recommends "${missing[@]}" >&2
}

# Sets KPKG/KPKGVER: the image package that linux-image-amd64 depends on,
# e.g. "Depends: linux-image-6.1.0-56-amd64 (= 6.1.192-2)".  apt-cache costs
# ~0.5 s a call when apt keeps no binary cache, so the answer is remembered
# until the package lists change (apt-get update renames files in lists/).
find_kernel_pkg() {
	local i dep="" stamp memo=$CACHE/kernel-pkg
	stamp=$(stat -c %Y /var/lib/apt/lists 2>/dev/null || echo none)
	if [[ -f $memo ]] && read -r i KPKG KPKGVER <"$memo" && [[ $i == "$stamp" ]]; then
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
	stamp=$(stat -c %Y /var/lib/apt/lists 2>/dev/null || echo none)
	echo "$stamp $KPKG $KPKGVER" >"$memo"
}

# Sets KDIR (unpacked .deb with modules.dep), KVER and KERNEL.
fetch_kernel() {
	local deb=$CACHE/debs/${KPKG}_${KPKGVER//:/%3a}_amd64.deb tmp
	if [[ -f $deb ]]; then
		note "kernel: $(basename "$deb") already downloaded"
	else
		log "kernel: downloading $KPKG=$KPKGVER"
		mkdir -p "$CACHE/debs"
		# Sandbox user root: apt's _apt user may not be able to write $CACHE.
		dl() { (cd "$CACHE/debs" && apt-get download -q -o APT::Sandbox::User=root "$KPKG=$KPKGVER" >&2); }
		dl || { apt_update && dl; } || die "cannot download $KPKG=$KPKGVER"
	fi
	KDIR=$CACHE/kernel/${KPKG}_$KPKGVER
	if [[ -d $KDIR ]]; then
		note "kernel: unpacked in $KDIR"
	else
		log "kernel: unpacking into $KDIR"
		tmp=$KDIR.tmp.$$
		rm -rf "$tmp"
		mkdir -p "$tmp"
		dpkg-deb -x "$deb" "$tmp"
		# The .deb ships no modules.dep (postinst normally runs depmod).
		KVER=$(ls "$tmp/lib/modules")
		depmod -b "$tmp" "$KVER"
		extract_vmlinux "$tmp/boot/vmlinuz-$KVER" "$tmp/boot/vmlinux-$KVER"
		mv "$tmp" "$KDIR" # atomic: a present $KDIR is always complete
	fi
	KVER=$(ls "$KDIR/lib/modules")
	KERNEL=$KDIR/boot/vmlinux-$KVER
	[[ -s $KERNEL ]] || KERNEL=$KDIR/boot/vmlinuz-$KVER
}

# Decompress the bzImage's xz payload into the plain ELF vmlinux.  qemu boots
# that directly through its PVH entry point, which skips ~3 s of in-guest xz
# decompression under TCG.  On failure the bzImage is booted instead.
extract_vmlinux() { # BZIMAGE OUT
	local off
	off=$(LC_ALL=C grep -m1 -obUaP '\xfd7zXZ\x00' "$1" | cut -d: -f1)
	# xz stops at the end of the stream, so tail may die of SIGPIPE: ignore.
	if [[ -n $off ]] && { tail -c +$((off + 1)) "$1" || true; } |
		xz -dc --single-stream >"$2" 2>/dev/null &&
		LC_ALL=C grep -qa 'Linux version' "$2"; then
		return
	fi
	log "kernel: cannot extract vmlinux, will boot the (slower) bzImage"
	rm -f "$2"
}

# Sets INITRD: busybox + virtio/9p modules + guest/init + guest/stage2.sh,
# keyed by kernel and busybox versions and a hash of the test-bed scripts.
build_initrd() {
	local bbver hash key tmp m ko
	bbver=$(dpkg-query -W -f='${Version}' busybox-static)
	hash=$(cat "$TESTBED/vm.sh" "$TESTBED/guest/init" "$TESTBED/guest/stage2.sh" |
		sha256sum | cut -c1-16)
	key=$(printf '%s\n' "$KPKG" "$KPKGVER" "$bbver" "$hash" | sha256sum | cut -c1-16)
	INITRD=$CACHE/initramfs/$key.cpio
	if [[ -f $INITRD ]]; then
		note "initramfs: $INITRD (cached)"
		return
	fi
	log "initramfs: building $INITRD"
	tmp=$(mktemp -d)
	mkdir -p "$tmp"/{bin,etc,lib/modules,proc,sys,dev}
	cp /bin/busybox "$tmp/bin/"
	cp "$TESTBED/guest/init" "$TESTBED/guest/stage2.sh" "$tmp/"
	for m in "${INITRD_MODULES[@]}"; do
		modprobe -d "$KDIR" -S "$KVER" --show-depends "$m" |
			awk '$1 == "insmod" { print $2 }'
	done | awk '!seen[$0]++' | while read -r ko; do
		cp "$ko" "$tmp/lib/modules/"
		basename "$ko" >>"$tmp/etc/rsverbs-modules"
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

prepare() {
	mkdir -p "$CACHE"
	exec 9>"$CACHE/.lock" # concurrent runs (make -j) must not race
	flock 9
	ensure_packages
	find_kernel_pkg
	fetch_kernel
	build_initrd
	exec 9>&-
	note "ready: kernel $KVER ($KPKGVER), initramfs $INITRD"
}

# qemu -virtfs path, with option-list commas escaped.
virtfs() { printf 'local,path=%s,mount_tag=%s,security_model=none%s' "${1//,/,,}" "$2" "$3"; }

run() {
	local timeout=600 out="" mem=1024
	while (($#)); do
		case $1 in
		--timeout) timeout=${2:?}; shift 2 ;;
		--out) out=${2:?}; shift 2 ;;
		--mem) mem=${2:?}; shift 2 ;;
		--) shift; break ;;
		*) usage ;;
		esac
	done
	(($#)) || usage
	[[ $timeout =~ ^[0-9]+$ && $mem =~ ^[0-9]+$ ]] || usage
	prepare

	local job tmpout="" serial nonce smp cwd
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
		printf 'RSV_NONCE=%q\nRSV_CWD=%q\nRSV_CMD=(' "$nonce" "$cwd"
		printf ' %q' "$@"
		printf ' )\n'
	} >"$job/job.sh"
	# Host paths the guest must see even if under its tmpfs /tmp, /run, ...
	printf '%s\n' "$cwd" "$(dirname "$TESTBED")" >"$job/expose"

	smp=$(nproc)
	if ((smp > 4)); then smp=4; fi
	# --foreground: keep qemu in our process group so ^C reaches it.
	# q35: its virtio devices use MSI, which saves ~0.7 s of ACPI interrupt
	# link setup per boot compared with the default i440fx machine.
	# shellcheck disable=SC2054 # the commas are qemu's, not array separators
	local qemu=(timeout --foreground -k 10 "$timeout"
		qemu-system-x86_64 -machine q35 -accel tcg,thread=multi -cpu max -m "$mem" -smp "$smp"
		-nodefaults -no-user-config -display none -no-reboot -nic none
		-serial stdio -kernel "$KERNEL" -initrd "$INITRD"
		-append "console=ttyS0 panic=-1 quiet rdinit=/init ${RSVERBS_KERNEL_ARGS:-}"
		-virtfs "$(virtfs / hostroot ,readonly=on,multidevs=remap)"
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
run)
	shift
	run "$@"
	;;
*) usage ;;
esac
