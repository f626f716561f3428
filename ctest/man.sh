#!/usr/bin/env bash
# The man pages (docs/man/) render without a warning: groff in its
# strictest warning mode, and man -l as a user would read them.
set -uo pipefail
cd "$(dirname "$0")/.."
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
make -s install DESTDIR="$d" PREFIX=/usr >/dev/null 2>&1
for page in docs/man/*.[1-8]; do
  name=$(basename "$page"); sec=${name##*.}
  check "make install puts $name in MANDIR/man$sec" cmp -s "$page" "$d/usr/share/man/man$sec/$name"
done
rm -rf "$d"
finish
