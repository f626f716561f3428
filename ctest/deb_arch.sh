#!/usr/bin/env bash
# The Debian packages of the other architectures (make check-deb-arch;
# docs/building.md), for arm64, ppc64el and s390x:
#   1. make deb ARCH=A cross-builds librsverbs1, librsverbs-dev,
#      rsverbs-tools and their -dbgsym packages on this host
#      (dpkg-buildpackage -aA, into build-A/deb); each says Architecture: A
#      and its library and command are A's ELF; dpkg-shlibdeps found A's
#      libraries, so librsverbs1 depends on libc6 alone (built without
#      std it links only the C library: Makefile, NATIVE_LIBS) and
#      rsverbs-tools on libc6 and libibverbs1; lintian --fail-on error,warning (the
#      flags of ctest/deb.sh) finds nothing;
#   2. in a throw-away overlay of the test bed's bookworm userland of A
#      (debootstrapped by testbed/vm.sh; the cached root is only ever the
#      overlay's lower layer, never written), run through qemu-user-static
#      and binfmt_misc: dpkg -i installs the five packages; dpkg -L lists
#      the library, the command, the header and rsverbs.pc where A's
#      multiarch directory puts them, and the ldconfig trigger puts the
#      library in ld.so.cache; LD_PRELOAD=librsverbs.so.1 (the bare SONAME)
#      loads it into /bin/true; a program compiled there with pkg-config
#      --libs rsverbs, and an rdma-core program under the preload, both bind
#      the five verbs to the packaged library (LD_DEBUG=bindings) and get
#      EINVAL for NULL arguments; /usr/bin/rsverbs runs; the installed
#      library is stripped and the dbgsym file has its build ID; dpkg
#      --purge leaves no file behind.
# An architecture whose userland is not cached gets step 1 only (and says
# so), unless RSVERBS_DEB_ARCH_PREPARE=1, which has testbed/vm.sh prepare
# the bookworm cell of that architecture first, as make matrix-arch does (no
# guest boots; a debootstrap under qemu-user takes minutes).
# RSVERBS_DEB_ARCHES picks the architectures (default: arm64 ppc64el s390x).
# Results in ctest/out/deb-arch (make check-deb-arch prints their total).
# Needs root (dpkg-buildpackage's fakeroot-free build, chroot, mounts).
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
# The overlays' mounts live in a mount namespace of this script's own, so
# that they go with it however it ends.
if [[ $EUID == 0 && -z ${RSVERBS_DEB_ARCH_NS:-} ]]; then
  RSVERBS_DEB_ARCH_NS=1 exec unshare --mount --propagation private bash "$PWD/ctest/deb_arch.sh" "$@"
fi
export RESULTS_DIR=${RESULTS_DIR:-$PWD/ctest/out/deb-arch}
SUITE=deb_arch
# shellcheck source=ctest/lib.sh
source ctest/lib.sh
[[ $EUID == 0 ]] || { fail "needs root (chroot, mounts)"; finish; exit; }
CACHE=$(realpath -m "${RSVERBS_CACHE:-$HOME/.cache/rsverbs}")
ARCHES=${RSVERBS_DEB_ARCHES:-arm64 ppc64el s390x}
t0=$SECONDS

# userland_root A: the cached bookworm userland of A (testbed/vm.sh's memo
# names its key), or nothing.
userland_root() {
  local key d
  read -r _ key 2>/dev/null <"$CACHE/userland/bookworm-$1.key" || return 0
  d=$CACHE/userland/bookworm-$1-$key/root
  [[ -x $d/usr/bin/dpkg ]] && echo "$d"
}
# binfmt A: qemu-user-static's binfmt_misc entry for A is enabled, registered
# from the package's own entry when missing (as testbed/vm.sh arch_binfmt).
binfmt() {
  local e=/proc/sys/fs/binfmt_misc/$ARCH_QEMU_USER conf=/usr/lib/binfmt.d/$ARCH_QEMU_USER.conf
  [[ -e /proc/sys/fs/binfmt_misc/register ]] || mount -t binfmt_misc binfmt_misc /proc/sys/fs/binfmt_misc || return 1
  [[ -e $e ]] || { [[ -r $conf ]] && cat "$conf" >/proc/sys/fs/binfmt_misc/register; } || return 1
  grep -qx enabled "$e" && grep -q '^flags: .*F' "$e"
}
# in_root CMD...: CMD in the overlay's root, with a clean environment.
in_root() { chroot "$M" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LANG=C.UTF-8 "$@"; }
# snapshot: every path of the root outside the virtual and scratch trees
# and the dpkg and ldconfig bookkeeping (which records that the packages
# came and went).
snapshot() {
  (cd "$M" && find . -xdev \( -path ./proc -o -path ./dev -o -path ./sys -o -path ./tmp -o -path ./run \
    -o -path ./root -o -path ./var/lib/dpkg -o -path ./var/cache -o -path ./var/log -o -path ./etc/ld.so.cache \) \
    -prune -o -print | LC_ALL=C sort)
}

for a in $ARCHES; do
  # shellcheck source=testbed/arch.sh
  RSVERBS_ARCH=$a . testbed/arch.sh
  a=$ARCH_DEB T=$ARCH_RUST-linux-gnu
  if [[ $ARCH_FOREIGN == 0 ]]; then fail "$a: is this machine's architecture (ctest/deb.sh covers it)"; continue; fi
  deb=$PWD/$ARCH_BUILD/deb
  log=$RESULTS_DIR/deb-$a.log

  # 1. The cross build, its packages and lintian.
  t=$SECONDS
  if make deb ARCH="$a" BUILD="$PWD/$ARCH_BUILD" LINTIAN= >"$log" 2>&1; then
    pass "$a: make deb ARCH=$a (dpkg-buildpackage -a$a): $((SECONDS - t)) s"
  else
    tail -n 20 "$log" >&2
    fail "$a: make deb ARCH=$a failed (log: $log)"
    continue
  fi
  check "$a: dpkg-buildpackage ran without a warning" bash -c "! grep -Eiq '(^|: )warning' '$log'"
  check "$a: dpkg-gensymbols -c4: the symbols file is exact" bash -c "grep -q 'dpkg-gensymbols.*-c4' '$log' && ! grep -q 'dpkg-gensymbols: warning' '$log'"
  for p in librsverbs1 librsverbs-dev librsverbs1-dbgsym rsverbs-tools rsverbs-tools-dbgsym; do
    f=$(echo "$deb/${p}_"*"_$a.deb")
    check "$a: $p built, Architecture: $a${f:+ ($(stat -c %s "$f" 2>/dev/null) bytes)}" \
      bash -c "[ -f '$f' ] && [ \"\$(dpkg-deb -f '$f' Architecture)\" = '$a' ]"
  done
  x=$(mktemp -d)
  dpkg-deb -x "$deb/librsverbs1_"*"_$a.deb" "$x"
  dpkg-deb -x "$deb/rsverbs-tools_"*"_$a.deb" "$x"
  for f in usr/lib/$T/librsverbs.so.1.0.0 usr/bin/rsverbs; do
    check "$a: /$f is ${ARCH_ELF%|*}, ${ARCH_ELF#*|}" \
      elf_is "$x/$f" "${ARCH_ELF%|*}" "${ARCH_ELF#*|}"
  done
  rm -rf "$x"
  dep_lib=$(dpkg-deb -f "$deb/librsverbs1_"*"_$a.deb" Depends)
  dep_tool=$(dpkg-deb -f "$deb/rsverbs-tools_"*"_$a.deb" Depends)
  check "$a: librsverbs1 Depends: $dep_lib (libc6 of $a alone, found by dpkg-shlibdeps)" \
    depends_on_libc_alone "$dep_lib"
  check "$a: rsverbs-tools Depends: $dep_tool" \
    bash -c "grep -q 'libc6 (>= ' <<<'$dep_tool' && grep -q 'libibverbs1 (>= ' <<<'$dep_tool'"
  lintian --fail-on error,warning "$deb"/*.changes >"$RESULTS_DIR/lintian-$a.txt" 2>&1
  lrc=$?
  grep -v '^running with root' "$RESULTS_DIR/lintian-$a.txt"
  check "$a: lintian: no error or warning" bash -c "[ $lrc = 0 ] && ! grep -Eq '^[EW]:' '$RESULTS_DIR/lintian-$a.txt'"

  # 2. Installed and used in A's own userland, through qemu-user.
  root=$(userland_root "$a")
  if [[ -z $root && ${RSVERBS_DEB_ARCH_PREPARE:-0} == 1 ]]; then
    root=$(RSVERBS_ARCH=$a testbed/vm.sh root 2>>"$log" | tail -n 1)
  fi
  if [[ -z $root || ! -d $root ]]; then
    echo "deb_arch: $a: skip the install: no cached bookworm userland of $a (make matrix-arch, or RSVERBS_DEB_ARCH_PREPARE=1)"
    continue
  fi
  check "$a: binfmt_misc runs $a's programs ($ARCH_QEMU_USER, flag F: also in a chroot)" binfmt || continue
  t=$SECONDS
  w=$(mktemp -d /var/tmp/rsverbs-deb-arch.XXXXXX)
  mkdir -p "$w/upper" "$w/work" "$w/merged"
  M=$w/merged
  if ! mount -t overlay overlay -o "lowerdir=$root,upperdir=$w/upper,workdir=$w/work" "$M" ||
    ! mount -t proc proc "$M/proc" || ! mount --rbind /dev "$M/dev"; then
    fail "$a: overlay of $root"
    umount -R "$M" 2>/dev/null
    rm -rf "$w"
    continue
  fi
  mkdir -p "$M/tmp/debs"
  cp "$deb"/*.deb "$M/tmp/debs/"
  cp ctest/null_args.c "$M/tmp/"
  L=/usr/lib/$T/librsverbs.so.1
  LRE="(/usr)?/lib/$T/librsverbs.so.1"
  snapshot >"$w/before"
  check "$a: dpkg -i of the five packages in bookworm's $a userland ($root)" \
    bash -c "chroot '$M' /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin sh -c 'dpkg -i /tmp/debs/*.deb' >'$w/dpkg.log' 2>&1 || { cat '$w/dpkg.log'; exit 1; }"
  in_root dpkg -L librsverbs1 librsverbs-dev rsverbs-tools >"$w/list" 2>&1
  for f in "$L.0.0" "$L" "/usr/lib/$T/librsverbs.so" "/usr/lib/$T/pkgconfig/rsverbs.pc" /usr/include/rsverbs.h /usr/bin/rsverbs; do
    check "$a: dpkg -L lists $f, and it is there" bash -c "grep -qx '$f' '$w/list' && [ -e '$M$f' ]"
  done
  check "$a: $L -> librsverbs.so.1.0.0, in ld.so.cache (ldconfig trigger)" \
    bash -c "[ \"\$(readlink '$M$L')\" = librsverbs.so.1.0.0 ] && chroot '$M' ldconfig -p | grep -Eq 'librsverbs.so.1 .* => $LRE\$'"
  check "$a: LD_PRELOAD=librsverbs.so.1 loads the packaged library into /bin/true" \
    bash -c "chroot '$M' /usr/bin/env -i LD_PRELOAD=librsverbs.so.1 LD_DEBUG=files /bin/true 2>&1 | grep -Eq 'calling init: $LRE\$'"
  check "$a: pkg-config: libdir /usr/lib/$T, -lrsverbs before -libverbs" \
    bash -c "[ \"\$(chroot '$M' pkg-config --variable=libdir rsverbs)\" = /usr/lib/$T ] && chroot '$M' pkg-config --libs rsverbs | grep -Eq -- '-lrsverbs .*-libverbs'"
  # shellcheck disable=SC2016 # expanded by the root's shell
  in_root sh -c 'cc -Wall -o /tmp/relinked /tmp/null_args.c $(pkg-config --cflags --libs rsverbs) -ldl &&
    cc -Wall -o /tmp/plain /tmp/null_args.c -libverbs -ldl' >"$w/cc.log" 2>&1
  check "$a: null_args.c compiled there, relinked with pkg-config --libs rsverbs and plain -libverbs" \
    bash -c "[ -x '$M/tmp/relinked' ] && [ -x '$M/tmp/plain' ] || { cat '$w/cc.log'; exit 1; }"
  in_root sh -c 'LD_DEBUG=bindings /tmp/relinked >/tmp/relinked.out 2>/tmp/relinked.bindings;
    LD_PRELOAD=librsverbs.so.1 LD_DEBUG=bindings /tmp/plain >/tmp/preload.out 2>/tmp/preload.bindings'
  for mode in relinked preload; do
    check "$a: $mode: NULL args give EINVAL, no crash" grep -q "null_args: ok" "$M/tmp/$mode.out"
    n=0
    for sym in "ibv_attach_mcast. \[IBVERBS_1.1\]" "ibv_detach_mcast. \[IBVERBS_1.1\]" "_ibv_query_gid_ex. \[IBVERBS_1.11\]" \
      "ibv_query_gid. \[IBVERBS_1.1\]" "_ibv_query_gid_table. \[IBVERBS_1.11\]"; do
      grep -Eq "to $LRE \[0\]: normal symbol .$sym" "$M/tmp/$mode.bindings" && n=$((n + 1))
    done
    check "$a: $mode: all five verbs bound to the packaged $L ($n of 5)" [ "$n" = 5 ]
  done
  check "$a: /usr/bin/rsverbs runs (--version, --help)" \
    bash -c "chroot '$M' /usr/bin/rsverbs --version | grep -q '^rsverbs ' && chroot '$M' /usr/bin/rsverbs --help | grep -q 'rsverbs doctor'"
  check "$a: the installed library is stripped (no .symtab, no .debug_info)" \
    bash -c "readelf -S -W '$M$L.0.0' >'$w/sections' && ! grep -Eq '\.symtab|\.debug_info' '$w/sections'"
  id=$(readelf -n "$M$L.0.0" | sed -n 's/.*Build ID: //p')
  check "$a: librsverbs1-dbgsym: /usr/lib/debug/.build-id/${id:0:2}/${id:2}.debug holds its debug info" \
    bash -c "[ -n '$id' ] && readelf -S -W '$M/usr/lib/debug/.build-id/${id:0:2}/${id:2}.debug' | grep -q debug_info"
  snapshot >"$w/installed"
  check "$a: installed: the snapshot sees the packaged files (so it would see leftovers)" \
    bash -c "comm -13 '$w/before' '$w/installed' | grep -qx '.$L.0.0'"
  check "$a: dpkg --purge of the five packages" \
    bash -c "chroot '$M' /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin dpkg --purge rsverbs-tools-dbgsym rsverbs-tools librsverbs1-dbgsym librsverbs-dev librsverbs1 >'$w/purge.log' 2>&1 || { cat '$w/purge.log'; exit 1; }"
  snapshot >"$w/after"
  left=$(comm -13 "$w/before" "$w/after")
  check "$a: purged: no file or directory left behind${left:+: $left}" [ -z "$left" ]
  umount -R "$M"
  rm -rf "$w"
  pass "$a: installed, used and purged in $a's userland under qemu-user: $((SECONDS - t)) s"
done
echo "deb_arch: wall time $((SECONDS - t0)) s; packages in build-ARCH/deb, lintian's output in $RESULTS_DIR"
finish
