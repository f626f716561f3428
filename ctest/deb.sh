#!/usr/bin/env bash
# The Debian packages, built and used in clean Debian 12 roots (the cached
# root of ctest/freshroot.sh, each time in a throw-away overlay, offline):
#   1. make deb builds librsverbs1, librsverbs-dev, librsverbs1-dbgsym and
#      rsverbs-tools (the rsverbs command and rsverbs(1))
#      with Debian's cargo-web and GNU ld (build dependencies checked, no -d);
#      lintian (the host's) finds nothing at its default level;
#   2. in a second clean root, apt installs them; a program relinked with
#      pkg-config --libs rsverbs (no rpath) and an rdma-core program under
#      LD_PRELOAD=librsverbs.so.1 (the bare SONAME) both bind the five verbs
#      to the packaged library (LD_DEBUG=bindings); the packaged library is
#      stripped and its debug file has its build ID; apt purge leaves no file
#      behind.
# The packages and lintian's output stay in ctest/out/deb/.  Needs root.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
# shellcheck source=ctest/freshroot.sh
source ctest/freshroot.sh
# shellcheck source=ctest/lib.sh
source ctest/lib.sh
t0=$SECONDS
[[ $EUID == 0 ]] || { fail "needs root (chroot, namespaces)"; finish; exit; }
command -v debootstrap >/dev/null || { tools/apt-get.sh update -qq && DEBIAN_FRONTEND=noninteractive tools/apt-get.sh install -y -qq debootstrap >/dev/null; }
make -s deps-deb # lintian, for the host-side lintian run
( freshroot_prepare >/dev/null ) || { fail "clean bookworm root (ctest/freshroot.sh)"; finish; exit; }
freshroot_prepare
( freshroot_vendor ) || { fail "cargo vendor on the host"; finish; exit; }
freshroot_vendor
out=$RESULTS_DIR/deb
rm -rf "$out"
mkdir -p "$out"

# 1. Build, in a clean root, with the Debian toolchain.
work=$FR_DIR/deb-build.$$
rm -rf "$work"
t=$SECONDS
freshroot_run "$work" '
cd /src
make deb LINTIAN= >/out/build.log 2>&1 || { tail -n 40 /out/build.log; exit 1; }
cp build/deb/*.deb build/deb/*.changes build/deb/*.buildinfo /out/
' "$out:/out"
rc=$?
rm -rf "$work"
check "make deb in a clean bookworm root (cargo-web, GNU ld, build dependencies checked): $((SECONDS - t)) s" [ "$rc" = 0 ]
check "build dependencies satisfied by packages (no dpkg-buildpackage -d)" bash -c "! grep -q '^deb: building with' '$out/build.log'"
check "dpkg-gensymbols -c4: the symbols file is exact" bash -c "grep -q 'dpkg-gensymbols.*-c4' '$out/build.log' && ! grep -q 'dpkg-gensymbols: warning' '$out/build.log'"
for p in librsverbs1 librsverbs-dev librsverbs1-dbgsym rsverbs-tools; do
  f=$(find "$out" -maxdepth 1 -name "${p}_*.deb" | head -1)
  check "package $p built${f:+ ($(stat -c %s "$f") bytes)}" test -n "$f"
done
dep=$(dpkg-deb -f "$(find "$out" -maxdepth 1 -name 'librsverbs1_*.deb' | head -1)" Depends 2>/dev/null)
check "librsverbs1 Depends: $dep (libc6 alone)" depends_on_libc_alone "$dep"
if command -v lintian >/dev/null; then
  lintian --fail-on error,warning "$out"/*.changes >"$out/lintian.txt" 2>&1
  lrc=$?
  lintian -I --pedantic --show-overrides "$out"/*.changes >"$out/lintian-all.txt" 2>&1
  grep -v '^running with root' "$out/lintian.txt"
  check "lintian: no error or warning (overrides explained in debian/*.lintian-overrides)" \
    bash -c "[ $lrc = 0 ] && ! grep -Eq '^[EW]:' '$out/lintian.txt'"
else
  fail "lintian is not installed (make deps-deb)"
fi

# 2. Install, use, purge, in another clean root.
work=$FR_DIR/deb-install.$$
rm -rf "$work"
t=$SECONDS
# shellcheck disable=SC2016 # run by bash in the root
freshroot_run "$work" '
cd /src
SUITE=deb-install RESULTS_DIR=/results
source ctest/lib.sh
M=/usr/lib/x86_64-linux-gnu
L=$M/librsverbs.so.1
# ld.so.cache and ld.so name it by /lib (merged /usr: /lib -> usr/lib, and
# /lib/x86_64-linux-gnu comes first in ld.so.conf.d).
LRE="(/usr)?/lib/x86_64-linux-gnu/librsverbs.so.1"
# Every path outside the virtual and scratch trees, and dpkg/apt/ldconfig
# bookkeeping (which records that the packages came and went).
snapshot() {
  find / -xdev \( -path /proc -o -path /dev -o -path /sys -o -path /tmp -o -path /run -o -path /src \
    -o -path /debs -o -path /results -o -path /root -o -path /var/lib/dpkg -o -path /var/lib/apt \
    -o -path /var/cache -o -path /var/log -o -path /etc/ld.so.cache \) -prune -o -print | LC_ALL=C sort
}
snapshot >/tmp/before
check "apt-get install of the four packages (offline)" sh -c "apt-get install -y -q /debs/librsverbs1_*.deb /debs/librsverbs-dev_*.deb /debs/librsverbs1-dbgsym_*.deb /debs/rsverbs-tools_*.deb >/tmp/apt.log 2>&1 || { cat /tmp/apt.log; exit 1; }"
check "rsverbs-tools: /usr/bin/rsverbs runs (--version, --help), exit 2 on bad usage" sh -c "/usr/bin/rsverbs --version | grep -q \"^rsverbs \" && /usr/bin/rsverbs --help | grep -q \"rsverbs doctor\" && { /usr/bin/rsverbs doctor 10.0.0.1 2>/dev/null; [ \$? = 2 ]; }"
check "rsverbs-tools: rsverbs(1) renders without warnings" sh -c "[ -f /usr/share/man/man1/rsverbs.1.gz ] && [ -z \"\$(zcat /usr/share/man/man1/rsverbs.1.gz | groff -ww -z -man 2>&1)\" ]"
check "librsverbs1: $L -> librsverbs.so.1.0.0, in ld.so.cache (ldconfig trigger)" sh -c "[ \"\$(readlink $L)\" = librsverbs.so.1.0.0 ] && ldconfig -p | grep -Eq \"librsverbs.so.1 \\(libc6,x86-64\\) => $LRE\$\""
check "librsverbs1: the installed library is stripped (no .symtab, no .debug_info)" sh -c "! readelf -S -W $L | grep -Eq \"\\.symtab|\\.debug_info\""
id=$(readelf -n $L | sed -n "s/.*Build ID: //p")
check "librsverbs1-dbgsym: /usr/lib/debug/.build-id/${id:0:2}/${id:2}.debug holds the debug info" sh -c "readelf -S -W /usr/lib/debug/.build-id/${id:0:2}/${id:2}.debug | grep -q debug_info"
check "librsverbs-dev: rsverbs.h, librsverbs.so, rsverbs.pc, rsverbs.7, rsverbs_gid_index.3, rsverbs_mcast_join.3" test -f /usr/include/rsverbs.h -a -L $M/librsverbs.so -a -f $M/pkgconfig/rsverbs.pc -a -f /usr/share/man/man7/rsverbs.7.gz -a -f /usr/share/man/man3/rsverbs_gid_index.3.gz -a -f /usr/share/man/man3/rsverbs_mcast_join.3.gz
check "pkg-config: libdir $M, -lrsverbs before -libverbs" sh -c "[ \"\$(pkg-config --variable=libdir rsverbs)\" = $M ] && pkg-config --libs rsverbs | grep -Eq -- \"-lrsverbs .*-libverbs\""
check "rsverbs(7) from the package renders without warnings" sh -c "[ -f /usr/share/man/man7/rsverbs.7.gz ] && [ -z \"\$(zcat /usr/share/man/man7/rsverbs.7.gz | groff -ww -z -man 2>&1)\" ]"
# Relinked with pkg-config alone (no rpath), and preloaded by the bare SONAME.
cc -Wall -o /tmp/relinked ctest/null_args.c $(pkg-config --cflags --libs rsverbs) -ldl
cc -Wall -o /tmp/plain ctest/null_args.c -libverbs -ldl
check "relinked: librsverbs.so.1 is NEEDED before libibverbs.so.1" sh -c "readelf -d /tmp/relinked | grep NEEDED | grep -n . | grep -E \"rsverbs|ibverbs\" | head -1 | grep -q rsverbs"
LD_DEBUG=bindings /tmp/relinked >/tmp/relinked.out 2>/tmp/relinked.bindings
LD_PRELOAD=librsverbs.so.1 LD_DEBUG=bindings /tmp/plain >/tmp/preload.out 2>/tmp/preload.bindings
for mode in relinked preload; do
  check "$mode: NULL args give EINVAL, no crash" grep -q "null_args: ok" /tmp/$mode.out
  for sym in "ibv_attach_mcast. \[IBVERBS_1.1\]" "ibv_detach_mcast. \[IBVERBS_1.1\]" "_ibv_query_gid_ex. \[IBVERBS_1.11\]" \
    "ibv_query_gid. \[IBVERBS_1.1\]" "_ibv_query_gid_table. \[IBVERBS_1.11\]"; do
    check "$mode: ${sym%%.*} bound to the packaged $L" grep -Eq "to $LRE \[0\]: normal symbol .$sym" /tmp/$mode.bindings
  done
done
snapshot >/tmp/installed
check "installed: the snapshot sees the packaged files (so it would see leftovers)" sh -c "comm -13 /tmp/before /tmp/installed | grep -qx $M/librsverbs.so.1.0.0"
check "apt-get purge of the four packages" sh -c "apt-get purge -y -q rsverbs-tools librsverbs1-dbgsym librsverbs-dev librsverbs1 >/tmp/purge.log 2>&1 || { cat /tmp/purge.log; exit 1; }"
check "purged: dpkg knows no rsverbs package" sh -c "! dpkg -l | grep -q rsverbs"
snapshot >/tmp/after
left=$(comm -13 /tmp/before /tmp/after)
check "purged: no file or directory left behind${left:+: $left}" [ -z "$left" ]
check "purged: $L gone from ld.so.cache" sh -c "! ldconfig -p | grep -q librsverbs"
finish
' "$out:/debs:ro" "$RESULTS_DIR:/results"
rc=$?
rm -rf "$work"
check "install, relink, preload and purge in a clean bookworm root (results: deb-install): $((SECONDS - t)) s" [ "$rc" = 0 ]
echo "deb: wall time $((SECONDS - t0)) s; packages and lintian output in $out"
finish
