# shellcheck shell=bash
# Sourced by ctest/build.sh and bench/build.sh: compile C programs in and
# for a test-bed userland (testbed/vm.sh root), with its gcc, headers and
# rdma-core, by chroot into its root; another architecture's root runs its
# gcc under qemu-user-static (binfmt_misc, testbed/arch.sh).
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
