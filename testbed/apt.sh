#!/bin/bash
# rsverbs test bed: a private apt configuration for the Debian suites the
# test bed takes kernels and userlands from (bullseye, bookworm,
# bookworm-backports, trixie, sid; main; amd64, or the architecture of
# RSVERBS_ARCH in a configuration of its own), kept under the cache.  The
# host's /etc/apt is only read (for the mirror and a few Acquire settings),
# never written.  See testbed/README.md.
#
# Sourced by testbed/vm.sh (functions apt_private_*), or run:
#   testbed/apt.sh update          refresh the private lists now
#   testbed/apt.sh env             print APT_CONFIG=... (then: apt-cache policy ...)
#   testbed/apt.sh mirror          print the mirror URI and the security one
#   testbed/apt.sh kernel SUITE    print the kernel packages for SUITE
set -euo pipefail
# The architecture facts (ARCH_DEB), for every file that sources this one:
# testbed/siw.sh runs as a process of its own and has none of vm.sh's.
if [[ -z ${ARCH_DEB:-} ]]; then
	# shellcheck source=testbed/arch.sh
	. "$(dirname "${BASH_SOURCE[0]}")/arch.sh"
fi

APT_SUITES=(bullseye bookworm bookworm-backports trixie sid)
# Suites that have a -security suite on the security mirror.
APT_SECURITY_SUITES=(bullseye bookworm trixie)
APT_HOST_KEYRING=/usr/share/keyrings/debian-archive-keyring.gpg
APT_MAX_AGE_MIN=1440 # re-run apt-get update when the lists are older than a day

apt_log() { printf 'testbed: %s\n' "$*" >&2; }
apt_die() {
	apt_log "error: $*"
	exit 125
}

# The host's sources, one "URI SUITE..." line per source (deb822 .sources
# files and one-line sources.list entries), types deb only.
apt_host_sources() {
	local f
	for f in /etc/apt/sources.list.d/*.sources; do
		[[ -r $f ]] || continue
		# deb822: blank-line separated stanzas; fold each into one line.
		awk 'function flush() { if (types ~ /(^| )deb( |$)/ && uris != "" && enabled != "no")
				{ n = split(uris, u, " "); for (i = 1; i <= n; i++) print u[i], suites }
				types = uris = suites = enabled = "" }
			/^[ \t]*#/ { next }
			/^[ \t]*$/ { flush(); next }
			{ key = tolower($1); sub(/:$/, "", key); $1 = ""; sub(/^ +/, "")
			  if (key == "types") types = $0; else if (key == "uris") uris = $0
			  else if (key == "suites") suites = $0; else if (key == "enabled") enabled = tolower($0) }
			END { flush() }' "$f"
	done
	for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
		[[ -r $f ]] || continue
		# deb [opts] URI SUITE COMPONENTS...
		sed -e 's/#.*//' -e 's/\[[^]]*\]//' "$f" | awk '$1 == "deb" && NF >= 3 { print $2, $3 }'
	done
}

# apt_mirror_for SUITE: the first host URI that serves SUITE.
apt_mirror_for() {
	apt_host_sources | awk -v s="$1" '{ for (i = 2; i <= NF; i++) if ($i == s) { print $1; exit } }' |
		sed 's|/*$||'
}

# Sets APT_MIRROR and APT_SECURITY_MIRROR from the host's configuration.
apt_private_mirrors() {
	APT_MIRROR=$(apt_mirror_for bookworm)
	APT_SECURITY_MIRROR=$(apt_mirror_for bookworm-security)
	[[ -n $APT_MIRROR ]] ||
		apt_die "no host apt source serves bookworm (/etc/apt/sources.list{,.d}): cannot derive a mirror"
}

# The host settings worth carrying over: proxies and the Release-file date
# checks (a mirror frozen in time needs Check-Valid-Until "false").
apt_host_settings() {
	apt-config dump 2>/dev/null | grep -E '^Acquire::(Check-Valid-Until|Check-Date|(http|https|ftp)::Proxy(::[^ ]*)?) ' || true
}

# Writes the configuration (if it changed) and exports APT_CONFIG.  Sets
# APT_DIR, APT_KEYRING.  Another architecture (testbed/arch.sh) has its own
# directory, so that the amd64 lists and their caches stay as they are.
apt_private_setup() {
	APT_DIR=$CACHE/apt
	if [[ $ARCH_DEB != amd64 ]]; then
		# Only the cell's suites: fewer lists to fetch, and fewer chances
		# to meet a mirror in mid-sync.
		APT_DIR=$CACHE/apt-$ARCH_DEB
		local cell=" bookworm ${KSUITE:-} ${USUITE:-} " x
		APT_SUITES=() APT_SECURITY_SUITES=()
		for x in bullseye bookworm bookworm-backports trixie sid; do
			[[ $cell == *" $x "* ]] || continue
			APT_SUITES+=("$x")
			[[ $x == *-* || $x == sid ]] || APT_SECURITY_SUITES+=("$x")
		done
	fi
	apt_private_mirrors
	mkdir -p "$APT_DIR"/etc/{apt.conf.d,preferences.d,sources.list.d,trusted.gpg.d} \
		"$APT_DIR"/state/lists/partial "$APT_DIR"/cache/archives/partial "$APT_DIR"/log
	[[ -e $APT_DIR/state/status ]] || : >"$APT_DIR/state/status"
	apt_private_keyring
	local s conf sources
	sources=$(
		printf 'Types: deb\nURIs: %s\nSuites: %s\nComponents: main\nArchitectures: %s\nSigned-By: %s\n' \
			"$APT_MIRROR" "${APT_SUITES[*]}" "$ARCH_DEB" "$APT_KEYRING"
		if [[ -n $APT_SECURITY_MIRROR ]]; then
			printf '\nTypes: deb\nURIs: %s\nSuites:' "$APT_SECURITY_MIRROR"
			for s in "${APT_SECURITY_SUITES[@]}"; do printf ' %s-security' "$s"; done
			printf '\nComponents: main\nArchitectures: %s\nSigned-By: %s\n' "$ARCH_DEB" "$APT_KEYRING"
		fi
	)
	conf=$(
		cat <<-EOF
			// Private apt configuration of the rsverbs test bed (testbed/apt.sh).
			// Generated; nothing here is read from or written to the host's /etc/apt.
			Dir::Etc "$APT_DIR/etc/";
			Dir::Etc::main "apt.conf";
			Dir::Etc::parts "apt.conf.d/";
			Dir::Etc::sourcelist "sources.list";
			Dir::Etc::sourceparts "sources.list.d/";
			Dir::Etc::preferences "preferences";
			Dir::Etc::preferencesparts "preferences.d/";
			Dir::Etc::trusted "trusted.gpg";
			Dir::Etc::trustedparts "trusted.gpg.d/";
			Dir::State "$APT_DIR/state/";
			Dir::State::lists "lists/";
			Dir::State::status "$APT_DIR/state/status";
			Dir::Cache "$APT_DIR/cache/";
			Dir::Cache::archives "archives/";
			Dir::Log "$APT_DIR/log/";
			APT::Architecture "$ARCH_DEB";
			APT::Architectures { "$ARCH_DEB"; };
			APT::Sandbox::User "root";
			Acquire::Languages "none";
			Acquire::AllowInsecureRepositories "false";
		EOF
		apt_host_settings
	)
	if [[ $(cat "$APT_DIR/apt.conf" 2>/dev/null) != "$conf" ]]; then
		apt_put "$APT_DIR/apt.conf" "$conf"
	fi
	if [[ $(cat "$APT_DIR/etc/sources.list.d/rsverbs.sources" 2>/dev/null) != "$sources" ]]; then
		apt_put "$APT_DIR/etc/sources.list.d/rsverbs.sources" "$sources"
		rm -f "$APT_DIR/updated" # new sources: update now
	fi
	export APT_CONFIG=$APT_DIR/apt.conf
}

# apt_put FILE TEXT: FILE holds TEXT and a newline, replaced at once (a
# temporary file of its own, renamed): two processes setting up an empty
# cache at the same moment (make check's two lanes on a fresh machine)
# never see each other's half-written file, nor lose a shared temporary
# file's rename (seen: ctest/check_self.sh's two updates, in a fresh
# cache, one died on "mv: cannot stat '.../keyring.gpg.tmp'").
apt_put() {
	local tmp
	tmp=$(mktemp "$1.XXXXXX")
	printf '%s\n' "$2" >"$tmp"
	mv -f "$tmp" "$1"
}

# Sets APT_KEYRING: the host's Debian archive keyring, plus the keyring of a
# newer debian-archive-keyring package when $APT_DIR/newer-keyring.gpg was
# fetched (see apt_private_newer_keyring), concatenated into one file.
apt_private_keyring() {
	APT_KEYRING=$APT_DIR/keyring.gpg
	local want files=("$APT_HOST_KEYRING")
	[[ -r $APT_HOST_KEYRING ]] || apt_die "$APT_HOST_KEYRING missing (package debian-archive-keyring)"
	if [[ -s $APT_DIR/newer-keyring.gpg ]]; then files+=("$APT_DIR/newer-keyring.gpg"); fi
	want=$(cat "${files[@]}" | sha256sum)
	if [[ ! -s $APT_KEYRING || $(sha256sum <"$APT_KEYRING") != "$want" ]]; then
		local tmp
		tmp=$(mktemp "$APT_KEYRING.XXXXXX")
		cat "${files[@]}" >"$tmp"
		mv -f "$tmp" "$APT_KEYRING"
	fi
}

# A suite signed by a key that the host keyring lacks (sid, once Debian
# rotates its archive key): take debian-archive-keyring from the newest
# suite that the host keyring could verify and add its keyring.  apt has
# verified that .deb against its suite's signed Release file.
apt_private_newer_keyring() {
	local s ver deb tmp
	for s in sid trixie bookworm-backports; do
		ver=$(apt_suite_version debian-archive-keyring "$s") && [[ -n $ver ]] && break
	done
	[[ -n ${ver:-} ]] || return 1
	tmp=$(mktemp -d)
	(cd "$tmp" && apt-get download -q "debian-archive-keyring=$ver" >&2) || {
		rm -rf "$tmp"
		return 1
	}
	deb=$(echo "$tmp"/*.deb)
	dpkg-deb -x "$deb" "$tmp/x"
	cp "$tmp/x/usr/share/keyrings/debian-archive-keyring.gpg" "$APT_DIR/newer-keyring.gpg"
	apt_log "apt: added the keyring of debian-archive-keyring $ver ($s)"
	rm -rf "$tmp"
}

# apt-get update of the private configuration when its lists are missing or
# older than a day (or $1 = force), one process at a time: make check's two
# lanes (ctest/check.sh) both reach here on a fresh machine (the guest lane
# for siw's kernel, the host lane for the other architectures' libibverbs),
# and two updates at once break each other: apt-get update deletes the
# binary caches, pkgcache.bin's temporary files among them, that another
# apt command is writing ("Problem renaming the file .../pkgcache.bin.XXXXXX
# ... (2: No such file or directory)", and a second update is refused the
# lists' lock). So the update runs under a lock of this directory, the
# stamp is looked at again once the lock is held (the other process has
# usually just updated), and the binary cache is built before the lock is
# let go, so that the readers after it (apt-cache, apt-get download) find
# it made and only read it.
apt_private_update() {
	local fd rc=0
	exec {fd}>>"$APT_DIR/update.lock"
	if ! flock -n "$fd"; then
		apt_log "apt: waiting for another process's update of the private package lists"
		flock -w 1800 "$fd" || apt_die "the private package lists stayed locked for 30 minutes ($APT_DIR/update.lock)"
	fi
	apt_private_update_locked "$@" || rc=$?
	exec {fd}>&-
	return "$rc"
}

apt_private_update_locked() {
	local out rc=0 stamp=$APT_DIR/updated
	if [[ ${1:-} != force && -n $(find "$stamp" -mmin -"$APT_MAX_AGE_MIN" 2>/dev/null) ]]; then
		return 0
	fi
	apt_log "apt: updating the private package lists (${APT_SUITES[*]})"
	out=$(apt-get update -q 2>&1) || rc=$?
	if grep -q 'NO_PUBKEY\|EXPKEYSIG' <<<"$out" && [[ ! -e $APT_DIR/newer-keyring.gpg ]]; then
		# Some suite is signed by a key the host's keyring lacks: the
		# suites that did verify can serve a newer keyring package.
		apt_log "apt: a suite is signed by a key the host keyring lacks; fetching a newer keyring"
		if apt_private_newer_keyring; then
			apt_private_keyring
			rc=0
			out=$(apt-get update -q 2>&1) || rc=$?
		fi
	fi
	# A security suite's index that fails to download (a mirror in mid-sync
	# for another architecture's lists, seen for bookworm-security's s390x
	# and ppc64el): the suite's own lists serve, so that is a warning.
	if ((rc != 0)) && grep -q '^E: Failed to fetch' <<<"$out" &&
		! grep '^E: Failed to fetch' <<<"$out" | grep -qv -- '-security/'; then
		rc=0
	fi
	if ((rc != 0)) || grep -q '^[WE]:' <<<"$out"; then
		printf '%s\n' "$out" | grep '^[WE]:' >&2 || true
		if ((rc != 0)) && [[ ! -e $stamp ]]; then
			apt_die "apt-get update of the private configuration failed (APT_CONFIG=$APT_CONFIG)"
		fi
		apt_log "apt: warning: update incomplete, using the lists as they are"
	fi
	apt-cache gencaches -q >/dev/null 2>&1 || true
	touch "$stamp"
}

# apt_suite_version PKG SUITE: the highest version of PKG in SUITE (and in
# SUITE-security, as a system tracking SUITE would install it).
apt_suite_version() {
	local v best=""
	while read -r v; do
		if [[ -z $best ]] || dpkg --compare-versions "$v" gt "$best"; then best=$v; fi
	done < <(apt-cache madison "$1" 2>/dev/null |
		awk -F' *[|] *' -v s="$2" '{ split($3, a, " "); if (a[2] == s "/main" || a[2] == s "-security/main") print $2 }')
	[[ -n $best ]] && echo "$best"
}

# apt_kernel_pkgs SUITE: prints "PKG VERSION" lines: the image package that
# linux-image-FLAVOUR (amd64, arm64, powerpc64le, s390x) of SUITE depends on, then what that image depends on
# with the same source version (sid's linux-binary-*, linux-modules-* and
# linux-base-*, which holds modules.builtin and modules.order).
apt_kernel_pkgs() {
	local meta img imgver dep
	local meta_pkg=linux-image-$ARCH_KFLAVOUR
	meta=$(apt_suite_version "$meta_pkg" "$1") || apt_die "no $meta_pkg in $1"
	dep=$(apt-cache show "$meta_pkg=$meta" |
		sed -n 's/^Depends: .*\(linux-image-[0-9][^ ,]*\) (= \([^)]*\)).*/\1 \2/p' | head -1)
	[[ -n $dep ]] || apt_die "$meta_pkg $meta ($1) names no image package"
	read -r img imgver <<<"$dep"
	echo "$img $imgver"
	apt-cache show "$img=$imgver" | sed -n '/^Depends:/{s/^Depends: //;s/, /\n/g;p;q}' |
		sed -n 's/^\(linux-\(binary\|modules\|base\)-[^ ]*\) (= \([^)]*\))$/\1 \3/p'
}

if [[ ${BASH_SOURCE[0]} == "$0" ]]; then
	CACHE=$(realpath -m "${RSVERBS_CACHE:-$HOME/.cache/rsverbs}")
	apt_private_setup
	case ${1:-} in
	update) apt_private_update force ;;
	env) echo "APT_CONFIG=$APT_CONFIG" ;;
	mirror) echo "$APT_MIRROR $APT_SECURITY_MIRROR" ;;
	kernel)
		apt_private_update
		apt_kernel_pkgs "${2:?suite}"
		;;
	*)
		sed -n 's/^#   //p' "${BASH_SOURCE[0]}" >&2
		exit 2
		;;
	esac
fi
