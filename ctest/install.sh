#!/usr/bin/env bash
# What make install installs, beyond ctest/abi.sh's file list: the rsverbs
# command (stripped, runs), the man pages (docs/man/: rsverbs.1 and
# rsverbs.7), which render without a warning (groff in its strictest
# warning mode, and man -l as a user reads them), and a stripped library whose
# debug info make install-debug puts where its .gnu_debuglink leads gdb.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
source ctest/lib.sh
for page in docs/man/*.[1-8]; do
  name=$(basename "$page")
  w=$(groff -ww -z -man "$page" 2>&1)
  check "$name: groff -ww -z -man gives no warning${w:+: $w}" [ -z "$w" ]
  w=$(MANROFFOPT=-ww MANWIDTH=80 man -l "$page" 2>&1 >/dev/null)
  check "$name: MANROFFOPT=-ww man -l renders it without a warning${w:+: $w}" [ -z "$w" ]
  check "$name: man -l output has NAME and SEE ALSO" sh -c "MANWIDTH=80 man -l '$page' 2>/dev/null | grep -q '^NAME' && MANWIDTH=80 man -l '$page' 2>/dev/null | grep -q '^SEE ALSO'"
done
# make install puts every page in MANDIR (and uninstall removes it: ctest/abi.sh).
d=$(mktemp -d)
make -s install install-debug DESTDIR="$d" PREFIX=/usr >/dev/null 2>&1
for page in docs/man/*.[1-8]; do
  name=$(basename "$page"); sec=${name##*.}
  check "make install puts $name in MANDIR/man$sec" cmp -s "$page" "$d/usr/share/man/man$sec/$name"
done
tool=$d/usr/bin/rsverbs
check "make install: BINDIR/rsverbs, executable, runs (--version)" sh -c "[ -x '$tool' ] && '$tool' --version | grep -qx 'rsverbs $(sed -n 's/^VERSION *:= *//p' Makefile)'"
check "make install: rsverbs is stripped (no .symtab)" sh -c "! readelf -S -W '$tool' | grep -q '\.symtab'"
for verb in gids doctor; do
  check "make install: rsverbs --help and rsverbs(1)'s SYNOPSIS both have '$verb'" \
    sh -c "'$tool' --help | grep -q 'rsverbs $verb' && grep -qx '.B rsverbs $verb' '$d/usr/share/man/man1/rsverbs.1'"
done
lib=$d/usr/lib/librsverbs.so.1.0.0
check "make install: the library is stripped (no .symtab, no .debug_* section)" \
  sh -c "! readelf -S -W '$lib' | grep -Eq '\.symtab|\.debug_'"
check "make install: .gnu_debuglink names librsverbs.so.1.0.0.debug" \
  sh -c "readelf -p .gnu_debuglink '$lib' | grep -q 'librsverbs.so.1.0.0.debug'"
check "make install-debug: LIBDIR/.debug/librsverbs.so.1.0.0.debug holds the debug info" \
  sh -c "readelf -S -W '$d/usr/lib/.debug/librsverbs.so.1.0.0.debug' | grep -q '\.debug_info'"
check "build/librsverbs.so.1 stays unstripped (make bench)" sh -c "readelf -S -W '${RSVERBS_BUILD:-build}/librsverbs.so.1' | grep -q '\.symtab'"
echo "install: unstripped $(stat -c %s "${RSVERBS_BUILD:-build}/librsverbs.so.1") bytes, installed $(stat -c %s "$lib") bytes"
rm -rf "$d"
finish
