# shellcheck shell=bash
# Sourced by ctest/build.sh and bench/build.sh: compile C programs in and
# for a test-bed userland (testbed/vm.sh root), with its gcc, headers and
# rdma-core, by chroot into its root; another architecture's root runs its
# gcc under qemu-user-static (binfmt_misc, testbed/arch.sh), unless this
# host's cross gcc is the same release (root_cross_cc).
#
# root_scratch ROOT LIBDIR: a scratch directory inside ROOT's /tmp (the
# guest never sees it: it mounts a tmpfs there) with include/rsverbs.h,
# lib/librsverbs.so.1 (from LIBDIR), its link, and lib/pkgconfig/rsverbs.pc
# naming them; sets SCRATCH_REL (its path in the root) and SCRATCH (on this
# host). Removed when the calling script exits.
root_scratch() {
	local root=$1 libdir=$2
	SCRATCH_REL=/tmp/rsverbs-build.$$
	SCRATCH=$root$SCRATCH_REL
	# shellcheck disable=SC2064 # the path now, not at exit
	trap "rm -rf '$SCRATCH'" EXIT
	mkdir -p "$SCRATCH"/{include,lib/pkgconfig,bin}
	cp include/rsverbs.h "$SCRATCH/include/"
	cp "$libdir/librsverbs.so.1" "$SCRATCH/lib/"
	ln -s librsverbs.so.1 "$SCRATCH/lib/librsverbs.so"
	sed -e "s|@PREFIX@|$SCRATCH_REL|" -e "s|@LIBDIR@|$SCRATCH_REL/lib|" -e "s|@INCLUDEDIR@|$SCRATCH_REL/include|" \
		-e "s|@VERSION@|$(sed -n 's/^VERSION *:= *//p' Makefile)|" pkgconfig/rsverbs.pc.in >"$SCRATCH/lib/pkgconfig/rsverbs.pc"
}

# root_run ROOT SCRIPT: runs SCRIPT (a path inside ROOT) with bash in ROOT,
# with a clean environment; its status.
root_run() {
	chroot "$1" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/tmp LANG=C.UTF-8 /bin/bash "$2"
}

# root_describe ROOT: "gcc X, rdma-core Y", what compiled there.
root_describe() {
	# shellcheck disable=SC2016 # dpkg-query's format
	echo "gcc $(chroot "$1" gcc -dumpfullversion), rdma-core $(chroot "$1" dpkg-query -W -f='${Version}' libibverbs-dev)"
}

# root_cross_cc ROOT (after root_scratch): sets ROOT_CC to the command that compiles for ROOT on
# this host, when ROOT is another architecture's userland and the host's
# cross gcc (gcc-ARCH_RUST-linux-gnu, testbed/arch.sh) is the very release
# of ROOT's own gcc: it then reads ROOT's headers and links ROOT's
# libraries only (-isystem and -L ahead of the cross toolchain's own
# directories, -B for crt1.o), and only its own headers and libgcc are the
# compiler's, which are that release's. Natively, a cross gcc is some 20
# times faster than the same gcc under qemu-user. Empty otherwise (another
# release, such as sid's: compile in ROOT with root_run). ROOT_PC_LIBDIR:
# ROOT's pkg-config directories, for PKG_CONFIG_LIBDIR (with
# PKG_CONFIG_SYSROOT_DIR=ROOT), so that rsverbs.pc's Requires finds ROOT's
# libibverbs.pc, not this host's.
root_cross_cc() {
	local root=$1 t=$ARCH_RUST-linux-gnu
	[ "${ROOT_CC_OF:-}" != "$root" ] || return 0 # asked already
	ROOT_CC_OF=$root ROOT_CC=()
	ROOT_PC_LIBDIR=$root/usr/lib/$t/pkgconfig:$root/usr/lib/pkgconfig:$root/usr/share/pkgconfig
	((ARCH_FOREIGN)) && command -v "$t-gcc" >/dev/null || return 0
	[ "$("$t-gcc" -dumpfullversion)" = "$(chroot "$root" gcc -dumpfullversion 2>/dev/null)" ] || return 0
	# ROOT's libc.so is a linker script of absolute paths, which ld opens
	# under --sysroot; one of them may be an absolute symlink in ROOT
	# (ppc64el's /lib64/ld64.so.2 -> /lib/powerpc64le-linux-gnu/ld64.so.2)
	# that this host would resolve outside ROOT. A copy of the script in
	# SCRATCH (root_scratch) names each file by its real path in ROOT; ld
	# prefixes those with the sysroot, since SCRATCH is inside ROOT.
	local script=$root/usr/lib/$t/libc.so path real
	mkdir -p "$SCRATCH/cross"
	cp "$script" "$SCRATCH/cross/libc.so"
	while read -r path; do
		real=$(chroot "$root" realpath -e -- "$path") || return 0
		sed -i "s|[(] *$path |( $real |; s| $path | $real |" "$SCRATCH/cross/libc.so"
	done < <(grep '^GROUP' "$script" | grep -o '/[^ )]*')
	ROOT_CC=("$t-gcc" --sysroot="$root" -isystem "$root/usr/include/$t" -isystem "$root/usr/include"
		-B"$root/usr/lib/$t/" -L"$SCRATCH/cross" -L"$root/usr/lib/$t")
}

# root_cc_lines ROOT: the lines a build script for root_build starts with
# after its cd: CC=(...), the compiler that root_build runs it with (its
# commands call "${CC[@]}"), and when that is the host's cross gcc,
# pkg-config's sysroot and directories.
root_cc_lines() {
	root_cross_cc "$1"
	if ((${#ROOT_CC[@]})); then
		printf 'CC=(%s)\nexport PKG_CONFIG_SYSROOT_DIR=%q PKG_CONFIG_LIBDIR=%q\n' \
			"$(printf '%q ' "${ROOT_CC[@]}")" "$1" "$ROOT_PC_LIBDIR"
	else
		echo 'CC=(cc)'
	fi
}

# root_build ROOT: runs $SCRATCH/build.sh (made with root_cc_lines) on this
# host when root_cross_cc found the same gcc release, else in ROOT; its
# status. ROOT_BUILT says where and how long, for the caller's report.
# shellcheck disable=SC2034 # ROOT_BUILT is the caller's
root_build() {
	local t=$SECONDS rc=0
	root_cross_cc "$1"
	if ((${#ROOT_CC[@]})); then
		bash "$SCRATCH/build.sh" || rc=$?
		ROOT_BUILT="compiled on this host by ${ROOT_CC[0]} in $((SECONDS - t)) s"
	else
		root_run "$1" "$SCRATCH_REL/build.sh" || rc=$?
		ROOT_BUILT="compiled in the root in $((SECONDS - t)) s"
	fi
	return $rc
}
