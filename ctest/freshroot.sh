#!/usr/bin/env bash
# A truly fresh Debian 12: in a clean bookworm root built with debootstrap
# (minbase + Debian's own toolchain, cargo-web and rustc-web from
# bookworm-security; no rustup, nothing from the host's cargo), `make
# LINKER=gnu` builds the library and the host-side checks pass: ctest/unit.sh
# and ctest/abi.sh (whose other-linker twin uses the host's cached zig,
# bound in read-only).  The crates are vendored on the host; the root builds
# in a network namespace of its own, with no network at all.
# Then, in another overlay of the same root, `make ARCH=arm64` from nothing:
# the Makefile's own dependency step (tools/deps.sh --build) adds the
# architecture to dpkg and installs the cross gcc, libstd-rust-web-dev:arm64
# and libibverbs-dev:arm64 with apt-get from the mirror (that run shares the
# host's network; cargo stays offline on the vendored crates), and the
# library it links is an aarch64 ELF with the native build's exports.
# s390x (RSVERBS_FRESHROOT_ARCHES=s390x) takes the other way tools/deps.sh
# has: Debian 12 has no libstd-rust-web-dev:s390x at rustc-web's version,
# so make installs the pinned rustup toolchain into the root's cache
# (/cache/rustup, from static.rust-lang.org) and no s390x package; so does
# ppc64el when apt cannot fetch its bookworm-security list.
# apt's .deb files are kept on the host between runs (FR_DIR/cross-debs).
# RSVERBS_FRESHROOT_ARCHES names the architectures (default arm64; "" none).
#
#   ctest/freshroot.sh            build (cached) the root, then build and check in it
#   ctest/freshroot.sh prepare    only make sure the root exists; prints its path
#
# The root is cached in ${RSVERBS_CACHE:-~/.cache/rsverbs}/freshroot/bookworm-KEY,
# KEY hashing the recipe, the package list, the mirrors and the versions the
# test bed's private apt lists (testbed/apt.sh) give for those packages in
# bookworm and bookworm-security.  Every run works on a throw-away overlay
# of it, so the cached root stays as debootstrap and apt left it.
# ctest/deb.sh sources this file for freshroot_prepare and freshroot_run.
# Needs root (debootstrap, chroot, mount namespaces).
set -uo pipefail
FR_REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
FR_CACHE=$(realpath -m "${RSVERBS_CACHE:-$HOME/.cache/rsverbs}")
FR_DIR=$FR_CACHE/freshroot
# debootstrap --include (bookworm main): the C toolchain, what ctest/abi.sh
# compiles against, and debhelper for ctest/deb.sh's package build.  (Not
# lintian: debootstrap cannot resolve its virtual perl-openssl-abi-3; the
# host's lintian checks the packages.)
FR_BASE_PACKAGES=(build-essential pkg-config libibverbs-dev librdmacm-dev libseccomp-dev
	debhelper ca-certificates)
# then apt-get install from bookworm + bookworm-security inside the root.
FR_RUST_PACKAGES=(cargo-web rustc-web)
FR_RECIPE=1 # bump when the way the root is built changes

fr_log() { printf 'freshroot: %s\n' "$*" >&2; }
fr_die() {
	fr_log "error: $*"
	exit 125
}

# The mirror URIs the host's apt uses (testbed/apt.sh reads them; nothing is
# hard-coded here) and the private apt configuration for version lookups.
fr_mirrors() {
	read -r FR_MIRROR FR_SECURITY_MIRROR < <("$FR_REPO/testbed/apt.sh" mirror) ||
		fr_die "testbed/apt.sh mirror failed"
	[[ -n $FR_MIRROR ]] || fr_die "no bookworm mirror in the host's apt sources"
	[[ -n ${FR_SECURITY_MIRROR:-} ]] ||
		fr_die "no bookworm-security source on the host: cargo-web 1.96 comes from there"
}

# Sets FR_KEY.  One madison call over the private lists (updated by
# testbed/apt.sh when missing or a day old).
fr_key() {
	local conf vers
	conf=$("$FR_REPO/testbed/apt.sh" env) || fr_die "testbed/apt.sh env failed"
	conf=${conf#APT_CONFIG=}
	if [[ ! -e $(dirname "$conf")/updated || -n $(find "$(dirname "$conf")/updated" -mmin +1440 2>/dev/null) ]]; then
		"$FR_REPO/testbed/apt.sh" update >&2 || fr_die "testbed/apt.sh update failed"
	fi
	vers=$(APT_CONFIG=$conf apt-cache madison "${FR_BASE_PACKAGES[@]}" "${FR_RUST_PACKAGES[@]}" 2>/dev/null |
		awk -F' *[|] *' '{ sub(/^ */, "", $1); split($3, a, " ") }
			a[2] == "bookworm/main" || a[2] == "bookworm-security/main" { print $1, $2 }' | LC_ALL=C sort -u)
	[[ -n $vers ]] || fr_die "the private apt lists know no bookworm package"
	FR_KEY=$(printf '%s\n' "$FR_RECIPE" "${FR_BASE_PACKAGES[*]}" "${FR_RUST_PACKAGES[*]}" \
		"$FR_MIRROR" "$FR_SECURITY_MIRROR" "$vers" | sha256sum | cut -c1-16)
}

# Sets FR_ROOT, building it when missing (its time and size: docs/building.md).
freshroot_prepare() {
	fr_mirrors
	fr_key
	FR_ROOT=$FR_DIR/bookworm-$FR_KEY/root
	[[ -d $FR_ROOT ]] && return 0
	mkdir -p "$FR_DIR"
	exec 8>"$FR_DIR/.lock" # one debootstrap at a time (make check in two checkouts)
	flock 8
	[[ -d $FR_ROOT ]] && { exec 8>&-; return 0; }
	local tmp=$FR_DIR/bookworm-$FR_KEY.tmp.$$ t0=$SECONDS
	fr_log "debootstrap bookworm into $FR_DIR/bookworm-$FR_KEY (a few minutes, once)"
	mkdir -p "$FR_DIR/debs"
	rm -rf "$tmp"
	mkdir -p "$tmp"
	# --cache-dir keeps the .debs, so a rebuild downloads only what changed.
	if ! debootstrap --variant=minbase --arch=amd64 \
		--include="$(IFS=,; echo "${FR_BASE_PACKAGES[*]}")" \
		--keyring=/usr/share/keyrings/debian-archive-keyring.gpg --cache-dir="$FR_DIR/debs" \
		bookworm "$tmp/root" "$FR_MIRROR" >"$tmp/debootstrap.log" 2>&1; then
		tail -n 30 "$tmp/debootstrap.log" >&2
		fr_die "debootstrap failed (log: $tmp/debootstrap.log)"
	fi
	# The root's own sources: bookworm, its updates and bookworm-security.
	rm -f "$tmp/root/etc/apt/sources.list"
	printf 'Types: deb\nURIs: %s\nSuites: bookworm bookworm-updates\nComponents: main\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n\nTypes: deb\nURIs: %s\nSuites: bookworm-security\nComponents: main\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n' \
		"$FR_MIRROR" "$FR_SECURITY_MIRROR" >"$tmp/root/etc/apt/sources.list.d/debian.sources"
	# The host's proxy and Release-date settings (a frozen mirror needs them).
	apt-config dump 2>/dev/null | grep -E '^Acquire::(Check-Valid-Until|Check-Date|(http|https|ftp)::Proxy(::[^ ]*)?) ' |
		sed 's/$/;/' >"$tmp/root/etc/apt/apt.conf.d/50host" || true
	cp /etc/resolv.conf "$tmp/root/etc/resolv.conf" 2>/dev/null || true
	# shellcheck disable=SC2016 # expanded by the inner shell
	if ! unshare --mount --fork sh -c '
		mount -t proc proc "$1/proc" && mount --bind /dev "$1/dev" &&
		chroot "$1" env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root DEBIAN_FRONTEND=noninteractive LANG=C.UTF-8 \
			sh -c "apt-get update -q && apt-get install -y -q --no-install-recommends $2 && apt-get upgrade -y -q && apt-get clean"
		' sh "$tmp/root" "${FR_RUST_PACKAGES[*]}" >"$tmp/apt.log" 2>&1; then
		tail -n 30 "$tmp/apt.log" >&2
		fr_die "apt-get install ${FR_RUST_PACKAGES[*]} in the root failed (log: $tmp/apt.log)"
	fi
	: >"$tmp/root/etc/resolv.conf"
	# shellcheck disable=SC2016 # dpkg-query's format
	chroot "$tmp/root" dpkg-query -W -f='${Package} ${Version}\n' >"$tmp/packages"
	printf 'mirror %s %s\nkey %s\nbuilt %s in %s s\n' "$FR_MIRROR" "$FR_SECURITY_MIRROR" "$FR_KEY" \
		"$(date -u +%FT%TZ)" $((SECONDS - t0)) >"$tmp/info"
	mv "$tmp" "$FR_DIR/bookworm-$FR_KEY"
	fr_log "root ready in $((SECONDS - t0)) s ($(du -sm "$FR_DIR/bookworm-$FR_KEY" | cut -f1) MB)"
	# Older roots, built over a day ago (a fresh one may be in use elsewhere).
	find "$FR_DIR" -mindepth 1 -maxdepth 1 -name 'bookworm-*' ! -name "bookworm-$FR_KEY" \
		-mtime +0 -exec rm -rf {} + 2>/dev/null || true
	exec 8>&-
}

# The crates, vendored on the host (cargo vendor; keyed by Cargo.lock).
# Sets FR_VENDOR.
freshroot_vendor() {
	FR_VENDOR=$FR_DIR/vendor-$(sha256sum <"$FR_REPO/Cargo.lock" | cut -c1-16)
	[[ -d $FR_VENDOR ]] && return 0
	rm -rf "$FR_VENDOR.tmp"
	(cd "$FR_REPO" && cargo vendor --quiet --locked --versioned-dirs "$FR_VENDOR.tmp" >/dev/null) ||
		fr_die "cargo vendor failed"
	mv "$FR_VENDOR.tmp" "$FR_VENDOR"
}

# The repository's tracked files as they are in the work tree (what make
# check tests), as a tar stream; without git, the tree minus build output.
freshroot_tar() {
	if command -v git >/dev/null && git -C "$FR_REPO" rev-parse --git-dir >/dev/null 2>&1; then
		git -C "$FR_REPO" ls-files -z -c -o --exclude-standard | tar -C "$FR_REPO" --null -T - --ignore-failed-read -cf - 2>/dev/null
	else
		tar -C "$FR_REPO" --exclude=./target --exclude=./build --exclude=./ctest/out -cf - .
	fi
}

# freshroot_run WORKDIR SCRIPT [BIND...]: runs SCRIPT (bash) as root in an
# overlay of FR_ROOT, in new mount and network namespaces, with the repository
# at /src, vendored crates at /vendor (CARGO_HOME /root/.cargo replaces
# crates.io with them, offline), the host's zig at $RSVERBS_CACHE=/cache, and
# BIND entries "HOSTDIR:ROOTDIR[:ro]".  WORKDIR (on the cache's file system)
# holds the overlay's upper layer; the caller removes it.  FR_NET=host
# shares the host's network (and its /etc/resolv.conf) instead: for a run
# whose apt-get reaches the mirror.
freshroot_run() {
	local work=$1 script=$2 net=--net
	shift 2
	[[ ${FR_NET:-none} != host ]] || net=
	mkdir -p "$work/upper/src" "$work/upper/vendor" "$work/upper/cache/zig-cache" \
		"$work/upper/root/.cargo" "$work/work" "$work/merged"
	freshroot_tar | tar -C "$work/upper/src" -xf -
	printf '[source.crates-io]\nreplace-with = "vendored"\n\n[source.vendored]\ndirectory = "/vendor"\n\n[net]\noffline = true\n' \
		>"$work/upper/root/.cargo/config.toml"
	printf '%s\n' "$script" >"$work/upper/run.sh"
	local zig
	zig=$FR_CACHE/zig-$(sed -n 's/^ZIG_VERSION *:= *//p' "$FR_REPO/Makefile")
	mkdir -p "$FR_DIR/zig-cache"
	# shellcheck disable=SC2016,SC2086 # expanded by the inner shell; $net: one option or none
	unshare --mount $net --fork bash -c '
		set -e
		w=$1 root=$2 vendor=$3 zig=$4 zigcache=$5 net=$6; shift 6
		if [ -n "$net" ]; then ip link set lo up 2>/dev/null || true; fi
		mount -t overlay overlay -o "lowerdir=$root,upperdir=$w/upper,workdir=$w/work" "$w/merged"
		m=$w/merged
		mount -t proc proc "$m/proc"
		mount --rbind /dev "$m/dev"
		mount --bind -o ro "$vendor" "$m/vendor"
		mount --bind "$zigcache" "$m/cache/zig-cache"
		if [ -z "$net" ]; then mount --bind -o ro /etc/resolv.conf "$m/etc/resolv.conf"; fi
		if [ -x "$zig/ziglang/zig" ]; then mkdir -p "$m/cache/${zig##*/}"; mount --bind -o ro "$zig" "$m/cache/${zig##*/}"; fi
		for b in "$@"; do
			IFS=: read -r h r o <<<"$b"
			mkdir -p "$m$r"; mount --bind "$h" "$m$r"
			if [ "$o" = ro ]; then mount -o remount,bind,ro "$m$r"; fi
		done
		exec chroot "$m" env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LANG=C.UTF-8 TERM=dumb \
			CARGO_HOME=/root/.cargo RSVERBS_CACHE=/cache DEBIAN_FRONTEND=noninteractive \
			bash -o pipefail /run.sh
	' fr "$work" "$FR_ROOT" "$FR_VENDOR" "$zig" "$FR_DIR/zig-cache" "$net" "$@"
}

# Inside the root: the build, then the host-side suites, their results
# written straight into the host's ctest/out under their own suite names.
# shellcheck disable=SC2016 # run by bash in the root
FR_SCRIPT='
cd /src
echo "root: $(. /etc/os-release; echo "$PRETTY_NAME"), $(cargo --version) ($(dpkg -S /usr/bin/cargo | cut -d: -f1)), $(rustc --version), $(ld --version | head -1)"
rc=0
if command -v rustup >/dev/null || [ -e /root/.rustup ]; then echo "FAIL rustup present"; rc=1; fi
t=$(date +%s)
if make LINKER=gnu >/results/freshroot-make.log 2>&1; then
	echo "BUILT make LINKER=gnu in $(( $(date +%s) - t )) s"
else
	tail -n 40 /results/freshroot-make.log; echo "FAIL make LINKER=gnu"; exit 1
fi
SUITE=freshroot-unit RESULTS_DIR=/results ctest/unit.sh >/results/freshroot-unit.log 2>&1 || rc=1
tail -n 1 /results/freshroot-unit.log
SUITE=freshroot-abi RESULTS_DIR=/results RSVERBS_BUILD=/src/build ctest/abi.sh >/results/freshroot-abi.log 2>&1 || rc=1
grep -E "^FAIL|passed" /results/freshroot-abi.log
exit $rc
'

# Inside the root, for the architecture in $A (set in front of it): the
# root is Debian 12 with its own toolchain and nothing of A (no foreign
# architecture, no cross gcc, no standard library of the target), then
# `make ARCH=$A`, the new user's command, installs what it needs and builds.
# shellcheck disable=SC2016 # run by bash in the root
FR_ARCH_SCRIPT='
cd /src
RSVERBS_ARCH=$A . testbed/arch.sh
t=$ARCH_RUST-unknown-linux-gnu
if command -v rustup >/dev/null || [ -e /root/.rustup ]; then echo "FAIL rustup present"; fi
if [ -n "$(dpkg --print-foreign-architectures)" ] || command -v "$ARCH_RUST-linux-gnu-gcc" >/dev/null ||
	[ -e "/usr/lib/rustlib/$t" ]; then
	echo "FAIL preinstalled: the root already has something of $A ($(dpkg --print-foreign-architectures))"
fi
s=$(date +%s)
if make ARCH="$A" >"/results/freshroot-$A-make.log" 2>&1; then
	echo "BUILT make ARCH=$A in $(( $(date +%s) - s )) s"
else
	tail -n 40 "/results/freshroot-$A-make.log"; echo "FAILED make ARCH=$A"
fi
echo "FOREIGN $(dpkg --print-foreign-architectures | tr "\n" " ")"
if [ -x "/cache/rustup/bin-$ARCH_DEB/rustc" ]; then
	echo "CACHED $("/cache/rustup/bin-$ARCH_DEB/rustc" --version) $(ls /cache/rustup/toolchains/*/lib/rustlib | tr "\n" " ")"
fi
grep -E "^build: (the rustc on PATH is Debian|installing rustup|$ARCH_DEB builds with)" "/results/freshroot-$A-make.log" || true
if [ -e "$ARCH_BUILD/librsverbs.so.1" ] && "$ARCH_RUST-linux-gnu-strip" -o /tmp/stripped "$ARCH_BUILD/librsverbs.so.1"; then
	echo "STRIPPED $(stat -c %s /tmp/stripped)"
fi
echo "INSTALLED $(dpkg-query -W -f="\${Package}:\${Architecture}\n" | grep -c ":$ARCH_DEB\$") packages of $ARCH_DEB;" \
	"$(grep -E "^build: (installing|dpkg --add-architecture)" "/results/freshroot-$A-make.log" | tr "\n" " ")"
'

# freshroot_arch ARCH REF: FR_ARCH_SCRIPT in a fresh overlay of FR_ROOT with
# the host's network and the host's /etc/ssl/certs, read-only (an https
# download, such as tools/deps.sh's rustup for s390x, must trust what the
# host's network presents: on this host a TLS-intercepting proxy's own CA,
# which the host's bundle has and Debian's does not; as apt gets the host's
# proxy settings), apt's archives at FR_DIR/cross-debs (one run at a
# time); then, on the host, the library, the command and the example are
# ARCH's ELF, and the library has REF's exports and version definitions.
freshroot_arch() {
	local a=$1 ref=$2 work log rc=0 t=$SECONDS b f
	# shellcheck source=testbed/arch.sh
	RSVERBS_ARCH=$a . testbed/arch.sh
	a=$ARCH_DEB
	work=$FR_DIR/run.$$.$a
	rm -rf "$work"
	mkdir -p "$FR_DIR/cross-debs/partial"
	log=$(
		exec 9>"$FR_DIR/cross-debs.lock"
		flock 9
		FR_NET=host freshroot_run "$work" "A=$a$FR_ARCH_SCRIPT" \
			"$RESULTS_DIR:/results" "$FR_DIR/cross-debs:/var/cache/apt/archives" \
			"/etc/ssl/certs:/etc/ssl/certs:ro" 2>&1
	) || rc=$?
	printf '%s\n' "$log"
	# shellcheck disable=SC2016 # bash -c's own $1 and $2
	check "$a: no rustup in the root, and nothing of $a before make (no foreign architecture, cross gcc or std)" \
		bash -c '! grep -Eq "^FAIL (rustup|preinstalled)" <<<"$1"' _ "$log"
	# Which toolchain make took (tools/deps.sh): Debian's rustc-web with
	# libstd-rust-web-dev:ARCH, or, where apt has no such package at
	# rustc-web's version (s390x on Debian 12 since bookworm's LTS:
	# docs/architectures.md), the pinned rustup toolchain in the cache.
	local route="Debian's rustc-web"
	grep -q '^CACHED ' <<<"$log" && route="the cached rustup toolchain ($(sed -n 's/^CACHED \(rustc [^ ]*\).*/\1/p' <<<"$log"))"
	if grep -q '^BUILT' <<<"$log" && [ "$rc" = 0 ]; then
		pass "$a: make ARCH=$a from nothing, $route, $(sed -n 's/^BUILT make ARCH=[^ ]* //p' <<<"$log") ($(sed -n 's/^INSTALLED \([0-9]*\).*/\1/p' <<<"$log") packages of $a installed by make; library stripped $(sed -n 's/^STRIPPED //p' <<<"$log") bytes)"
	else
		fail "$a: make ARCH=$a from nothing (log: $RESULTS_DIR/freshroot-$a-make.log)"
	fi
	if grep -q '^CACHED ' <<<"$log"; then
		# shellcheck disable=SC2016 # bash -c's own $1 and $2
		check "$a: apt had no libstd-rust-web-dev:$a at rustc-web's version, so make installed the pinned rustup toolchain with $ARCH_RUST-unknown-linux-gnu into the cache, and left dpkg without $a" \
			bash -c 'grep -q "^build: the rustc on PATH is Debian.*lists have no libstd-rust-web-dev:$2 of that version" <<<"$1" &&
				grep -q "^build: installing rustup" <<<"$1" && grep -q "^CACHED rustc .* $3-unknown-linux-gnu " <<<"$1" &&
				grep -q "^FOREIGN $" <<<"$1" && grep -q "^INSTALLED 0 " <<<"$1"' _ "$log" "$a" "$ARCH_RUST"
	else
		# shellcheck disable=SC2016 # bash -c's own $1 and $2
		check "$a: make added the architecture to dpkg and installed libstd-rust-web-dev:$a and libibverbs-dev:$a itself" \
			bash -c 'grep -q "^FOREIGN $2 " <<<"$1" && grep -q "^INSTALLED.*build: installing.*libstd-rust-web-dev:$2 libibverbs-dev:$2" <<<"$1"' _ "$log" "$a"
	fi
	b=$work/upper/src/$ARCH_BUILD
	check "$a: $ARCH_BUILD/librsverbs.so.1 is ${ARCH_ELF%|*}, ${ARCH_ELF#*|}, with the native build's exports and version definitions" \
		same_abi "$b/librsverbs.so.1" "$ref" "${ARCH_ELF%|*}" "${ARCH_ELF#*|}"
	for f in rsverbs examples/attach examples/receiver; do
		check "$a: $ARCH_BUILD/$f is ${ARCH_ELF%|*}" elf_is "$b/$f" "${ARCH_ELF%|*}" "${ARCH_ELF#*|}"
	done
	rm -rf "$work"
	# .debs no run has read for two weeks (superseded versions).
	find "$FR_DIR/cross-debs" -maxdepth 1 -name '*.deb' -atime +14 -delete 2>/dev/null || true
	echo "freshroot: $a: $((SECONDS - t)) s"
}

freshroot_main() {
	cd "$FR_REPO" || exit 1
	# shellcheck source=ctest/lib.sh
	source ctest/lib.sh
	local t0=$SECONDS cold=warm work out
	[[ $EUID == 0 ]] || { fail "needs root (debootstrap, chroot, namespaces)"; finish; return; }
	if ! command -v debootstrap >/dev/null; then
		fr_log "installing debootstrap"
		if ! { tools/apt-get.sh update -qq && DEBIAN_FRONTEND=noninteractive tools/apt-get.sh install -y -qq debootstrap >/dev/null; }; then
			fail "apt-get install debootstrap"; finish; return
		fi
	fi
	fr_mirrors
	fr_key
	[[ -d $FR_DIR/bookworm-$FR_KEY/root ]] || cold=cold
	( freshroot_prepare ) || { fail "clean bookworm root (debootstrap)"; finish; return; }
	FR_ROOT=$FR_DIR/bookworm-$FR_KEY/root
	pass "clean bookworm root with cargo-web/rustc-web ($cold, $((SECONDS - t0)) s): $(grep -E '^(cargo-web|rustc-web) ' "$FR_ROOT/../packages" | tr '\n' ' ')"
	# zig for abi.sh's other-linker twin: the host's cached copy (the root has no pip).
	make -s zig >/dev/null || fail "make zig (for abi.sh's twin) failed"
	( freshroot_vendor ) || { fail "cargo vendor on the host"; finish; return; }
	freshroot_vendor
	work=$FR_DIR/run.$$
	out=$RESULTS_DIR
	rm -rf "$work"
	local t1=$SECONDS rc=0 log
	log=$(freshroot_run "$work" "$FR_SCRIPT" "$out:/results" 2>&1) || rc=$?
	printf '%s\n' "$log"
	# shellcheck disable=SC2016 # bash -c's own $1
	check "no rustup in the root" bash -c '! grep -q "^FAIL rustup" <<<"$1"' _ "$log"
	if grep -q '^BUILT' <<<"$log"; then
		pass "make LINKER=gnu in the root, offline: $(sed -n 's/^BUILT //p' <<<"$log")"
	else
		fail "make LINKER=gnu in the root, offline"
	fi
	check "unit and ABI suites pass in the root (results: freshroot-unit, freshroot-abi)" [ "$rc" = 0 ]
	local t2=$SECONDS a
	for a in ${RSVERBS_FRESHROOT_ARCHES-arm64}; do
		freshroot_arch "$a" "$work/upper/src/build/librsverbs.so.1"
	done
	rm -rf "$work"
	echo "freshroot: wall time $((SECONDS - t0)) s ($cold root; build and checks $((t2 - t1)) s; other architectures $((SECONDS - t2)) s)"
	finish
}

if [[ ${BASH_SOURCE[0]} == "$0" ]]; then
	case ${1:-} in
	prepare) freshroot_prepare && echo "$FR_ROOT" ;;
	"") freshroot_main ;;
	*) sed -n 's/^#   //p' "$0" >&2; exit 2 ;;
	esac
fi
