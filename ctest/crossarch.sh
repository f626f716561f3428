#!/usr/bin/env bash
# The other architectures, on this host (docs/architectures.md):
#   - the library's unit tests on aarch64, powerpc64le and s390x (big-endian,
#     and all three with an unsigned char) under qemu-user-static: every
#     encoder and parser on each target (RSVERBS_UNIT_ARCHES narrows it);
#   - librsverbs.so.1 cross-built for arm64, ppc64el and s390x (make lib
#     ARCH=arm64, into build-arm64/): the same exports and version nodes as
#     this host's, nothing imported above the glibc floor, the right ELF
#     machine and order, SONAME librsverbs.so.1; linked by GNU ld too
#     (LINKER=gnu, the cross gcc: what debian/rules uses), with the same
#     exports and version nodes;
#   - each architecture's stripped librsverbs.so.1 (this host's too) against
#     Debian 12's libibverbs.so.1 of that architecture
#     (bench/libibverbs-size.tsv): printed, and held within the allowance
#     below;
#   - the struct offsets rsverbs reads (ctest/abi_layout.c) and the prototypes
#     (ctest/proto.c), compiled by each target's own gcc against verbs.h.
# The real kernels of those architectures: make matrix-arch (ctest/matrix.sh).
# RSVERBS_CROSS_ARCHES overrides the list (Debian's names or the toolchain's).
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
source ctest/lib.sh
ARCHES=${RSVERBS_CROSS_ARCHES:-arm64 ppc64el s390x}
O=ctest/out/crossarch; mkdir -p "$O"

# The host's library, which every cross build must match.
HOSTLIB=${RSVERBS_BUILD:-$PWD/build}/librsverbs.so.1
floor=${RSVERBS_GLIBC_FLOOR:-2.17}

# size_check ARCH_DEB STRIP LIB: LIB stripped as bench/sizes.sh strips it
# against libibverbs.so.1 of libibverbs1 44.0-2 (Debian 12) of that
# architecture, stripped the same way: the checked-in
# bench/libibverbs-size.tsv, which bench/libibverbs-size.sh makes from the
# .debs (and --check verifies), so that no network is needed here.
# The goal is no larger (docs/building.md "Against libibverbs"). The fabric
# join engine's rework (one event model, the fd's identity at every use,
# the credential-change replacement, the unlocked wait) took amd64, arm64
# and s390x over it by 0.6 to 4.6 % (docs/building.md "Over the bar"), and
# no cut found so far reaches it without taking from the engine or the
# hints; until one does, the check holds the library within
# SIZE_ALLOWANCE_PCT of the bar, so that any further growth fails, and
# prints how far over it is.
# A release goal, checked by CI (RSVERBS_CHECK_FULL=1) and when crossarch
# runs alone; a newcomer's make check measures and prints the sizes without
# failing on them (RSVERBS_SIZE_BAR=0, ctest/check.sh).
SIZE_ALLOWANCE_PCT=5
# at_most BAR SIZE: both known, SIZE <= BAR.
at_most() { [ -n "$1" ] && [ -n "$2" ] && [ "$2" -le "$1" ]; }
size_check() {
  local bar size ceiling over s=$O/$1.stripped
  bar=$(awk -F'\t' -v a="$1" '$1 == a { print $5 }' bench/libibverbs-size.tsv)
  size=$("$2" -o "$s" "$3" && stat -c %s "$s") || size=
  if [ "${RSVERBS_SIZE_BAR:-1}" = 0 ]; then
    check "$1: librsverbs.so.1 strips (${size:-?} bytes; libibverbs1 44.0-2's bar, checked by CI: ${bar:-?})" test -n "$size"
    return
  fi
  ceiling=${bar:+$((bar + bar * SIZE_ALLOWANCE_PCT / 100))}
  over=under
  if at_most "$bar" "$size"; then
    over="$((bar - size)) bytes under it"
  elif [ -n "$size" ] && [ -n "$bar" ]; then
    over="$((size - bar)) bytes over it, $(awk -v d="$((size - bar))" -v b="$bar" 'BEGIN { printf "%.1f", 100 * d / b }') %"
  fi
  check "$1: stripped librsverbs.so.1 (${size:-?} bytes) within ${SIZE_ALLOWANCE_PCT} % of libibverbs1 44.0-2's libibverbs.so.1 (${bar:-?}: $over; the ceiling ${ceiling:-?})" \
    at_most "$ceiling" "$size"
}
size_check "$(dpkg --print-architecture)" strip "$HOSTLIB"

# verbs.h and its siblings are architecture-independent; the target's libc
# and kernel headers come from its cross toolchain: a directory holding
# only infiniband/, never the host's /usr/include (testbed/README.md).
inc=$O/include
mkdir -p "$inc"
ln -sfn /usr/include/infiniband "$inc/infiniband"

for a in $ARCHES; do
  # shellcheck source=testbed/arch.sh
  RSVERBS_ARCH=$a . testbed/arch.sh
  a=$ARCH_DEB
  gcc=$ARCH_RUST-linux-gnu-gcc
  tools/deps.sh --cross "$a" || { fail "$a: cannot install the cross toolchain (tools/deps.sh --cross $a)"; continue; }
  # The Makefile's own directory for ARCH, which testbed/arch.sh names
  # too; BUILD is given all the same, so that a BUILD on make check's
  # command line (passed down in MAKEFLAGS) cannot move it.
  lib=$PWD/$ARCH_BUILD/librsverbs.so.1
  if make -s lib ARCH="$a" BUILD="$PWD/$ARCH_BUILD" > "$O/$a.build.log" 2>&1; then
    check "$a: librsverbs.so.1 is ${ARCH_ELF%|*}, ${ARCH_ELF#*|} ($ARCH_BUILD/)" elf_is "$lib" "${ARCH_ELF%|*}" "${ARCH_ELF#*|}"
    check "$a: SONAME is librsverbs.so.1" sh -c "readelf -d '$lib' | grep -q 'Library soname: \[librsverbs.so.1\]'"
    size_check "$a" "$ARCH_RUST-linux-gnu-strip" "$lib"
    check "$a: the same exported symbols as the host's library" [ "$(exports "$lib")" = "$(exports "$HOSTLIB")" ]
    check "$a: the same version definitions as the host's library" [ "$(verdefs "$lib")" = "$(verdefs "$HOSTLIB")" ]
    newest=$(objdump -T "$lib" | grep -o 'GLIBC_[0-9][0-9.]*' | sed 's/GLIBC_//' | sort -uV | tail -1)
    # The Makefile's ZIG_GLIBC: zig knows powerpc64le's glibc from 2.19 on,
    # so the floor there is 2.19 (docs/architectures.md).
    f=$floor
    [ "$a" != ppc64el ] || f=2.19
    check "$a: imports no glibc symbol version above $f (newest: GLIBC_$newest)" \
      [ "$(printf '%s\n' "$newest" "$f" | sort -V | tail -1)" = "$f" ]
    # The same staticlib linked by the cross gcc and GNU ld: one more link.
    twin=$PWD/$ARCH_BUILD/twin-gnu
    if make -s lib ARCH="$a" BUILD="$twin" LINKER=gnu >> "$O/$a.build.log" 2>&1; then
      check "$a: LINKER=gnu ($gcc): ${ARCH_ELF%|*}, the same exports and version definitions as the host's" \
        same_abi "$twin/librsverbs.so.1" "$HOSTLIB" "${ARCH_ELF%|*}" "${ARCH_ELF#*|}"
    else
      fail "$a: make lib ARCH=$a LINKER=gnu failed (log: $O/$a.build.log)"
    fi
  else
    tail -5 "$O/$a.build.log" >&2
    fail "$a: make lib ARCH=$a failed (log: $O/$a.build.log)"
  fi
  check "$a: struct layout vs verbs.h, by $gcc" \
    "$gcc" -std=c11 -Wall -Werror -I"$inc" -c ctest/abi_layout.c -o "$O/$a.abi_layout.o"
  check "$a: C prototypes identical to verbs.h, by $gcc" \
    "$gcc" -std=c11 -Wall -Werror -I"$inc" -Iinclude -c ctest/proto.c -o "$O/$a.proto.o"
done

# The unit tests on each architecture under qemu-user-static (cargo's
# per-target runner): s390x is big-endian, and all three have an unsigned
# char. Tests that ask the kernel something are left out: qemu-user hands
# their syscalls to this x86_64 kernel, which answers an unknown ioctl
# with ENOSYS and prints /proc/net/igmp in its own byte order. They run in
# each architecture's guest instead (make matrix-arch).
# Also left out: the trace file's tests (as root the sink walks the path
# from "/", and qemu-user's -L prefix answers "/" with the sysroot, which
# has no /tmp), and the one that re-runs the test binary as a child (the
# child is exec'd without qemu-user). The host runs all of them.
# And the rdma_cm engine's logic tests, whose stand-in fd is marked as the
# library marks its rdma_cm fd, F_SETSIG 63: qemu-user refuses signals 63
# and 64 there (EINVAL; its own signal mapping keeps the top ones), where
# every kernel accepts them (seen 2026-11-28: qemu-s390x-static 7.2 on a
# pipe, 60-62 ok, 63-64 EINVAL; the host's kernel 63 and 64 ok).
KERNEL_TESTS=(ipjoin::sock::tests:: trace::facts::tests::igmp_membership_per_device
  ipjoin::cm::tests::a_full_memberships_reset_read_during_a_sendonly_join_is_attributed_and_left
  ipjoin::cm::tests::a_late_sendonly_refusal_never_fails_a_later_full_join
  ipjoin::cm::tests::an_fd_replaced_at_its_number_during_the_wait_is_not_used
  ipjoin::cm::tests::eacces_closes_the_fd_and_joins_again_on_a_new_one
  ipjoin::cm::tests::id_events_with_a_colliding_id_are_the_ids
  ipjoin::member::tests::a_lost_explicit_membership_joins_again_at_its_next_join
  ipjoin::tests::a_join_waiting_for_its_answer_does_not_hold_the_lock
  trace::sink::tests:: trace::tests::configure_values
  safe::tests::a_failed_detach_on_drop_survives_a_closed_stderr
  uverbs::route::tests::discovery_on_a_non_uverbs_fd_reports_the_kernel_errno
  uverbs::route::tests::enotty_from_a_non_uverbs_fd_is_not_cached)
for a in ${RSVERBS_UNIT_ARCHES:-$ARCHES}; do
  # shellcheck source=testbed/arch.sh
  RSVERBS_ARCH=$a . testbed/arch.sh
  a=$ARCH_DEB target=$ARCH_RUST-unknown-linux-gnu
  T=${target^^} T=${T//-/_}
  export "CARGO_TARGET_${T}_LINKER=$ARCH_RUST-linux-gnu-gcc"
  export "CARGO_TARGET_${T}_RUNNER=$ARCH_QEMU_USER-static -L /usr/$ARCH_RUST-linux-gnu"
  # No warning on this target either (c_char is unsigned here: a cast that
  # is needed on x86_64 is a clippy warning on these).
  check "$a: cargo clippy --lib without warnings (the C library's build and the std one)" sh -c \
    "cargo clippy --release --locked --lib --target $target -- -D warnings >$O/$a.clippy 2>&1 &&
     cargo clippy --release --locked --lib --target $target --no-default-features -- --cfg rsverbs_clib --cfg rsverbs_symver -D warnings >>$O/$a.clippy 2>&1"
  out=$O/$a.unit
  skips=()
  for t in "${KERNEL_TESTS[@]}"; do skips+=(--skip "$t"); done
  cargo test --release --locked --lib --target "$target" -- "${skips[@]}" > "$out" 2>&1
  list=$(cargo test --release --locked --lib --target "$target" -- --list 2>/dev/null)
  # A skip that names no test any more would hide nothing: fail on it.
  for t in "${KERNEL_TESTS[@]}"; do
    grep -q "^$t" <<< "$list" || fail "$a unit: the skipped test $t no longer exists"
  done
  n=0
  while read -r _ name _ res; do
    n=$((n + 1))
    case $res in ok) pass "$a unit: $name" ;; ignored*) ;; *) fail "$a unit: $name ($res)" ;; esac
  done < <(grep -E '^test .* \.\.\. ' "$out")
  check "$a unit: cargo test finished cleanly ($n tests, ${#KERNEL_TESTS[@]} left out under qemu-user)" \
    grep -q '^test result: ok' "$out"
  grep -E '^test result|panicked' "$out"
done
finish
